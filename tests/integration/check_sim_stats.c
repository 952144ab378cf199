/* check_sim_stats.c: kvferry-sim's benchmark options (tools/kvferry-sim_stats.c), with a real
 * kvferryd and real sims on the local path: --stats-json writes one latency per completed
 * request and the workload's bytes; --parity first verifies exactly one request; --cpu-pids
 * samples the daemon's CPU time at the start and after every window; bad values (of these and
 * of the history options, --events, --cancel-pct, --event-wait-ms) are refused with exit 2
 * (4: a history file that cannot be opened) before anything runs. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wtest.h"

static json_t *load_stats(struct wenv *e, const char *name)
{
    char p[200];
    tu_fmt(p, sizeof p, "%s/%s.r0.json", e->dir, name);
    json_error_t err;
    json_t *j = json_load_file(p, 0, &err);
    ck_assert_msg(j != NULL, "%s: %s", p, err.text);
    return j;
}

START_TEST(sim_stats_json_has_a_latency_per_request_and_cpu_samples_per_window)
{
    struct wenv e;
    wt_start(&e, NULL);
    char pid[32], gprefix[128], cprefix[128];
    snprintf(pid, sizeof pid, "%d", (int)e.daemon);
    tu_fmt(gprefix, sizeof gprefix, "%s/gen", e.dir);
    tu_fmt(cprefix, sizeof cprefix, "%s/ctx", e.dir);
    /* slots=2: windows of 2 requests; 5 requests are 3 windows */
    pid_t c = wt_sim(&e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec",
                     "tiny:tp=1,slots=2", "--rank", "0", "--requests", "5", "--parity", "first",
                     "--stats-json", cprefix, (char *)NULL);
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec",
                     "tiny:tp=1,slots=2", "--rank", "0", "--requests", "5", "--ctx-instance", "ctx",
                     "--parity", "first", "--stats-json", gprefix, "--cpu-pids", pid, (char *)NULL);
    int gq = wt_wait(q, 30000), gc = wt_wait(c, 20000);
    char *gl = wt_log(&e, "gen.log");
    ck_assert_msg(gq == 0 && gc == 0, "generation %d context %d:\n%s", gq, gc, gl);
    ck_assert_msg(strstr(gl, "parity OK"), "%s", gl);
    free(gl);

    json_t *g = load_stats(&e, "gen");
    ck_assert_str_eq(json_string_value(json_object_get(g, "role")), "generation");
    ck_assert_int_eq(json_integer_value(json_object_get(g, "ok")), 5);
    ck_assert_int_eq(json_integer_value(json_object_get(g, "verified")), 1);
    ck_assert_int_gt(json_integer_value(json_object_get(g, "bytes")), 0);
    json_t *lat = json_object_get(g, "latency_recv_done");
    json_t *iss = json_object_get(g, "issue_s"), *done = json_object_get(g, "done_s");
    ck_assert_uint_eq(json_array_size(lat), 5);
    ck_assert_uint_eq(json_array_size(json_object_get(g, "req")), 5);
    double wall = json_real_value(json_object_get(g, "time_s"));
    for (size_t i = 0; i < 5; i++) {
        double l = json_real_value(json_array_get(lat, i));
        double a = json_real_value(json_array_get(iss, i)),
               b = json_real_value(json_array_get(done, i));
        ck_assert_msg(l > 0 && l <= wall, "latency %zu: %f of %f s", i, l, wall);
        ck_assert_msg(b >= a && b - a - l < 1e-6 && l - (b - a) < 1e-6, "%zu: %f %f %f", i, a, b,
                      l);
    }
    /* start + one sample per window, each after the requests so far */
    json_t *ticks = json_object_get(g, "cpu_ticks"),
           *after = json_object_get(g, "cpu_ticks_after_requests");
    ck_assert_uint_eq(json_array_size(ticks), 4);
    ck_assert_int_eq(json_integer_value(json_array_get(after, 0)), 0);
    ck_assert_int_eq(json_integer_value(json_array_get(after, 1)), 2);
    ck_assert_int_eq(json_integer_value(json_array_get(after, 3)), 5);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(g, "cpu_pids"), 0)),
                     e.daemon);
    long long t0 = json_integer_value(json_array_get(json_array_get(ticks, 0), 0));
    long long t3 = json_integer_value(json_array_get(json_array_get(ticks, 3), 0));
    ck_assert_int_ge(t3, t0);
    json_decref(g);

    json_t *cx = load_stats(&e, "ctx");
    ck_assert_str_eq(json_string_value(json_object_get(cx, "role")), "context");
    ck_assert_uint_eq(json_array_size(json_object_get(cx, "latency_send_sent")), 5);
    ck_assert_ptr_null(json_object_get(cx, "cpu_ticks"));
    json_decref(cx);
    wt_stop(&e);
}
END_TEST

static int sim_exit(struct wenv *e, const char *a, const char *b)
{
    pid_t p = wt_sim(e, "bad.log", "--role", "generation", "--instance", "gen", "--spec", "tiny",
                     "--rank", "0", "--ctx-instance", "ctx", a, b, (char *)NULL);
    return wt_wait(p, 10000);
}

START_TEST(sim_refuses_bad_bench_and_history_options)
{
    struct wenv e;
    wt_start(&e, NULL);
    ck_assert_int_eq(sim_exit(&e, "--parity", "some"), 2);
    ck_assert_int_eq(sim_exit(&e, "--cpu-pids", "1,2,3,4,5"), 2); /* at most 4 */
    ck_assert_int_eq(sim_exit(&e, "--cpu-pids", "0"), 2);
    ck_assert_int_eq(sim_exit(&e, "--cpu-pids", "12,x"), 2);
    ck_assert_int_eq(sim_exit(&e, "--cpu-pids", "4294967296"), 2);
    /* the chaos run's options (check_sim_events.c) */
    ck_assert_int_eq(sim_exit(&e, "--cancel-pct", "101"), 2);
    ck_assert_int_eq(sim_exit(&e, "--cancel-pct", "-1"), 2);
    ck_assert_int_eq(sim_exit(&e, "--event-wait-ms", "x"), 2);
    ck_assert_int_eq(sim_exit(&e, "--events", "/nonexistent-dir/h"), 4);
    /* nothing registered: every refusal happened before connecting */
    ck_assert_uint_eq(wt_ctl_count(&e, "workers", "workers"), 0);
    wt_stop(&e);
}
END_TEST

static Suite *sim_stats_suite(void)
{
    Suite *s = suite_create("sim_stats");
    TCase *t = tcase_create("bench options");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, sim_stats_json_has_a_latency_per_request_and_cpu_samples_per_window);
    tcase_add_test(t, sim_refuses_bad_bench_and_history_options);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(sim_stats_suite());
}
