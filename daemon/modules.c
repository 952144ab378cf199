/* modules.c: the one table of daemon modules (see modules.h). Later modules add a row here. */
#include "modules.h"
#include "control.h"
#include "control_metrics.h"
#include "engine.h"
#include "daemon.h"
#include "gpu.h"
#include "request_metrics.h"
#include "workers.h"

static int gpu_module_status(struct daemon *d, json_t *ret)
{
    return d->gpu ? gpu_status(d->gpu, ret) : 0;
}

const struct daemon_module daemon_modules[] = {
    {"control", control_status, control_stats, control_reloaded, NULL, NULL, control_metrics,
     &control_metrics_len},
    {"workers", workers_status, workers_stats, NULL, workers_drain_start, workers_in_flight,
     workers_metrics, &workers_metrics_len},
    {"peers", engine_peers_status, engine_peers_stats, NULL, engine_drain_start, engine_in_flight,
     peers_metrics, &peers_metrics_len},
    {"arena", engine_arena_status, engine_arena_stats, NULL, NULL, NULL, arena_metrics,
     &arena_metrics_len},
    {"gpu", gpu_module_status, NULL, NULL, NULL, NULL, NULL, NULL},
};
const size_t daemon_modules_len = sizeof(daemon_modules) / sizeof(daemon_modules[0]);
