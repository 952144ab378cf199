/* check_ctx_gone.c: a remote context worker killed mid-request gives its readers PEER_LOST
 * (README, "Failures and typed errors"; issue 13 item 7), not UNKNOWN_INSTANCE: the reader whose
 * RECV_REQ waits at the context daemon for the dead rank's SEND, and a reader that comes after
 * the death with the table it cached before. Two real daemons; the context rank is a real
 * process (forked, its own libkvferry connection) killed with SIGKILL. */
#include <check.h>

#include "remoteutil.h"

#define TINY "tiny:blocks=128,slots=16"

static void recv_args(struct ru_rank *r, uint64_t req, const char *home, struct kvf_recv_args *a)
{
    *a = (struct kvf_recv_args){.req_id = req,
                                .ctx_instance = "ctx",
                                .ctx_dp_rank = -1,
                                .ctx_home = home,
                                .n_groups = r->l.n_groups,
                                .counts = r->counts,
                                .ids = r->ids};
}

static void expect_peer_lost(struct ru_rank *g, uint64_t req, uint64_t t0, const char *what)
{
    struct kvf_event ev;
    int k = ru_wait_event(g, req, &ev, 10000);
    uint64_t took = ru_now_ms() - t0;
    ck_assert_msg(k == KVF_EV_FAILED, "%s: ended %d (%s)", what, k, ev.message);
    ck_assert_msg(ev.error == KVF_E_PEER_LOST, "%s: %s: %s", what, kvf_error_to_string(ev.error),
                  ev.message);
    ck_assert_msg(strstr(ev.message, "went away"), "%s: %s", what, ev.message);
    ck_assert_msg(took < 2000, "%s: PEER_LOST after %llu ms", what, (unsigned long long)took);
    fprintf(stderr, "%s: PEER_LOST after %llu ms: %s\n", what, (unsigned long long)took,
            ev.message);
}

START_TEST(gone_remote_context_worker_killed_gives_its_readers_peer_lost)
{
    struct two t;
    two_start(&t, "deadlines:\n  send_wait: 60s\n", NULL, NULL);
    uint64_t rng = 41;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 8, &rng, 0x5a);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 8, &rng, RU_POISON);
    ru_inst_register(&gen, &t.b);
    pid_t pid = ru_rank_fork(&ctx, 0, &t.a, NULL, NULL); /* registered, never SENDs */
    /* the reader's RECV_REQ waits at the context daemon for a SEND that never comes */
    struct kvf_recv_args a;
    recv_args(&gen.r[0], 60, t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    ru_wait_peers_stat(&t.a, "flows", 1, 5000);
    uint64_t t0 = ru_now_ms();
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    expect_peer_lost(&gen.r[0], 60, t0, "reader waiting for the SEND");
    /* a reader after the death, planning with the table cached before it */
    recv_args(&gen.r[0], 61, t.a.addr, &a);
    t0 = ru_now_ms();
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    expect_peer_lost(&gen.r[0], 61, t0, "reader after the death");
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("ctx_gone");
    TCase *tc = tcase_create("gone");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, gone_remote_context_worker_killed_gives_its_readers_peer_lost);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
