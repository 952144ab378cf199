/* arenautil.h: a recording arena for the arena suites (bodies in tests/support/arenautil.c).
 * au_rec logs every grant and timeout callback in order, and runs an optional hook inside the
 * grant callback (a test that re-enters the arena from there, or checks a model of its queue). */
#ifndef KVF_ARENAUTIL_H
#define KVF_ARENAUTIL_H

#include "arena.h"

#define AU_LOG_MAX 4096

struct au_log {
    uint32_t n_grants;
    struct { struct arena_resv *r; struct arena_grant g; } grants[AU_LOG_MAX];
    uint32_t n_timeouts;
    struct arena_resv *timeouts[AU_LOG_MAX];
    /* optional hook: runs inside the grant callback */
    void (*hook)(struct arena_resv *r, const struct arena_grant *g, uint32_t n);
};

extern struct au_log au_rec;
extern struct arena *au_arena; /* the last arena au_mk made (for hooks) */

/* Parameters whose callbacks log into au_rec: 500 ms reserve timeout, 64 waiters, 16 credits. */
struct arena_params au_params(uint64_t size, uint64_t chunk);

/* A fresh arena of au_params (the log cleared); fails the test when refused. */
struct arena *au_mk(uint64_t size, uint64_t chunk);

/* The arena's counters, checked to add up (whole slots: in use + free + quarantined = total). */
struct arena_stats au_stats(const struct arena *a);

/* Report and release every slot the log granted to r, from log index `from`. */
void au_land_all(struct arena *a, struct arena_resv *r, uint32_t from);

#endif
