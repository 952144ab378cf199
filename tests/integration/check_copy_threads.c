/* check_copy_threads.c: the same-daemon path on the copy threads (daemon/copyeng.h) with real
 * kvferry-sim workers: copies run off the loop, split over the threads, and land bitwise
 * right; a context or a generation worker killed (SIGKILL) while its split copies run, or while
 * the daemon still maps its pools in after REGISTER (wprefault.c), leaves the daemon up,
 * serving others, with no copy, prefault, pin or deferred unmap left behind. */
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

static long long section_int(struct wenv *e, const char *cmd, const char *sec, const char *key)
{
    json_t *s = wt_ctl(e, cmd);
    long long v = json_integer_value(json_object_get(json_object_get(s, sec), key));
    json_decref(s);
    return v;
}

static long long copy_int(struct wenv *e, const char *key)
{
    return section_int(e, "status", "copy", key);
}

static long long prefault_int(struct wenv *e, const char *key)
{
    return section_int(e, "stats", "workers", key);
}

static bool all_released(struct wenv *e, void *arg)
{
    (void)arg;
    return !copy_int(e, "running_jobs") && !copy_int(e, "pinned_mappings") &&
           !prefault_int(e, "prefaulting") && !copy_int(e, "deferred_unmaps") &&
           !copy_int(e, "unmaps_pending") &&
           !wt_ctl_count(e, "transfers", "transfers") && !wt_ctl_count(e, "workers", "workers");
}

static bool no_workers(struct wenv *e, void *arg)
{
    (void)arg;
    return wt_ctl_count(e, "workers", "workers") == 0;
}

/* stats.workers.prefaults has moved past *(long long *)arg (left there: its new value) */
static bool prefault_started(struct wenv *e, void *arg)
{
    long long *v = arg, before = *v;
    return (*v = prefault_int(e, "prefaults")) != before;
}

/* Waits until every copy, pin, deferred and pending unmap is gone and no request or worker is
 * left. */
static void assert_all_released(struct wenv *e)
{
    wt_until(e, 15000, all_released, NULL);
    ck_assert_int_eq(copy_int(e, "running_jobs"), 0);
    ck_assert_int_eq(prefault_int(e, "prefaulting"), 0);
    ck_assert_int_eq(copy_int(e, "pinned_mappings"), 0);
    ck_assert_int_eq(copy_int(e, "deferred_unmaps"), 0);
    ck_assert_int_eq(copy_int(e, "unmaps_pending"), 0); /* every mapping let go is unmapped */
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
    ck_assert_int_gt(copy_int(e, "pieces_total"), copy_int(e, "jobs_total")); /* split */
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

/* A worker killed while the daemon still maps its pools in (one copy thread). The daemon is
 * stopped (SIGSTOP) the moment REGISTER has started the prefault, the worker killed, the daemon
 * resumed: its loop sees the close while the prefault still runs (a few attempts, in case a
 * very fast machine ended it first). The prefault is cancelled, the pools unmapped once its
 * running piece ended, and the daemon goes on serving, bitwise right. */
START_TEST(copy_threads_worker_killed_mid_prefault_leaves_the_daemon_serving)
{
    struct wenv e;
    wt_start(&e, cfg(1));
    for (int attempt = 0; attempt < 5 && prefault_int(&e, "prefaults_cancelled") == 0; attempt++) {
        long long started = prefault_int(&e, "prefaults");
        char log[32];
        snprintf(log, sizeof log, "late%d.log", attempt);
        pid_t p = wt_sim(&e, log, "--role", "context", "--instance", "late", "--spec", SPEC,
                         "--rank", "0", "--requests", "1", "--prompt-tokens", TOKENS, (char *)NULL);
        long long now = started;
        wt_until(&e, 60000, prefault_started, &now);
        kill(e.daemon, SIGSTOP);
        ck_assert_int_gt(now, started); /* registered: its prefault was submitted */
        kill(p, SIGKILL);
        wt_wait(p, 5000);
        kill(e.daemon, SIGCONT);
        wt_until(&e, 60000, no_workers, NULL);
        fprintf(stderr, "attempt %d: worker killed; prefaults cancelled %lld, done %lld\n",
                attempt, prefault_int(&e, "prefaults_cancelled"),
                prefault_int(&e, "prefaults_done"));
    }
    ck_assert_int_ge(prefault_int(&e, "prefaults_cancelled"), 1);
    ck_assert_int_eq(kill(e.daemon, 0), 0);
    assert_all_released(&e);
    pid_t c, g;
    pair(&e, "after", 2, &c, &g); /* served, bitwise right, prefaulted meanwhile */
    int rg = wt_wait(g, 120000), rc = wt_wait(c, 120000);
    char *l = wt_log(&e, "after-gen.log");
    ck_assert_msg(rg == 0 && rc == 0 && strstr(l, "parity OK"), "gen %d ctx %d:\n%s", rg, rc, l);
    free(l);
    assert_all_released(&e);
    ck_assert_int_ge(prefault_int(&e, "prefaults"), 3); /* the pair's too (ended or cancelled) */
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
    tcase_add_test(tc, copy_threads_worker_killed_mid_prefault_leaves_the_daemon_serving);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
