/* check_local_timeline.c: the same-daemon path's host timeline and its bounds after a template
 * hit, through a real kvferryd and real kvferry-sim workers. Every completed RECV is stamped
 * from the frame that completed its meeting to its DONE frame written, in order, on the host
 * clock the sims read too (a DONE is received after the copy ended); stats sums the spans of
 * exactly the requests done. A context rank that registers again with smaller pools (same
 * instance, same request shape) is a new template, bounds checked again: its requests land bit
 * for bit, never through the old template's offsets. */
#include <check.h>
#include <stdio.h>

#include "wtest.h"

#define SPEC "kimi-linear-48b"

/* A context and a generation sim of n requests; parity of every request checked. */
static void run_pair(struct wenv *e, const char *tag, const char *ctx_spec, const char *n)
{
    char cl[64], gl[64], cs[160], gs[160];
    snprintf(cl, sizeof cl, "%s-ctx.log", tag);
    snprintf(gl, sizeof gl, "%s-gen.log", tag);
    snprintf(cs, sizeof cs, "%s/%s-ctx", e->dir, tag);
    snprintf(gs, sizeof gs, "%s/%s-gen", e->dir, tag);
    pid_t c = wt_sim(e, cl, "--role", "context", "--instance", "c", "--spec", ctx_spec, "--rank",
                     "0", "--requests", n, "--prompt-tokens", "512", "--stats-json", cs,
                     (char *)NULL);
    pid_t g = wt_sim(e, gl, "--role", "generation", "--instance", "g", "--spec", SPEC, "--rank",
                     "0", "--requests", n, "--prompt-tokens", "512", "--ctx-instance", "c",
                     "--parity", "all", "--stats-json", gs, (char *)NULL);
    int rg = wt_wait(g, 120000), rc = wt_wait(c, 120000);
    char *l = wt_log(e, gl);
    ck_assert_msg(rg == 0 && rc == 0 && strstr(l, "parity OK"), "gen %d ctx %d:\n%s", rg, rc, l);
    free(l);
}

static uint64_t stamp(json_t *st, const char *k)
{
    json_t *v = json_object_get(st, k);
    ck_assert_msg(json_is_integer(v), "stamp %s missing", k);
    return (uint64_t)json_integer_value(v);
}

/* The sim's DONE receipt time of request q (CLOCK_MONOTONIC seconds). */
static double sim_done(json_t *sim, uint64_t q)
{
    json_t *req = json_object_get(sim, "req");
    for (size_t i = 0; i < json_array_size(req); i++)
        if ((uint64_t)json_integer_value(json_array_get(req, i)) == q) {
            double t0 = json_real_value(json_object_get(sim, "t0_s"));
            double iss = json_real_value(json_array_get(json_object_get(sim, "issue_s"), i));
            double sent = json_real_value(json_array_get(json_object_get(sim, "sent_s"), i));
            double done = json_real_value(json_array_get(json_object_get(sim, "done_s"), i));
            ck_assert(iss <= sent && sent <= done);
            return t0 + done;
        }
    ck_abort_msg("request %llu not in the sim's stats", (unsigned long long)q);
    return 0;
}

static bool no_workers(struct wenv *e, void *arg)
{
    (void)arg;
    return wt_ctl_count(e, "workers", "workers") == 0;
}

START_TEST(every_done_recv_is_stamped_in_order_on_the_sims_clock)
{
    struct wenv e;
    wt_start(&e, "transfers:\n  keep_finished: 10m\n");
    run_pair(&e, "a", SPEC, "4");
    json_t *st = wt_ctl(&e, "stats");
    json_t *lp = json_object_get(json_object_get(json_object_get(st, "workers"), "transfers"),
                                 "local_phase_s");
    ck_assert_int_eq(json_integer_value(json_object_get(
                         json_object_get(json_object_get(st, "workers"), "transfers"),
                         "local_phase_requests")), 4);
    double sum = 0;
    const char *parts[] = {"read", "decode", "admit", "plan", "check", "start", "run", "done"};
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++)
        sum += json_real_value(json_object_get(lp, parts[i]));
    double total = json_real_value(json_object_get(lp, "total"));
    ck_assert_msg(total > 0 && sum > total * 0.999 && sum < total * 1.001,
                  "spans %.9f do not add up to total %.9f", sum, total);
    json_decref(st);
    char path[128];
    snprintf(path, sizeof path, "%s/a-gen.r0.json", e.dir);
    json_t *sim = json_load_file(path, 0, NULL);
    ck_assert_ptr_nonnull(sim);
    json_t *x = wt_ctl(&e, "transfers"), *fin = json_object_get(x, "finished");
    int recvs = 0;
    const char *order[] = {"trig_read", "trig_frame", "trig_entry", "met", "planned", "checked",
                           "started", "copied", "written"};
    for (size_t i = 0; i < json_array_size(fin); i++) {
        json_t *r = json_array_get(fin, i), *ts = json_object_get(r, "stamps_ns");
        if (strcmp(json_string_value(json_object_get(r, "side")), "recv")) {
            ck_assert_ptr_null(ts); /* a SEND has no timeline */
            continue;
        }
        ck_assert_ptr_nonnull(ts);
        recvs++;
        ck_assert(stamp(ts, "read") <= stamp(ts, "frame"));
        ck_assert(stamp(ts, "frame") <= stamp(ts, "trig_frame"));
        for (size_t k = 1; k < sizeof order / sizeof *order; k++)
            ck_assert_msg(stamp(ts, order[k - 1]) <= stamp(ts, order[k]), "%s after %s",
                          order[k - 1], order[k]);
        uint64_t q = (uint64_t)json_integer_value(json_object_get(r, "req_id"));
        /* "written" is after the daemon's send returned: the sim may read the DONE first */
        ck_assert_msg(sim_done(sim, q) * 1e9 >= (double)stamp(ts, "copied"),
                      "request %llu: the sim had its DONE before the copy ended",
                      (unsigned long long)q);
    }
    ck_assert_int_eq(recvs, 4);
    json_decref(x);
    json_decref(sim);
    wt_stop(&e);
}
END_TEST

START_TEST(a_context_registered_again_with_smaller_pools_gets_its_own_checked_template)
{
    struct wenv e;
    wt_start(&e, NULL);
    run_pair(&e, "big", SPEC ":blocks=512", "3"); /* one miss, two hits: its template fits */
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_template_misses"), 1);
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_template_hits"), 2);
    wt_until(&e, 15000, no_workers, NULL);
    /* the same instances and request shape; the context's pools are smaller, so the first
     * template's offsets (its last blocks) would leave them: a new template, checked again */
    run_pair(&e, "small", SPEC ":blocks=64", "3");
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_template_misses"), 2);
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_template_hits"), 4);
    ck_assert_int_eq(wt_xfer_stat(&e, "done"), 6);
    wt_stop(&e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("local_timeline");
    TCase *tc = tcase_create("local");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, every_done_recv_is_stamped_in_order_on_the_sims_clock);
    tcase_add_test(tc, a_context_registered_again_with_smaller_pools_gets_its_own_checked_template);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
