/* check_remote_small.c: small requests between two real daemons take small landing slots
 * (arena.h, size classes): 256 tiny requests hold their credits at once in an arena of 12
 * landing slots, then all land bitwise right, and both arenas end whole and empty. */
#include <check.h>

#include "remoteutil.h"

/* 16 slots of 8 MiB (the default 512MiB/32MiB in proportion): 12 land, 4 stage. A tiny
 * request (one block and a state slot, under 256 KiB) fits 32 to a slot. A first credit
 * waits at most 2 s. */
#define ARENA12 "arena:\n  size: 128MiB\n  chunk: 8MiB\n  reserve_timeout: 2s\n" \
                "gates:\n  min_bytes: 0\n  min_blocks: 0\ndeadlines:\n  send_wait: 30s\n"
#define SPEC "tiny:blocks=512,slots=300"

enum { N = 256, NB = 1 };

static long long arena_int(const struct ru_daemon *d, const char *key)
{
    return ru_ctl_int(d, "arena", key);
}

START_TEST(remote_256_tiny_requests_in_flight_fit_12_landing_slots)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = ARENA12, .extra_b = ARENA12, .spec = SPEC,
                                            .blocks = NB, .rng = 21});
    ck_assert_int_eq(arena_int(&t.b, "slots_total"), 12);
    ck_assert_uint_eq(t.gen.n, 1);
    for (uint32_t i = 0; i < t.ctx.n; i++)
        pattern_fill(&t.ctx.r[i].l, &t.ctx.r[i].mem, &t.ctx.r[i].pids, 0, 9);
    /* request q lands in block q and state slot q; every RECV first, no SEND yet: each holds
     * its landing credits while its RECV_REQ waits at the context daemon */
    static uint32_t ids[N][LAYOUT_MAX_GROUPS * (NB + 1)];
    static struct plan_ids pids[N];
    struct ru_rank *g = &t.gen.r[0];
    for (uint32_t q = 0; q < N; q++) {
        uint32_t *p = ids[q];
        memset(&pids[q], 0, sizeof pids[q]);
        for (uint32_t gr = 0; gr < g->l.n_groups; gr++) {
            uint32_t n = g->counts[gr];
            for (uint32_t k = 0; k < n; k++)
                p[k] = g->l.groups[gr].kind == GROUP_STATE ? q : q * NB + k;
            pids[q].n[gr] = n;
            pids[q].ids[gr] = p;
            p += n;
        }
        struct kvf_recv_args a = {.req_id = 5000 + q, .ctx_instance = "ctx", .ctx_dp_rank = -1,
                                  .ctx_home = t.a.addr, .n_groups = g->l.n_groups,
                                  .counts = g->counts, .ids = ids[q]};
        ck_assert_int_eq(kvf_recv(g->c, &a), 0);
    }
    uint64_t until = ru_now_ms() + 20000;
    long long in_use = 0, waiting = -1;
    while ((in_use < N || waiting != 0) && ru_now_ms() < until) {
        in_use = arena_int(&t.b, "slots_in_use");
        waiting = arena_int(&t.b, "waiting_requests");
        if (in_use < N || waiting != 0)
            ru_sleep_ms(10);
    }
    long long split = arena_int(&t.b, "slots_split"), free_ = arena_int(&t.b, "slots_free");
    fprintf(stderr, "256 tiny RECVs hold %lld landing grants in %lld cut slot(s); %lld of 12 "
            "slots still whole and free\n", in_use, split, free_);
    if (in_use != N || waiting != 0)
        two_stop(&t, 0);
    ck_assert_int_eq(in_use, N); /* whole slots only: 12, and 244 would time out waiting */
    ck_assert_int_eq(waiting, 0);
    ck_assert_int_ge(split, 1);
    ck_assert_int_ge(free_, 1); /* small grants crowd few slots: large requests still fit */
    uint32_t readers[8] = {0};
    ru_readers(&t.ctx, &t.gen, -1, readers);
    for (uint32_t q = 0; q < N; q++)
        for (uint32_t i = 0; i < t.ctx.n; i++) /* every request from the same filled blocks */
            ck_assert_int_eq(kvf_send(t.ctx.r[i].c, 5000 + q, t.ctx.r[i].l.n_groups,
                                      t.ctx.r[i].counts, t.ctx.r[i].ids, readers[i]),
                             0);
    int done = 0, failed = 0;
    until = ru_now_ms() + 60000;
    while (done + failed < N && ru_now_ms() < until) {
        struct kvf_event ev;
        while (kvf_poll(g->c, &ev, 5) == 1) {
            if (ev.kind == KVF_EV_DONE) {
                done++;
            } else if (ev.kind == KVF_EV_FAILED) {
                fprintf(stderr, "req %llu: %s: %s\n", (unsigned long long)ev.req_id,
                        kvf_error_to_string(ev.error), ev.message);
                failed++;
            }
        }
    }
    if (failed || done < N)
        two_stop(&t, 0);
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(done, N);
    for (uint32_t q = 0; q < N; q++) {
        uint32_t bp;
        uint64_t bo;
        char where[256];
        ck_assert_msg(pattern_verify(&g->l, &g->mem, &pids[q], 0, 9, &bp, &bo, where,
                                     sizeof where) == 0, "request %u: %s", q, where);
    }
    until = ru_now_ms() + 5000;
    while ((arena_int(&t.b, "slots_in_use") || arena_int(&t.b, "slots_split") ||
            arena_int(&t.a, "slots_in_use")) && ru_now_ms() < until)
        ru_sleep_ms(10);
    ck_assert_int_eq(arena_int(&t.b, "slots_in_use"), 0);
    ck_assert_int_eq(arena_int(&t.b, "slots_split"), 0); /* whole again */
    ck_assert_int_eq(arena_int(&t.b, "slots_free"), 12);
    ck_assert_int_eq(arena_int(&t.a, "slots_in_use"), 0);
    ck_assert_int_ge(arena_int(&t.b, "small_grants_total"), N);
    two_stop(&t, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("remote_small");
    TCase *tc = tcase_create("size_classes");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, remote_256_tiny_requests_in_flight_fit_12_landing_slots);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
