/* check_arena_classes.c: the arena's size classes (arena.size_classes): small requests take
 * slots cut to the smallest power of two, ids reused after a recut reject stale reports, small
 * slots quarantine like whole ones, and random mixes never overlap. */
#include <errno.h>

#include "arenautil.h"
#include "testutil.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)


static struct arena *mk_classes(uint64_t size, uint64_t chunk)
{
    memset(&au_rec, 0, sizeof(au_rec));
    struct arena_params p = au_params(size, chunk);
    p.size_classes = true;
    p.max_waiters = 1024;
    struct arena *a = NULL;
    ck_assert_int_eq(arena_new(&p, &a), 0);
    au_arena = a;
    return a;
}

/* No two live grants share a byte; every one is 4 KiB aligned and inside the region. */
static void assert_disjoint(const struct arena_grant *g, uint32_t n, uint64_t size)
{
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_uint_eq(g[i].offset % ARENA_MIN_ALIGN, 0);
        ck_assert_uint_le(g[i].offset + g[i].length, size);
        for (uint32_t k = i + 1; k < n; k++)
            ck_assert_msg(g[i].offset + g[i].length <= g[k].offset ||
                              g[k].offset + g[k].length <= g[i].offset,
                          "grants %u and %u overlap", i, k);
    }
}

START_TEST(arena_small_requests_take_small_slots_so_256_fit_in_12)
{
    struct arena *a = mk_classes(12 * MIB, 1 * MIB);
    static struct arena_resv r[256];
    for (int i = 0; i < 256; i++) {
        arena_resv_init(&r[i], (uint64_t)i, 1, 3000);
        ck_assert_int_eq(arena_want(a, &r[i], 1, 0), 1);
    }
    struct arena_stats st = au_stats(a);
    ck_assert_uint_eq(st.waiting_requests, 0); /* whole slots: 244 would wait */
    ck_assert_uint_eq(st.slots_in_use, 256);
    ck_assert_uint_eq(st.slots_split, 1);     /* 256 x 4 KiB: one 1 MiB slot cut */
    ck_assert_uint_eq(st.slots_free, 11);
    ck_assert_uint_eq(st.small_grants_total, 256);
    ck_assert_uint_eq(au_rec.n_grants, 256);
    struct arena_grant g[256];
    for (int i = 0; i < 256; i++) {
        g[i] = au_rec.grants[i].g;
        ck_assert_uint_eq(g[i].length, 3000);
        ck_assert_uint_ge(g[i].slot, arena_slots_total(a));
    }
    assert_disjoint(g, 256, 12 * MIB);
    /* a large request still gets the 11 whole slots at once */
    struct arena_resv big;
    arena_resv_init(&big, 999, 1, 11 * MIB);
    ck_assert_int_eq(arena_want(a, &big, 11, 0), 11);
    ck_assert_uint_eq(au_stats(a).slots_free, 0);
    for (int i = 0; i < 256; i++) {
        ck_assert_int_eq(arena_report(a, &r[i], g[i].slot, g[i].generation, 0, 3000, NULL), 0);
        ck_assert_int_eq(arena_release(a, &r[i], g[i].slot, g[i].generation), 0);
    }
    st = au_stats(a);
    ck_assert_uint_eq(st.slots_split, 0); /* the last small slot freed made it whole */
    ck_assert_uint_eq(st.slots_free, 1);
    arena_resv_close(a, &big, false);
    ck_assert_uint_eq(au_stats(a).slots_free, 12);
    ck_assert_uint_eq(au_stats(a).slots_in_use, 0);
    arena_free(a);
}
END_TEST

START_TEST(arena_class_is_the_smallest_power_of_two_and_only_tails_are_small)
{
    struct arena *a = mk_classes(8 * MIB, 1 * MIB);
    struct arena_resv x, y, z;
    arena_resv_init(&x, 1, 1, 1 * MIB + 300 * KIB); /* a whole chunk, then a 512 KiB class tail */
    ck_assert_int_eq(arena_want(a, &x, 2, 0), 2);
    ck_assert_uint_eq(au_rec.grants[0].g.length, 1 * MIB);
    ck_assert_uint_lt(au_rec.grants[0].g.slot, arena_slots_total(a));
    ck_assert_uint_eq(au_rec.grants[1].g.length, 300 * KIB);
    ck_assert_uint_ge(au_rec.grants[1].g.slot, arena_slots_total(a));
    arena_resv_init(&y, 2, 1, 600 * KIB); /* over half a slot: whole */
    ck_assert_int_eq(arena_want(a, &y, 1, 0), 1);
    ck_assert_uint_lt(au_rec.grants[2].g.slot, arena_slots_total(a));
    arena_resv_init(&z, 3, 1, 5 * KIB); /* 8 KiB class */
    ck_assert_int_eq(arena_want(a, &z, 1, 0), 1);
    ck_assert_uint_eq(au_rec.grants[3].g.offset % (8 * KIB), 0);
    ck_assert_uint_eq(au_stats(a).slots_split, 2);
    struct arena_grant g[4] = {au_rec.grants[0].g, au_rec.grants[1].g, au_rec.grants[2].g, au_rec.grants[3].g};
    assert_disjoint(g, 4, 8 * MIB);
    ck_assert_int_eq(arena_report(a, &z, g[3].slot, g[3].generation, 0, 5 * KIB, NULL), 0);
    struct arena_grant back;
    ck_assert_int_eq(arena_report(a, &x, g[1].slot, g[1].generation, 1 * MIB, 300 * KIB, &back), 0);
    ck_assert_uint_eq(back.offset, g[1].offset); /* the report gives the grant back, offset too */
    ck_assert_int_eq(arena_report(a, &x, (uint32_t)(arena_slots_total(a) + 8 * MIB / 4096), 1, 0,
                                  1, NULL), -EINVAL); /* past every id */
    ck_assert_int_eq(arena_report(a, &x, g[1].slot + 1, g[1].generation, 0, 1, NULL), -ESTALE);
    arena_resv_close(a, &x, false);
    arena_resv_close(a, &y, false);
    arena_resv_close(a, &z, false);
    ck_assert_uint_eq(au_stats(a).slots_free, 8);
    ck_assert_uint_eq(au_stats(a).slots_split, 0);
    arena_free(a);
}
END_TEST

/* An id reused after its slot was merged and cut again for another class never takes an old
 * generation's report. */
START_TEST(arena_small_slot_ids_reused_after_a_recut_reject_stale_reports)
{
    struct arena *a = mk_classes(1 * MIB, 1 * MIB);
    struct arena_resv x, y;
    arena_resv_init(&x, 1, 1, 4 * KIB);
    ck_assert_int_eq(arena_want(a, &x, 1, 0), 1);
    struct arena_grant old = au_rec.grants[0].g;
    arena_resv_close(a, &x, false); /* merged back */
    ck_assert_uint_eq(au_stats(a).slots_split, 0);
    arena_resv_init(&y, 2, 1, 8 * KIB); /* another class, same first offset, same id */
    ck_assert_int_eq(arena_want(a, &y, 1, 0), 1);
    struct arena_grant now = au_rec.grants[1].g;
    ck_assert_uint_eq(now.slot, old.slot);
    ck_assert_uint_eq(now.offset, old.offset);
    ck_assert_uint_gt(now.generation, old.generation);
    ck_assert_int_eq(arena_report(a, &y, old.slot, old.generation, 0, 8 * KIB, NULL), -ESTALE);
    ck_assert_int_eq(arena_report(a, &y, now.slot, now.generation, 0, 8 * KIB, NULL), 0);
    ck_assert_uint_eq(au_stats(a).stale_reports_total, 1);
    arena_resv_close(a, &y, false);
    arena_free(a);
}
END_TEST

/* A small slot a failed peer may still write stays out of use, and keeps its whole slot cut,
 * until that peer is reclaimed (arena.h: quarantine). */
START_TEST(arena_small_slots_quarantine_until_the_peer_is_reclaimed)
{
    struct arena *a = mk_classes(2 * MIB, 1 * MIB);
    struct arena_resv x, y;
    arena_resv_init(&x, 1, 7, 4 * KIB);
    arena_resv_init(&y, 2, 8, 4 * KIB);
    ck_assert_int_eq(arena_want(a, &x, 1, 0), 1);
    ck_assert_int_eq(arena_want(a, &y, 1, 0), 1);
    arena_resv_close(a, &x, true); /* granted, never reported: a put may be in flight */
    arena_resv_close(a, &y, false);
    struct arena_stats st = au_stats(a);
    ck_assert_uint_eq(st.slots_quarantined, 1);
    ck_assert_uint_eq(st.quarantined_bytes, 4 * KIB);
    ck_assert_uint_eq(st.slots_split, 1); /* not whole again while a piece is quarantined */
    ck_assert_uint_eq(st.slots_free, 1);
    ck_assert_uint_eq(st.slots_in_use, 0);
    ck_assert_uint_eq(arena_reclaim_peer(a, 8), 0);
    ck_assert_uint_eq(arena_reclaim_peer(a, 7), 1);
    st = au_stats(a);
    ck_assert_uint_eq(st.slots_quarantined, 0);
    ck_assert_uint_eq(st.quarantined_bytes, 0);
    ck_assert_uint_eq(st.slots_split, 0);
    ck_assert_uint_eq(st.slots_free, 2);
    arena_free(a);
}
END_TEST

/* Random mixes of sizes: live grants never overlap, counters agree, all comes back. */
START_TEST(arena_size_classes_random_mix_never_overlaps)
{
    srand(12);
    struct arena *a = mk_classes(8 * MIB, 1 * MIB);
    enum { NM = 64 };
    static struct arena_resv rs[NM];
    static struct arena_grant live[NM * 16];
    for (int i = 0; i < NM; i++)
        arena_resv_init(&rs[i], (uint64_t)i, (uint64_t)(i % 3), (uint64_t)(1 + rand() % 3000) * 997);
    uint32_t seen = 0;
    for (int step = 0; step < 4000; step++) {
        struct arena_resv *r = &rs[rand() % NM];
        int op = rand() % 10;
        if (op < 5 && r->state == RESV_IDLE && r->granted < r->bytes) {
            arena_want(a, r, 1 + (uint32_t)(rand() % 4), (uint64_t)step);
        } else if (op < 8 && (r->state == RESV_IDLE || r->state == RESV_WAITING)) {
            arena_resv_close(a, r, rand() % 4 == 0);
        } else if (op < 9) {
            arena_reclaim_peer(a, (uint64_t)(rand() % 3));
        } else if (r->state == RESV_CLOSED || r->state == RESV_TIMED_OUT) {
            arena_resv_init(r, r->id, r->peer, (uint64_t)(1 + rand() % 3000) * 997);
        }
        seen = au_rec.n_grants;
        /* live grants: those of reservations still holding them */
        uint32_t n = 0;
        for (int i = 0; i < NM; i++)
            if (rs[i].state == RESV_IDLE || rs[i].state == RESV_WAITING)
                for (uint32_t k = 0; k < seen; k++)
                    if (au_rec.grants[k].r == &rs[i] && au_rec.grants[k].g.ext_off < rs[i].granted &&
                        n < NM * 16) {
                        /* newest grant of each extent offset is the live one */
                        bool newer = false;
                        for (uint32_t m = k + 1; m < seen && !newer; m++)
                            newer = au_rec.grants[m].r == &rs[i] &&
                                    au_rec.grants[m].g.ext_off == au_rec.grants[k].g.ext_off;
                        if (!newer)
                            live[n++] = au_rec.grants[k].g;
                    }
        struct arena_stats st = au_stats(a);
        ck_assert_uint_eq(n, st.slots_in_use);
        assert_disjoint(live, n, 8 * MIB);
        if (au_rec.n_grants > AU_LOG_MAX - 64)
            break;
    }
    for (int i = 0; i < NM; i++)
        arena_resv_close(a, &rs[i], false);
    for (uint64_t p = 0; p < 3; p++)
        arena_reclaim_peer(a, p);
    struct arena_stats st = au_stats(a);
    ck_assert_uint_eq(st.slots_free, 8);
    ck_assert_uint_eq(st.slots_split, 0);
    ck_assert_uint_eq(st.slots_in_use, 0);
    ck_assert_uint_gt(st.small_grants_total, 50);
    arena_free(a);
}
END_TEST


static Suite *arena_classes_suite(void)
{
    Suite *s = suite_create("arena_classes");
    TCase *tc = tcase_create("size_classes");
    tcase_add_test(tc, arena_small_requests_take_small_slots_so_256_fit_in_12);
    tcase_add_test(tc, arena_class_is_the_smallest_power_of_two_and_only_tails_are_small);
    tcase_add_test(tc, arena_small_slot_ids_reused_after_a_recut_reject_stale_reports);
    tcase_add_test(tc, arena_small_slots_quarantine_until_the_peer_is_reclaimed);
    tcase_add_test(tc, arena_size_classes_random_mix_never_overlaps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(arena_classes_suite()); }
