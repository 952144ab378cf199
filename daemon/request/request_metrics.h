/* request_metrics.h: the request core's stats keys declared as metrics (modules.h): the workers
 * section (workers.c, transfers.c) and the engine's peers and arena sections (engine.c,
 * arena.c). Paths are relative to each section. */
#ifndef KVF_REQUEST_METRICS_H
#define KVF_REQUEST_METRICS_H

#include <stddef.h>

#include "prom.h"

extern const struct prom_doc workers_metrics[], peers_metrics[], arena_metrics[];
extern const size_t workers_metrics_len, peers_metrics_len, arena_metrics_len;

#endif
