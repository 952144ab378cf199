/* check_arena_share.c: the landing arena's per-peer share (arena.peer_share): one owner never
 * holds more than its share, quarantined slots count against it until reclaimed, a waiter at its
 * share is passed over so other owners keep moving, and the holders are listed largest first. */
#include <errno.h>

#include "arena.h"
#include "testutil.h"

#define MIB (1024ull * 1024ull)

static uint32_t n_grants[8]; /* per reservation id */
static struct arena_grant last[8];

static void on_grant(struct arena_resv *r, const struct arena_grant *g, uint32_t n, void *user)
{
    (void)user;
    n_grants[r->id] += n;
    last[r->id] = g[n - 1];
}

static void on_timeout(struct arena_resv *r, void *user)
{
    (void)r;
    (void)user;
}

static struct arena *mk(uint32_t pct, bool classes)
{
    memset(n_grants, 0, sizeof n_grants);
    struct arena_params p = {.size = 8 * MIB, .chunk = MIB, .reserve_timeout_ms = 500,
                             .max_waiters = 64, .max_credits = 16, .size_classes = classes,
                             .peer_share_pct = pct, .on_grant = on_grant,
                             .on_timeout = on_timeout};
    struct arena *a = NULL;
    ck_assert_int_eq(arena_new(&p, &a), 0);
    return a;
}

static void resv(struct arena_resv *r, uint64_t id, uint64_t flow, uint64_t owner, uint64_t bytes)
{
    arena_resv_init(r, id, flow, bytes);
    arena_resv_set_owner(r, owner);
}

START_TEST(share_past_100_percent_is_refused)
{
    struct arena_params p = {.size = 8 * MIB, .chunk = MIB, .max_waiters = 1, .max_credits = 1,
                             .peer_share_pct = 101, .on_grant = on_grant,
                             .on_timeout = on_timeout};
    struct arena *a = NULL;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p.peer_share_pct = 100;
    ck_assert_int_eq(arena_new(&p, &a), 0);
    ck_assert_uint_eq(arena_share_bytes(a), 8 * MIB);
    arena_free(a);
    p.peer_share_pct = 1; /* never less than one slot */
    ck_assert_int_eq(arena_new(&p, &a), 0);
    ck_assert_uint_eq(arena_share_bytes(a), MIB);
    arena_free(a);
}
END_TEST

START_TEST(a_frozen_peer_holds_its_share_and_the_others_keep_moving)
{
    struct arena *a = mk(50, false); /* 8 slots, 4 MiB each owner */
    struct arena_resv A, B, A2, B2;
    resv(&A, 1, 101, 1, 8 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 8, 0), 8);
    ck_assert_uint_eq(n_grants[1], 4); /* its share; it keeps waiting for the rest */
    ck_assert_int_eq(A.state, RESV_WAITING);
    ck_assert_uint_eq(arena_owner_bytes(a, 1), 4 * MIB);
    /* B queued behind A is served: A waits for its own slots, not for room */
    resv(&B, 2, 102, 2, 2 * MIB);
    ck_assert_int_eq(arena_want(a, &B, 2, 0), 2);
    ck_assert_uint_eq(n_grants[2], 2);
    /* A's peer is lost with puts maybe in flight: its slots stay quarantined and still count */
    arena_resv_close(a, &A, true);
    struct arena_stats st;
    arena_get_stats(a, &st);
    ck_assert_uint_eq(st.slots_quarantined, 4);
    ck_assert_uint_eq(arena_owner_bytes(a, 1), 4 * MIB);
    resv(&A2, 3, 103, 1, MIB);
    ck_assert_int_eq(arena_want(a, &A2, 1, 0), 1);
    ck_assert_uint_eq(n_grants[3], 0); /* 2 slots free, but owner 1 is at its share */
    resv(&B2, 4, 104, 2, 2 * MIB);
    ck_assert_int_eq(arena_want(a, &B2, 2, 0), 2);
    ck_assert_uint_eq(n_grants[4], 2); /* passes A2 */
    struct arena_owner o[4];
    ck_assert_uint_eq(arena_owners(a, o, 4), 2);
    ck_assert_uint_eq(o[0].bytes, 4 * MIB);
    ck_assert_uint_eq(o[1].owner, 2);
    /* owner 2 at its share too: nothing more for it */
    ck_assert_uint_eq(arena_owner_bytes(a, 2), 4 * MIB);
    /* reclaimed once no put can land: A2 gets its slot, owner 1's count is A2's only */
    ck_assert_uint_eq(arena_reclaim_peer(a, 101), 4);
    ck_assert_uint_eq(n_grants[3], 1);
    ck_assert_uint_eq(arena_owner_bytes(a, 1), MIB);
    arena_resv_close(a, &A2, false);
    arena_resv_close(a, &B, false);
    arena_resv_close(a, &B2, false);
    ck_assert_uint_eq(arena_owners(a, o, 4), 0);
    arena_get_stats(a, &st);
    ck_assert_uint_eq(st.slots_free, 8);
    arena_free(a);
}
END_TEST

START_TEST(released_slots_leave_the_share_and_serve_the_capped_waiter)
{
    struct arena *a = mk(25, false); /* 2 MiB each */
    struct arena_resv A;
    resv(&A, 1, 101, 1, 3 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 3, 0), 3);
    ck_assert_uint_eq(n_grants[1], 2);
    struct arena_grant g = last[1];
    ck_assert_int_eq(arena_report(a, &A, g.slot, g.generation, g.ext_off, g.length, NULL), 0);
    ck_assert_int_eq(arena_release(a, &A, g.slot, g.generation), 0);
    ck_assert_uint_eq(n_grants[1], 3); /* its own release made room in its share */
    ck_assert_int_eq(A.state, RESV_IDLE);
    arena_resv_close(a, &A, false);
    ck_assert_uint_eq(arena_owner_bytes(a, 1), 0);
    arena_free(a);
}
END_TEST

START_TEST(small_slots_count_their_own_bytes)
{
    struct arena *a = mk(50, true);
    struct arena_resv r[3];
    for (int i = 0; i < 3; i++) {
        resv(&r[i], (uint64_t)i + 1, 200 + (uint64_t)i, 7, 8192); /* an 8 KiB class each */
        ck_assert_int_eq(arena_want(a, &r[i], 1, 0), 1);
    }
    ck_assert_uint_eq(arena_owner_bytes(a, 7), 3 * 8192);
    arena_resv_close(a, &r[0], true);
    ck_assert_uint_eq(arena_owner_bytes(a, 7), 3 * 8192); /* quarantined: still held */
    ck_assert_uint_eq(arena_reclaim_peer(a, 200), 1);
    ck_assert_uint_eq(arena_owner_bytes(a, 7), 2 * 8192);
    arena_resv_close(a, &r[1], false);
    arena_resv_close(a, &r[2], false);
    ck_assert_uint_eq(arena_owner_bytes(a, 7), 0);
    arena_free(a);
}
END_TEST

START_TEST(unowned_reservations_are_not_capped)
{
    struct arena *a = mk(25, false);
    struct arena_resv r;
    arena_resv_init(&r, 1, 9, 8 * MIB); /* owner 0: the staging side */
    ck_assert_int_eq(arena_want(a, &r, 8, 0), 8);
    ck_assert_uint_eq(n_grants[1], 8);
    arena_resv_close(a, &r, false);
    arena_free(a);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena_share");
    TCase *tc = tcase_create("share");
    tcase_add_test(tc, share_past_100_percent_is_refused);
    tcase_add_test(tc, a_frozen_peer_holds_its_share_and_the_others_keep_moving);
    tcase_add_test(tc, released_slots_leave_the_share_and_serve_the_capped_waiter);
    tcase_add_test(tc, small_slots_count_their_own_bytes);
    tcase_add_test(tc, unowned_reservations_are_not_capped);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
