/* move_metrics.h: the copy module's stats keys (copyeng_stats_json, and the pin counts and unmapper
 * stats that modules.c adds) declared as metrics (modules.h). */
#ifndef KVF_MOVE_METRICS_H
#define KVF_MOVE_METRICS_H

#include <stddef.h>

#include "prom.h"

extern const struct prom_doc copy_metrics[];
extern const size_t copy_metrics_len;

#endif
