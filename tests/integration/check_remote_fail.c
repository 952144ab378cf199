/* check_remote_fail.c: failures of the transfer engine across two real daemons (issue 5, step 4):
 * a context daemon killed with SIGKILL while credits are out (PEER_LOST within a bound, landing
 * slots quarantined then reclaimed), a peer with the wrong secret refused, no secret at all, an
 * incompatible context instance failing only its own requests (verdict cached), per-phase
 * deadlines, many requests in flight through a small arena, and drain on SIGTERM. */
#include <check.h>

#include "remoteutil.h"

#define TINY "tiny:blocks=128,slots=16"
#define SMALL_ARENA "arena:\n  size: 8MiB\n  chunk: 1MiB\ngates:\n  min_bytes: 0\n  min_blocks: 0\n"
#define BOUNCE "gates:\n  min_bytes: 0\n  min_blocks: 0\n"

static long long arena_in_use(const struct ru_daemon *d)
{
    return ru_ctl_int(d, "arena", "slots_in_use");
}

START_TEST(remote_context_daemon_killed_fails_with_peer_lost_and_frees_the_arena)
{
    struct two t;
    two_start(&t, SMALL_ARENA "deadlines:\n  send_wait: 30s\n", SMALL_ARENA, NULL);
    uint64_t rng = 11;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 8, &rng, 0x5a);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 8, &rng, RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);
    /* the context rank never SENDs: the RECV_REQ waits there while credits are granted here */
    struct kvf_recv_args a;
    ru_recv_args(&gen.r[0], 7, "ctx", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    uint64_t until = ru_now_ms() + tu_ms(5000);
    while (arena_in_use(&t.b) <= 0 && ru_now_ms() < until)
        ru_sleep_ms(10);
    ck_assert_int_gt(arena_in_use(&t.b), 0);
    uint64_t t0 = ru_now_ms();
    ru_daemon_kill9(&t.a);
    struct kvf_event ev;
    int k = ru_wait_event(&gen.r[0], 7, &ev, 5000);
    uint64_t took = ru_now_ms() - t0;
    ck_assert_int_eq(k, KVF_EV_FAILED);
    ck_assert_msg(ev.error == KVF_E_PEER_LOST, "%s: %s", kvf_error_to_string(ev.error), ev.message);
    ck_assert_uint_lt(took, 3000);
    fprintf(stderr, "PEER_LOST %llu ms after SIGKILL: %s\n", (unsigned long long)took, ev.message);
    /* quarantined, then reclaimed once the endpoint is closed */
    long long q0 = ru_ctl_int(&t.b, "arena", "quarantined_slots");
    until = ru_now_ms() + tu_ms(3000);
    while ((arena_in_use(&t.b) != 0 || ru_ctl_int(&t.b, "arena", "quarantined_slots") != 0) &&
           ru_now_ms() < until)
        ru_sleep_ms(20);
    fprintf(stderr, "quarantined right after the loss: %lld slot(s); reclaimed: %lld\n", q0,
            ru_ctl_int(&t.b, "arena", "reclaimed_total"));
    ck_assert_int_gt(ru_ctl_int(&t.b, "arena", "reclaimed_total"), 0);
    ck_assert_int_eq(arena_in_use(&t.b), 0);
    ck_assert_int_eq(ru_ctl_int(&t.b, "arena", "quarantined_slots"), 0);
    /* the context daemon comes back on the same port: the next request reconnects */
    struct ru_daemon a2;
    char extra[128];
    snprintf(extra, sizeof extra, "%s", SMALL_ARENA);
    ck_assert_int_eq(ru_daemon_start(&a2, t.top, "a", 1, t.secret, extra), 0);
    ru_inst_free(&ctx);
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 8, &rng, 0x5a);
    ru_inst_register(&ctx, &a2);
    pattern_fill(&ctx.r[0].l, &ctx.r[0].mem, &ctx.r[0].pids, 0, 77);
    ck_assert_int_eq(kvf_send(ctx.r[0].c, 8, ctx.r[0].l.n_groups, ctx.r[0].counts, ctx.r[0].ids, 1),
                     0);
    ru_recv_args(&gen.r[0], 8, "ctx", a2.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    k = ru_wait_event(&gen.r[0], 8, &ev, 20000);
    if (k != KVF_EV_DONE) {
        ru_dump_log(&a2, "context daemon (restarted)");
        ru_dump_log(&t.b, "generation daemon");
    }
    ck_assert_msg(k == KVF_EV_DONE, "after reconnect: %d %s: %s", k, kvf_error_to_string(ev.error),
                  ev.message);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    ck_assert_int_eq(ru_daemon_stop(&a2), 0);
    t.a = a2;
    t.a.pid = 0;
    ru_daemon_stop(&t.b);
    char cmd[128];
    tu_fmt(cmd, sizeof cmd, "rm -rf %s", t.top);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(remote_peer_with_the_wrong_secret_is_refused)
{
    struct two t;
    two_start2(&t, NULL, NULL, NULL, "wrong");
    uint64_t rng = 12;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 4, &rng, 0x5a);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 4, &rng, RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);
    struct kvf_recv_args a;
    ru_recv_args(&gen.r[0], 3, "ctx", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    struct kvf_event ev;
    int k = ru_wait_event(&gen.r[0], 3, &ev, 10000);
    ck_assert_int_eq(k, KVF_EV_FAILED);
    ck_assert_msg(ev.error == KVF_E_PEER_UNREACHABLE, "%s: %s", kvf_error_to_string(ev.error),
                  ev.message);
    json_t *p = ru_ctl(&t.a, "peers");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(json_array_size(json_object_get(p, "peers")), 0); /* never admitted */
    json_decref(p);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

START_TEST(remote_without_a_cluster_secret_fails_no_route_and_local_use_works)
{
    struct two t;
    two_start2(&t, NULL, NULL, NULL, "");
    uint64_t rng = 13;
    struct ru_inst gen;
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 4, &rng, RU_POISON);
    ru_inst_register(&gen, &t.b); /* registration works without a secret */
    struct kvf_recv_args a;
    ru_recv_args(&gen.r[0], 3, "ctx", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    struct kvf_event ev;
    ck_assert_int_eq(ru_wait_event(&gen.r[0], 3, &ev, 5000), KVF_EV_FAILED);
    ck_assert_int_eq(ev.error, KVF_E_NO_ROUTE);
    ck_assert_ptr_nonnull(strstr(ev.message, "cluster.secret_file"));
    json_t *ar = ru_ctl(&t.b, "arena");
    ck_assert_ptr_nonnull(ar);
    ck_assert(json_is_false(json_object_get(ar, "enabled")));
    json_decref(ar);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

START_TEST(remote_incompatible_instance_fails_only_its_requests)
{
    struct two t;
    two_start(&t, NULL, NULL, NULL);
    uint64_t rng = 14;
    struct ru_inst good, bad, gen;
    ru_inst_init(&good, TINY, "good", ROLE_CONTEXT, 4, &rng, 0x5a);
    ru_inst_init(&bad, TINY ",hd=16", "bad", ROLE_CONTEXT, 4, &rng, 0x5a);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 4, &rng, RU_POISON);
    ru_inst_register(&good, &t.a);
    ru_inst_register(&bad, &t.a);
    ru_inst_register(&gen, &t.b);
    struct kvf_event ev;
    struct kvf_recv_args a;
    for (int round = 0; round < 2; round++) {
        ru_recv_args(&gen.r[0], 100 + (uint64_t)round, "bad", t.a.addr, &a);
        ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
        ck_assert_int_eq(ru_wait_event(&gen.r[0], 100 + (uint64_t)round, &ev, 10000),
                         KVF_EV_FAILED);
        ck_assert_msg(ev.error == KVF_E_PEER_INCOMPATIBLE, "%s: %s", kvf_error_to_string(ev.error),
                      ev.message);
        if (round == 1)
            ck_assert_msg(strstr(ev.message, "cached"), "second verdict not cached: %s",
                          ev.message);
    }
    pattern_fill(&good.r[0].l, &good.r[0].mem, &good.r[0].pids, 0, 5);
    ck_assert_int_eq(
        kvf_send(good.r[0].c, 200, good.r[0].l.n_groups, good.r[0].counts, good.r[0].ids, 1), 0);
    ru_recv_args(&gen.r[0], 200, "good", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    ck_assert_int_eq(ru_wait_event(&gen.r[0], 200, &ev, 10000), KVF_EV_DONE);
    ru_assert_parity(&gen.r[0], 0, 5, "the compatible instance");
    ru_inst_free(&good);
    ru_inst_free(&bad);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

/* Rule 8 across daemons: a generation instance whose layout leaves out the context's GDN state
 * group fails PEER_INCOMPATIBLE naming the group, the context's SEND is never served (it ends
 * FAILED with the reader's verdict, not SENT), and a complete generation instance then moves the
 * same context instance's next request with parity. */
START_TEST(remote_generation_omitting_a_group_is_refused_and_the_send_not_served)
{
    struct two t;
    two_start(&t, "deadlines:\n  send_wait: 1s\n  transfer: 1s\n", NULL, NULL);
    uint64_t rng = 15;
    const char *q = "qwen3-next-80b:hd=16,blocks=8,slots=2,tpb=16";
    char omit[96];
    snprintf(omit, sizeof omit, "%s,omit=gdn", q);
    struct ru_inst ctx, bad, gen;
    ru_inst_init(&ctx, q, "ctx", ROLE_CONTEXT, 3, &rng, 0x5a);
    ru_inst_init(&bad, omit, "bad", ROLE_GENERATION, 3, &rng, RU_POISON);
    ru_inst_init(&gen, q, "gen", ROLE_GENERATION, 3, &rng, RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&bad, &t.b);
    ru_inst_register(&gen, &t.b);
    pattern_fill(&ctx.r[0].l, &ctx.r[0].mem, &ctx.r[0].pids, 0, 9);
    ck_assert_int_eq(kvf_send(ctx.r[0].c, 300, ctx.r[0].l.n_groups, ctx.r[0].counts, ctx.r[0].ids, 1),
                     0);
    struct kvf_event ev;
    struct kvf_recv_args a;
    ru_recv_args(&bad.r[0], 300, "ctx", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(bad.r[0].c, &a), 0);
    ck_assert_int_eq(ru_wait_event(&bad.r[0], 300, &ev, 10000), KVF_EV_FAILED);
    ck_assert_msg(ev.error == KVF_E_PEER_INCOMPATIBLE, "%s: %s", kvf_error_to_string(ev.error),
                  ev.message);
    ck_assert_msg(strstr(ev.message, "groups.gdn: omitted by generation rank"), "%s", ev.message);
    int k = ru_wait_event(&ctx.r[0], 300, &ev, 10000);
    ck_assert_msg(k == KVF_EV_FAILED, "context SEND ended %d (%s), not unserved", k, ev.message);
    ck_assert_msg(ev.error == KVF_E_PEER_INCOMPATIBLE && strstr(ev.message, "groups.gdn"), "%s: %s",
                  kvf_error_to_string(ev.error), ev.message);
    /* the complete layout of the same model moves the next request */
    ck_assert_int_eq(kvf_send(ctx.r[0].c, 301, ctx.r[0].l.n_groups, ctx.r[0].counts, ctx.r[0].ids, 1),
                     0);
    ru_recv_args(&gen.r[0], 301, "ctx", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    ck_assert_int_eq(ru_wait_event(&gen.r[0], 301, &ev, 10000), KVF_EV_DONE);
    ru_assert_parity(&gen.r[0], 0, 9, "the complete generation layout");
    ru_inst_free(&ctx);
    ru_inst_free(&bad);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

/* A RECV that reaches the home before the context instance has registered there (its ranks are
 * still starting: GPU pools take seconds) waits, asking again, up to deadlines.lookup, and then
 * completes once the instance is complete; an instance that never comes still fails
 * UNKNOWN_INSTANCE at that deadline, with the home's words. */
START_TEST(remote_recv_before_the_context_registers_waits_for_it_up_to_the_lookup_deadline)
{
    struct two t;
    two_start(&t, BOUNCE "deadlines:\n  lookup: 3s\n", BOUNCE "deadlines:\n  lookup: 3s\n", NULL);
    uint64_t rng = 23;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 4, &rng, 0x5a);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 4, &rng, RU_POISON);
    ru_inst_register(&gen, &t.b);
    struct kvf_recv_args a;
    ru_recv_args(&gen.r[0], 7, "ctx", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    ru_wait_peers_stat(&t.b, "table_retries", 1, 10000); /* the home said "not registered" */
    ru_inst_register(&ctx, &t.a);
    uint32_t readers[64] = {0};
    ru_readers(&ctx, &gen, -1, readers);
    pattern_fill(&ctx.r[0].l, &ctx.r[0].mem, &ctx.r[0].pids, 0, 0x777);
    ck_assert_int_eq(kvf_send(ctx.r[0].c, 7, ctx.r[0].l.n_groups, ctx.r[0].counts, ctx.r[0].ids,
                              readers[0]),
                     0);
    struct kvf_event ev;
    int k = ru_wait_event(&gen.r[0], 7, &ev, 10000);
    ck_assert_msg(k == KVF_EV_DONE, "event %d: %s: %s", k, kvf_error_to_string(ev.error),
                  ev.message);
    ru_assert_parity(&gen.r[0], 0, 0x777, "late context registration");
    json_t *st = ru_ctl(&t.b, "stats");
    ck_assert_ptr_nonnull(st);
    ck_assert_int_gt(
        json_integer_value(json_object_get(json_object_get(st, "peers"), "table_retries")), 0);
    json_decref(st);
    /* an instance that never registers: UNKNOWN_INSTANCE at the lookup deadline, not before */
    uint64_t t0 = ru_now_ms();
    ru_recv_args(&gen.r[0], 8, "never", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    ck_assert_int_eq(ru_wait_event(&gen.r[0], 8, &ev, 10000), KVF_EV_FAILED);
    uint64_t took = ru_now_ms() - t0;
    ck_assert_msg(ev.error == KVF_E_UNKNOWN_INSTANCE, "%s: %s", kvf_error_to_string(ev.error),
                  ev.message);
    ck_assert_msg(took >= 2500 && took < 6000, "failed after %llu ms", (unsigned long long)took);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

START_TEST(remote_timeouts_per_phase_and_failed_flows_give_their_slots_back)
{
    struct two t;
    /* lookup (300ms) ends before the request's own deadline (800ms): an unknown instance is
     * UNKNOWN_INSTANCE, asked for until then */
    two_start(&t, BOUNCE "deadlines:\n  send_wait: 400ms\n  transfer: 400ms\n  lookup: 300ms\n",
              BOUNCE "deadlines:\n  send_wait: 400ms\n  transfer: 400ms\n  lookup: 300ms\n",
              NULL);
    uint64_t rng = 15;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 4, &rng, 0x5a);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 4, &rng, RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);
    struct kvf_event ev;
    struct kvf_recv_args a;
    ru_recv_args(&gen.r[0], 1, "nosuch", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    ck_assert_int_eq(ru_wait_event(&gen.r[0], 1, &ev, 5000), KVF_EV_FAILED);
    ck_assert_msg(ev.error == KVF_E_UNKNOWN_INSTANCE, "%s: %s", kvf_error_to_string(ev.error),
                  ev.message);
    uint64_t t0 = ru_now_ms();
    ru_recv_args(&gen.r[0], 2, "ctx", t.a.addr, &a); /* no SEND ever */
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    ck_assert_int_eq(ru_wait_event(&gen.r[0], 2, &ev, 5000), KVF_EV_FAILED);
    uint64_t took = ru_now_ms() - t0;
    ck_assert_msg(ev.error == KVF_E_TIMEOUT, "%s: %s", kvf_error_to_string(ev.error), ev.message);
    /* the context daemon waits deadlines.send_wait for the SEND, then NACKs TIMEOUT */
    ck_assert_uint_ge(took, 350);
    ck_assert_uint_lt(took, 3000);
    ck_assert_msg(strstr(ev.message, "send_wait"), "%s", ev.message);
    /* its landing slots were quarantined, then reclaimed on the context daemon's drain ack:
     * the peer is still connected */
    uint64_t until = ru_now_ms() + tu_ms(2000);
    while ((arena_in_use(&t.b) != 0 || ru_ctl_int(&t.b, "arena", "quarantined_slots") != 0) &&
           ru_now_ms() < until)
        ru_sleep_ms(20);
    ck_assert_int_eq(arena_in_use(&t.b), 0);
    ck_assert_int_eq(ru_ctl_int(&t.b, "arena", "quarantined_slots"), 0);
    long long r1 = ru_ctl_int(&t.b, "arena", "reclaimed_total");
    ck_assert_int_gt(r1, 0);
    /* the generation rank cancels a waiting request: same story, started from this side */
    ru_recv_args(&gen.r[0], 3, "ctx", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    until = ru_now_ms() + tu_ms(2000);
    while (arena_in_use(&t.b) <= 0 && ru_now_ms() < until)
        ru_sleep_ms(5);
    ck_assert_int_eq(kvf_cancel(gen.r[0].c, 3), 0);
    ck_assert_int_eq(ru_wait_event(&gen.r[0], 3, &ev, 3000), KVF_EV_FAILED);
    ck_assert_int_eq(ev.error, KVF_E_CANCELLED);
    until = ru_now_ms() + tu_ms(2000);
    while ((arena_in_use(&t.b) != 0 || ru_ctl_int(&t.b, "arena", "quarantined_slots") != 0) &&
           ru_now_ms() < until)
        ru_sleep_ms(20);
    ck_assert_int_eq(arena_in_use(&t.b), 0);
    ck_assert_int_eq(ru_ctl_int(&t.b, "arena", "quarantined_slots"), 0);
    ck_assert_int_gt(ru_ctl_int(&t.b, "arena", "reclaimed_total"), r1);
    json_t *pe = ru_ctl(&t.b, "peers");
    ck_assert_int_eq(json_array_size(json_object_get(pe, "peers")), 1);
    ck_assert_str_eq(json_string_value(
                         json_object_get(json_array_get(json_object_get(pe, "peers"), 0), "state")),
                     "ready");
    json_decref(pe);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

START_TEST(remote_many_requests_in_flight_through_a_small_arena)
{
    enum { N = 12, NB = 8 };
    struct two t;
    two_start(&t, SMALL_ARENA, SMALL_ARENA, NULL);
    uint64_t rng = 16;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, "tiny:tp=2,blocks=128,slots=16", "ctx", ROLE_CONTEXT, NB, &rng, 0x5a);
    ru_inst_init(&gen, "tiny:tp=2,blocks=128,slots=16", "gen", ROLE_GENERATION, NB, &rng,
                 RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);
    for (uint32_t i = 0; i < ctx.n; i++)
        pattern_fill(&ctx.r[i].l, &ctx.r[i].mem, &ctx.r[i].pids, 0, 9);
    /* request q lands in blocks [q*NB, (q+1)*NB) and slot q of each generation rank */
    uint32_t ids[2][N][LAYOUT_MAX_GROUPS * (NB + 1)];
    struct plan_ids pids[2][N];
    uint32_t readers[8] = {0};
    ru_readers(&ctx, &gen, -1, readers);
    for (uint32_t q = 0; q < N; q++) {
        for (uint32_t i = 0; i < ctx.n; i++)
            ck_assert_int_eq(kvf_send(ctx.r[i].c, 1000 + q, ctx.r[i].l.n_groups, ctx.r[i].counts,
                                      ctx.r[i].ids, readers[i]),
                             0);
        for (uint32_t g = 0; g < gen.n; g++) {
            struct ru_rank *r = &gen.r[g];
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
        for (uint32_t g = 0; g < gen.n; g++) {
            struct kvf_event ev;
            while (kvf_poll(gen.r[g].c, &ev, 5) == 1) {
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
    for (uint32_t g = 0; g < gen.n; g++)
        for (uint32_t q = 0; q < N; q++) {
            uint32_t bp;
            uint64_t bo;
            char where[256];
            ck_assert_msg(pattern_verify(&gen.r[g].l, &gen.r[g].mem, &pids[g][q], 0, 9, &bp, &bo,
                                         where, sizeof where) == 0,
                          "rank %u request %u: %s", g, q, where);
        }
    ck_assert_int_eq(arena_in_use(&t.b), 0);
    ck_assert_int_eq(arena_in_use(&t.a), 0);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

START_TEST(remote_drain_fails_waiting_requests_within_the_drain_timeout)
{
    struct two t;
    two_start(&t, BOUNCE, BOUNCE "daemon:\n  drain_timeout: 500ms\n", NULL);
    uint64_t rng = 17;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 4, &rng, 0x5a);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 4, &rng, RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);
    struct kvf_recv_args a;
    ru_recv_args(&gen.r[0], 5, "ctx", t.a.addr, &a); /* no SEND: it waits */
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    uint64_t until = ru_now_ms() + tu_ms(5000);
    while (arena_in_use(&t.b) <= 0 && ru_now_ms() < until)
        ru_sleep_ms(10);
    uint64_t t0 = ru_now_ms();
    ck_assert_int_eq(ru_daemon_stop(&t.b), 0);
    ck_assert_uint_lt(ru_now_ms() - t0, 3000);
    struct kvf_event ev;
    ck_assert_int_eq(ru_wait_event(&gen.r[0], 5, &ev, 3000), KVF_EV_FAILED);
    /* the context daemon heard of it: its flow ended (NACK or peer loss) */
    until = ru_now_ms() + tu_ms(3000);
    while (ru_now_ms() < until) {
        json_t *tr = ru_ctl(&t.a, "stats");
        json_t *pe = tr ? json_object_get(tr, "peers") : NULL;
        long long flows = pe ? json_integer_value(json_object_get(pe, "flows")) : -1;
        long long ended = pe ? json_integer_value(json_object_get(pe, "flows_failed")) : -1;
        json_decref(tr);
        if (flows == 1 && ended == 1)
            break;
        ru_sleep_ms(20);
    }
    json_t *st = ru_ctl(&t.a, "stats");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(st, "peers"), "flows_failed")), 1);
    json_decref(st);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

/* The generation daemon caches the context table with its epoch. When the context instance
 * re-registers, the next request planned with the old epoch gets NACK UNKNOWN_INSTANCE (stale
 * table) from the context daemon: the cached table is dropped and the request is replanned
 * once with a refetched table, and succeeds. */
START_TEST(remote_stale_table_epoch_is_refetched_and_replanned)
{
    struct two t;
    two_start(&t, BOUNCE, BOUNCE, NULL);
    uint64_t rng = 18;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 4, &rng, 0x5a);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 4, &rng, RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);
    struct kvf_event ev;
    struct kvf_recv_args a;
    for (uint64_t req = 1; req <= 3; req++) {
        if (req == 2) { /* the context rank re-registers: its instance's epoch moves on */
            ctx.r[0].c = kvf_close(ctx.r[0].c);
            ru_rank_register(&ctx, 0, &t.a, NULL);
        }
        pattern_fill(&ctx.r[0].l, &ctx.r[0].mem, &ctx.r[0].pids, 0, 40 + req);
        ck_assert_int_eq(
            kvf_send(ctx.r[0].c, req, ctx.r[0].l.n_groups, ctx.r[0].counts, ctx.r[0].ids, 1), 0);
        ru_recv_args(&gen.r[0], req, "ctx", t.a.addr, &a);
        ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
        int k = ru_wait_event(&gen.r[0], req, &ev, 10000);
        ck_assert_msg(k == KVF_EV_DONE, "request %llu: %s: %s", (unsigned long long)req,
                      kvf_error_to_string(ev.error), ev.message);
        ru_assert_parity(&gen.r[0], 0, 40 + req, "after refetch");
    }
    /* request 2 planned with the cached table, was refused as stale and replanned once */
    json_t *st = ru_ctl(&t.b, "stats");
    json_t *pe = json_object_get(st, "peers");
    ck_assert_int_eq(json_integer_value(json_object_get(pe, "tables_fetched")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(pe, "replans")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(pe, "stale_epochs")), 1);
    json_decref(st);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

/* SIGSTOP then SIGKILL of the context daemon while chunks are streaming (tcp, 64 KiB chunks,
 * a 75 MiB request): the generation rank gets PEER_LOST, the landing slots come back. */
START_TEST(remote_context_daemon_killed_while_chunks_stream)
{
    const char *cfg = "arena:\n  size: 4MiB\n  chunk: 64KiB\ngates:\n  min_bytes: 0\n";
    int caught = 0;
    for (int attempt = 0; attempt < 3 && !caught; attempt++) {
        struct two t;
        two_start(&t, cfg, cfg, "tcp");
        uint64_t rng = 19 + (uint64_t)attempt;
        struct ru_inst ctx, gen;
        const char *spec = "kimi-linear-48b:blocks=64,slots=1";
        ru_inst_init(&ctx, spec, "ctx", ROLE_CONTEXT, 64, &rng, 0x5a);
        ru_inst_init(&gen, spec, "gen", ROLE_GENERATION, 64, &rng, RU_POISON);
        ru_inst_register(&ctx, &t.a);
        ru_inst_register(&gen, &t.b);
        ck_assert_int_eq(
            kvf_send(ctx.r[0].c, 1, ctx.r[0].l.n_groups, ctx.r[0].counts, ctx.r[0].ids, 1), 0);
        struct kvf_recv_args a;
        ru_recv_args(&gen.r[0], 1, "ctx", t.a.addr, &a);
        ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
        uint64_t until = ru_now_ms() + tu_ms(10000);
        long long landed = 0;
        while (ru_now_ms() < until) {
            json_t *st = ru_ctl(&t.b, "stats");
            landed =
                json_integer_value(json_object_get(json_object_get(st, "peers"), "chunks_landed"));
            json_decref(st);
            if (landed > 0)
                break;
        }
        kill(t.a.pid, SIGSTOP);
        json_t *st = ru_ctl(&t.b, "stats");
        long long done =
            json_integer_value(json_object_get(json_object_get(st, "peers"), "remote_done"));
        landed = json_integer_value(json_object_get(json_object_get(st, "peers"), "chunks_landed"));
        json_decref(st);
        uint64_t t0 = ru_now_ms();
        ru_daemon_kill9(&t.a);
        struct kvf_event ev;
        int k = ru_wait_event(&gen.r[0], 1, &ev, 5000);
        uint64_t took = ru_now_ms() - t0;
        if (done == 0) {
            caught = 1;
            fprintf(stderr, "killed after %lld chunks landed: %s %llu ms later: %s\n", landed,
                    kvf_error_to_string(ev.error), (unsigned long long)took, ev.message);
            ck_assert_int_eq(k, KVF_EV_FAILED);
            ck_assert_int_eq(ev.error, KVF_E_PEER_LOST);
            ck_assert_uint_lt(took, 3000);
            until = ru_now_ms() + tu_ms(3000);
            while (
                (arena_in_use(&t.b) != 0 || ru_ctl_int(&t.b, "arena", "quarantined_slots") != 0) &&
                ru_now_ms() < until)
                ru_sleep_ms(20);
            ck_assert_int_eq(arena_in_use(&t.b), 0);
            ck_assert_int_eq(ru_ctl_int(&t.b, "arena", "quarantined_slots"), 0);
        }
        ru_inst_free(&ctx);
        ru_inst_free(&gen);
        two_stop(&t, 1);
    }
    if (!caught)
        fprintf(stderr, "remote_context_daemon_killed_while_chunks_stream: SKIPPED: the transfer "
                        "finished before the daemon could be stopped, three times\n");
}
END_TEST

START_TEST(remote_peers_max_inflight_is_enforced_per_peer)
{
    struct two t;
    two_start(&t, BOUNCE "peers:\n  max_inflight: 2\ndaemon:\n  drain_timeout: 300ms\n",
              BOUNCE "daemon:\n  drain_timeout: 300ms\n", NULL);
    uint64_t rng = 21;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 2, &rng, 0x5a);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 2, &rng, RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);
    struct kvf_recv_args a;
    for (uint64_t req = 1; req <= 4; req++) { /* no SENDs: every flow waits at the context */
        ru_recv_args(&gen.r[0], req, "ctx", t.a.addr, &a);
        ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
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
        if (kvf_poll(gen.r[0].c, &ev, 20) == 1 && ev.kind == KVF_EV_FAILED) {
            ck_assert_msg(ev.req_id >= 3, "request %llu refused", (unsigned long long)ev.req_id);
            ck_assert_int_eq(ev.error, KVF_E_NO_ROUTE);
            ck_assert_ptr_nonnull(strstr(ev.message, "peers.max_inflight"));
            refused++;
        }
    ck_assert_int_eq(refused, 2);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
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
    two_start(&t, cfg, cfg, NULL);
    uint64_t rng = 0x5eed;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, "tiny:tp=2,blocks=128,slots=32", "ctx", ROLE_CONTEXT, NB, &rng, 0x5a);
    ru_inst_init(&gen, "tiny:tp=2,blocks=128,slots=32", "gen", ROLE_GENERATION, NB, &rng,
                 RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);
    for (uint32_t i = 0; i < ctx.n; i++)
        pattern_fill(&ctx.r[i].l, &ctx.r[i].mem, &ctx.r[i].pids, 0, 77);
    uint32_t readers[8] = {0};
    ru_readers(&ctx, &gen, -1, readers);
    static uint32_t ids[2][N][LAYOUT_MAX_GROUPS * (NB + 1)];
    struct plan_ids pids[2][N];
    int ended[2][N], kind[2][N];
    memset(ended, 0, sizeof ended);
    for (uint32_t q = 0; q < N; q++) {
        int recv_first = (int)(ru_rand(&rng) & 1);
        for (int step = 0; step < 2; step++) {
            if ((step == 0) != recv_first) {
                for (uint32_t i = 0; i < ctx.n; i++)
                    ck_assert_int_eq(kvf_send(ctx.r[i].c, 100 + q, ctx.r[i].l.n_groups,
                                              ctx.r[i].counts, ctx.r[i].ids, readers[i]),
                                     0);
                continue;
            }
            for (uint32_t g = 0; g < gen.n; g++) {
                struct ru_rank *r = &gen.r[g];
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
            ru_sleep_ms((unsigned)(ru_rand(&rng) % 4));
            kvf_cancel(gen.r[0].c, 100 + q); /* may be too late: then it completes */
        }
    }
    int open = 2 * N;
    uint64_t until = ru_now_ms() + tu_ms(60000);
    while (open > 0 && ru_now_ms() < until)
        for (uint32_t g = 0; g < gen.n; g++) {
            struct kvf_event ev;
            while (kvf_poll(gen.r[g].c, &ev, 2) == 1) {
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
        for (uint32_t g = 0; g < gen.n; g++) {
            if (kind[g][q] != KVF_EV_DONE) {
                cancelled++;
                kvf_cancel(ctx.r[g].c, 100 + q); /* its reader will never come */
                continue;
            }
            uint32_t bp;
            uint64_t bo;
            char where[256];
            ck_assert_msg(pattern_verify(&gen.r[g].l, &gen.r[g].mem, &pids[g][q], 0, 77, &bp, &bo,
                                         where, sizeof where) == 0,
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
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

START_TEST(remote_arena_placement_device_is_refused_at_start)
{
    char top[64], secret[128];
    tu_tmpdir(top, sizeof top);
    ru_secret(top, "secret", 9, secret, sizeof secret);
    struct ru_daemon d;
    ck_assert_int_eq(ru_daemon_start(&d, top, "d", 0, secret, "arena:\n  placement: device\n"), -1);
    FILE *f = fopen(d.log, "r");
    ck_assert_ptr_nonnull(f);
    char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    ck_assert_msg(strstr(buf, "arena.placement is device"), "log: %s", buf);
    char cmd[128];
    tu_fmt(cmd, sizeof cmd, "rm -rf %s", top);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("remote_fail");
    TCase *tc = tcase_create("failures");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, remote_context_daemon_killed_fails_with_peer_lost_and_frees_the_arena);
    tcase_add_test(tc, remote_peer_with_the_wrong_secret_is_refused);
    tcase_add_test(tc, remote_recv_before_the_context_registers_waits_for_it_up_to_the_lookup_deadline);
    tcase_add_test(tc, remote_without_a_cluster_secret_fails_no_route_and_local_use_works);
    tcase_add_test(tc, remote_incompatible_instance_fails_only_its_requests);
    tcase_add_test(tc, remote_generation_omitting_a_group_is_refused_and_the_send_not_served);
    tcase_add_test(tc, remote_timeouts_per_phase_and_failed_flows_give_their_slots_back);
    tcase_add_test(tc, remote_many_requests_in_flight_through_a_small_arena);
    tcase_add_test(tc, remote_drain_fails_waiting_requests_within_the_drain_timeout);
    tcase_add_test(tc, remote_stale_table_epoch_is_refetched_and_replanned);
    tcase_add_test(tc, remote_context_daemon_killed_while_chunks_stream);
    tcase_add_test(tc, remote_peers_max_inflight_is_enforced_per_peer);
    tcase_add_test(tc, remote_both_directions_at_once_through_small_arenas);
    tcase_add_test(tc, remote_random_cancels_leave_no_slot_behind);
    tcase_add_test(tc, remote_arena_placement_device_is_refused_at_start);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
