/* check_metrics.c: the `metrics` command end to end: a real kvferryd on a private socket
 * directory, scraped through the real kvferryctl; every line of the scrape is checked against
 * the exposition grammar (promcheck.h), every stats value must appear as a sample, counters must
 * move, and promtool (from Debian's `prometheus`, see scripts/install-deps) checks the scrape too
 * (required in CI: KVF_REQUIRE_PROMTOOL=1). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "kvferry.h"
#include "layout.h"
#include "preset.h"
#include "promcheck.h"
#include "ready.h"
#include "testutil.h"

struct daemon_fx {
    char dir[64];
    char cfg[128], log[128];
    char sock[TU_SUN_PATH_MAX + 1], wsock[TU_SUN_PATH_MAX + 1]; /* control, worker */
    struct tr_notify ready;
    pid_t pid;
};

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void fx_start(struct daemon_fx *f)
{
    tu_tmpdir(f->dir, sizeof(f->dir));
    tu_fmt(f->cfg, sizeof(f->cfg), "%s/kvferry.yaml", f->dir);
    tu_sock_path(f->sock, sizeof(f->sock), "%s/control.sock", f->dir);
    tu_sock_path(f->wsock, sizeof(f->wsock), "%s/worker.sock", f->dir);
    tu_fmt(f->log, sizeof(f->log), "%s/kvferryd.log", f->dir);
    tr_open(&f->ready, f->dir);
    FILE *c = fopen(f->cfg, "w");
    ck_assert_ptr_nonnull(c);
    fprintf(c, "sockets:\n  dir: %s\n", f->dir);
    fclose(c);
    char bin[256];
    tu_bin("kvferryd", bin, sizeof(bin));
    f->pid = fork();
    ck_assert_int_ge(f->pid, 0);
    if (f->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed test never leaves a daemon behind */
        int fd = open(f->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        tr_child_env(&f->ready);
        execl(bin, "kvferryd", "--config", f->cfg, (char *)NULL);
        _exit(127);
    }
    /* READY=1, not the control socket's file: the worker socket comes after it */
    int up = tr_wait_ready(&f->ready, f->pid, 30000, NULL);
    ck_assert_msg(up != 0, "kvferryd exited at start (see %s)", f->log);
    ck_assert_msg(up == 1, "no READY=1 from kvferryd within 30 s (see %s)", f->log);
}

static void fx_stop(struct daemon_fx *f)
{
    ck_assert_int_eq(kill(f->pid, SIGTERM), 0);
    int status = 0;
    pid_t r = 0;
    for (int i = 0; i < 500 && (r = waitpid(f->pid, &status, WNOHANG)) == 0; i++)
        sleep_ms(10);
    if (r == 0) {
        kill(f->pid, SIGKILL);
        waitpid(f->pid, &status, 0);
        ck_abort_msg("kvferryd did not exit within 5 s of SIGTERM");
    }
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "kvferryd exit status %d", status);
    unlink(f->cfg);
    unlink(f->log);
    unlink(f->sock);
    unlink(f->wsock);
    tr_close(&f->ready);
    rmdir(f->dir);
}

/* Runs argv with `in` (may be NULL) on stdin; returns its exit code, stdout in *out (malloc'd). */
static int run(char *const argv[], const char *in, char **out)
{
    int po[2], pi[2];
    ck_assert_int_eq(pipe(po), 0);
    ck_assert_int_eq(pipe(pi), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        dup2(pi[0], 0);
        dup2(po[1], 1);
        close(pi[1]);
        close(po[0]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(pi[0]);
    close(po[1]);
    if (in) {
        size_t n = strlen(in), off = 0;
        signal(SIGPIPE, SIG_IGN);
        while (off < n) {
            ssize_t w = write(pi[1], in + off, n - off);
            if (w <= 0)
                break;
            off += (size_t)w;
        }
    }
    close(pi[1]);
    size_t cap = 65536, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 1 == cap)
            buf = realloc(buf, cap *= 2);
        ssize_t r = read(po[0], buf + len, cap - len - 1);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    close(po[0]);
    int status;
    waitpid(pid, &status, 0);
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int ctl(struct daemon_fx *f, const char *a1, const char *a2, char **out)
{
    char bin[256];
    tu_bin("kvferryctl", bin, sizeof(bin));
    char *argv[] = {bin, "--socket", f->sock, (char *)a1, (char *)a2, NULL};
    return run(argv, NULL, out);
}

#define sample pc_value

static size_t count_samples(const char *text)
{
    size_t n = 0;
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (*p != '#' && *p != '\n')
            n++;
    return n;
}

static size_t count_leaves(json_t *v)
{
    if (json_is_number(v) || json_is_boolean(v))
        return 1;
    json_t *le = json_object_get(v, "le");
    if (json_is_array(le)) /* a histogram: its buckets (and +Inf), _sum, _count */
        return json_array_size(le) + 3;
    size_t n = 0;
    const char *k;
    json_t *c;
    if (json_is_object(v))
        json_object_foreach(v, k, c) n += count_leaves(c);
    return n;
}

static void assert_valid(const char *text)
{
    char err[256] = "";
    int bad = pc_validate(text, true, err, sizeof(err));
    ck_assert_msg(bad == 0, "scrape is not valid exposition: %s\n%s", err, text);
}

START_TEST(scrape_through_kvferryctl_is_valid_and_carries_every_stats_value)
{
    struct daemon_fx f;
    fx_start(&f);
    char *text, *stats;
    ck_assert_int_eq(ctl(&f, "metrics", NULL, &text), 0);
    assert_valid(text);
    ck_assert_double_eq(sample(text, "kvferry_build_info{version=\"" KVF_VERSION "\"}"), 1);
    double up = sample(text, "kvferry_uptime_seconds");
    ck_assert(up >= 0 && up < 60);
    ck_assert_double_eq(sample(text, "kvferry_workers_transfers_failed_total{error=\"TIMEOUT\"}"),
                        0);
    ck_assert_double_eq(sample(text, "kvferry_control_connections_open"), 1);
    ck_assert_double_eq(sample(text, "kvferry_metrics_series_dropped"), 0);
    ck_assert_ptr_nonnull(strstr(text, "# TYPE kvferry_control_commands_total counter\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE kvferry_workers_transfers_in_flight gauge\n"));
    for (const char *p = text; *p; p = strchr(p, '\n') + 1) /* one namespace */
        ck_assert_msg(!strncmp(p, "kvferry_", 8) || !strncmp(p, "# HELP kvferry_", 15) ||
                          !strncmp(p, "# TYPE kvferry_", 15),
                      "foreign line: %.80s", p);

    /* every number of `stats` is one sample (plus build_info, uptime, undeclared,
     * series_dropped), nothing left undeclared */
    ck_assert_int_eq(ctl(&f, "--json", "stats", &stats), 0);
    json_t *sj = json_loads(stats, 0, NULL);
    ck_assert_ptr_nonnull(sj);
    ck_assert_uint_gt(count_leaves(sj), 20);
    ck_assert_double_eq(sample(text, "kvferry_metrics_undeclared"), 0);
    ck_assert_uint_eq(count_samples(text), count_leaves(sj) + 4);
    json_decref(sj);
    free(stats);
    free(text);
    fx_stop(&f);
}
END_TEST

START_TEST(counters_move_between_scrapes)
{
    struct daemon_fx f;
    fx_start(&f);
    char *a, *b, *junk;
    ck_assert_int_eq(ctl(&f, "metrics", NULL, &a), 0);
    ck_assert_int_eq(ctl(&f, "no-such-command", NULL, &junk), 1);
    free(junk);
    ck_assert_int_eq(ctl(&f, "metrics", NULL, &b), 0);
    assert_valid(a);
    assert_valid(b);
    ck_assert_double_eq(sample(a, "kvferry_control_errors_total"), 0);
    ck_assert_double_eq(sample(b, "kvferry_control_errors_total"), 1);
    ck_assert_double_eq(sample(b, "kvferry_control_commands_total") -
                            sample(a, "kvferry_control_commands_total"),
                        2);
    ck_assert_double_eq(sample(b, "kvferry_control_connections_accepted_total"), 3);
    ck_assert(sample(b, "kvferry_uptime_seconds") >= sample(a, "kvferry_uptime_seconds"));
    free(a);
    free(b);
    fx_stop(&f);
}
END_TEST

/* A real generation rank (libkvferry, preset "tiny", sealed memfd pools) asks for a request of
 * a context instance that never sends: the daemon fails it, and the failure shows up as a
 * label of the per-error counter, next to the other counters it moved. */
START_TEST(a_failed_transfer_shows_as_its_error_label)
{
    struct daemon_fx f;
    fx_start(&f);
    struct preset_spec spec;
    static struct layout rank;
    char err[256] = "";
    ck_assert_int_eq(preset_parse("tiny:blocks=16,slots=2", &spec, err, sizeof(err)), 0);
    ck_assert_int_eq(preset_build(&spec, "gen-m", ROLE_GENERATION, -1, &rank, err, sizeof(err)), 0);
    char *lj = layout_to_json(&rank);
    ck_assert_ptr_nonnull(lj);
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    memset(pools, 0, sizeof(pools));
    for (uint32_t i = 0; i < rank.n_pools; i++) {
        int fd = memfd_create("kvf-metrics", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ck_assert_int_ge(fd, 0);
        ck_assert_int_eq(ftruncate(fd, (off_t)rank.pools[i].bytes), 0);
        ck_assert_int_eq(fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK), 0);
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_HOST, .device = -1,
                                     .bytes = rank.pools[i].bytes, .fd = fd};
    }
    struct kvf_client *c = NULL;
    ck_assert_int_eq(kvf_connect(f.wsock, NULL, &c), 0);
    ck_assert_msg(kvf_register(c, lj, pools, rank.n_pools, err, sizeof(err)) == 0, "%s", err);
    uint32_t counts[LAYOUT_MAX_GROUPS], ids[LAYOUT_MAX_GROUPS];
    for (uint32_t g = 0; g < rank.n_groups; g++) {
        counts[g] = 1;
        ids[g] = 0;
    }
    struct kvf_recv_args ra = {.req_id = 42,
                               .ctx_instance = "ctx-that-never-sends",
                               .ctx_dp_rank = -1,
                               .deadline_ms = 100,
                               .n_groups = rank.n_groups,
                               .counts = counts,
                               .ids = ids};
    ck_assert_int_eq(kvf_recv(c, &ra), 0);
    struct kvf_event ev;
    ck_assert_int_eq(kvf_poll(c, &ev, 5000), 1);
    ck_assert_int_eq(ev.kind, KVF_EV_FAILED);
    ck_assert_uint_eq(ev.req_id, 42);

    char *text, series[128];
    ck_assert_int_eq(ctl(&f, "metrics", NULL, &text), 0);
    assert_valid(text);
    snprintf(series, sizeof(series), "kvferry_workers_transfers_failed_total{error=\"%s\"}",
             kvf_error_to_string((kvf_error_t)ev.error));
    ck_assert_double_eq(sample(text, series), 1);
    double failed = 0;
    for (int e = 1; e < KVF_E__COUNT; e++) {
        snprintf(series, sizeof(series), "kvferry_workers_transfers_failed_total{error=\"%s\"}",
                 kvf_error_to_string((kvf_error_t)e));
        failed += sample(text, series);
    }
    ck_assert_double_eq(failed, 1); /* every error label present, one failure in all */
    ck_assert_double_eq(sample(text, "kvferry_workers_transfers_recvs_total"), 1);
    ck_assert_double_eq(sample(text, "kvferry_workers_registered_total"), 1);
    ck_assert_double_eq(sample(text, "kvferry_workers_accepted_total"), 1);
    ck_assert_double_eq(sample(text, "kvferry_workers_transfers_in_flight"), 0);
    free(text);
    /* the failed request stays listed a while (transfers.keep_finished), with its outcome */
    char *xf;
    ck_assert_int_eq(ctl(&f, "--json", "transfers", &xf), 0);
    json_t *xj = json_loads(xf, 0, NULL);
    ck_assert_ptr_nonnull(xj);
    ck_assert_uint_eq(json_array_size(json_object_get(xj, "transfers")), 0);
    json_t *fin = json_array_get(json_object_get(xj, "finished"), 0);
    ck_assert_msg(fin != NULL, "no finished row: %s", xf);
    ck_assert_int_eq(json_integer_value(json_object_get(fin, "req_id")), 42);
    ck_assert_str_eq(json_string_value(json_object_get(fin, "state")), "failed");
    ck_assert_str_eq(json_string_value(json_object_get(fin, "outcome")),
                     kvf_error_to_string((kvf_error_t)ev.error));
    json_decref(xj);
    free(xf);
    ck_assert_int_eq(ctl(&f, "transfers", NULL, &xf), 0); /* the table says it too */
    ck_assert_msg(strstr(xf, "ended") && strstr(xf, kvf_error_to_string((kvf_error_t)ev.error)),
                  "%s", xf);
    free(xf);
    c = kvf_close(c);
    for (uint32_t i = 0; i < rank.n_pools; i++)
        close(pools[i].fd);
    free(lj);
    fx_stop(&f);
}
END_TEST

START_TEST(json_reply_carries_text_and_content_type)
{
    struct daemon_fx f;
    fx_start(&f);
    char *out;
    ck_assert_int_eq(ctl(&f, "--json", "metrics", &out), 0);
    json_t *r = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(r);
    const char *text = json_string_value(json_object_get(r, "text"));
    ck_assert_ptr_nonnull(text);
    assert_valid(text);
    ck_assert_str_eq(json_string_value(json_object_get(r, "content_type")),
                     "text/plain; version=0.0.4; charset=utf-8");
    ck_assert_int_eq(json_integer_value(json_object_get(r, "dropped")), 0);
    json_decref(r);
    free(out);
    fx_stop(&f);
}
END_TEST

START_TEST(promtool_accepts_the_scrape_when_installed)
{
    int have = pc_promtool();
    ck_assert_msg(have >= 0, "KVF_REQUIRE_PROMTOOL=1 but promtool is not on PATH "
                             "(scripts/install-deps installs it)");
    if (!have) {
        printf("SKIP promtool_accepts_the_scrape_when_installed: promtool not installed "
               "(scripts/install-deps puts the binary in /usr/local/bin); the built-in validator "
               "still ran\n");
        return;
    }
    struct daemon_fx f;
    fx_start(&f);
    char *text, *out;
    ck_assert_int_eq(ctl(&f, "metrics", NULL, &text), 0);
    char *argv[] = {"promtool", "check", "metrics", NULL};
    int rc = run(argv, text, &out);
    ck_assert_msg(rc == 0, "promtool check metrics: exit %d: %s", rc, out);
    free(out);
    free(text);
    fx_stop(&f);
}
END_TEST

static Suite *metrics_suite(void)
{
    Suite *s = suite_create("metrics");
    TCase *tc = tcase_create("scrape");
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, scrape_through_kvferryctl_is_valid_and_carries_every_stats_value);
    tcase_add_test(tc, counters_move_between_scrapes);
    tcase_add_test(tc, a_failed_transfer_shows_as_its_error_label);
    tcase_add_test(tc, json_reply_carries_text_and_content_type);
    tcase_add_test(tc, promtool_accepts_the_scrape_when_installed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(metrics_suite());
}
