/* check_frag_quar.c: pool quarantine for fragment puts (issue 13 item 7, docs/DESIGN.md §5). A
 * fragment request that fails while the context daemon's puts into the generation rank's pools
 * are still in flight reports FAILED to the generation worker only after those puts ended (the
 * context daemon acks the drain once its job completed), so the worker never reuses blocks a put
 * can still write. Two real daemons over tcp (puts slow enough to be caught in flight), every
 * payload below the gates (fragment). */
#include <check.h>

#include "remoteutil.h"

#define SPEC "tiny:blocks=4096,slots=4"
#define ALL_FRAGMENT "gates:\n  min_bytes: 1TiB\n  min_blocks: 16777216\n"

static long long frag_jobs(const struct ru_daemon *d)
{
    return ru_peers_stat(d, "frag_jobs_in_flight");
}

/* Pool unmaps the daemon defers until nothing pins the mapping (status copy.deferred_unmaps). */
static long long deferred_unmaps(const struct ru_daemon *d)
{
    json_t *r = ru_ctl(d, "status");
    json_t *v = json_object_get(json_object_get(r, "copy"), "deferred_unmaps");
    long long x = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(r);
    return x;
}

START_TEST(frag_failure_mid_transfer_reports_after_the_puts_ended)
{
    struct two t;
    /* the table's lookup scales with the machine's load: under 4x load on 2 cores the default
     * 2 s could end a request before the cancel this test is about */
    char cfg[160];
    snprintf(cfg, sizeof cfg, ALL_FRAGMENT "deadlines:\n  lookup: %ums\n", tu_keepalive_ms(2000));
    two_start_insts(&t, &(struct two_insts){.extra_a = cfg, .extra_b = cfg, .tls = "tcp",
                                            .spec = SPEC, .blocks = 4000, .rng = 51});
    int caught = 0;
    for (uint64_t req = 70; req < 80 && !caught; req++) {
        struct ru_rank *c = &t.ctx.r[0], *g = &t.gen.r[0];
        ck_assert_int_eq(kvf_send(c->c, req, c->l.n_groups, c->counts, c->ids, 1), 0);
        struct kvf_recv_args a = {.req_id = req,
                                  .ctx_instance = "ctx",
                                  .ctx_dp_rank = -1,
                                  .ctx_home = t.a.addr,
                                  .n_groups = g->l.n_groups,
                                  .counts = g->counts,
                                  .ids = g->ids};
        ck_assert_int_eq(kvf_recv(g->c, &a), 0);
        /* the context daemon's puts are in flight: fail the request now */
        uint64_t until = ru_now_ms() + tu_ms(5000);
        long long n;
        while ((n = frag_jobs(&t.a)) < 1 && ru_now_ms() < until)
            ;
        /* -ENOENT: the request ended (its DONE is queued) before the cancel went out */
        int crc = kvf_cancel(g->c, req);
        ck_assert_msg(crc == 0 || crc == -ENOENT, "kvf_cancel: %d", crc);
        struct kvf_event ev;
        int k = ru_wait_event(g, req, &ev, 20000);
        ck_assert_msg(crc == 0 || k == KVF_EV_DONE, "not in flight at the cancel, then %d (%s: %s)",
                      k, kvf_error_to_string(ev.error), ev.message);
        long long left = frag_jobs(&t.a); /* asked after the worker heard the end */
        struct kvf_event cev;
        ru_wait_event(c, req, &cev, 20000); /* the SEND ends too (served or failed) */
        if (k == KVF_EV_DONE)
            continue; /* the puts were done before the cancel came: try again */
        ck_assert_msg(k == KVF_EV_FAILED && ev.error == KVF_E_CANCELLED, "%d %s: %s", k,
                      kvf_error_to_string(ev.error), ev.message);
        ck_assert_msg(left == 0, "the generation worker heard FAILED while %lld fragment job(s) "
                      "still put into its pools", left);
        caught = n >= 1 && ru_peers_stat(&t.b, "frag_holds") >= 1;
        fprintf(stderr, "request %llu: cancelled with %lld job(s) in flight; FAILED reached the "
                "worker after they ended (holds %lld)\n", (unsigned long long)req, n,
                ru_peers_stat(&t.b, "frag_holds"));
    }
    ck_assert_msg(caught, "no request was caught with its puts in flight");
    ck_assert_int_eq(ru_peers_stat(&t.b, "frag_holds") >= 1, 1);
    two_stop(&t, 1);
}
END_TEST

/* A generation worker that goes away while the context daemon's fragment puts into its pools
 * are in flight: the daemon keeps the pools mapped (pinned by the held flow) until the puts
 * ended, then unmaps them, and serves on. Over tcp UCX lands those puts with active messages
 * that write to the address unchecked, so an unmapped pool would fault the daemon. */
START_TEST(gen_worker_gone_mid_fragment_keeps_its_pools_mapped_until_the_puts_ended)
{
    struct two t;
    two_start(&t, ALL_FRAGMENT, ALL_FRAGMENT, "tcp");
    uint64_t rng = 52;
    struct ru_inst ctx;
    ru_inst_init(&ctx, SPEC, "ctx", ROLE_CONTEXT, 4000, &rng, 0x5a);
    ru_inst_register(&ctx, &t.a);
    int caught = 0;
    for (uint64_t req = 90; req < 100 && !caught; req++) {
        char name[32];
        tu_fmt(name, sizeof name, "gen%llu", (unsigned long long)req);
        struct ru_inst gen;
        ru_inst_init(&gen, SPEC, name, ROLE_GENERATION, 4000, &rng, RU_POISON);
        ru_inst_register(&gen, &t.b);
        struct ru_rank *c = &ctx.r[0], *g = &gen.r[0];
        ck_assert_int_eq(kvf_send(c->c, req, c->l.n_groups, c->counts, c->ids, 1), 0);
        struct kvf_recv_args a = {.req_id = req,
                                  .ctx_instance = "ctx",
                                  .ctx_dp_rank = -1,
                                  .ctx_home = t.a.addr,
                                  .n_groups = g->l.n_groups,
                                  .counts = g->counts,
                                  .ids = g->ids};
        ck_assert_int_eq(kvf_recv(g->c, &a), 0);
        uint64_t until = ru_now_ms() + tu_ms(5000);
        long long n;
        while ((n = frag_jobs(&t.a)) < 1 && ru_now_ms() < until)
            ;
        g->c = kvf_close(g->c); /* the worker goes away with the puts in flight */
        long long def = 0, jobs = n;
        until = ru_now_ms() + tu_ms(5000);
        while ((def = deferred_unmaps(&t.b)) < 1 && (jobs = frag_jobs(&t.a)) > 0 &&
               ru_now_ms() < until)
            ;
        caught = n >= 1 && def >= 1;
        /* whether caught or not: the puts end, the unmaps follow, the SEND ends */
        until = ru_now_ms() + tu_ms(20000);
        while ((frag_jobs(&t.a) > 0 || deferred_unmaps(&t.b) > 0) && ru_now_ms() < until)
            ru_sleep_ms(5);
        long long left = deferred_unmaps(&t.b);
        ck_assert_msg(left == 0, "generation daemon: %lld unmap(s) still deferred (-1: it no "
                      "longer answers, e.g. a put landed in an unmapped pool)", left);
        ck_assert_int_eq(frag_jobs(&t.a), 0);
        struct kvf_event cev;
        ru_wait_event(c, req, &cev, 20000);
        fprintf(stderr, "request %llu: worker gone with %lld job(s) in flight; %lld unmap(s) "
                "deferred until they ended\n", (unsigned long long)req, n, def);
        ru_inst_free(&gen);
    }
    ck_assert_msg(caught, "no request was caught with its puts in flight");
    ck_assert_int_eq(kill(t.b.pid, 0), 0);
    ck_assert_int_ge(ru_peers_stat(&t.b, "frag_holds"), 1);
    ru_inst_free(&ctx);
    two_stop(&t, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("frag_quar");
    TCase *tc = tcase_create("quarantine");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, frag_failure_mid_transfer_reports_after_the_puts_ended);
    tcase_add_test(tc, gen_worker_gone_mid_fragment_keeps_its_pools_mapped_until_the_puts_ended);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
