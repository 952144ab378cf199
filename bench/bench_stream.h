/* bench_stream.h: what the streaming benches share (bench_stream on host pools,
 * bench_stream_gpu on GPU pools, issue 28): the clock, dying with the bench's name, a
 * request's items (the first `blocks` blocks of every paged group and slot 0 of every state
 * group), waiting for a request's end, medians. Header only: each bench is one program; it sets
 * bs_name first. */
#ifndef KVF_BENCH_STREAM_H
#define KVF_BENCH_STREAM_H

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kvferry.h"
#include "layout.h"
#include "preset.h"

static const char *bs_name = "bench";

static inline double bs_now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static inline void bs_die(const char *what, int rc)
{
    fprintf(stderr, "%s: %s: %d (%s)\n", bs_name, what, rc, strerror(rc < 0 ? -rc : rc));
    exit(1);
}

/* The layout of model spec (a preset: "kimi-k3:tp=2") as instance inst in role; exits when
 * spec does not parse or build. */
static inline void bs_layout(const char *spec, const char *inst, layout_role_t role,
                             struct layout *l)
{
    struct preset_spec ps;
    char err[512];
    if (preset_parse(spec, &ps, err, sizeof err) ||
        preset_build(&ps, inst, role, -1, l, err, sizeof err)) {
        fprintf(stderr, "%s: %s: %s\n", bs_name, spec, err);
        exit(1);
    }
}

/* A client named after l's instance (home: its context home, or NULL), connected at sock and
 * registered with l over pools; exits on a refusal. */
static inline struct kvf_client *bs_register(const char *sock, const char *home,
                                             const struct layout *l,
                                             const struct kvf_pool *pools)
{
    char err[512];
    struct kvf_client *c = NULL;
    struct kvf_options o = {.name = l->instance, .home = home, .err = err, .errlen = sizeof err};
    int rc = kvf_connect(sock, &o, &c);
    if (rc)
        bs_die(err, rc);
    char *json = layout_to_json(l);
    rc = kvf_register(c, json, pools, l->n_pools, err, sizeof err);
    free(json);
    if (rc)
        bs_die(err, rc);
    return c;
}

/* The request's items of layout l: counts[g] per group, ids concatenated (n_ids). */
static inline void bs_items(const struct layout *l, uint32_t blocks, uint32_t *counts,
                            uint32_t *ids, uint32_t *n_ids)
{
    for (uint32_t g = 0; g < l->n_groups; g++) {
        uint32_t n = l->groups[g].kind == GROUP_STATE ? 1 : blocks;
        for (uint32_t k = 0; k < n; k++)
            ids[(*n_ids)++] = k;
        counts[g] = n;
    }
}

/* Waits for req's terminal event on c: its time; exits on FAILED unless want_failed. */
static inline double bs_wait_end(struct kvf_client *c, uint64_t req, uint64_t *bytes,
                                 bool want_failed)
{
    for (;;) {
        struct kvf_event ev;
        int rc = kvf_poll(c, &ev, 30000);
        if (rc <= 0)
            bs_die("no event within 30 s", rc ? rc : -ETIMEDOUT);
        if (ev.req_id != req)
            continue;
        if (ev.kind == KVF_EV_FAILED && !want_failed) {
            fprintf(stderr, "%s: request %llu failed: %s: %s\n", bs_name,
                    (unsigned long long)req, kvf_error_to_string(ev.error), ev.message);
            exit(1);
        }
        if (bytes)
            *bytes = ev.bytes;
        return bs_now_ms();
    }
}

static inline int bs_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (sorts v). */
static inline double bs_median(double *v, unsigned n)
{
    qsort(v, n, sizeof v[0], bs_cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#endif
