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

START_TEST(frag_failure_mid_transfer_reports_after_the_puts_ended)
{
    struct two t;
    two_start(&t, ALL_FRAGMENT, ALL_FRAGMENT, "tcp");
    uint64_t rng = 51;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, SPEC, "ctx", ROLE_CONTEXT, 4000, &rng, 0x5a);
    ru_inst_init(&gen, SPEC, "gen", ROLE_GENERATION, 4000, &rng, RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);
    int caught = 0;
    for (uint64_t req = 70; req < 80 && !caught; req++) {
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
        /* the context daemon's puts are in flight: fail the request now */
        uint64_t until = ru_now_ms() + 5000;
        long long n;
        while ((n = frag_jobs(&t.a)) < 1 && ru_now_ms() < until)
            ;
        ck_assert_int_eq(kvf_cancel(g->c, req), 0);
        struct kvf_event ev;
        int k = ru_wait_event(g, req, &ev, 20000);
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
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("frag_quar");
    TCase *tc = tcase_create("quarantine");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, frag_failure_mid_transfer_reports_after_the_puts_ended);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
