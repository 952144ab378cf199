/* arena_text.c: the arena's names and its JSON for `kvferryctl arena`, and the sender-side
 * bound check: what needs only the public API (arena.h). */
#include "arena.h"

#include <errno.h>
#include <jansson.h>
#include <stddef.h>

static const char *const resv_state_names[] = {
    [RESV_IDLE] = "idle",
    [RESV_WAITING] = "waiting",
    [RESV_TIMED_OUT] = "timed_out",
    [RESV_CLOSED] = "closed",
};

const char *arena_resv_state_to_string(arena_resv_state_t s)
{
    if ((unsigned)s >= sizeof(resv_state_names) / sizeof(resv_state_names[0]))
        return "unknown";
    return resv_state_names[s];
}

int arena_grant_check(const struct arena_grant *g, uint64_t ext_off, uint64_t length)
{
    if (!g || ext_off != g->ext_off || length != g->length)
        return -ERANGE;
    return 0;
}

json_t *arena_stats_json(const struct arena *a)
{
    struct arena_stats st;
    arena_get_stats(a, &st);
    json_t *o = json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
                     "capacity_bytes", (json_int_t)st.capacity_bytes,
                     "chunk_bytes", (json_int_t)st.chunk_bytes,
                     "slot_bytes", (json_int_t)st.slot_bytes,
                     "slots_total", (json_int_t)st.slots_total,
                     "slots_free", (json_int_t)st.slots_free,
                     "slots_in_use", (json_int_t)st.slots_in_use,
                     "waiting_requests", (json_int_t)st.waiting_requests,
                     "quarantined_slots", (json_int_t)st.slots_quarantined,
                     "quarantined_bytes", (json_int_t)st.quarantined_bytes,
                     "grants_total", (json_int_t)st.grants_total,
                     "timeouts_total", (json_int_t)st.timeouts_total,
                     "stale_reports_total", (json_int_t)st.stale_reports_total,
                     "bound_violations_total", (json_int_t)st.bound_violations_total,
                     "reclaimed_total", (json_int_t)st.reclaimed_total,
                     "refused_waiters_total", (json_int_t)st.refused_waiters_total);
    if (o) {
        json_object_set_new(o, "slots_split", json_integer(st.slots_split));
        json_object_set_new(o, "small_grants_total", json_integer((json_int_t)st.small_grants_total));
        json_object_set_new(o, "peer_share_bytes", json_integer((json_int_t)arena_share_bytes(a)));
    }
    return o;
}
