/* check_copy_threads.c: the same-daemon path on the copy threads (daemon/copyeng.h) with real
 * kvferry-sim workers: copies run off the loop and land bitwise right; a context or a
 * generation worker killed (SIGKILL) while its copies run leaves the daemon up, serving
 * others, with no copy, pin or deferred unmap left behind. */
#include <check.h>

#include "wtest.h"

/* threads copy threads; 5 s deadlines (scaled: the sims fill 48 MB patterns slowly under TSan) */
static const char *cfg(int threads)
{
    static char b[128];
    return tu_fmt(b, sizeof b,
                  "copy:\n  threads: %d\ndeadlines:\n  send_wait: %ums\n  transfer: %ums\n",
                  threads, tu_ms(5000), tu_ms(5000));
}
#define SPEC "kimi-linear-48b" /* small enough for TSan builds (shadow memory) */
#define TOKENS "512" /* 48 MB a request: ms of copy each, all on the copy threads */

static long long copy_int(struct wenv *e, const char *key)
{
    json_t *s = wt_ctl(e, "status");
    long long v = json_integer_value(json_object_get(json_object_get(s, "copy"), key));
    json_decref(s);
    return v;
}

/* Waits until every copy, pin and deferred unmap is gone and no request or worker is left. */
static void assert_all_released(struct wenv *e)
{
    int64_t until = wt_now_ms() + tu_ms(15000);
    while (wt_now_ms() < until &&
           (copy_int(e, "running_jobs") || copy_int(e, "pinned_mappings") ||
            copy_int(e, "deferred_unmaps") || wt_ctl_count(e, "transfers", "transfers") ||
            wt_ctl_count(e, "workers", "workers")))
        usleep(20000);
    ck_assert_int_eq(copy_int(e, "running_jobs"), 0);
    ck_assert_int_eq(copy_int(e, "pinned_mappings"), 0);
    ck_assert_int_eq(copy_int(e, "deferred_unmaps"), 0);
    ck_assert_uint_eq(wt_ctl_count(e, "transfers", "transfers"), 0);
    ck_assert_uint_eq(wt_ctl_count(e, "workers", "workers"), 0);
}

/* A context and a generation sim of `n` requests each; parity checked by the generation. */
static void pair(struct wenv *e, const char *tag, int n, pid_t *ctx, pid_t *gen)
{
    char cl[64], gl[64], ci[32], gi[32], nr[16];
    snprintf(cl, sizeof cl, "%s-ctx.log", tag);
    snprintf(gl, sizeof gl, "%s-gen.log", tag);
    snprintf(ci, sizeof ci, "%s-c", tag);
    snprintf(gi, sizeof gi, "%s-g", tag);
    snprintf(nr, sizeof nr, "%d", n);
    *ctx = wt_sim(e, cl, "--role", "context", "--instance", ci, "--spec", SPEC, "--rank", "0",
                  "--requests", nr, "--prompt-tokens", TOKENS, (char *)NULL);
    *gen = wt_sim(e, gl, "--role", "generation", "--instance", gi, "--spec", SPEC, "--rank", "0",
                  "--requests", nr, "--prompt-tokens", TOKENS, "--ctx-instance", ci,
                  "--parity", "all", (char *)NULL);
}

/* Kills `victim` as soon as a copy is running, then checks everything is released. */
static void kill_mid_copy(struct wenv *e, pid_t victim, pid_t other, const char *who)
{
    long long jobs0 = copy_int(e, "jobs_total");
    int64_t until = wt_now_ms() + tu_ms(120000);
    while (wt_now_ms() < until && copy_int(e, "running_jobs") == 0)
        usleep(1000);
    ck_assert_msg(copy_int(e, "running_jobs") > 0, "no copy ever ran on the copy threads");
    kill(victim, SIGKILL);
    wt_wait(victim, 5000);
    long long deferred = copy_int(e, "deferred_unmaps"), cancelled = copy_int(e, "cancelled_total");
    fprintf(stderr, "%s killed after %lld copy job(s); then %lld unmap(s) deferred behind a "
            "running copy, %lld copy job(s) cancelled in all\n", who, jobs0, deferred, cancelled);
    kill(other, SIGKILL); /* its requests would wait for their deadlines */
    wt_wait(other, 5000);
    ck_assert_int_eq(kill(e->daemon, 0), 0); /* the daemon is up, and answers (wt_ctl) */
    assert_all_released(e);
}

START_TEST(copy_threads_move_requests_off_the_loop_bitwise_right)
{
    struct wenv e;
    wt_start(&e, cfg(2));
    pid_t c, g;
    pair(&e, "ok", 4, &c, &g);
    int rg = wt_wait(g, 120000), rc = wt_wait(c, 120000);
    char *l = wt_log(&e, "ok-gen.log");
    ck_assert_msg(rg == 0 && rc == 0 && strstr(l, "parity OK"), "gen %d ctx %d:\n%s", rg, rc, l);
    free(l);
    ck_assert_int_eq(copy_int(&e, "threads"), 2);
    ck_assert_int_ge(copy_int(&e, "jobs_total"), 4);
    ck_assert_int_gt(copy_int(&e, "pieces_total"), copy_int(&e, "jobs_total")); /* split */
    assert_all_released(&e);
    wt_stop(&e);
}
END_TEST

START_TEST(copy_threads_worker_killed_mid_copy_leaves_the_daemon_serving)
{
    struct wenv e;
    wt_start(&e, cfg(1)); /* one copy thread: a kill lands in a copy more often */
    pid_t c, g;
    pair(&e, "a", 200, &c, &g);
    kill_mid_copy(&e, c, g, "context worker (copy source)");
    pair(&e, "b", 200, &c, &g);
    kill_mid_copy(&e, g, c, "generation worker (copy destination)");
    pair(&e, "after", 2, &c, &g); /* everyone else is still served */
    int rg = wt_wait(g, 120000), rc = wt_wait(c, 120000);
    char *l = wt_log(&e, "after-gen.log");
    ck_assert_msg(rg == 0 && rc == 0 && strstr(l, "parity OK"), "gen %d ctx %d:\n%s", rg, rc, l);
    free(l);
    assert_all_released(&e);
    wt_stop(&e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("copy_threads");
    TCase *tc = tcase_create("local");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, copy_threads_move_requests_off_the_loop_bitwise_right);
    tcase_add_test(tc, copy_threads_worker_killed_mid_copy_leaves_the_daemon_serving);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
