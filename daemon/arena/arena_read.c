/* arena_read.c: what an arena reports and the settings read or set after its start: its slot
 * size and count, owners' shares, the first-credit timeout (live), the next deadline, stats. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "arena.h"
#include "arena_int.h"
#include "arena_share.h"

uint64_t arena_slot_bytes(const struct arena *a) { return a->slot_bytes; }
uint32_t arena_slots_total(const struct arena *a) { return a->n_slots; }

uint64_t arena_owner_bytes(const struct arena *a, uint64_t owner)
{
    return shares_bytes(a->shares, owner);
}

uint64_t arena_share_bytes(const struct arena *a)
{
    return a->share_cap;
}

uint32_t arena_owners(const struct arena *a, struct arena_owner *out, uint32_t max)
{
    return shares_list(a->shares, out, max);
}

void arena_set_reserve_timeout(struct arena *a, uint64_t timeout_ms)
{
    if (a)
        a->p.reserve_timeout_ms = timeout_ms;
}

uint64_t arena_reserve_timeout(const struct arena *a)
{
    return a->p.reserve_timeout_ms;
}

int arena_next_deadline(const struct arena *a, uint64_t *ret)
{
    bool found = false;
    uint64_t best = 0;
    for (const struct arena_resv *r = a ? a->q_head : NULL; r; r = r->q_next) {
        if (r->ever_granted)
            continue;
        if (!found || r->deadline_ms < best)
            best = r->deadline_ms;
        found = true;
    }
    if (!found)
        return -ENOENT;
    *ret = best;
    return 0;
}

void arena_get_stats(const struct arena *a, struct arena_stats *ret)
{
    *ret = (struct arena_stats){
        .capacity_bytes = a->p.size,
        .chunk_bytes = a->p.chunk,
        .slot_bytes = a->slot_bytes,
        .slots_total = a->n_slots,
        .slots_free = a->n_free,
        .slots_in_use = a->n_in_use,
        .slots_quarantined = a->n_quarantined,
        .slots_split = a->n_split,
        .small_grants_total = a->small_grants_total,
        .quarantined_bytes = a->q_bytes,
        .waiting_requests = a->n_waiting,
        .grants_total = a->grants_total,
        .timeouts_total = a->timeouts_total,
        .stale_reports_total = a->stale_total,
        .bound_violations_total = a->bound_total,
        .reclaimed_total = a->reclaimed_total,
        .refused_waiters_total = a->refused_total,
    };
}
