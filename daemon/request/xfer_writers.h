/* xfer_writers.h: who writes a same-daemon RECV (plan_writers), kept per key so that a request
 * pays neither the layouts' walk nor compat_check for it, and its one plan_build skips
 * compat_check too (plan_input.compat_known). The key is everything the answer depends on:
 * the generation rank's registration (worker id), the context table as the registrations of
 * its ranks in rank order, the context DP rank, and which groups the request has items in.
 * A worker id is never reused in a daemon's life and a rank's layout never changes while it
 * is registered, so a rank that leaves or re-registers (any layout) makes a new key: the old
 * entry is never hit again and is replaced (direct-mapped, XFER_WCACHE_SLOTS). Only answers
 * that passed are kept; the request's own ids, token count and aliasing are checked every time
 * (plan_check_request). Loop thread only. */
#ifndef KVF_XFER_WRITERS_H
#define KVF_XFER_WRITERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvferry.h"

#define XFER_WCACHE_SLOTS 64

struct xfer;
struct reg_instance;

struct xfer_wcache_entry {
    uint64_t gen_worker;        /* 0: empty */
    int32_t dp_rank;
    uint32_t groups;            /* bit g: the request has items in group g */
    uint32_t n_ctx;
    uint64_t *ctx_workers;      /* n_ctx, owned */
    uint8_t *writers;           /* n_ctx, owned */
};

struct xfer_wcache {
    struct xfer_wcache_entry e[XFER_WCACHE_SLOTS];
    uint64_t hits, misses;
};

void xfer_wcache_done(struct xfer_wcache *c);

/* RECV r's writers against its complete context instance `in` into writers[] (in->n_ranks
 * entries, 1 = writer): KVF_OK, or plan_writers' typed error and message (not kept). */
kvf_error_t xfer_writers(struct xfer_wcache *c, const struct xfer *r,
                         const struct reg_instance *in, uint8_t *writers, char *msg,
                         size_t msglen);

/* Has compat_check passed for r's rank against `in` as it is registered now (an entry for the
 * key)? Then r's plan_build may set compat_known. */
bool xfer_wcache_compat_known(const struct xfer_wcache *c, const struct xfer *r,
                              const struct reg_instance *in);

#endif
