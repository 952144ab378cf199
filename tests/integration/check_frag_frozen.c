/* check_frag_frozen.c: the fragment path over cma (docs/UCX.md "Fragment writes into the
 * generation pools over cma") keeps the pool guarantee when the context daemon freezes. Two real
 * daemons on one host (shared memory and cma lanes), a payload below the gates: the context
 * daemon writes the generation rank's pools itself with process_vm_writev. A frozen (SIGSTOP)
 * context daemon could still be inside such a write and finish it when it runs again, so the
 * generation daemon, which loses it for silence, holds the request's FAILED (its pools pinned)
 * until that daemon fences its writes on a new link or its process exits; here it is killed, and FAILED
 * PEER_LOST reaches the worker only then. */
#include <check.h>

#include "remoteutil.h"

#define SPEC "tiny:blocks=64,slots=4"
#define CFG                                                                                        \
    "peers:\n  keepalive_interval: %ums\n  keepalive_misses: 5\n"                                  \
    "deadlines:\n  send_wait: 60s\n  transfer: 60s\n"

static void recv_req(struct two *t, uint64_t req)
{
    struct ru_rank *g = &t->gen.r[0];
    struct kvf_recv_args a = {.req_id = req,
                              .ctx_instance = "ctx",
                              .ctx_dp_rank = -1,
                              .ctx_home = t->a.addr,
                              .n_groups = g->l.n_groups,
                              .counts = g->counts,
                              .ids = g->ids};
    ck_assert_int_eq(kvf_recv(g->c, &a), 0);
}

START_TEST(a_frozen_context_daemon_writing_pools_over_cma_holds_failed_until_it_exits)
{
    struct two t;
    char cfg[192];
    unsigned iv = tu_keepalive_ms(200); /* a healthy daemon stalled by load is never lost */
    tu_fmt(cfg, sizeof cfg, CFG, iv);
    two_start_insts(&t, &(struct two_insts){.extra_a = cfg, .extra_b = cfg, .spec = SPEC,
                                            .blocks = 4, .rng = 61});
    struct ru_rank *c = &t.ctx.r[0], *g = &t.gen.r[0];
    struct kvf_event ev;
    /* one request moves over cma writes, every byte checked */
    pattern_fill(&c->l, &c->mem, &c->pids, 0, 77);
    ck_assert_int_eq(kvf_send(c->c, 1, c->l.n_groups, c->counts, c->ids, 1), 0);
    recv_req(&t, 1);
    ck_assert_int_eq(ru_wait_event(g, 1, &ev, 20000), KVF_EV_DONE);
    ck_assert_int_eq(ru_wait_event(c, 1, &ev, 20000), KVF_EV_SENT);
    ru_assert_parity(g, 0, 77, "fragment over cma");
    ck_assert_int_ge(ru_peers_stat(&t.a, "fragment_copy_jobs"), 1);
    ck_assert_int_eq(ru_peers_stat(&t.a, "fragment_puts"), 0);
    /* the next one's RECV_REQ reaches a frozen context daemon */
    ck_assert_int_eq(kvf_send(c->c, 2, c->l.n_groups, c->counts, c->ids, 1), 0);
    ru_sleep_ms(50); /* the SEND is in A's hands before it freezes */
    ck_assert_int_eq(kill(t.a.pid, SIGSTOP), 0);
    uint64_t frozen = ru_now_ms();
    recv_req(&t, 2);
    /* lost for silence after 5 intervals: the flow failed, held (not reported) */
    ru_wait_peers_stat(&t.b, "frag_holds", 1, 10000 + iv * 5);
    uint64_t lost = ru_now_ms();
    int k = ru_wait_event(g, 2, &ev, 3000); /* 15x ENGINE_RECLAIM_MS past the loss */
    ck_assert_msg(k == 0, "the generation worker heard %d (%s) %llu ms after the freeze, while "
                  "the frozen writer could still write its pools", k,
                  k ? kvf_error_to_string(ev.error) : "", (unsigned long long)(ru_now_ms() - frozen));
    uint64_t killed = ru_now_ms();
    ru_daemon_kill9(&t.a);
    k = ru_wait_event(g, 2, &ev, 10000);
    ck_assert_msg(k == KVF_EV_FAILED && ev.error == KVF_E_PEER_LOST, "after the kill: %d %s: %s",
                  k, kvf_error_to_string(ev.error), ev.message);
    fprintf(stderr, "frozen context daemon: lost %llu ms after the freeze, FAILED held %llu ms "
            "until its SIGKILL, then reported %llu ms after it\n",
            (unsigned long long)(lost - frozen), (unsigned long long)(killed - lost),
            (unsigned long long)(ru_now_ms() - killed));
    two_stop(&t, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("frag_frozen");
    TCase *tc = tcase_create("frozen");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, a_frozen_context_daemon_writing_pools_over_cma_holds_failed_until_it_exits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
