/* plan_tcache.h: plan templates (plan_template.h) kept per (who, shape): `who` is the caller's
 * name for the layouts planned against (the daemon: the registrations' worker ids, which are
 * never reused, so a rank that leaves or re-registers makes a new key and its entries are never
 * hit again), the shape is the request's (plan_template_shape). Bounded in entries and bytes;
 * the least recently used entry goes first, and a template larger than the byte bound is used
 * for its request and not kept. Refusals are never kept. plan_tcache_forget drops the entries
 * naming a worker, so memory does not wait for eviction. One owner thread (the daemon's loop);
 * an entry returned is valid until the next call on the cache. */
#ifndef KVF_PLAN_TCACHE_H
#define KVF_PLAN_TCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan_template.h"

#define PLAN_TCACHE_MAX_ENTRIES 4096
/* a generation rank and every rank of the largest context instance a layout can declare */
#define PLAN_TCACHE_MAX_WHO (1 + LAYOUT_MAX_TP * LAYOUT_MAX_PP)

struct plan_tcache_entry {
    uint64_t hash, last_use;
    uint64_t *who;               /* n_who; owned */
    uint32_t n_who;
    struct plan_template t;
    bool fits;                   /* the caller's mark: its memory bounds held for t */
};

struct plan_tcache {
    struct plan_tcache_entry *e; /* max_entries; owned */
    uint32_t n, max_entries;
    size_t bytes, max_bytes;
    uint64_t tick;
    uint64_t hits, misses, evicted, not_kept;
};

/* max_entries 1..PLAN_TCACHE_MAX_ENTRIES, max_bytes > 0: 0, or -EINVAL / -ENOMEM. */
int plan_tcache_init(struct plan_tcache *c, uint32_t max_entries, size_t max_bytes);
void plan_tcache_done(struct plan_tcache *c);

/* The plan of in's request: from the template of (who, in's shape), or built (plan_build's
 * checks and result, as a template) and kept. 0 with *ret (plan_done) and, in *entry_ret, the
 * entry used or kept (NULL when not kept) and *hit; or plan_build's refusal (-EINVAL / -ENOMEM,
 * *err), the same one plan_build gives for this input. n_who 1..PLAN_TCACHE_MAX_WHO. */
int plan_tcache_plan(struct plan_tcache *c, const uint64_t *who, uint32_t n_who,
                     const struct plan_input *in, struct plan *ret,
                     struct plan_tcache_entry **entry_ret, bool *hit, struct plan_error *err);

/* A hit without its plan: with a template of (who, in's shape), the request's checks
 * (plan_check_request, plan_build's refusals) and 1 with the entry in *entry_ret, counted as a
 * hit; the caller substitutes the ids when it needs the ops (plan_template_substitute), which
 * a GPU program per template does not. 0 with *entry_ret NULL: no template (plan_tcache_plan
 * builds one). Or -EINVAL / -ENOMEM with *err. */
int plan_tcache_lookup(struct plan_tcache *c, const uint64_t *who, uint32_t n_who,
                       const struct plan_input *in, struct plan_tcache_entry **entry_ret,
                       struct plan_error *err);

/* Drops every entry whose who names id. */
void plan_tcache_forget(struct plan_tcache *c, uint64_t id);

#endif
