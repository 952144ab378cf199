/* arenautil.c: the recording arena of tests/arenautil.h. */
#include "arenautil.h"
#include "testutil.h"

struct au_log au_rec;
struct arena *au_arena;

static void on_grant(struct arena_resv *r, const struct arena_grant *g, uint32_t n, void *user)
{
    if (user != &au_rec || n < 1 || au_rec.n_grants + n > AU_LOG_MAX)
        ck_abort_msg("on_grant: bad call (n %u, logged %u)", n, au_rec.n_grants);
    for (uint32_t i = 0; i < n; i++) {
        au_rec.grants[au_rec.n_grants].r = r;
        au_rec.grants[au_rec.n_grants].g = g[i];
        au_rec.n_grants++;
    }
    if (au_rec.hook)
        au_rec.hook(r, g, n);
}

static void on_timeout(struct arena_resv *r, void *user)
{
    if (user != &au_rec || au_rec.n_timeouts >= AU_LOG_MAX)
        ck_abort_msg("on_timeout: bad call");
    au_rec.timeouts[au_rec.n_timeouts++] = r;
}

struct arena_params au_params(uint64_t size, uint64_t chunk)
{
    return (struct arena_params){.size = size, .chunk = chunk, .reserve_timeout_ms = 500,
                                 .max_waiters = 64, .max_credits = 16, .on_grant = on_grant,
                                 .on_timeout = on_timeout, .user = &au_rec};
}

struct arena *au_mk(uint64_t size, uint64_t chunk)
{
    memset(&au_rec, 0, sizeof(au_rec));
    struct arena_params p = au_params(size, chunk);
    struct arena *a = NULL;
    ck_assert_int_eq(arena_new(&p, &a), 0);
    au_arena = a;
    return a;
}

struct arena_stats au_stats(const struct arena *a)
{
    struct arena_stats st;
    arena_get_stats(a, &st);
    if (st.slots_split == 0) /* every grant is a whole slot */
        ck_assert_uint_eq(st.slots_in_use + st.slots_free + st.slots_quarantined, st.slots_total);
    else /* cut slots hold many grants each */
        ck_assert_uint_le(st.slots_free + st.slots_split, st.slots_total);
    return st;
}

void au_land_all(struct arena *a, struct arena_resv *r, uint32_t from)
{
    for (uint32_t i = from; i < au_rec.n_grants; i++) {
        if (au_rec.grants[i].r != r)
            continue;
        const struct arena_grant *g = &au_rec.grants[i].g;
        ck_assert_int_eq(arena_report(a, r, g->slot, g->generation, g->ext_off, g->length, NULL), 0);
        ck_assert_int_eq(arena_release(a, r, g->slot, g->generation), 0);
    }
}
