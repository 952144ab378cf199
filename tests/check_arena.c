/* check_arena.c: the arena's slots, FIFO credits, generations, timeouts, bounds and quarantine. */
#include <errno.h>
#include <jansson.h>

#include "arena.h"
#include "testutil.h"

#define KIB 1024ull
#define MIB (1024ull * 1024ull)
#define LOG_MAX 4096

/* Records every callback, in order. */
struct rec {
    uint32_t n_grants;
    struct { struct arena_resv *r; struct arena_grant g; } grants[LOG_MAX];
    uint32_t n_timeouts;
    struct arena_resv *timeouts[LOG_MAX];
    /* optional hook: runs inside on_grant */
    void (*hook)(struct arena_resv *r, const struct arena_grant *g, uint32_t n);
};

static struct rec rec;
static struct arena *cur_arena;

static void on_grant(struct arena_resv *r, const struct arena_grant *g, uint32_t n, void *user)
{
    if (user != &rec || n < 1 || rec.n_grants + n > LOG_MAX)
        ck_abort_msg("on_grant: bad call (n %u, logged %u)", n, rec.n_grants);
    for (uint32_t i = 0; i < n; i++) {
        rec.grants[rec.n_grants].r = r;
        rec.grants[rec.n_grants].g = g[i];
        rec.n_grants++;
    }
    if (rec.hook)
        rec.hook(r, g, n);
}

static void on_timeout(struct arena_resv *r, void *user)
{
    if (user != &rec || rec.n_timeouts >= LOG_MAX)
        ck_abort_msg("on_timeout: bad call");
    rec.timeouts[rec.n_timeouts++] = r;
}

static struct arena_params params(uint64_t size, uint64_t chunk)
{
    return (struct arena_params){.size = size, .chunk = chunk, .reserve_timeout_ms = 500,
                                 .max_waiters = 64, .max_credits = 16, .on_grant = on_grant,
                                 .on_timeout = on_timeout, .user = &rec};
}

static struct arena *mk(uint64_t size, uint64_t chunk)
{
    memset(&rec, 0, sizeof(rec));
    struct arena_params p = params(size, chunk);
    struct arena *a = NULL;
    ck_assert_int_eq(arena_new(&p, &a), 0);
    cur_arena = a;
    return a;
}

static struct arena_stats stats(const struct arena *a)
{
    struct arena_stats st;
    arena_get_stats(a, &st);
    if (st.slots_split == 0) /* every grant is a whole slot */
        ck_assert_uint_eq(st.slots_in_use + st.slots_free + st.slots_quarantined, st.slots_total);
    else /* cut slots hold many grants each */
        ck_assert_uint_le(st.slots_free + st.slots_split, st.slots_total);
    return st;
}

/* Report and release every slot the log granted to r, from log index `from`. */
static void land_all(struct arena *a, struct arena_resv *r, uint32_t from)
{
    for (uint32_t i = from; i < rec.n_grants; i++) {
        if (rec.grants[i].r != r)
            continue;
        const struct arena_grant *g = &rec.grants[i].g;
        ck_assert_int_eq(arena_report(a, r, g->slot, g->generation, g->ext_off, g->length, NULL), 0);
        ck_assert_int_eq(arena_release(a, r, g->slot, g->generation), 0);
    }
}

START_TEST(arena_new_refuses_bad_params)
{
    struct arena *a = NULL;
    struct arena_params p = params(64 * MIB, 4 * MIB);
    p.align = 2048;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p.align = 12288; /* not a power of two */
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = params(64 * MIB, 0);
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = params(3 * MIB, 4 * MIB); /* smaller than one slot */
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = params((uint64_t)ARENA_MAX_SLOTS * 4 * KIB + 4 * KIB, 4 * KIB); /* too many slots */
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = params(64 * MIB, 4 * MIB), p.max_credits = 0;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p.max_credits = ARENA_MAX_CREDITS + 1;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = params(64 * MIB, 4 * MIB), p.max_waiters = 0;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = params(64 * MIB, 4 * MIB), p.max_waiters = ARENA_MAX_WAITERS + 1;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = params(64 * MIB, 4 * MIB), p.on_grant = NULL;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    p = params(64 * MIB, 4 * MIB), p.on_timeout = NULL;
    ck_assert_int_eq(arena_new(&p, &a), -EINVAL);
    ck_assert_ptr_null(a);
    ck_assert_ptr_null(arena_free(NULL));
}
END_TEST

START_TEST(arena_slots_are_aligned_and_rounded_up)
{
    /* chunk 10000 bytes rounds up to 12 KiB slots at the default 4 KiB alignment */
    struct arena *a = mk(100 * KIB, 10000);
    ck_assert_uint_eq(arena_slot_bytes(a), 12 * KIB);
    ck_assert_uint_eq(arena_slots_total(a), 8); /* 100 KiB / 12 KiB, the tail unused */
    struct arena_resv r;
    arena_resv_init(&r, 1, 1, 8 * 10000);
    ck_assert_int_eq(arena_want(a, &r, 8, 0), 8);
    ck_assert_uint_eq(rec.n_grants, 8);
    for (uint32_t i = 0; i < 8; i++) {
        const struct arena_grant *g = &rec.grants[i].g;
        ck_assert_uint_eq(g->offset % 4096, 0);
        ck_assert_uint_le(g->offset + arena_slot_bytes(a), 100 * KIB);
        ck_assert_uint_eq(g->length, 10000);
        ck_assert_uint_eq(g->ext_off, (uint64_t)i * 10000);
    }
    arena_resv_close(a, &r, false);
    arena_free(a);

    struct arena_params p = params(1 * MIB, 4 * KIB);
    p.align = 64 * KIB;
    ck_assert_int_eq(arena_new(&p, &a), 0);
    ck_assert_uint_eq(arena_slot_bytes(a), 64 * KIB);
    ck_assert_uint_eq(arena_slots_total(a), 16);
    arena_free(a);
}
END_TEST

START_TEST(arena_credits_go_fifo_and_head_of_line_waits)
{
    struct arena *a = mk(4 * MIB, 1 * MIB); /* 4 slots */
    struct arena_resv A, B, C, D;
    arena_resv_init(&A, 1, 1, 4 * MIB); arena_resv_init(&B, 2, 1, 2 * MIB);
    arena_resv_init(&C, 3, 1, 1 * MIB); arena_resv_init(&D, 4, 1, 2 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 4, 0), 4);
    ck_assert_uint_eq(rec.n_grants, 4);
    ck_assert_int_eq(A.state, RESV_IDLE);
    ck_assert_int_eq(arena_want(a, &B, 2, 1), 2);
    ck_assert_int_eq(arena_want(a, &C, 1, 2), 1);
    ck_assert_int_eq(arena_want(a, &D, 2, 3), 2);
    ck_assert_uint_eq(stats(a).waiting_requests, 3);
    ck_assert_uint_eq(rec.n_grants, 4);

    /* One slot frees: the head (B) takes it and keeps the head; C waits behind it. */
    const struct arena_grant *g = &rec.grants[0].g;
    ck_assert_int_eq(arena_report(a, &A, g->slot, g->generation, g->ext_off, g->length, NULL), 0);
    ck_assert_int_eq(arena_release(a, &A, g->slot, g->generation), 0);
    ck_assert_uint_eq(rec.n_grants, 5);
    ck_assert_ptr_eq(rec.grants[4].r, &B);
    ck_assert_int_eq(B.state, RESV_WAITING);
    ck_assert_uint_eq(B.want, 1);

    /* The rest of A lands: B completes, then C, then D gets one. */
    for (uint32_t i = 1; i < 4; i++) {
        g = &rec.grants[i].g;
        ck_assert_int_eq(arena_report(a, &A, g->slot, g->generation, g->ext_off, g->length, NULL), 0);
        ck_assert_int_eq(arena_release(a, &A, g->slot, g->generation), 0);
    }
    ck_assert_uint_eq(rec.n_grants, 8);
    ck_assert_ptr_eq(rec.grants[5].r, &B);
    ck_assert_ptr_eq(rec.grants[6].r, &C);
    ck_assert_ptr_eq(rec.grants[7].r, &D);
    ck_assert_int_eq(B.state, RESV_IDLE);
    ck_assert_int_eq(C.state, RESV_IDLE);
    ck_assert_int_eq(D.state, RESV_WAITING);
    ck_assert_uint_eq(D.want, 1);
    /* B's grants are consecutive extent chunks. */
    ck_assert_uint_eq(rec.grants[4].g.ext_off, 0);
    ck_assert_uint_eq(rec.grants[5].g.ext_off, 1 * MIB);

    /* A window refill joins the tail: A asks again, D (ahead of it) is served first. */
    arena_resv_close(a, &A, false);
    struct arena_resv E;
    arena_resv_init(&E, 5, 1, 3 * MIB);
    ck_assert_int_eq(arena_want(a, &E, 1, 10), 1);
    land_all(a, &B, 0);
    ck_assert_ptr_eq(rec.grants[8].r, &D);
    ck_assert_ptr_eq(rec.grants[9].r, &E);
    ck_assert_uint_eq(stats(a).waiting_requests, 0);
    arena_resv_close(a, &C, false);
    arena_resv_close(a, &D, false);
    arena_resv_close(a, &E, false);
    ck_assert_uint_eq(stats(a).slots_free, 4);
    arena_free(a);
}
END_TEST

START_TEST(arena_stale_generation_report_is_rejected_not_consumed)
{
    struct arena *a = mk(1 * MIB, 1 * MIB); /* 1 slot */
    struct arena_resv A, B;
    arena_resv_init(&A, 1, 1, 1 * MIB); arena_resv_init(&B, 2, 1, 1 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 1, 0), 1);
    struct arena_grant ga = rec.grants[0].g;
    ck_assert_int_eq(arena_report(a, &A, ga.slot, ga.generation, 0, 1 * MIB, NULL), 0);
    ck_assert_int_eq(arena_release(a, &A, ga.slot, ga.generation), 0);
    ck_assert_int_eq(arena_want(a, &B, 1, 0), 1);
    struct arena_grant gb = rec.grants[1].g;
    ck_assert_uint_eq(gb.slot, ga.slot);
    ck_assert_uint_gt(gb.generation, ga.generation);

    /* A late duplicate of A's report, and B reporting with A's generation: both stale. */
    ck_assert_int_eq(arena_report(a, &A, ga.slot, ga.generation, 0, 1 * MIB, NULL), -ESTALE);
    ck_assert_int_eq(arena_report(a, &B, gb.slot, ga.generation, 0, 1 * MIB, NULL), -ESTALE);
    ck_assert_int_eq(arena_release(a, &A, ga.slot, ga.generation), -ESTALE);
    ck_assert_uint_eq(stats(a).stale_reports_total, 2);
    ck_assert_uint_eq(B.landed, 0);
    /* Nothing was consumed: B's own report still lands, once. */
    struct arena_grant got;
    ck_assert_int_eq(arena_report(a, &B, gb.slot, gb.generation, 0, 1 * MIB, &got), 0);
    ck_assert_uint_eq(got.generation, gb.generation);
    ck_assert_uint_eq(B.landed, 1 * MIB);
    ck_assert_int_eq(arena_report(a, &B, gb.slot, gb.generation, 0, 1 * MIB, NULL), -EALREADY);
    ck_assert_int_eq(arena_report(a, &B, 1, gb.generation, 0, 1 * MIB, NULL), -EINVAL);
    ck_assert_uint_eq(stats(a).stale_reports_total, 3);
    arena_resv_close(a, &A, false);
    arena_resv_close(a, &B, false);
    arena_free(a);
}
END_TEST

START_TEST(arena_report_length_must_equal_the_grant)
{
    struct arena *a = mk(4 * MIB, 1 * MIB);
    struct arena_resv r;
    arena_resv_init(&r, 1, 1, 2 * MIB + 512 * KIB); /* 2.5 chunks: last grant is 512 KiB */
    ck_assert_int_eq(arena_want(a, &r, 16, 0), 3);   /* clamped to the chunks of the extent */
    ck_assert_uint_eq(rec.n_grants, 3);
    struct arena_grant last = rec.grants[2].g;
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
    ck_assert_uint_eq(stats(a).bound_violations_total, 3);
    ck_assert_uint_eq(r.landed, 0);
    /* An unreported credit cannot be released (only closing returns it). */
    ck_assert_int_eq(arena_release(a, &r, last.slot, last.generation), -EBUSY);
    ck_assert_int_eq(arena_report(a, &r, last.slot, last.generation, 2 * MIB, 512 * KIB, NULL), 0);
    ck_assert_int_eq(arena_release(a, &r, last.slot, last.generation), 0);
    /* The whole extent is granted: further asks grant nothing. */
    ck_assert_int_eq(arena_want(a, &r, 1, 0), 0);
    arena_resv_close(a, &r, false);
    ck_assert_uint_eq(stats(a).slots_free, 4);
    arena_free(a);
}
END_TEST

START_TEST(arena_reserve_timeout_fires_exactly_at_deadline_without_leak)
{
    struct arena *a = mk(1 * MIB, 1 * MIB); /* 1 slot, timeout 500 ms */
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
    ck_assert_uint_eq(rec.n_timeouts, 1);
    ck_assert_ptr_eq(rec.timeouts[0], &B);
    ck_assert_int_eq(B.state, RESV_TIMED_OUT);
    ck_assert_uint_eq(B.held, 0);
    ck_assert_int_eq(arena_next_deadline(a, &dl), -ENOENT);
    struct arena_stats st = stats(a);
    ck_assert_uint_eq(st.timeouts_total, 1);
    ck_assert_uint_eq(st.waiting_requests, 0);
    ck_assert_uint_eq(st.slots_in_use, 1);
    /* A timed-out reservation is terminal; the slot A frees goes to nobody. */
    ck_assert_int_eq(arena_want(a, &B, 1, 1600), -EINVAL);
    land_all(a, &A, 0);
    ck_assert_uint_eq(rec.n_grants, 1);
    st = stats(a);
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
    ck_assert_ptr_eq(rec.timeouts[1], &D);
    ck_assert_uint_eq(arena_tick(a, 2499), 0);
    ck_assert_uint_eq(arena_tick(a, 2500), 1);
    ck_assert_ptr_eq(rec.timeouts[2], &C);
    arena_resv_close(a, &H, false);
    arena_resv_close(a, &B, false); /* no-op on a terminal reservation */
    arena_resv_close(a, &A, false);
    ck_assert_uint_eq(stats(a).slots_free, 1);
    arena_free(a);
}
END_TEST

START_TEST(arena_exhaustion_waits_then_times_out_but_refills_never_do)
{
    struct arena *a = mk(2 * MIB, 1 * MIB); /* 2 slots */
    struct arena_resv A, W[3];
    arena_resv_init(&A, 1, 1, 8 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 2, 0), 2);
    ck_assert_int_eq(arena_want(a, &A, 2, 0), 2); /* holds 2, may hold 16 */
    ck_assert_int_eq(A.state, RESV_WAITING);                  /* refill queued, no deadline */
    for (int i = 0; i < 3; i++) {
        arena_resv_init(&W[i], 10 + i, 1, 1 * MIB);
        ck_assert_int_eq(arena_want(a, &W[i], 1, 100 + i), 1);
    }
    ck_assert_uint_eq(stats(a).waiting_requests, 4);
    uint64_t dl = 0;
    ck_assert_int_eq(arena_next_deadline(a, &dl), 0);
    ck_assert_uint_eq(dl, 600);
    ck_assert_uint_eq(arena_tick(a, 601), 2);
    ck_assert_uint_eq(arena_tick(a, 100000), 1);
    ck_assert_uint_eq(rec.n_timeouts, 3);
    for (int i = 0; i < 3; i++) {
        ck_assert_ptr_eq(rec.timeouts[i], &W[i]);
        ck_assert_int_eq(W[i].state, RESV_TIMED_OUT);
    }
    ck_assert_int_eq(A.state, RESV_WAITING); /* a refill never times out */
    ck_assert_uint_eq(stats(a).waiting_requests, 1);
    ck_assert_uint_eq(stats(a).slots_in_use, 2);
    land_all(a, &A, 0);
    ck_assert_uint_eq(rec.n_grants, 4);
    ck_assert_uint_eq(rec.grants[2].g.ext_off, 2 * MIB);
    arena_resv_close(a, &A, false);
    ck_assert_uint_eq(stats(a).slots_free, 2);
    arena_free(a);
}
END_TEST

START_TEST(arena_want_limits_are_enforced)
{
    struct arena_params p = params(2 * MIB, 1 * MIB);
    p.max_waiters = 2;
    p.max_credits = 4;
    memset(&rec, 0, sizeof(rec));
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
    ck_assert_uint_eq(stats(a).refused_waiters_total, 1);
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
    ck_assert_uint_eq(stats(a).slots_free, 2);
    arena_free(a);
}
END_TEST

START_TEST(arena_quarantine_holds_slots_until_the_peer_is_reclaimed)
{
    struct arena *a = mk(4 * MIB, 1 * MIB);
    struct arena_resv A, B, C;
    arena_resv_init(&A, 1, 7, 3 * MIB); arena_resv_init(&B, 2, 8, 1 * MIB);
    arena_resv_init(&C, 3, 9, 4 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 3, 0), 3);
    ck_assert_int_eq(arena_want(a, &B, 1, 0), 1);
    struct arena_grant g0 = rec.grants[0].g, g1 = rec.grants[1].g, g2 = rec.grants[2].g;
    ck_assert_int_eq(arena_report(a, &A, g0.slot, g0.generation, g0.ext_off, g0.length, NULL), 0);
    ck_assert_int_eq(arena_want(a, &C, 4, 0), 4);

    /* A dies with puts possibly in flight: its two GRANTED slots are quarantined under peer 7;
     * its FILLED slot (put done and flushed before the report) is free and goes to C at once. */
    arena_resv_close(a, &A, true);
    struct arena_stats st = stats(a);
    ck_assert_uint_eq(st.slots_quarantined, 2);
    ck_assert_uint_eq(st.quarantined_bytes, 2 * arena_slot_bytes(a));
    ck_assert_uint_eq(st.slots_in_use, 2); /* B's and the one C got */
    ck_assert_uint_eq(C.held, 1);
    ck_assert_ptr_eq(rec.grants[rec.n_grants - 1].r, &C);
    ck_assert_uint_eq(rec.grants[rec.n_grants - 1].g.slot, g0.slot);
    /* A late report for a quarantined slot is rejected. */
    ck_assert_int_eq(arena_report(a, &A, g1.slot, g1.generation, g1.ext_off, g1.length, NULL), -ESTALE);

    ck_assert_uint_eq(arena_reclaim_peer(a, 8), 0);
    ck_assert_uint_eq(stats(a).slots_quarantined, 2);
    ck_assert_uint_eq(arena_reclaim_peer(a, 7), 2);
    st = stats(a);
    ck_assert_uint_eq(st.slots_quarantined, 0);
    ck_assert_uint_eq(st.quarantined_bytes, 0);
    ck_assert_uint_eq(st.reclaimed_total, 2);
    ck_assert_uint_eq(C.held, 3); /* the reclaimed slots went to the waiter */
    ck_assert_uint_eq(arena_reclaim_peer(a, 7), 0);
    /* Reissued slots carry new generations. */
    for (uint32_t i = 0; i < rec.n_grants; i++) {
        const struct arena_grant *g = &rec.grants[i].g;
        if (rec.grants[i].r == &C && (g->slot == g1.slot || g->slot == g2.slot))
            ck_assert_uint_gt(g->generation, g->slot == g1.slot ? g1.generation : g2.generation);
    }
    /* Closing without in-flight puts frees directly. */
    arena_resv_close(a, &B, false);
    arena_resv_close(a, &C, false);
    st = stats(a);
    ck_assert_uint_eq(st.slots_free, 4);
    ck_assert_uint_eq(st.slots_quarantined, 0);
    arena_free(a);
}
END_TEST

START_TEST(arena_release_then_regrant_bumps_the_generation)
{
    struct arena *a = mk(1 * MIB, 1 * MIB);
    struct arena_resv r;
    arena_resv_init(&r, 1, 1, 5 * MIB);
    uint32_t last = 0;
    for (uint32_t i = 0; i < 5; i++) {
        ck_assert_int_eq(arena_want(a, &r, 1, 0), 1);
        ck_assert_uint_eq(rec.n_grants, i + 1);
        struct arena_grant g = rec.grants[i].g;
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
        ck_assert_int_eq(arena_report(cur_arena, r, g[i].slot, g[i].generation, g[i].ext_off,
                                      g[i].length, NULL), 0);
        ck_assert_int_eq(arena_release(cur_arena, r, g[i].slot, g[i].generation), 0);
    }
    if (r->granted < r->bytes && r->state == RESV_IDLE)
        ck_assert_int_ge(arena_want(cur_arena, r, 2, 0), 1);
}

START_TEST(arena_callbacks_may_reenter_the_arena)
{
    struct arena *a = mk(2 * MIB, 1 * MIB);
    rec.hook = land_hook;
    struct arena_resv A, B;
    arena_resv_init(&A, 1, 1, 20 * MIB); arena_resv_init(&B, 2, 1, 7 * MIB + 1);
    ck_assert_int_eq(arena_want(a, &A, 2, 0), 2);
    ck_assert_int_eq(arena_want(a, &B, 2, 0), 2);
    ck_assert_uint_eq(A.landed, 20 * MIB);
    ck_assert_uint_eq(B.landed, 7 * MIB + 1);
    ck_assert_uint_eq(rec.n_grants, 20 + 8);
    struct arena_stats st = stats(a);
    ck_assert_uint_eq(st.slots_free, 2);
    ck_assert_uint_eq(st.grants_total, 28);
    arena_resv_close(a, &A, false);
    arena_resv_close(a, &B, false);
    arena_free(a);
}
END_TEST

START_TEST(arena_stats_json_has_every_counter)
{
    struct arena *a = mk(8 * MIB, 1 * MIB);
    struct arena_resv A, B;
    arena_resv_init(&A, 1, 3, 8 * MIB); arena_resv_init(&B, 2, 3, 1 * MIB);
    ck_assert_int_eq(arena_want(a, &A, 8, 0), 8);
    ck_assert_int_eq(arena_want(a, &B, 1, 0), 1);
    struct arena_grant g = rec.grants[0].g;
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
    ck_assert_uint_eq(stats(a).slots_free, 8);
    ck_assert_str_eq(arena_resv_state_to_string(RESV_TIMED_OUT), "timed_out");
    ck_assert_str_eq(arena_resv_state_to_string((arena_resv_state_t)99), "unknown");
    arena_free(a);
}
END_TEST

/* ---- randomized: a model of the queue checks FIFO; invariants checked after every step ---- */

/* Check records every ck_assert (one write each); the hot loop checks quietly, fails loudly. */
#define CHECK(c) do { if (!(c)) ck_abort_msg("%s:%d: %s", __FILE__, __LINE__, #c); } while (0)

#define NR 24
static struct arena_resv *model_q[NR * 2];
static uint32_t model_n;

static void model_remove(struct arena_resv *r)
{
    for (uint32_t i = 0; i < model_n; i++)
        if (model_q[i] == r) {
            memmove(&model_q[i], &model_q[i + 1], (--model_n - i) * sizeof(model_q[0]));
            return;
        }
}

static void fifo_hook(struct arena_resv *r, const struct arena_grant *g, uint32_t n)
{
    (void)g, (void)n;
    CHECK(model_n > 0 && model_q[0] == r); /* only the head is ever served */
    if (r->state != RESV_WAITING)
        model_remove(r);
}

START_TEST(arena_randomized_sequences_keep_invariants)
{
    struct arena *a = mk(16 * MIB, 1 * MIB);
    rec.hook = fifo_hook;
    model_n = 0;
    struct arena_resv rs[NR];
    srand(12345);
    for (int i = 0; i < NR; i++)
        arena_resv_init(&rs[i], (uint64_t)i, (uint64_t)(i % 4), (uint64_t)(1 + rand() % 40) * 300 * KIB);
    uint64_t now = 0;
    uint32_t log_pos = 0;
    /* live grants per slot, from the log: (holder, generation, filled) */
    struct { struct arena_resv *r; uint32_t gen; uint64_t ext_off, length; bool filled, live; } sl[16];
    memset(sl, 0, sizeof(sl));
    uint32_t quar[4] = {0}; /* quarantined slots per peer, by the model */
    for (int step = 0; step < 20000; step++) {
        if (rec.n_grants > LOG_MAX - 64)
            rec.n_grants = log_pos = 0;
        now += (uint64_t)(rand() % 40);
        struct arena_resv *r = &rs[rand() % NR];
        int op = rand() % 100;
        if (op < 35) {
            uint32_t c = 1 + (uint32_t)(rand() % 6);
            if (r->state == RESV_IDLE && r->held + c <= 16 && r->granted < r->bytes) {
                model_q[model_n++] = r; /* enqueue in the model before the call grants */
                CHECK(arena_want(a, r, c, now) >= 1);
            }
        } else if (op < 75) {
            /* report or release a random live slot of this reservation */
            int s = rand() % 16;
            if (sl[s].live && sl[s].r == r) {
                if (!sl[s].filled) {
                    int bad = rand() % 10;
                    uint32_t gen = sl[s].gen - (bad == 0);
                    int rc = arena_report(a, r, (uint32_t)s, gen, UINT64_MAX, 0, NULL);
                    CHECK((rc) == (bad == 0 ? -ESTALE : -ERANGE));
                    /* an unreported credit cannot be released */
                    CHECK((arena_release(a, r, (uint32_t)s, sl[s].gen)) == (-EBUSY));
                } else {
                    CHECK((arena_release(a, r, (uint32_t)s, sl[s].gen)) == (0));
                    sl[s].live = false;
                }
            }
        } else if (op < 85) {
            if (r->state == RESV_IDLE || r->state == RESV_WAITING) {
                bool in_flight = rand() % 2;
                if (r->state == RESV_WAITING)
                    model_remove(r);
                arena_resv_close(a, r, in_flight);
                for (int s = 0; s < 16; s++)
                    if (sl[s].live && sl[s].r == r) {
                        quar[r->peer] += in_flight && !sl[s].filled; /* unreported: quarantined */
                        sl[s].live = false;
                    }
            } else {
                arena_resv_init(r, r->id, r->peer, (uint64_t)(1 + rand() % 40) * 300 * KIB);
            }
        } else if (op < 92) {
            uint64_t peer = (uint64_t)(rand() % 4);
            CHECK(arena_reclaim_peer(a, peer) == quar[peer]);
            quar[peer] = 0;
        } else {
            uint32_t before = rec.n_timeouts;
            arena_tick(a, now);
            for (uint32_t i = before; i < rec.n_timeouts; i++)
                model_remove(rec.timeouts[i]);
        }
        /* Fold new grants into the slot picture; fill half of the fresh ones right away. */
        for (; log_pos < rec.n_grants; log_pos++) {
            const struct arena_grant *g = &rec.grants[log_pos].g;
            struct arena_resv *h = rec.grants[log_pos].r;
            CHECK((g->slot) < (16));
            CHECK((g->offset) == ((uint64_t)g->slot * MIB));
            CHECK((g->ext_off + g->length) <= (h->bytes));
            CHECK(!sl[g->slot].live);
            CHECK((g->generation) > (sl[g->slot].gen));
            sl[g->slot].r = h, sl[g->slot].gen = g->generation, sl[g->slot].ext_off = g->ext_off;
            sl[g->slot].length = g->length, sl[g->slot].filled = false, sl[g->slot].live = true;
        }
        for (int s = 0; s < 16; s++) {
            if (sl[s].live && !sl[s].filled && rand() % 2) {
                CHECK(arena_report(a, sl[s].r, (uint32_t)s, sl[s].gen, sl[s].ext_off, sl[s].length,
                                   NULL) == 0);
                sl[s].filled = true;
            }
        }
        /* Invariants. */
        struct arena_stats st = stats(a);
        uint32_t held = 0, live = 0, waiting = 0;
        for (int i = 0; i < NR; i++) {
            if (rs[i].state == RESV_IDLE || rs[i].state == RESV_WAITING)
                held += rs[i].held;
            waiting += rs[i].state == RESV_WAITING;
            CHECK((rs[i].granted) <= (rs[i].bytes));
            CHECK((rs[i].landed) <= (rs[i].granted));
        }
        for (int s = 0; s < 16; s++)
            live += sl[s].live;
        CHECK((held) == (st.slots_in_use));
        CHECK((live) == (st.slots_in_use));
        CHECK((waiting) == (st.waiting_requests));
        CHECK((model_n) == (st.waiting_requests));
        CHECK(st.slots_quarantined == quar[0] + quar[1] + quar[2] + quar[3]);
        CHECK(st.waiting_requests == 0 || st.slots_free == 0); /* no idle slot while anyone waits */
    }
    CHECK((stats(a).grants_total) > (1000));
    CHECK((stats(a).timeouts_total) > (0));
    for (int i = 0; i < NR; i++)
        arena_resv_close(a, &rs[i], false);
    for (uint64_t p = 0; p < 4; p++)
        arena_reclaim_peer(a, p);
    CHECK((stats(a).slots_free) == (16));
    arena_free(a);
}
END_TEST

/* ---- size classes ---- */

static struct arena *mk_classes(uint64_t size, uint64_t chunk)
{
    memset(&rec, 0, sizeof(rec));
    struct arena_params p = params(size, chunk);
    p.size_classes = true;
    p.max_waiters = 1024;
    struct arena *a = NULL;
    ck_assert_int_eq(arena_new(&p, &a), 0);
    cur_arena = a;
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
    struct arena_stats st = stats(a);
    ck_assert_uint_eq(st.waiting_requests, 0); /* whole slots: 244 would wait */
    ck_assert_uint_eq(st.slots_in_use, 256);
    ck_assert_uint_eq(st.slots_split, 1);     /* 256 x 4 KiB: one 1 MiB slot cut */
    ck_assert_uint_eq(st.slots_free, 11);
    ck_assert_uint_eq(st.small_grants_total, 256);
    ck_assert_uint_eq(rec.n_grants, 256);
    struct arena_grant g[256];
    for (int i = 0; i < 256; i++) {
        g[i] = rec.grants[i].g;
        ck_assert_uint_eq(g[i].length, 3000);
        ck_assert_uint_ge(g[i].slot, arena_slots_total(a));
    }
    assert_disjoint(g, 256, 12 * MIB);
    /* a large request still gets the 11 whole slots at once */
    struct arena_resv big;
    arena_resv_init(&big, 999, 1, 11 * MIB);
    ck_assert_int_eq(arena_want(a, &big, 11, 0), 11);
    ck_assert_uint_eq(stats(a).slots_free, 0);
    for (int i = 0; i < 256; i++) {
        ck_assert_int_eq(arena_report(a, &r[i], g[i].slot, g[i].generation, 0, 3000, NULL), 0);
        ck_assert_int_eq(arena_release(a, &r[i], g[i].slot, g[i].generation), 0);
    }
    st = stats(a);
    ck_assert_uint_eq(st.slots_split, 0); /* the last small slot freed made it whole */
    ck_assert_uint_eq(st.slots_free, 1);
    arena_resv_close(a, &big, false);
    ck_assert_uint_eq(stats(a).slots_free, 12);
    ck_assert_uint_eq(stats(a).slots_in_use, 0);
    arena_free(a);
}
END_TEST

START_TEST(arena_class_is_the_smallest_power_of_two_and_only_tails_are_small)
{
    struct arena *a = mk_classes(8 * MIB, 1 * MIB);
    struct arena_resv x, y, z;
    arena_resv_init(&x, 1, 1, 1 * MIB + 300 * KIB); /* a whole chunk, then a 512 KiB class tail */
    ck_assert_int_eq(arena_want(a, &x, 2, 0), 2);
    ck_assert_uint_eq(rec.grants[0].g.length, 1 * MIB);
    ck_assert_uint_lt(rec.grants[0].g.slot, arena_slots_total(a));
    ck_assert_uint_eq(rec.grants[1].g.length, 300 * KIB);
    ck_assert_uint_ge(rec.grants[1].g.slot, arena_slots_total(a));
    arena_resv_init(&y, 2, 1, 600 * KIB); /* over half a slot: whole */
    ck_assert_int_eq(arena_want(a, &y, 1, 0), 1);
    ck_assert_uint_lt(rec.grants[2].g.slot, arena_slots_total(a));
    arena_resv_init(&z, 3, 1, 5 * KIB); /* 8 KiB class */
    ck_assert_int_eq(arena_want(a, &z, 1, 0), 1);
    ck_assert_uint_eq(rec.grants[3].g.offset % (8 * KIB), 0);
    ck_assert_uint_eq(stats(a).slots_split, 2);
    struct arena_grant g[4] = {rec.grants[0].g, rec.grants[1].g, rec.grants[2].g, rec.grants[3].g};
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
    ck_assert_uint_eq(stats(a).slots_free, 8);
    ck_assert_uint_eq(stats(a).slots_split, 0);
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
    struct arena_grant old = rec.grants[0].g;
    arena_resv_close(a, &x, false); /* merged back */
    ck_assert_uint_eq(stats(a).slots_split, 0);
    arena_resv_init(&y, 2, 1, 8 * KIB); /* another class, same first offset, same id */
    ck_assert_int_eq(arena_want(a, &y, 1, 0), 1);
    struct arena_grant now = rec.grants[1].g;
    ck_assert_uint_eq(now.slot, old.slot);
    ck_assert_uint_eq(now.offset, old.offset);
    ck_assert_uint_gt(now.generation, old.generation);
    ck_assert_int_eq(arena_report(a, &y, old.slot, old.generation, 0, 8 * KIB, NULL), -ESTALE);
    ck_assert_int_eq(arena_report(a, &y, now.slot, now.generation, 0, 8 * KIB, NULL), 0);
    ck_assert_uint_eq(stats(a).stale_reports_total, 1);
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
    struct arena_stats st = stats(a);
    ck_assert_uint_eq(st.slots_quarantined, 1);
    ck_assert_uint_eq(st.quarantined_bytes, 4 * KIB);
    ck_assert_uint_eq(st.slots_split, 1); /* not whole again while a piece is quarantined */
    ck_assert_uint_eq(st.slots_free, 1);
    ck_assert_uint_eq(st.slots_in_use, 0);
    ck_assert_uint_eq(arena_reclaim_peer(a, 8), 0);
    ck_assert_uint_eq(arena_reclaim_peer(a, 7), 1);
    st = stats(a);
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
        seen = rec.n_grants;
        /* live grants: those of reservations still holding them */
        uint32_t n = 0;
        for (int i = 0; i < NM; i++)
            if (rs[i].state == RESV_IDLE || rs[i].state == RESV_WAITING)
                for (uint32_t k = 0; k < seen; k++)
                    if (rec.grants[k].r == &rs[i] && rec.grants[k].g.ext_off < rs[i].granted &&
                        n < NM * 16) {
                        /* newest grant of each extent offset is the live one */
                        bool newer = false;
                        for (uint32_t m = k + 1; m < seen && !newer; m++)
                            newer = rec.grants[m].r == &rs[i] &&
                                    rec.grants[m].g.ext_off == rec.grants[k].g.ext_off;
                        if (!newer)
                            live[n++] = rec.grants[k].g;
                    }
        struct arena_stats st = stats(a);
        ck_assert_uint_eq(n, st.slots_in_use);
        assert_disjoint(live, n, 8 * MIB);
        if (rec.n_grants > LOG_MAX - 64)
            break;
    }
    for (int i = 0; i < NM; i++)
        arena_resv_close(a, &rs[i], false);
    for (uint64_t p = 0; p < 3; p++)
        arena_reclaim_peer(a, p);
    struct arena_stats st = stats(a);
    ck_assert_uint_eq(st.slots_free, 8);
    ck_assert_uint_eq(st.slots_split, 0);
    ck_assert_uint_eq(st.slots_in_use, 0);
    ck_assert_uint_gt(st.small_grants_total, 50);
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
    tcase_add_test(tc, arena_release_then_regrant_bumps_the_generation);
    tcase_add_test(tc, arena_reserve_timeout_fires_exactly_at_deadline_without_leak);
    tcase_add_test(tc, arena_exhaustion_waits_then_times_out_but_refills_never_do);
    tcase_add_test(tc, arena_quarantine_holds_slots_until_the_peer_is_reclaimed);
    tcase_add_test(tc, arena_stats_json_has_every_counter);
    tcase_add_test(tc, arena_randomized_sequences_keep_invariants);
    suite_add_tcase(s, tc);
    tc = tcase_create("size_classes");
    tcase_add_test(tc, arena_small_requests_take_small_slots_so_256_fit_in_12);
    tcase_add_test(tc, arena_class_is_the_smallest_power_of_two_and_only_tails_are_small);
    tcase_add_test(tc, arena_small_slot_ids_reused_after_a_recut_reject_stale_reports);
    tcase_add_test(tc, arena_small_slots_quarantine_until_the_peer_is_reclaimed);
    tcase_add_test(tc, arena_size_classes_random_mix_never_overlaps);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(arena_suite()); }
