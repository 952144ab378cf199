/* check_arena.c: the arena's slots, FIFO credits, generations, timeouts, bounds and quarantine
 * (its size classes: check_arena_classes.c; a randomized model: check_arena_random.c). */
#include <errno.h>
#include <jansson.h>

#include "arenautil.h"
#include "testutil.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)

START_TEST(arena_new_refuses_bad_params)
{
    struct arena *a = NULL;
    struct arena_params p = au_params(64 * MIB, 4 * MIB);
    p.align = 2048;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p.align = 12288; /* not a power of two */
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = au_params(64 * MIB, 0);
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = au_params(3 * MIB, 4 * MIB); /* smaller than one slot */
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = au_params((uint64_t)ARENA_MAX_SLOTS * 4 * KIB + 4 * KIB, 4 * KIB); /* too many slots */
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = au_params(64 * MIB, 4 * MIB), p.max_credits = 0;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p.max_credits = ARENA_MAX_CREDITS + 1;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = au_params(64 * MIB, 4 * MIB), p.max_waiters = 0;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = au_params(64 * MIB, 4 * MIB), p.max_waiters = ARENA_MAX_WAITERS + 1;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = au_params(64 * MIB, 4 * MIB), p.on_grant = NULL;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = au_params(64 * MIB, 4 * MIB), p.on_timeout = NULL;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    ck_assert_ptr_null(a);
    ck_assert_ptr_null(arena_free(NULL));
}
END_TEST

START_TEST(arena_slots_are_aligned_and_rounded_up)
{
    /* chunk 10000 bytes rounds up to 12 KiB slots at the default 4 KiB alignment */
    struct arena *a = au_mk(100 * KIB, 10000);
    ck_assert_uint_eq(arena_slot_bytes(a), 12 * KIB);
    ck_assert_uint_eq(arena_slots_total(a), 8); /* 100 KiB / 12 KiB, the tail unused */
    struct arena_resv r;
    arena_resv_init(&r, 1, 1, 8 * 10000);
    ck_assert_int_eq(arena_want(a, &r, 8, 0), 8);
    ck_assert_uint_eq(au_rec.n_grants, 8);
    for (uint32_t i = 0; i < 8; i++) {
        const struct arena_grant *g = &au_rec.grants[i].g;
        ck_assert_uint_eq(g->offset % 4096, 0);
        ck_assert_uint_le(g->offset + arena_slot_bytes(a), 100 * KIB);
        ck_assert_uint_eq(g->length, 10000);
        ck_assert_uint_eq(g->ext_off, (uint64_t)i * 10000);
    }
    arena_resv_close(a, &r, false);
    arena_free(a);

    struct arena_params p = au_params(1 * MIB, 4 * KIB);
    p.align = 64 * KIB;
    ck_assert_int_eq(arena_new(&p, &a), 0);
    ck_assert_uint_eq(arena_slot_bytes(a), 64 * KIB);
    ck_assert_uint_eq(arena_slots_total(a), 16);
    arena_free(a);
}
END_TEST

START_TEST(arena_credits_go_fifo_and_head_of_line_waits)
{
    struct arena *a = au_mk(4 * MIB, 1 * MIB); /* 4 slots */
    struct arena_resv A, B, C, D;
    arena_resv_init(&A, 1, 1, 4 * MIB); arena_resv_init(&B, 2, 1, 2 * MIB);
    arena_resv_init(&C, 3, 1, 1 * MIB); arena_resv_init(&D, 4, 1, 2 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 4, 0), 4);
    ck_assert_uint_eq(au_rec.n_grants, 4);
    ck_assert_int_eq(A.state, RESV_IDLE);
    ck_assert_int_eq(arena_want(a, &B, 2, 1), 2);
    ck_assert_int_eq(arena_want(a, &C, 1, 2), 1);
    ck_assert_int_eq(arena_want(a, &D, 2, 3), 2);
    ck_assert_uint_eq(au_stats(a).waiting_requests, 3);
    ck_assert_uint_eq(au_rec.n_grants, 4);

    /* One slot frees: the head (B) takes it and keeps the head; C waits behind it. */
    const struct arena_grant *g = &au_rec.grants[0].g;
    ck_assert_int_eq(arena_report(a, &A, g->slot, g->generation, g->ext_off, g->length, NULL), 0);
    ck_assert_int_eq(arena_release(a, &A, g->slot, g->generation), 0);
    ck_assert_uint_eq(au_rec.n_grants, 5);
    ck_assert_ptr_eq(au_rec.grants[4].r, &B);
    ck_assert_int_eq(B.state, RESV_WAITING);
    ck_assert_uint_eq(B.want, 1);

    /* The rest of A lands: B completes, then C, then D gets one. */
    for (uint32_t i = 1; i < 4; i++) {
        g = &au_rec.grants[i].g;
        ck_assert_int_eq(arena_report(a, &A, g->slot, g->generation, g->ext_off, g->length, NULL), 0);
        ck_assert_int_eq(arena_release(a, &A, g->slot, g->generation), 0);
    }
    ck_assert_uint_eq(au_rec.n_grants, 8);
    ck_assert_ptr_eq(au_rec.grants[5].r, &B);
    ck_assert_ptr_eq(au_rec.grants[6].r, &C);
    ck_assert_ptr_eq(au_rec.grants[7].r, &D);
    ck_assert_int_eq(B.state, RESV_IDLE);
    ck_assert_int_eq(C.state, RESV_IDLE);
    ck_assert_int_eq(D.state, RESV_WAITING);
    ck_assert_uint_eq(D.want, 1);
    /* B's grants are consecutive extent chunks. */
    ck_assert_uint_eq(au_rec.grants[4].g.ext_off, 0);
    ck_assert_uint_eq(au_rec.grants[5].g.ext_off, 1 * MIB);

    /* A window refill joins the tail: A asks again, D (ahead of it) is served first. */
    arena_resv_close(a, &A, false);
    struct arena_resv E;
    arena_resv_init(&E, 5, 1, 3 * MIB);
    ck_assert_int_eq(arena_want(a, &E, 1, 10), 1);
    au_land_all(a, &B, 0);
    ck_assert_ptr_eq(au_rec.grants[8].r, &D);
    ck_assert_ptr_eq(au_rec.grants[9].r, &E);
    ck_assert_uint_eq(au_stats(a).waiting_requests, 0);
    arena_resv_close(a, &C, false);
    arena_resv_close(a, &D, false);
    arena_resv_close(a, &E, false);
    ck_assert_uint_eq(au_stats(a).slots_free, 4);
    arena_free(a);
}
END_TEST

START_TEST(arena_stale_generation_report_is_rejected_not_consumed)
{
    struct arena *a = au_mk(1 * MIB, 1 * MIB); /* 1 slot */
    struct arena_resv A, B;
    arena_resv_init(&A, 1, 1, 1 * MIB); arena_resv_init(&B, 2, 1, 1 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 1, 0), 1);
    struct arena_grant ga = au_rec.grants[0].g;
    ck_assert_int_eq(arena_report(a, &A, ga.slot, ga.generation, 0, 1 * MIB, NULL), 0);
    ck_assert_int_eq(arena_release(a, &A, ga.slot, ga.generation), 0);
    ck_assert_int_eq(arena_want(a, &B, 1, 0), 1);
    struct arena_grant gb = au_rec.grants[1].g;
    ck_assert_uint_eq(gb.slot, ga.slot);
    ck_assert_uint_gt(gb.generation, ga.generation);

    /* A late duplicate of A's report, and B reporting with A's generation: both stale. */
    ck_assert_int_eq(arena_report(a, &A, ga.slot, ga.generation, 0, 1 * MIB, NULL), -ESTALE);
    ck_assert_int_eq(arena_report(a, &B, gb.slot, ga.generation, 0, 1 * MIB, NULL), -ESTALE);
    ck_assert_int_eq(arena_release(a, &A, ga.slot, ga.generation), -ESTALE);
    ck_assert_uint_eq(au_stats(a).stale_reports_total, 2);
    ck_assert_uint_eq(B.landed, 0);
    /* Nothing was consumed: B's own report still lands, once. */
    struct arena_grant got;
    ck_assert_int_eq(arena_report(a, &B, gb.slot, gb.generation, 0, 1 * MIB, &got), 0);
    ck_assert_uint_eq(got.generation, gb.generation);
    ck_assert_uint_eq(B.landed, 1 * MIB);
    ck_assert_int_eq(arena_report(a, &B, gb.slot, gb.generation, 0, 1 * MIB, NULL), -EALREADY);
    ck_assert_int_eq(arena_report(a, &B, 1, gb.generation, 0, 1 * MIB, NULL), -EINVAL);
    ck_assert_uint_eq(au_stats(a).stale_reports_total, 3);
    arena_resv_close(a, &A, false);
    arena_resv_close(a, &B, false);
    arena_free(a);
}
END_TEST

START_TEST(arena_report_length_must_equal_the_grant)
{
    struct arena *a = au_mk(4 * MIB, 1 * MIB);
    struct arena_resv r;
    arena_resv_init(&r, 1, 1, 2 * MIB + 512 * KIB); /* 2.5 chunks: last grant is 512 KiB */
    ck_assert_int_eq(arena_want(a, &r, 16, 0), 3);   /* clamped to the chunks of the extent */
    ck_assert_uint_eq(au_rec.n_grants, 3);
    struct arena_grant last = au_rec.grants[2].g;
    ck_assert_uint_eq(last.ext_off, 2 * MIB);
    ck_assert_uint_eq(last.length, 512 * KIB);
    ck_assert_int_eq(arena_grant_check(&last, 2 * MIB, 512 * KIB), 0);
    ck_assert_int_eq(arena_grant_check(&last, 2 * MIB, 512 * KIB + 1), -ERANGE);
    ck_assert_int_eq(arena_grant_check(&last, 2 * MIB - 1, 512 * KIB), -ERANGE);
    ck_assert_int_eq(arena_grant_check(NULL, 0, 0), -ERANGE);

    ck_assert_int_eq(arena_report(a, &r, last.slot, last.generation, 2 * MIB, 1 * MIB, NULL), -ERANGE);
    ck_assert_int_eq(arena_report(a, &r, last.slot, last.generation, 2 * MIB, 512 * KIB - 1, NULL),
                     -ERANGE);
    ck_assert_int_eq(arena_report(a, &r, last.slot, last.generation, 1 * MIB, 512 * KIB, NULL), -ERANGE);
    ck_assert_uint_eq(au_stats(a).bound_violations_total, 3);
    ck_assert_uint_eq(r.landed, 0);
    /* An unreported credit cannot be released (only closing returns it). */
    ck_assert_int_eq(arena_release(a, &r, last.slot, last.generation), -EBUSY);
    ck_assert_int_eq(arena_report(a, &r, last.slot, last.generation, 2 * MIB, 512 * KIB, NULL), 0);
    ck_assert_int_eq(arena_release(a, &r, last.slot, last.generation), 0);
    /* The whole extent is granted: further asks grant nothing. */
    ck_assert_int_eq(arena_want(a, &r, 1, 0), 0);
    arena_resv_close(a, &r, false);
    ck_assert_uint_eq(au_stats(a).slots_free, 4);
    arena_free(a);
}
END_TEST

/* arena.cut_at_layers: grants end at the cuts too (a streamed layer moves alone), repeats and
 * offsets already passed skipped, and the credits asked count the stretches between cuts */
START_TEST(arena_grants_never_cross_a_cut)
{
    struct arena *a = au_mk(8 * MIB, 1 * MIB);
    struct arena_resv r;
    static const uint64_t cuts[] = {0, 100 * KIB, 100 * KIB, 3 * MIB, 4 * MIB, 9 * MIB};
    arena_resv_init(&r, 1, 1, 4 * MIB);
    arena_resv_set_cuts(&r, cuts, 6);
    ck_assert_int_eq(arena_want(a, &r, 16, 0), 5);
    ck_assert_uint_eq(au_rec.n_grants, 5);
    static const uint64_t off[] = {0, 100 * KIB, 1 * MIB + 100 * KIB, 2 * MIB + 100 * KIB,
                                   3 * MIB};
    for (uint32_t i = 0; i < 5; i++) {
        ck_assert_uint_eq(au_rec.grants[i].g.ext_off, off[i]);
        ck_assert_uint_eq(au_rec.grants[i].g.length, (i < 4 ? off[i + 1] : 4 * MIB) - off[i]);
    }
    au_land_all(a, &r, 0);
    ck_assert_uint_eq(r.landed, 4 * MIB);
    arena_resv_close(a, &r, false);
    ck_assert_uint_eq(au_stats(a).slots_free, 8);
    arena_free(a);
}
END_TEST

START_TEST(arena_reserve_timeout_fires_exactly_at_deadline_without_leak)
{
    struct arena *a = au_mk(1 * MIB, 1 * MIB); /* 1 slot, timeout 500 ms */
    struct arena_resv A, B;
    arena_resv_init(&A, 1, 1, 1 * MIB); arena_resv_init(&B, 2, 1, 1 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 1, 900), 1);
    ck_assert_int_eq(arena_want(a, &B, 1, 1000), 1);
    uint64_t dl = 0;
    ck_assert_int_eq(arena_next_deadline(a, &dl), 0);
    ck_assert_uint_eq(dl, 1500);
    ck_assert_uint_eq(arena_tick(a, 1499), 0);
    ck_assert_int_eq(B.state, RESV_WAITING);
    ck_assert_uint_eq(arena_tick(a, 1500), 1);
    ck_assert_uint_eq(au_rec.n_timeouts, 1);
    ck_assert_ptr_eq(au_rec.timeouts[0], &B);
    ck_assert_int_eq(B.state, RESV_TIMED_OUT);
    ck_assert_uint_eq(B.held, 0);
    ck_assert_int_eq(arena_next_deadline(a, &dl), -ENOENT);
    struct arena_stats st = au_stats(a);
    ck_assert_uint_eq(st.timeouts_total, 1);
    ck_assert_uint_eq(st.waiting_requests, 0);
    ck_assert_uint_eq(st.slots_in_use, 1);
    /* A timed-out reservation is terminal; the slot A frees goes to nobody. */
    ck_assert_int_eq(arena_want(a, &B, 1, 1600), -EINVAL);
    au_land_all(a, &A, 0);
    ck_assert_uint_eq(au_rec.n_grants, 1);
    st = au_stats(a);
    ck_assert_uint_eq(st.slots_free, 1);
    ck_assert_uint_eq(st.slots_in_use, 0);
    /* A reload shortens the wait of later requests only. */
    struct arena_resv C, D, H;
    arena_resv_init(&C, 3, 1, 1 * MIB), arena_resv_init(&D, 4, 1, 1 * MIB);
    arena_resv_init(&H, 5, 1, 1 * MIB);
    ck_assert_int_eq(arena_want(a, &H, 1, 2000), 1); /* holds the only slot */
    ck_assert_int_eq(arena_want(a, &C, 1, 2000), 1);
    arena_set_reserve_timeout(a, 100);
    ck_assert_int_eq(arena_want(a, &D, 1, 2000), 1);
    ck_assert_int_eq(arena_next_deadline(a, &dl), 0);
    ck_assert_uint_eq(dl, 2100);
    ck_assert_uint_eq(arena_tick(a, 2100), 1);
    ck_assert_ptr_eq(au_rec.timeouts[1], &D);
    ck_assert_uint_eq(arena_tick(a, 2499), 0);
    ck_assert_uint_eq(arena_tick(a, 2500), 1);
    ck_assert_ptr_eq(au_rec.timeouts[2], &C);
    arena_resv_close(a, &H, false);
    arena_resv_close(a, &B, false); /* no-op on a terminal reservation */
    arena_resv_close(a, &A, false);
    ck_assert_uint_eq(au_stats(a).slots_free, 1);
    arena_free(a);
}
END_TEST

START_TEST(arena_exhaustion_waits_then_times_out_but_refills_never_do)
{
    struct arena *a = au_mk(2 * MIB, 1 * MIB); /* 2 slots */
    struct arena_resv A, W[3];
    arena_resv_init(&A, 1, 1, 8 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 2, 0), 2);
    ck_assert_int_eq(arena_want(a, &A, 2, 0), 2); /* holds 2, may hold 16 */
    ck_assert_int_eq(A.state, RESV_WAITING);                  /* refill queued, no deadline */
    for (int i = 0; i < 3; i++) {
        arena_resv_init(&W[i], 10 + i, 1, 1 * MIB);
        ck_assert_int_eq(arena_want(a, &W[i], 1, 100 + i), 1);
    }
    ck_assert_uint_eq(au_stats(a).waiting_requests, 4);
    uint64_t dl = 0;
    ck_assert_int_eq(arena_next_deadline(a, &dl), 0);
    ck_assert_uint_eq(dl, 600);
    ck_assert_uint_eq(arena_tick(a, 601), 2);
    ck_assert_uint_eq(arena_tick(a, 100000), 1);
    ck_assert_uint_eq(au_rec.n_timeouts, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_ptr_eq(au_rec.timeouts[i], &W[i]);
        ck_assert_int_eq(W[i].state, RESV_TIMED_OUT);
    }
    ck_assert_int_eq(A.state, RESV_WAITING); /* a refill never times out */
    ck_assert_uint_eq(au_stats(a).waiting_requests, 1);
    ck_assert_uint_eq(au_stats(a).slots_in_use, 2);
    au_land_all(a, &A, 0);
    ck_assert_uint_eq(au_rec.n_grants, 4);
    ck_assert_uint_eq(au_rec.grants[2].g.ext_off, 2 * MIB);
    arena_resv_close(a, &A, false);
    ck_assert_uint_eq(au_stats(a).slots_free, 2);
    arena_free(a);
}
END_TEST

START_TEST(arena_want_limits_are_enforced)
{
    struct arena_params p = au_params(2 * MIB, 1 * MIB);
    p.max_waiters = 2;
    p.max_credits = 4;
    memset(&au_rec, 0, sizeof(au_rec));
    struct arena *a = NULL;
    ck_assert_int_eq(arena_new(&p, &a), 0);
    struct arena_resv A, B, C, D, Z;
    arena_resv_init(&A, 1, 1, 100 * MIB); arena_resv_init(&B, 2, 1, 1 * MIB);
    arena_resv_init(&C, 3, 1, 1 * MIB); arena_resv_init(&D, 4, 1, 1 * MIB);
    arena_resv_init(&Z, 5, 1, 0);
    ck_assert_int_eq(arena_want(a, &A, 5, 0), -E2BIG);
    ck_assert_int_eq(arena_want(a, &A, 0, 0), -EINVAL);
    ck_assert_int_eq(arena_want(a, &Z, 1, 0), -EINVAL);
    ck_assert_int_eq(arena_want(a, &A, 4, 0), 4); /* 2 granted, 2 waiting */
    ck_assert_int_eq(arena_want(a, &A, 1, 0), -EALREADY);
    ck_assert_int_eq(arena_want(a, &B, 1, 0), 1);
    ck_assert_int_eq(arena_want(a, &C, 1, 0), -EAGAIN); /* queue full: A and B */
    ck_assert_uint_eq(au_stats(a).refused_waiters_total, 1);
    ck_assert_int_eq(C.state, RESV_IDLE);
    arena_resv_close(a, &B, false);
    ck_assert_int_eq(arena_want(a, &C, 1, 0), 1);
    ck_assert_int_eq(arena_want(a, &D, 1, 0), -EAGAIN);
    arena_resv_close(a, &A, false); /* frees 2: C takes one, the other stays free */
    ck_assert_int_eq(C.state, RESV_IDLE);
    ck_assert_uint_eq(C.held, 1);
    ck_assert_int_eq(arena_want(a, &D, 1, 0), 1);
    ck_assert_uint_eq(D.held, 1);
    arena_resv_close(a, &C, false);
    arena_resv_close(a, &D, false);
    arena_resv_close(a, NULL, false);
    ck_assert_uint_eq(au_stats(a).slots_free, 2);
    arena_free(a);
}
END_TEST

START_TEST(arena_quarantine_holds_slots_until_the_peer_is_reclaimed)
{
    struct arena *a = au_mk(4 * MIB, 1 * MIB);
    struct arena_resv A, B, C;
    arena_resv_init(&A, 1, 7, 3 * MIB); arena_resv_init(&B, 2, 8, 1 * MIB);
    arena_resv_init(&C, 3, 9, 4 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 3, 0), 3);
    ck_assert_int_eq(arena_want(a, &B, 1, 0), 1);
    struct arena_grant g0 = au_rec.grants[0].g, g1 = au_rec.grants[1].g, g2 = au_rec.grants[2].g;
    ck_assert_int_eq(arena_report(a, &A, g0.slot, g0.generation, g0.ext_off, g0.length, NULL), 0);
    ck_assert_int_eq(arena_want(a, &C, 4, 0), 4);

    /* A dies with puts possibly in flight: its two GRANTED slots are quarantined under peer 7;
     * its FILLED slot (put done and flushed before the report) is free and goes to C at once. */
    arena_resv_close(a, &A, true);
    struct arena_stats st = au_stats(a);
    ck_assert_uint_eq(st.slots_quarantined, 2);
    ck_assert_uint_eq(st.quarantined_bytes, 2 * arena_slot_bytes(a));
    ck_assert_uint_eq(st.slots_in_use, 2); /* B's and the one C got */
    ck_assert_uint_eq(C.held, 1);
    ck_assert_ptr_eq(au_rec.grants[au_rec.n_grants - 1].r, &C);
    ck_assert_uint_eq(au_rec.grants[au_rec.n_grants - 1].g.slot, g0.slot);
    /* A late report for a quarantined slot is rejected. */
    ck_assert_int_eq(arena_report(a, &A, g1.slot, g1.generation, g1.ext_off, g1.length, NULL), -ESTALE);

    ck_assert_uint_eq(arena_reclaim_peer(a, 8), 0);
    ck_assert_uint_eq(au_stats(a).slots_quarantined, 2);
    ck_assert_uint_eq(arena_reclaim_peer(a, 7), 2);
    st = au_stats(a);
    ck_assert_uint_eq(st.slots_quarantined, 0);
    ck_assert_uint_eq(st.quarantined_bytes, 0);
    ck_assert_uint_eq(st.reclaimed_total, 2);
    ck_assert_uint_eq(C.held, 3); /* the reclaimed slots went to the waiter */
    ck_assert_uint_eq(arena_reclaim_peer(a, 7), 0);
    /* Reissued slots carry new generations. */
    for (uint32_t i = 0; i < au_rec.n_grants; i++) {
        const struct arena_grant *g = &au_rec.grants[i].g;
        if (au_rec.grants[i].r == &C && (g->slot == g1.slot || g->slot == g2.slot))
            ck_assert_uint_gt(g->generation, g->slot == g1.slot ? g1.generation : g2.generation);
    }
    /* Closing without in-flight puts frees directly. */
    arena_resv_close(a, &B, false);
    arena_resv_close(a, &C, false);
    st = au_stats(a);
    ck_assert_uint_eq(st.slots_free, 4);
    ck_assert_uint_eq(st.slots_quarantined, 0);
    arena_free(a);
}
END_TEST

START_TEST(arena_release_then_regrant_bumps_the_generation)
{
    struct arena *a = au_mk(1 * MIB, 1 * MIB);
    struct arena_resv r;
    arena_resv_init(&r, 1, 1, 5 * MIB);
    uint32_t last = 0;
    for (uint32_t i = 0; i < 5; i++) {
        ck_assert_int_eq(arena_want(a, &r, 1, 0), 1);
        ck_assert_uint_eq(au_rec.n_grants, i + 1);
        struct arena_grant g = au_rec.grants[i].g;
        ck_assert_uint_eq(g.slot, 0);
        ck_assert_uint_eq(g.generation, last + 1);
        ck_assert_uint_eq(g.ext_off, (uint64_t)i * MIB);
        last = g.generation;
        ck_assert_int_eq(arena_report(a, &r, 0, g.generation, g.ext_off, g.length, NULL), 0);
        ck_assert_int_eq(arena_release(a, &r, 0, g.generation), 0);
    }
    ck_assert_uint_eq(r.landed, 5 * MIB);
    ck_assert_uint_eq(r.granted, 5 * MIB);
    arena_resv_close(a, &r, false);
    arena_free(a);
}
END_TEST

/* Inside on_grant: land each chunk and release at once (a zero-latency sender). */
static void land_hook(struct arena_resv *r, const struct arena_grant *g, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        ck_assert_int_eq(arena_report(au_arena, r, g[i].slot, g[i].generation, g[i].ext_off,
                                      g[i].length, NULL), 0);
        ck_assert_int_eq(arena_release(au_arena, r, g[i].slot, g[i].generation), 0);
    }
    if (r->granted < r->bytes && r->state == RESV_IDLE)
        ck_assert_int_ge(arena_want(au_arena, r, 2, 0), 1);
}

START_TEST(arena_callbacks_may_reenter_the_arena)
{
    struct arena *a = au_mk(2 * MIB, 1 * MIB);
    au_rec.hook = land_hook;
    struct arena_resv A, B;
    arena_resv_init(&A, 1, 1, 20 * MIB); arena_resv_init(&B, 2, 1, 7 * MIB + 1);
    ck_assert_int_eq(arena_want(a, &A, 2, 0), 2);
    ck_assert_int_eq(arena_want(a, &B, 2, 0), 2);
    ck_assert_uint_eq(A.landed, 20 * MIB);
    ck_assert_uint_eq(B.landed, 7 * MIB + 1);
    ck_assert_uint_eq(au_rec.n_grants, 20 + 8);
    struct arena_stats st = au_stats(a);
    ck_assert_uint_eq(st.slots_free, 2);
    ck_assert_uint_eq(st.grants_total, 28);
    arena_resv_close(a, &A, false);
    arena_resv_close(a, &B, false);
    arena_free(a);
}
END_TEST

START_TEST(arena_stats_json_has_every_counter)
{
    struct arena *a = au_mk(8 * MIB, 1 * MIB);
    struct arena_resv A, B;
    arena_resv_init(&A, 1, 3, 8 * MIB); arena_resv_init(&B, 2, 3, 1 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 8, 0), 8);
    ck_assert_int_eq(arena_want(a, &B, 1, 0), 1);
    struct arena_grant g = au_rec.grants[0].g;
    ck_assert_int_eq(arena_report(a, &A, g.slot, g.generation + 1, g.ext_off, g.length, NULL), -ESTALE);
    ck_assert_int_eq(arena_report(a, &A, g.slot, g.generation, g.ext_off, g.length + 1, NULL), -ERANGE);
    ck_assert_uint_eq(arena_tick(a, 500), 1);
    arena_resv_close(a, &A, true);
    json_t *j = arena_stats_json(a);
    ck_assert_ptr_nonnull(j);
    struct { const char *key; json_int_t want; } exp[] = {
        {"capacity_bytes", 8 * MIB}, {"chunk_bytes", 1 * MIB},     {"slot_bytes", 1 * MIB},
        {"slots_total", 8},          {"slots_free", 0},            {"slots_in_use", 0},
        {"waiting_requests", 0},     {"quarantined_slots", 8},     {"quarantined_bytes", 8 * MIB},
        {"grants_total", 8},         {"timeouts_total", 1},        {"stale_reports_total", 1},
        {"bound_violations_total", 1}, {"reclaimed_total", 0},     {"refused_waiters_total", 0},
        {"slots_split", 0},          {"small_grants_total", 0},    {"peer_share_bytes", 8 * MIB},
    };
    ck_assert_uint_eq(json_object_size(j), sizeof(exp) / sizeof(exp[0]));
    for (size_t i = 0; i < sizeof(exp) / sizeof(exp[0]); i++) {
        json_t *v = json_object_get(j, exp[i].key);
        ck_assert_msg(json_is_integer(v), "missing %s", exp[i].key);
        ck_assert_msg(json_integer_value(v) == exp[i].want, "%s = %lld, want %lld", exp[i].key,
                      (long long)json_integer_value(v), (long long)exp[i].want);
    }
    json_decref(j);
    ck_assert_uint_eq(arena_reclaim_peer(a, 3), 8);
    ck_assert_uint_eq(au_stats(a).slots_free, 8);
    ck_assert_str_eq(arena_resv_state_to_string(RESV_TIMED_OUT), "timed_out");
    ck_assert_str_eq(arena_resv_state_to_string((arena_resv_state_t)99), "unknown");
    arena_free(a);
}
END_TEST

static Suite *arena_suite(void)
{
    Suite *s = suite_create("arena");
    TCase *tc = tcase_create("arena");
    tcase_add_test(tc, arena_new_refuses_bad_params);
    tcase_add_test(tc, arena_slots_are_aligned_and_rounded_up);
    tcase_add_test(tc, arena_credits_go_fifo_and_head_of_line_waits);
    tcase_add_test(tc, arena_want_limits_are_enforced);
    tcase_add_test(tc, arena_callbacks_may_reenter_the_arena);
    tcase_add_test(tc, arena_stale_generation_report_is_rejected_not_consumed);
    tcase_add_test(tc, arena_report_length_must_equal_the_grant);
    tcase_add_test(tc, arena_grants_never_cross_a_cut);
    tcase_add_test(tc, arena_release_then_regrant_bumps_the_generation);
    tcase_add_test(tc, arena_reserve_timeout_fires_exactly_at_deadline_without_leak);
    tcase_add_test(tc, arena_exhaustion_waits_then_times_out_but_refills_never_do);
    tcase_add_test(tc, arena_quarantine_holds_slots_until_the_peer_is_reclaimed);
    tcase_add_test(tc, arena_stats_json_has_every_counter);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(arena_suite()); }
