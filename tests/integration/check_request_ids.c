/* check_request_ids.c: request ids are meetings, not counters (issue 13 item 3, reqtab.h), on
 * the same-daemon path with a real kvferryd and real kvferry-sim processes: a prefill instance
 * that restarts and reuses its request ids moves the new request's bytes (checked bitwise: the
 * two rounds use different pattern seeds), in both orders of SEND and RECV; an id reused while
 * the previous request is in flight is refused BAD_REQUEST, on the context side (a SEND) and on
 * the generation side (a RECV beyond the readers), naming the id and the instance. */
#include "wtest.h"

/* Long deadlines: the previous request's tally would live send_wait + transfer (40 s), far past
 * this test, so the restart meets it. */
#define LONG_DEADLINES "deadlines:\n  lookup: 20s\n  send_wait: 20s\n  transfer: 20s\n"

static size_t waiting(struct wenv *e, const char *side, const char *instance)
{
    json_t *r = wt_ctl(e, "transfers"), *x;
    size_t k, n = 0;
    json_array_foreach(json_object_get(r, "transfers"), k, x)
        n += tj_is(json_object_get(x, "side"), side) &&
             tj_is(json_object_get(x, "instance"), instance) &&
             tj_is(json_object_get(x, "state"), "waiting");
    json_decref(r);
    return n;
}

static void until_waiting(struct wenv *e, const char *side, const char *instance, size_t want)
{
    int64_t end = wt_now_ms() + 20000;
    size_t n;
    while ((n = waiting(e, side, instance)) < want) {
        ck_assert_msg(wt_now_ms() < end, "%zu %s(s) of %s waiting, not %zu", n, side, instance,
                      want);
        usleep(10000);
    }
}

static pid_t ctx_sim(struct wenv *e, const char *log, const char *seed)
{
    return wt_sim(e, log, "--role", "context", "--instance", "ctx", "--spec", "tiny", "--rank",
                  "0", "--requests", "2", "--readers", "1", "--seed", seed, (char *)NULL);
}

static pid_t gen_sim(struct wenv *e, const char *log, const char *seed)
{
    return wt_sim(e, log, "--role", "generation", "--instance", "gen", "--spec", "tiny", "--rank",
                  "0", "--requests", "2", "--ctx-instance", "ctx", "--seed", seed, (char *)NULL);
}

/* One round of requests 1 and 2; recv_first: the generation's RECVs wait before the SENDs. */
static void round_trip(struct wenv *e, const char *seed, int recv_first)
{
    char cl[32], gl[32];
    snprintf(cl, sizeof cl, "ctx%s.log", seed);
    snprintf(gl, sizeof gl, "gen%s.log", seed);
    pid_t c = -1, g = -1;
    if (recv_first) {
        g = gen_sim(e, gl, seed);
        until_waiting(e, "recv", "gen", 2);
        c = ctx_sim(e, cl, seed);
    } else {
        c = ctx_sim(e, cl, seed);
        until_waiting(e, "send", "ctx", 2);
        g = gen_sim(e, gl, seed);
    }
    int rg = wt_wait(g, 30000), rc = wt_wait(c, 30000);
    char *gt = wt_log(e, gl), *ct = wt_log(e, cl);
    ck_assert_msg(rg == 0 && rc == 0, "round seed %s: gen %d ctx %d:\n%s\n%s", seed, rg, rc, gt, ct);
    ck_assert_msg(strstr(gt, "ok 2 failed 0") && strstr(gt, "parity OK"), "gen:\n%s", gt);
    /* the context's SENDs were SENT with the bytes read, not released empty by the old tally */
    ck_assert_msg(strstr(ct, "ok 2 failed 0") && !strstr(ct, " bytes 0 "), "ctx:\n%s", ct);
    free(gt);
    free(ct);
}

/* The prefill instance restarts (a new process, the same instance and ids) within the previous
 * requests' send_wait + transfer; so does the decode worker. */
static void prefill_restart(int recv_first)
{
    struct wenv e;
    wt_start(&e, LONG_DEADLINES);
    round_trip(&e, "1", recv_first);
    for (int64_t end = wt_now_ms() + 10000; wt_ctl_count(&e, "workers", "workers") > 0;) {
        ck_assert_msg(wt_now_ms() < end, "round 1's workers still registered");
        usleep(10000);
    }
    round_trip(&e, "2", recv_first);
    ck_assert_uint_eq(wt_ctl_count(&e, "transfers", "transfers"), 0);
    wt_stop(&e);
}

START_TEST(request_ids_prefill_restart_send_first_moves_the_new_bytes) { prefill_restart(0); }
END_TEST
START_TEST(request_ids_prefill_restart_recv_first_moves_the_new_bytes) { prefill_restart(1); }
END_TEST

/* A two-rank context instance: rank 1's SEND of request 1 waits (no reader yet) while rank 0
 * restarts and sends request 1 again: the old request is in flight, so the new SEND is refused
 * BAD_REQUEST, naming the id and the instance. Once rank 1's old SEND ended too, the same id
 * is a new request and moves. */
START_TEST(request_ids_send_reused_in_flight_is_bad_request_then_a_new_request_after)
{
    struct wenv e;
    wt_start(&e, LONG_DEADLINES);
    pid_t r1 = wt_sim(&e, "r1.log", "--role", "context", "--instance", "ctx", "--spec", "tiny:tp=2",
                      "--rank", "1", "--requests", "1", "--readers", "1", (char *)NULL);
    pid_t r0 = wt_sim(&e, "r0.log", "--role", "context", "--instance", "ctx", "--spec", "tiny:tp=2",
                      "--rank", "0", "--requests", "1", "--readers", "1", (char *)NULL);
    until_waiting(&e, "send", "ctx", 2);
    kill(r0, SIGKILL); /* its SEND ends with its connection; rank 1's stays in flight */
    wt_wait(r0, 5000);
    until_waiting(&e, "send", "ctx", 1);
    ck_assert_uint_eq(waiting(&e, "send", "ctx"), 1);
    pid_t n0 = wt_sim(&e, "n0.log", "--role", "context", "--instance", "ctx", "--spec", "tiny:tp=2",
                      "--rank", "0", "--requests", "1", "--readers", "1", "--expect-error",
                      "BAD_REQUEST", (char *)NULL);
    int rn0 = wt_wait(n0, 20000);
    char *l = wt_log(&e, "n0.log");
    ck_assert_msg(rn0 == 0, "reused SEND: exit %d:\n%s", rn0, l);
    ck_assert_msg(strstr(l, "request 1 of context instance ctx") && strstr(l, "in flight"), "%s", l);
    free(l);
    kill(r1, SIGKILL);
    wt_wait(r1, 5000);
    /* the old request ended: request 1 again is a new request, moved and checked */
    pid_t c = wt_sim(&e, "c.log", "--role", "context", "--instance", "ctx", "--spec", "tiny:tp=2",
                     "--all-ranks", "--requests", "1", "--readers", "1", "--seed", "3", (char *)NULL);
    pid_t g = wt_sim(&e, "g.log", "--role", "generation", "--instance", "gen", "--spec", "tiny",
                     "--rank", "0", "--requests", "1", "--ctx-instance", "ctx", "--seed", "3",
                     (char *)NULL);
    int rg = wt_wait(g, 30000), rc = wt_wait(c, 30000);
    l = wt_log(&e, "g.log");
    ck_assert_msg(rg == 0 && rc == 0 && strstr(l, "parity OK"), "gen %d ctx %d:\n%s", rg, rc, l);
    free(l);
    wt_stop(&e);
}
END_TEST

/* A second decode instance RECVs request 1 of the context instance while the first one's RECV
 * of it waits for the writers: the SEND named one reader, so the second RECV is an id reused in
 * flight, refused BAD_REQUEST at once (not a TIMEOUT at send_wait); the first one moves. */
START_TEST(request_ids_recv_beyond_the_readers_in_flight_is_bad_request)
{
    struct wenv e;
    wt_start(&e, LONG_DEADLINES);
    /* rank 0 sends request 1 now, rank 1 only later (it sends request 1 once gb was refused) */
    pid_t r0 = wt_sim(&e, "r0.log", "--role", "context", "--instance", "ctx", "--spec", "tiny:tp=2",
                      "--rank", "0", "--requests", "1", "--readers", "1", "--seed", "5",
                      (char *)NULL);
    until_waiting(&e, "send", "ctx", 1);
    pid_t r1 = wt_sim(&e, "r1.log", "--role", "context", "--instance", "ctx", "--spec", "tiny:tp=2",
                      "--rank", "1", "--requests", "1", "--readers", "1", "--seed", "5",
                      "--start-delay-ms", "20000", (char *)NULL);
    wt_until_listed(&e, 10000, "workers", "instances", "id", "ctx", "home", "true");
    pid_t ga = wt_sim(&e, "ga.log", "--role", "generation", "--instance", "ga", "--spec", "tiny",
                      "--rank", "0", "--requests", "1", "--ctx-instance", "ctx", "--seed", "5",
                      (char *)NULL);
    until_waiting(&e, "recv", "ga", 1);
    int64_t t0 = wt_now_ms();
    pid_t gb = wt_sim(&e, "gb.log", "--role", "generation", "--instance", "gb", "--spec", "tiny",
                      "--rank", "0", "--requests", "1", "--ctx-instance", "ctx", "--expect-error",
                      "BAD_REQUEST", (char *)NULL);
    int rgb = wt_wait(gb, 20000);
    int64_t dt = wt_now_ms() - t0;
    char *l = wt_log(&e, "gb.log");
    ck_assert_msg(rgb == 0, "second reader: exit %d:\n%s", rgb, l);
    ck_assert_msg(strstr(l, "request 1 of context instance ctx") && strstr(l, "reader"), "%s", l);
    ck_assert_msg(dt < 10000, "refused after %lld ms", (long long)dt);
    free(l);
    kill(r1, SIGKILL); /* the old rank 1 never sends: ga ends PEER_LOST, rank 0's SEND stays */
    wt_wait(r1, 5000);
    wt_wait(ga, 20000);
    kill(r0, SIGKILL);
    wt_wait(r0, 5000);
    wt_stop(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("request_ids");
    TCase *t = tcase_create("same_daemon");
    tcase_set_timeout(t, 90);
    tcase_add_test(t, request_ids_prefill_restart_send_first_moves_the_new_bytes);
    tcase_add_test(t, request_ids_prefill_restart_recv_first_moves_the_new_bytes);
    tcase_add_test(t, request_ids_send_reused_in_flight_is_bad_request_then_a_new_request_after);
    tcase_add_test(t, request_ids_recv_beyond_the_readers_in_flight_is_bad_request);
    suite_add_tcase(s, t);
    return tu_run(s);
}
