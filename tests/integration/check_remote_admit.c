/* check_remote_admit.c: what two real daemons refuse or wait for before moving anything: a peer
 * with the wrong secret, no secret at all (local use still works), an incompatible context
 * instance failing only its own requests (verdict cached), a generation layout leaving out a
 * group, a RECV before the context registers (waits up to the lookup deadline), a stale table
 * epoch (refetched and replanned), and arena placement "device" refused at start. */
#include <check.h>

#include "remoteutil.h"

#define TINY "tiny:blocks=128,slots=16"
#define BOUNCE "gates:\n  min_bytes: 0\n  min_blocks: 0\n"

START_TEST(remote_peer_with_the_wrong_secret_is_refused)
{
    struct two t;
    two_start_insts(&t,
                    &(struct two_insts){.secret_b = "wrong", .spec = TINY, .blocks = 4, .rng = 12});
    struct kvf_recv_args a;
    ru_recv_args(&t.gen.r[0], 3, "ctx", t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(t.gen.r[0].c, &a), 0);
    struct kvf_event ev;
    int k = ru_wait_event(&t.gen.r[0], 3, &ev, 10000);
    ck_assert_int_eq(k, KVF_EV_FAILED);
    ck_assert_msg(ev.error == KVF_E_PEER_UNREACHABLE, "%s: %s", kvf_error_to_string(ev.error),
                  ev.message);
    json_t *p = ru_ctl(&t.a, "peers");
    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(json_array_size(json_object_get(p, "peers")), 0); /* never admitted */
    json_decref(p);
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
    /* short, so a SEND left unserved would end TIMEOUT before the waits below (a wrong error,
     * caught); scaled, so the complete request's own deadlines outlast a loaded machine's stalls */
    char dl[96];
    tu_fmt(dl, sizeof dl, "deadlines:\n  send_wait: %ums\n  transfer: %ums\n", tu_ms(3000),
           tu_ms(3000));
    two_start(&t, dl, NULL, NULL);
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


/* The generation daemon caches the context table with its epoch. When the context instance
 * re-registers, the next request planned with the old epoch gets NACK UNKNOWN_INSTANCE (stale
 * table) from the context daemon: the cached table is dropped and the request is replanned
 * once with a refetched table, and succeeds. */
START_TEST(remote_stale_table_epoch_is_refetched_and_replanned)
{
    struct two t;
    two_start_insts(
        &t, &(struct two_insts){
                .extra_a = BOUNCE, .extra_b = BOUNCE, .spec = TINY, .blocks = 4, .rng = 18});
    struct kvf_event ev;
    struct kvf_recv_args a;
    for (uint64_t req = 1; req <= 3; req++) {
        if (req == 2) { /* the context rank re-registers: its instance's epoch moves on */
            t.ctx.r[0].c = kvf_close(t.ctx.r[0].c);
            ru_rank_register(&t.ctx, 0, &t.a, NULL);
        }
        pattern_fill(&t.ctx.r[0].l, &t.ctx.r[0].mem, &t.ctx.r[0].pids, 0, 40 + req);
        ck_assert_int_eq(kvf_send(t.ctx.r[0].c, req, t.ctx.r[0].l.n_groups, t.ctx.r[0].counts,
                                  t.ctx.r[0].ids, 1),
                         0);
        ru_recv_args(&t.gen.r[0], req, "ctx", t.a.addr, &a);
        ck_assert_int_eq(kvf_recv(t.gen.r[0].c, &a), 0);
        int k = ru_wait_event(&t.gen.r[0], req, &ev, 10000);
        ck_assert_msg(k == KVF_EV_DONE, "request %llu: %s: %s", (unsigned long long)req,
                      kvf_error_to_string(ev.error), ev.message);
        ru_assert_parity(&t.gen.r[0], 0, 40 + req, "after refetch");
    }
    /* request 2 planned with the cached table, was refused as stale and replanned once */
    json_t *st = ru_ctl(&t.b, "stats");
    json_t *pe = json_object_get(st, "peers");
    ck_assert_int_eq(json_integer_value(json_object_get(pe, "tables_fetched")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(pe, "replans")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(pe, "stale_epochs")), 1);
    json_decref(st);
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
    Suite *s = suite_create("remote_admit");
    TCase *tc = tcase_create("admit");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, remote_peer_with_the_wrong_secret_is_refused);
    tcase_add_test(tc, remote_recv_before_the_context_registers_waits_for_it_up_to_the_lookup_deadline);
    tcase_add_test(tc, remote_without_a_cluster_secret_fails_no_route_and_local_use_works);
    tcase_add_test(tc, remote_incompatible_instance_fails_only_its_requests);
    tcase_add_test(tc, remote_generation_omitting_a_group_is_refused_and_the_send_not_served);
    tcase_add_test(tc, remote_stale_table_epoch_is_refetched_and_replanned);
    tcase_add_test(tc, remote_arena_placement_device_is_refused_at_start);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
