/* modules.c: the one table of daemon modules (see modules.h). Later modules add a row here. */
#include <errno.h>
#include <stdlib.h>

#include "modules.h"
#include "control.h"
#include "control_metrics.h"
#include "copyeng.h"
#include "mempin.h"
#include "unmapper.h"
#include "move_metrics.h"
#include "engine.h"
#include "daemon.h"
#include "gpu.h"
#include "rails.h"
#include "request_metrics.h"
#include "workers.h"

static int gpu_module_status(struct daemon *d, json_t *ret)
{
    return d->gpu ? gpu_status(d->gpu, ret) : 0;
}

/* The copy threads, the pool mappings pinned by their jobs, and the unmaps of those let go. */
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
    struct unmapper_stats u;
    unmapper_get_stats(d->unmapper, &u);
    json_object_set_new(ret, "unmaps_pending", json_integer(u.pending));
    json_object_set_new(ret, "unmaps_pending_bytes", json_integer((json_int_t)u.pending_bytes));
    json_object_set_new(ret, "unmaps_total", json_integer((json_int_t)u.unmaps));
    json_object_set_new(ret, "unmapped_bytes_total", json_integer((json_int_t)u.bytes));
    json_object_set_new(ret, "unmap_seconds_total", json_real(u.busy_ns / 1e9));
    json_object_set_new(ret, "unmap_max_seconds", json_real(u.max_ns / 1e9));
    json_object_set_new(ret, "unmap_step_max_seconds", json_real(u.max_step_ns / 1e9));
    return 0;
}

/* Each GPU's nearest RDMA NIC (docs/SCALE.md), read from sysfs on the first `status` and kept:
 * PCIe devices do not move under a running daemon, and `kvferryctl top` asks every second.
 * Shown before rails exist, so that an operator sees the node as the daemon does. Loop thread. */
static int rails_module_status(struct daemon *d, json_t *ret)
{
    (void)d;
    static json_t *seen; /* owned: the first call's answer, for the daemon's life */
    if (!seen) {
        static struct topo t;
        static struct rails r;
        char err[256], *text = NULL;
        int rc = topo_sysfs_describe("/sys", &text, err, sizeof err);
        if (rc == 0)
            rc = topo_parse(text, &t, err, sizeof err);
        free(text);
        if (rc == 0)
            rails_choose(&t, &r); /* no NIC: every GPU without a rail */
        seen = rc < 0 ? json_pack("{s:s}", "error", err) : rails_json(&t, &r);
        if (!seen)
            return -ENOMEM;
    }
    json_object_update(ret, seen);
    return 0;
}

const struct daemon_module daemon_modules[] = {
    {"control", control_status, control_stats, control_reloaded, NULL, NULL, control_metrics,
     &control_metrics_len, control_live},
    {"workers", workers_status, workers_stats, workers_reloaded, workers_drain_start,
     workers_in_flight, workers_metrics, &workers_metrics_len, workers_live},
    {"peers", engine_peers_status, engine_peers_stats, engine_reloaded, engine_drain_start,
     engine_in_flight, peers_metrics, &peers_metrics_len, engine_live},
    {"arena", engine_arena_status, engine_arena_stats, NULL, NULL, NULL, arena_metrics,
     &arena_metrics_len, NULL},
    {"gpu", gpu_module_status, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    {"rails", rails_module_status, NULL, NULL, NULL, NULL, NULL, NULL, NULL},
    {"copy", copy_module_status, copy_module_status, NULL, NULL, NULL, copy_metrics,
     &copy_metrics_len, NULL},
};
const size_t daemon_modules_len = sizeof(daemon_modules) / sizeof(daemon_modules[0]);
