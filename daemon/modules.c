/* modules.c: the one table of daemon modules (see modules.h). Later modules add a row here. */
#include <errno.h>

#include "modules.h"
#include "control.h"
#include "copyeng.h"
#include "mempin.h"
#include "engine.h"
#include "daemon.h"
#include "gpu.h"
#include "workers.h"

static int gpu_module_status(struct daemon *d, json_t *ret)
{
    return d->gpu ? gpu_status(d->gpu, ret) : 0;
}

/* The copy threads and the pool mappings pinned by their jobs. */
static int copy_module_status(struct daemon *d, json_t *ret)
{
    json_t *o = d->copy ? copyeng_stats_json(d->copy) : NULL;
    if (d->copy && !o)
        return -ENOMEM;
    uint32_t pinned, deferred;
    mempin_counts(&pinned, &deferred);
    if (o)
        json_object_update(ret, o);
    json_decref(o);
    json_object_set_new(ret, "pinned_mappings", json_integer(pinned));
    json_object_set_new(ret, "deferred_unmaps", json_integer(deferred));
    return 0;
}

const struct daemon_module daemon_modules[] = {
    {"control", control_status, control_stats, control_reloaded, NULL, NULL},
    {"workers", workers_status, workers_stats, NULL, workers_drain_start, workers_in_flight},
    {"peers", engine_peers_status, engine_peers_stats, NULL, engine_drain_start, engine_in_flight},
    {"arena", engine_arena_status, engine_arena_stats, NULL, NULL, NULL},
    {"gpu", gpu_module_status, NULL, NULL, NULL, NULL},
    {"copy", copy_module_status, copy_module_status, NULL, NULL, NULL},
};
const size_t daemon_modules_len = sizeof(daemon_modules) / sizeof(daemon_modules[0]);
