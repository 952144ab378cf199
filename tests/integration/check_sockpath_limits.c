/* check_sockpath_limits.c: unix socket paths at their hard limit (sun_path: 108 bytes with the
 * NUL, so 107) and one byte past it, in every place that takes one: kvferryd's sockets.control,
 * sockets.worker and sockets.dir (the paths it derives), the library's kvf_connect (an explicit
 * path and KVFERRY_WORKER_SOCKET) and kvferryctl (--socket and --config). At the limit the real
 * daemon serves the real library and kvferryctl; one byte past, each refuses with an error that
 * names the path (or key) and the limit, never truncating the path to something else.
 * (The daemon's path under $XDG_RUNTIME_DIR, used without a config: check_defaults.) */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "kvferry.h"
#include "ready.h"
#include "testutil.h"

#define LIMIT ((int)TU_SUN_PATH_MAX) /* 107 */

struct fx {
    char top[64], cfg[128], log[128];
    struct tr_notify ready;
    pid_t pid;
};

/* <top>/<d...d>/<leaf>: exactly len bytes (mkdir of the padding directory when mk). */
static void path_of_len(const char *top, const char *leaf, int len, bool mk, char *buf, size_t blen)
{
    int pad = len - (int)strlen(top) - 2 - (int)strlen(leaf);
    ck_assert_int_gt(pad, 0);
    char dir[256];
    tu_fmt(dir, sizeof dir, "%s/%0*d", top, pad, 0);
    if (mk)
        ck_assert(mkdir(dir, 0700) == 0 || errno == EEXIST);
    tu_fmt(buf, blen, "%s/%s", dir, leaf);
    ck_assert_int_eq((int)strlen(buf), len);
}

static void fx_init(struct fx *f)
{
    memset(f, 0, sizeof *f);
    tu_tmpdir(f->top, sizeof f->top);
    tu_fmt(f->cfg, sizeof f->cfg, "%s/kvferry.yaml", f->top);
    tu_fmt(f->log, sizeof f->log, "%s/kvferryd.log", f->top);
}

/* Writes the config `yaml` and runs kvferryd on it (NOTIFY_SOCKET in top). */
static void fx_spawn(struct fx *f, const char *yaml)
{
    FILE *c = fopen(f->cfg, "w");
    ck_assert_ptr_nonnull(c);
    fputs(yaml, c);
    ck_assert_int_eq(fclose(c), 0);
    tr_open(&f->ready, f->top);
    char bin[256];
    tu_bin("kvferryd", bin, sizeof bin);
    f->pid = fork();
    ck_assert_int_ge(f->pid, 0);
    if (f->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int fd = open(f->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0)
            dup2(fd, 2);
        tr_child_env(&f->ready);
        execl(bin, bin, "--config", f->cfg, (char *)NULL);
        _exit(127);
    }
}

static char *slurp(const char *path)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    return buf;
}

static void fx_serve(struct fx *f, const char *yaml)
{
    fx_spawn(f, yaml);
    int up = tr_wait_ready(&f->ready, f->pid, 30000, NULL);
    ck_assert_msg(up == 1, "kvferryd did not start (%d):\n%s", up, slurp(f->log));
}

/* The daemon refuses to start: exit 1, and its log says want. */
static void fx_refused(struct fx *f, const char *yaml, const char *want)
{
    fx_spawn(f, yaml);
    int st = 0;
    int up = tr_wait_ready(&f->ready, f->pid, 30000, &st);
    ck_assert_msg(up == 0, "kvferryd started with: %s", yaml);
    f->pid = 0;
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 1, "exit status %d", st);
    const char *log = slurp(f->log);
    ck_assert_msg(strstr(log, want), "log lacks \"%s\":\n%s", want, log);
    tr_close(&f->ready);
}

static void fx_done(struct fx *f)
{
    if (f->pid > 0) {
        ck_assert_int_eq(kill(f->pid, SIGTERM), 0);
        int st;
        ck_assert_int_eq(waitpid(f->pid, &st, 0), f->pid);
        ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kvferryd exit status %d", st);
        f->pid = 0;
    }
    tr_close(&f->ready);
    char cmd[128];
    ck_assert_int_eq(system(tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", f->top)), 0);
}

/* kvferryctl ARGS status: its exit code, stderr+stdout in out. */
static int ctl(const char *args, char *out, size_t len)
{
    char bin[256], cmd[1024];
    tu_fmt(cmd, sizeof cmd, "%s %s status 2>&1", tu_bin("kvferryctl", bin, sizeof bin), args);
    return tu_sh(cmd, out, len);
}

/* The library connects (HELLO and its answer) to path; NULL: its default (the environment). */
static void library_connects(const char *path)
{
    struct kvf_client *c = NULL;
    struct kvf_options o = {.no_reconnect = 1, .connect_timeout_ms = 10000};
    int rc = kvf_connect(path, &o, &c);
    ck_assert_msg(rc == 0, "kvf_connect(%s): %s", path ? path : "default", strerror(-rc));
    kvf_close(c);
}

START_TEST(explicit_socket_paths_of_107_bytes_serve_the_library_and_kvferryctl)
{
    struct fx f;
    fx_init(&f);
    char ctl_path[256], wrk_path[256], yaml[1024], args[512], out[4096];
    path_of_len(f.top, "c.sock", LIMIT, false, ctl_path, sizeof ctl_path);
    path_of_len(f.top, "w.sock", LIMIT, false, wrk_path, sizeof wrk_path);
    tu_fmt(yaml, sizeof yaml, "sockets:\n  control: \"%s\"\n  worker: \"%s\"\n", ctl_path,
           wrk_path);
    fx_serve(&f, yaml); /* it makes the padding directory itself */
    library_connects(wrk_path);
    ck_assert_int_eq(setenv("KVFERRY_WORKER_SOCKET", wrk_path, 1), 0);
    library_connects(NULL);
    unsetenv("KVFERRY_WORKER_SOCKET");
    ck_assert_msg(ctl(tu_fmt(args, sizeof args, "--socket %s", ctl_path), out, sizeof out) == 0,
                  "%s", out);
    ck_assert_msg(ctl(tu_fmt(args, sizeof args, "--config %s", f.cfg), out, sizeof out) == 0, "%s",
                  out);
    fx_done(&f);
}
END_TEST

START_TEST(sockets_dir_at_its_maximum_derives_paths_that_serve)
{
    struct fx f;
    fx_init(&f);
    /* <dir>/control.sock is the longer leaf (13 bytes with its '/'): it reaches 107 */
    char dir[256], yaml[512], wrk[256], args[512], out[4096];
    path_of_len(f.top, "s", LIMIT - 13, false, dir, sizeof dir);
    tu_fmt(yaml, sizeof yaml, "sockets:\n  dir: \"%s\"\n", dir);
    fx_serve(&f, yaml);
    char ctl_path[256];
    ck_assert_int_eq((int)strlen(tu_fmt(ctl_path, sizeof ctl_path, "%s/control.sock", dir)), LIMIT);
    library_connects(tu_fmt(wrk, sizeof wrk, "%s/worker.sock", dir));
    ck_assert_msg(ctl(tu_fmt(args, sizeof args, "--config %s", f.cfg), out, sizeof out) == 0, "%s",
                  out);
    ck_assert_msg(ctl(tu_fmt(args, sizeof args, "--socket %s", ctl_path), out, sizeof out) == 0,
                  "%s", out);
    fx_done(&f);
}
END_TEST

START_TEST(daemon_refuses_socket_paths_one_byte_past_the_limit_naming_key_and_limit)
{
    struct fx f;
    fx_init(&f);
    char p[256], yaml[512];
    const char *keys[] = {"control", "worker"};
    for (int i = 0; i < 2; i++) {
        path_of_len(f.top, "x.sock", LIMIT + 1, false, p, sizeof p);
        tu_fmt(yaml, sizeof yaml, "sockets:\n  %s: \"%s\"\n", keys[i], p);
        char want[128];
        tu_fmt(want, sizeof want, "sockets.%s: 108 characters is above the maximum 107", keys[i]);
        fx_refused(&f, yaml, want);
    }
    path_of_len(f.top, "s", LIMIT - 12, false, p, sizeof p); /* control.sock would be 108 */
    tu_fmt(yaml, sizeof yaml, "sockets:\n  dir: \"%s\"\n", p);
    fx_refused(&f, yaml, "sockets.dir: 95 characters is above the maximum 94");
    fx_done(&f);
}
END_TEST

START_TEST(library_and_kvferryctl_refuse_paths_one_byte_past_the_limit)
{
    char top[64], p[256], args[512], out[4096];
    tu_tmpdir(top, sizeof top);
    path_of_len(top, "x.sock", LIMIT + 1, true, p, sizeof p);
    struct kvf_client *c = NULL;
    struct kvf_options o = {.no_reconnect = 1, .connect_timeout_ms = 2000};
    ck_assert_int_eq(kvf_connect(p, &o, &c), -ENAMETOOLONG);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(setenv("KVFERRY_WORKER_SOCKET", p, 1), 0);
    ck_assert_int_eq(kvf_connect(NULL, &o, &c), -ENAMETOOLONG); /* not a truncated default */
    unsetenv("KVFERRY_WORKER_SOCKET");
    ck_assert_int_eq(ctl(tu_fmt(args, sizeof args, "--socket %s", p), out, sizeof out), 3);
    char want[512];
    tu_fmt(want, sizeof want,
           "control socket path %s is 108 bytes: a unix socket path holds at most 107", p);
    ck_assert_msg(strstr(out, want), "kvferryctl said: %s", out);
    char cmd[128];
    ck_assert_int_eq(system(tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", top)), 0);
}
END_TEST

static Suite *limits_suite(void)
{
    Suite *s = suite_create("sockpath_limits");
    TCase *tc = tcase_create("limits");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, explicit_socket_paths_of_107_bytes_serve_the_library_and_kvferryctl);
    tcase_add_test(tc, sockets_dir_at_its_maximum_derives_paths_that_serve);
    tcase_add_test(tc, daemon_refuses_socket_paths_one_byte_past_the_limit_naming_key_and_limit);
    tcase_add_test(tc, library_and_kvferryctl_refuse_paths_one_byte_past_the_limit);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    return tu_run(limits_suite());
}
