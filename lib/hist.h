/* hist.h: a fixed-bucket histogram (counts per upper bound, sum, count) and its stats JSON,
 * which prom_from_json renders as a Prometheus histogram when the key is declared PROM_HISTOGRAM.
 * JSON form: {"le":[b0,b1,...],"counts":[c0,c1,...,c_inf],"sum":S,"count":N}, counts per bucket
 * (not cumulative), the last one above every bound. A zeroed struct hist is empty; its bounds
 * (struct hist_spec) are passed to each call, so it needs no init. Not thread-safe: one owner. */
#ifndef KVF_HIST_H
#define KVF_HIST_H

#include <stddef.h>
#include <stdint.h>

struct json_t;

#define HIST_BOUNDS_MAX 32

struct hist_spec {
    size_t n;                    /* bounds in use */
    double le[HIST_BOUNDS_MAX];  /* ascending upper bounds */
};

extern const struct hist_spec hist_latency_seconds; /* 50 us .. 60 s */
extern const struct hist_spec hist_request_bytes;   /* 4 KiB .. 256 GiB, powers of 2 */

struct hist {
    uint64_t counts[HIST_BOUNDS_MAX + 1];
    double sum;
    uint64_t count;
};

void hist_observe(struct hist *h, const struct hist_spec *spec, double v);
/* A new JSON object in the form above; NULL on ENOMEM. */
struct json_t *hist_json(const struct hist *h, const struct hist_spec *spec);

#endif
