/* check_remote_ids.c: request ids are meetings, not counters, between two real daemons (issue
 * 13 item 3, reqtab.h): a prefill instance at the context daemon restarts and reuses its request
 * ids within the previous requests' send_wait + transfer; the decode instance at the other
 * daemon RECVs them again, and the new bytes arrive (kvferry-sim checks every byte; the rounds
 * use different pattern seeds, so the old request's bytes cannot pass). Both orders (the RECVs
 * waiting before the new SENDs, and the SENDs first), and a request read by a decode instance at
 * each daemon. */
#include <check.h>

#include "remoteutil.h"
#include "wtest.h" /* wt_wait */

#define EXTRA "arena:\n  size: 32MiB\n  chunk: 4MiB\ngates:\n  min_bytes: 0\n" \
              "deadlines:\n  lookup: 20s\n  send_wait: 20s\n  transfer: 20s\n"


/* Requests waiting at daemon d on side ("send" or "recv"). */
static long long waiting(const struct ru_daemon *d, const char *side)
{
    json_t *r = ru_ctl(d, "transfers"), *x;
    size_t k;
    long long n = 0;
    json_array_foreach(json_object_get(r, "transfers"), k, x)
        n += tj_is(json_object_get(x, "side"), side) && tj_is(json_object_get(x, "state"), "waiting");
    json_decref(r);
    return n;
}

/* Waits until instance is registered at d. */
static void until_listed(const struct ru_daemon *d, const char *instance)
{
    uint64_t end = ru_now_ms() + 20000;
    for (;;) {
        json_t *r = ru_ctl(d, "workers"), *x;
        size_t k;
        int found = 0;
        json_array_foreach(json_object_get(r, "workers"), k, x)
            found |= tj_is(json_object_get(x, "instance"), instance);
        json_decref(r);
        if (found)
            return;
        ck_assert_msg(ru_now_ms() < end, "%s not registered within 20 s", instance);
        ru_sleep_ms(10);
    }
}

static void until_waiting(const struct ru_daemon *d, const char *side, long long want)
{
    uint64_t end = ru_now_ms() + 20000;
    long long n;
    while ((n = waiting(d, side)) < want) {
        ck_assert_msg(ru_now_ms() < end, "%lld %s(s) waiting, not %lld", n, side, want);
        ru_sleep_ms(10);
    }
}

/* One round of requests 1 and 2 with pattern seed `seed`; 0 when every side exited 0.
 * mixed: a second decode instance at the context daemon reads them too (two readers). */
static int round_trip(struct two *t, const char *seed, int recv_first, int mixed)
{
    char sim[256];
    tu_bin("kvferry-sim", sim, sizeof sim);
    char *gen_argv[] = {sim, "--role", "generation", "--instance", "decode", "--spec", "tiny",
                        "--rank", "0", "--socket", t->b.worker, "--ctx-instance", "prefill",
                        "--ctx-home", t->a.addr, "--requests", "2", "--seed", (char *)seed,
                        NULL};
    /* recv_first: the prefill registers, then waits 5 s before its SENDs (a RECV_REQ for an
     * instance not registered at all is refused UNKNOWN_INSTANCE, as it should be); the decode's
     * RECVs are seen waiting meanwhile. Else its SENDs wait for the decode to start. Either
     * way the SENDs end SENT once read, and the prefill exits. */
    char *ctx_argv[] = {sim, "--role", "context", "--instance", "prefill", "--spec", "tiny",
                        "--rank", "0", "--socket", t->a.worker, "--requests", "2", "--readers",
                        mixed ? "2" : "1", "--seed", (char *)seed, "--start-delay-ms", "5000",
                        NULL};
    char *local_argv[] = {sim, "--role", "generation", "--instance", "dlocal", "--spec", "tiny",
                          "--rank", "0", "--socket", t->a.worker, "--ctx-instance", "prefill",
                          "--requests", "2", "--seed", (char *)seed, NULL};
    pid_t pg = -1, pc = -1, pl = -1;
    if (recv_first) {
        pc = ru_run_sim(ctx_argv);
        until_listed(&t->a, "prefill");
        pg = ru_run_sim(gen_argv);
        until_waiting(&t->b, "recv", 2);
    } else {
        ctx_argv[17] = NULL; /* no delay: its SENDs wait for the decode */
        pc = ru_run_sim(ctx_argv);
        until_waiting(&t->a, "send", 2);
        pg = ru_run_sim(gen_argv);
        if (mixed)
            pl = ru_run_sim(local_argv);
    }
    int sg = wt_wait(pg, 40000), sl = mixed ? wt_wait(pl, 40000) : 0;
    int sc = wt_wait(pc, 40000);
    if (sg != 0 || sc != 0 || sl != 0)
        fprintf(stderr, "round seed %s: remote decode exit %d, local decode exit %d, context "
                "exit %d\n", seed, sg, sl, sc);
    return sg == 0 && sc == 0 && sl == 0 ? 0 : -1;
}

static void prefill_restart(int recv_first, int mixed)
{
    struct two t;
    two_start(&t, EXTRA, EXTRA, NULL);
    int ok = round_trip(&t, "1", recv_first, mixed) == 0;
    /* round 1's ranks left both daemons: the prefill instance restarts with the same ids */
    for (uint64_t end = ru_now_ms() + 10000; ok && ru_now_ms() < end;) {
        json_t *a = ru_ctl(&t.a, "workers"), *b = ru_ctl(&t.b, "workers");
        size_t n = json_array_size(json_object_get(a, "workers")) +
                   json_array_size(json_object_get(b, "workers"));
        json_decref(a);
        json_decref(b);
        if (n == 0)
            break;
        ru_sleep_ms(10);
    }
    ok = ok && round_trip(&t, "2", recv_first, mixed) == 0;
    long long done = ru_peers_stat(&t.b, "remote_done");
    two_stop(&t, ok);
    ck_assert_msg(ok, "a round failed (see above)");
    ck_assert_int_eq(done, 4); /* 2 requests x 2 rounds, all moved between the daemons */
}

START_TEST(remote_ids_prefill_restart_recv_first_moves_the_new_bytes) { prefill_restart(1, 0); }
END_TEST
START_TEST(remote_ids_prefill_restart_send_first_moves_the_new_bytes) { prefill_restart(0, 0); }
END_TEST
/* One reader at each daemon: the local reader's tally at the context daemon must not carry
 * over to the restarted prefill's SENDs (it released them after the remote reader alone). */
START_TEST(remote_ids_prefill_restart_with_a_local_and_a_remote_reader_moves_both)
{
    prefill_restart(0, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("remote_ids");
    TCase *t = tcase_create("two_daemons");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, remote_ids_prefill_restart_recv_first_moves_the_new_bytes);
    tcase_add_test(t, remote_ids_prefill_restart_send_first_moves_the_new_bytes);
    tcase_add_test(t, remote_ids_prefill_restart_with_a_local_and_a_remote_reader_moves_both);
    suite_add_tcase(s, t);
    return tu_run(s);
}
