/* check_remote_load.c: two real daemons under load: many requests in flight through a small
 * arena, peers.max_inflight enforced per peer, both directions at once through small arenas,
 * and random cancels that leave no landing slot behind. */
#include <check.h>

#include "remoteutil.h"

#define TINY "tiny:blocks=128,slots=16"
#define SMALL_ARENA "arena:\n  size: 8MiB\n  chunk: 1MiB\ngates:\n  min_bytes: 0\n  min_blocks: 0\n"
#define BOUNCE "gates:\n  min_bytes: 0\n  min_blocks: 0\n"

static long long arena_in_use(const struct ru_daemon *d)
{
    return ru_ctl_int(d, "arena", "slots_in_use");
}

START_TEST(remote_many_requests_in_flight_through_a_small_arena)
{
    enum { N = 12, NB = 8 };
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = SMALL_ARENA, .extra_b = SMALL_ARENA,
                                            .spec = "tiny:tp=2,blocks=128,slots=16", .blocks = NB,
                                            .rng = 16});
    for (uint32_t i = 0; i < t.ctx.n; i++)
        pattern_fill(&t.ctx.r[i].l, &t.ctx.r[i].mem, &t.ctx.r[i].pids, 0, 9);
    /* request q lands in blocks [q*NB, (q+1)*NB) and slot q of each generation rank */
    uint32_t ids[2][N][LAYOUT_MAX_GROUPS * (NB + 1)];
    struct plan_ids pids[2][N];
    uint32_t readers[8] = {0};
    ru_readers(&t.ctx, &t.gen, -1, readers);
    for (uint32_t q = 0; q < N; q++) {
        for (uint32_t i = 0; i < t.ctx.n; i++)
            ck_assert_int_eq(kvf_send(t.ctx.r[i].c, 1000 + q, t.ctx.r[i].l.n_groups,
                                      t.ctx.r[i].counts, t.ctx.r[i].ids, readers[i]),
                             0);
        for (uint32_t g = 0; g < t.gen.n; g++) {
            struct ru_rank *r = &t.gen.r[g];
            uint32_t *p = ids[g][q];
            memset(&pids[g][q], 0, sizeof pids[g][q]);
            for (uint32_t gr = 0; gr < r->l.n_groups; gr++) {
                uint32_t n = r->counts[gr];
                for (uint32_t k = 0; k < n; k++)
                    p[k] = r->l.groups[gr].kind == GROUP_STATE ? q : q * NB + k;
                pids[g][q].n[gr] = n;
                pids[g][q].ids[gr] = p;
                p += n;
            }
            struct kvf_recv_args a = {.req_id = 1000 + q,
                                      .ctx_instance = "ctx",
                                      .ctx_dp_rank = -1,
                                      .ctx_home = t.a.addr,
                                      .n_groups = r->l.n_groups,
                                      .counts = r->counts,
                                      .ids = ids[g][q]};
            ck_assert_int_eq(kvf_recv(r->c, &a), 0);
        }
    }
    int done[2] = {0, 0}, failed = 0;
    uint64_t until = ru_now_ms() + tu_ms(60000);
    while ((done[0] < N || done[1] < N) && !failed && ru_now_ms() < until) {
        for (uint32_t g = 0; g < t.gen.n; g++) {
            struct kvf_event ev;
            while (kvf_poll(t.gen.r[g].c, &ev, 5) == 1) {
                if (ev.kind == KVF_EV_DONE)
                    done[g]++;
                else if (ev.kind == KVF_EV_FAILED) {
                    fprintf(stderr, "req %llu: %s: %s\n", (unsigned long long)ev.req_id,
                            kvf_error_to_string(ev.error), ev.message);
                    failed++;
                }
            }
        }
    }
    if (failed || done[0] < N || done[1] < N) {
        ru_dump_log(&t.a, "context daemon");
        ru_dump_log(&t.b, "generation daemon");
    }
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(done[0], N);
    ck_assert_int_eq(done[1], N);
    for (uint32_t g = 0; g < t.gen.n; g++)
        for (uint32_t q = 0; q < N; q++) {
            uint32_t bp;
            uint64_t bo;
            char where[256];
            ck_assert_msg(pattern_verify(&t.gen.r[g].l, &t.gen.r[g].mem, &pids[g][q], 0, 9, &bp,
                                         &bo, where, sizeof where) == 0,
                          "rank %u request %u: %s", g, q, where);
        }
    ck_assert_int_eq(arena_in_use(&t.b), 0);
    ck_assert_int_eq(arena_in_use(&t.a), 0);
    two_stop(&t, 1);
}
END_TEST


START_TEST(remote_peers_max_inflight_is_enforced_per_peer)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = BOUNCE "peers:\n  max_inflight: 2\n"
                                                              "daemon:\n  drain_timeout: 300ms\n",
                                            .extra_b = BOUNCE "daemon:\n  drain_timeout: 300ms\n",
                                            .spec = TINY, .blocks = 2, .rng = 21});
    struct kvf_recv_args a;
    for (uint64_t req = 1; req <= 4; req++) { /* no SENDs: every flow waits at the context */
        ru_recv_args(&t.gen.r[0], req, "ctx", t.a.addr, &a);
        ck_assert_int_eq(kvf_recv(t.gen.r[0].c, &a), 0);
        /* in order: the context daemon took it (a flow) or refused it (a NACK) */
        uint64_t end = ru_now_ms() + tu_ms(10000);
        while (ru_peers_stat(&t.a, "flows") + ru_peers_stat(&t.a, "nacks_sent") < (long long)req) {
            ck_assert_msg(ru_now_ms() < end, "request %llu never reached the context daemon",
                          (unsigned long long)req);
            ru_sleep_ms(10);
        }
    }
    int refused = 0;
    struct kvf_event ev;
    uint64_t until = ru_now_ms() + tu_ms(3000);
    while (refused < 2 && ru_now_ms() < until)
        if (kvf_poll(t.gen.r[0].c, &ev, 20) == 1 && ev.kind == KVF_EV_FAILED) {
            ck_assert_msg(ev.req_id >= 3, "request %llu refused", (unsigned long long)ev.req_id);
            ck_assert_int_eq(ev.error, KVF_E_NO_ROUTE);
            ck_assert_ptr_nonnull(strstr(ev.message, "peers.max_inflight"));
            refused++;
        }
    ck_assert_int_eq(refused, 2);
    two_stop(&t, 1);
}
END_TEST


/* Both daemons send and receive at once through small arenas (each: 16 slots of 256 KiB, a
 * quarter of them staging): landing credits held for the peer never starve the staging of
 * this daemon's own outgoing chunks, so both directions complete. */
START_TEST(remote_both_directions_at_once_through_small_arenas)
{
    enum { N = 4 };
    const char *cfg = "arena:\n  size: 4MiB\n  chunk: 256KiB\n  reserve_timeout: 3s\n"
                      "gates:\n  min_bytes: 0\n";
    char top[64], secret[128];
    tu_tmpdir(top, sizeof top);
    ru_secret(top, "secret", 8, secret, sizeof secret);
    struct ru_daemon d[2];
    ck_assert_int_eq(ru_daemon_start(&d[0], top, "a", 1, secret, cfg), 0);
    ck_assert_int_eq(ru_daemon_start(&d[1], top, "b", 1, secret, cfg), 0);
    uint64_t rng = 23;
    struct ru_inst ctx[2], gen[2];
    const char *spec = "kimi-linear-48b:blocks=8,slots=4";
    for (int i = 0; i < 2; i++) {
        ru_inst_init(&ctx[i], spec, i ? "ctxB" : "ctxA", ROLE_CONTEXT, 4, &rng, 0x5a);
        ru_inst_init(&gen[i], spec, i ? "genB" : "genA", ROLE_GENERATION, 4, &rng, RU_POISON);
        ru_inst_register(&ctx[i], &d[i]);
        ru_inst_register(&gen[i], &d[i]);
        pattern_fill(&ctx[i].r[0].l, &ctx[i].r[0].mem, &ctx[i].r[0].pids, 0, 60);
    }
    /* genA reads ctxB (homed at b), genB reads ctxA (homed at a): N requests each way, both
     * directions at once; the generation ranks land every request in the same blocks (same
     * bytes each time), so one request per direction is in flight at a time: two RECVs into the
     * same blocks would race (their scatters run on the copy threads) */
    int done[2] = {0, 0}, failed = 0;
    uint64_t until = ru_now_ms() + tu_ms(60000);
    for (uint64_t q = 1; q <= N && !failed; q++) {
        for (int i = 0; i < 2; i++) {
            struct ru_rank *c = &ctx[1 - i].r[0], *g = &gen[i].r[0];
            ck_assert_int_eq(kvf_send(c->c, q, c->l.n_groups, c->counts, c->ids, 1), 0);
            struct kvf_recv_args a;
            ru_recv_args(g, q, i ? "ctxA" : "ctxB", d[1 - i].addr, &a);
            ck_assert_int_eq(kvf_recv(g->c, &a), 0);
        }
        while ((done[0] < (int)q || done[1] < (int)q) && !failed && ru_now_ms() < until)
            for (int i = 0; i < 2; i++) {
                struct kvf_event ev;
                while (kvf_poll(gen[i].r[0].c, &ev, 5) == 1) {
                    if (ev.kind == KVF_EV_DONE)
                        done[i]++;
                    else if (ev.kind == KVF_EV_FAILED) {
                        fprintf(stderr, "gen%c req %llu: %s: %s\n", 'A' + i,
                                (unsigned long long)ev.req_id, kvf_error_to_string(ev.error),
                                ev.message);
                        failed++;
                    }
                }
            }
    }
    if (failed || done[0] < N || done[1] < N) {
        ru_dump_log(&d[0], "daemon a");
        ru_dump_log(&d[1], "daemon b");
    }
    ck_assert_int_eq(failed, 0);
    ck_assert_int_eq(done[0], N);
    ck_assert_int_eq(done[1], N);
    for (int i = 0; i < 2; i++) {
        ru_assert_parity(&gen[i].r[0], 0, 60, "both directions");
        json_t *ar = ru_ctl(&d[i], "arena");
        ck_assert_int_eq(json_integer_value(json_object_get(ar, "slots_in_use")), 0);
        ck_assert_int_eq(
            json_integer_value(json_object_get(json_object_get(ar, "staging"), "slots_in_use")), 0);
        ck_assert_int_eq(
            json_integer_value(json_object_get(json_object_get(ar, "staging"), "slots_total")), 4);
        json_decref(ar);
        ru_inst_free(&ctx[i]);
        ru_inst_free(&gen[i]);
    }
    ck_assert_int_eq(ru_daemon_stop(&d[0]), 0);
    ck_assert_int_eq(ru_daemon_stop(&d[1]), 0);
    char cmd[128];
    tu_fmt(cmd, sizeof cmd, "rm -rf %s", top);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST


/* Many requests in both SEND/RECV orders through a small arena, a third of them cancelled by the
 * generation rank at a random moment: every request ends exactly once, every completed one is
 * bitwise right, and both arenas end with nothing in use and nothing quarantined (the
 * cancelled flows' slots come back through the drain acks). */
START_TEST(remote_random_cancels_leave_no_slot_behind)
{
    enum { N = 24, NB = 4 };
    const char *cfg = "arena:\n  size: 4MiB\n  chunk: 64KiB\ngates:\n  min_bytes: 0\n"
                      "daemon:\n  drain_timeout: 1s\n";
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = cfg, .extra_b = cfg,
                                            .spec = "tiny:tp=2,blocks=128,slots=32", .blocks = NB,
                                            .rng = 0x5eed});
    for (uint32_t i = 0; i < t.ctx.n; i++)
        pattern_fill(&t.ctx.r[i].l, &t.ctx.r[i].mem, &t.ctx.r[i].pids, 0, 77);
    uint32_t readers[8] = {0};
    ru_readers(&t.ctx, &t.gen, -1, readers);
    static uint32_t ids[2][N][LAYOUT_MAX_GROUPS * (NB + 1)];
    struct plan_ids pids[2][N];
    int ended[2][N], kind[2][N];
    memset(ended, 0, sizeof ended);
    for (uint32_t q = 0; q < N; q++) {
        int recv_first = (int)(ru_rand(&t.rng) & 1);
        for (int step = 0; step < 2; step++) {
            if ((step == 0) != recv_first) {
                for (uint32_t i = 0; i < t.ctx.n; i++)
                    ck_assert_int_eq(kvf_send(t.ctx.r[i].c, 100 + q, t.ctx.r[i].l.n_groups,
                                              t.ctx.r[i].counts, t.ctx.r[i].ids, readers[i]),
                                     0);
                continue;
            }
            for (uint32_t g = 0; g < t.gen.n; g++) {
                struct ru_rank *r = &t.gen.r[g];
                uint32_t *p = ids[g][q];
                memset(&pids[g][q], 0, sizeof pids[g][q]);
                for (uint32_t gr = 0; gr < r->l.n_groups; gr++) {
                    for (uint32_t k = 0; k < r->counts[gr]; k++)
                        p[k] = r->l.groups[gr].kind == GROUP_STATE ? q : q * NB + k;
                    pids[g][q].n[gr] = r->counts[gr];
                    pids[g][q].ids[gr] = p;
                    p += r->counts[gr];
                }
                struct kvf_recv_args a;
                ru_recv_args(r, 100 + q, "ctx", t.a.addr, &a);
                a.ids = ids[g][q];
                ck_assert_int_eq(kvf_recv(r->c, &a), 0);
            }
        }
        if (q % 3 == 0) {
            ru_sleep_ms((unsigned)(ru_rand(&t.rng) % 4));
            kvf_cancel(t.gen.r[0].c, 100 + q); /* may be too late: then it completes */
        }
    }
    int open = 2 * N;
    uint64_t until = ru_now_ms() + tu_ms(60000);
    while (open > 0 && ru_now_ms() < until)
        for (uint32_t g = 0; g < t.gen.n; g++) {
            struct kvf_event ev;
            while (kvf_poll(t.gen.r[g].c, &ev, 2) == 1) {
                if (ev.kind != KVF_EV_DONE && ev.kind != KVF_EV_FAILED)
                    continue;
                uint32_t q = (uint32_t)(ev.req_id - 100);
                ck_assert_uint_lt(q, N);
                ck_assert_msg(!ended[g][q], "request %u ended twice on rank %u", q, g);
                ended[g][q] = 1;
                kind[g][q] = ev.kind;
                open--;
                if (ev.kind == KVF_EV_FAILED)
                    ck_assert_msg(ev.error == KVF_E_CANCELLED && g == 0 && q % 3 == 0,
                                  "request %u rank %u: %s: %s", q, g, kvf_error_to_string(ev.error),
                                  ev.message);
            }
        }
    ck_assert_int_eq(open, 0);
    int cancelled = 0;
    for (uint32_t q = 0; q < N; q++)
        for (uint32_t g = 0; g < t.gen.n; g++) {
            if (kind[g][q] != KVF_EV_DONE) {
                cancelled++;
                kvf_cancel(t.ctx.r[g].c, 100 + q); /* its reader will never come */
                continue;
            }
            uint32_t bp;
            uint64_t bo;
            char where[256];
            ck_assert_msg(pattern_verify(&t.gen.r[g].l, &t.gen.r[g].mem, &pids[g][q], 0, 77, &bp,
                                         &bo, where, sizeof where) == 0,
                          "rank %u request %u: %s", g, q, where);
        }
    fprintf(stderr, "random cancels: %d of %d requests cancelled in flight\n", cancelled, N);
    until = ru_now_ms() + tu_ms(3000);
    for (;;) {
        json_t *ab = ru_ctl(&t.b, "arena"), *aa = ru_ctl(&t.a, "arena");
        long long busy =
            json_integer_value(json_object_get(ab, "slots_in_use")) +
            json_integer_value(json_object_get(ab, "quarantined_slots")) +
            json_integer_value(json_object_get(json_object_get(aa, "staging"), "slots_in_use"));
        json_decref(ab);
        json_decref(aa);
        if (busy == 0)
            break;
        ck_assert_msg(ru_now_ms() < until, "%lld slots still busy", busy);
        ru_sleep_ms(20);
    }
    two_stop(&t, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("remote_load");
    TCase *tc = tcase_create("load");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, remote_many_requests_in_flight_through_a_small_arena);
    tcase_add_test(tc, remote_peers_max_inflight_is_enforced_per_peer);
    tcase_add_test(tc, remote_both_directions_at_once_through_small_arenas);
    tcase_add_test(tc, remote_random_cancels_leave_no_slot_behind);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
