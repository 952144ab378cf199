/* control_metrics.h: the control module's stats keys declared as metrics (modules.h). */
#ifndef KVF_CONTROL_METRICS_H
#define KVF_CONTROL_METRICS_H

#include <stddef.h>

#include "prom.h"

extern const struct prom_doc control_metrics[];
extern const size_t control_metrics_len;

#endif
