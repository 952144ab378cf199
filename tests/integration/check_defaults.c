/* check_defaults.c: kvferryd with no config file at all (issue 2: the defaults must let an
 * unprivileged user run it). The real binary starts with no argument, as uid 65534 when the
 * test runs as root (else as the test's own user), and puts its control socket under
 * $XDG_RUNTIME_DIR/kvferry, or ./run without XDG_RUNTIME_DIR; it answers status, and SIGTERM
 * stops it with exit 0. */
#include <check.h>
#include <grp.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "daemon_harness.h"

#define NOBODY 65534

static void copy_file(const char *from, const char *to, mode_t mode)
{
    int in = open(from, O_RDONLY | O_CLOEXEC);
    ck_assert_int_ge(in, 0);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    ck_assert_int_ge(out, 0);
    char buf[1 << 16];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        ck_assert_int_eq(write(out, buf, (size_t)n), n);
    ck_assert_int_eq(n, 0);
    close(in);
    ck_assert_int_eq(fchmod(out, mode), 0);
    close(out);
}

/* Runs build/kvferryd with no arguments in h->dir (cwd), with XDG_RUNTIME_DIR = xdg (NULL:
 * unset), as NOBODY when root. */
static void spawn_bare(struct dh *h, const char *xdg)
{
    char rel[256], bin[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(tu_bin("kvferryd", rel, sizeof(rel)), bin));
    bool root = geteuid() == 0;
    tu_fmt(h->log, sizeof(h->log), "%s/kvferryd.log", h->dir);
    if (root) {
        ck_assert_int_eq(chmod(h->dir, 0777), 0);
        /* the checkout may sit where uid 65534 cannot reach (a CI clone under /root): run a
         * copy of the binary from the test's own directory */
        char copy[PATH_MAX];
        tu_fmt(copy, sizeof(copy), "%s/kvferryd", h->dir);
        copy_file(bin, copy, 0755);
        tu_fmt(bin, sizeof(bin), "%s", copy);
    }
    dh_notify_open(h);
    h->pid = fork();
    ck_assert_int_ge(h->pid, 0);
    if (h->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int fd = open(h->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0)
            dup2(fd, 2);
        if (chdir(h->dir) != 0)
            _exit(126);
        setenv("NOTIFY_SOCKET", h->notify_path, 1);
        unsetenv("WATCHDOG_USEC");
        if (xdg)
            setenv("XDG_RUNTIME_DIR", xdg, 1);
        else
            unsetenv("XDG_RUNTIME_DIR");
        if (root && (setgroups(0, NULL) || setgid(NOBODY) || setuid(NOBODY)))
            _exit(125);
        execl(bin, bin, (char *)NULL);
        _exit(127);
    }
}

/* spawn_bare, then waits for READY=1 (the socket file comes before it). */
static void start_bare(struct dh *h, const char *xdg)
{
    spawn_bare(h, xdg);
    ck_assert_msg(dh_wait_notify(h, "READY=1", 30000), "no READY=1 from kvferryd (see %s)", h->log);
}

static void check_served_and_stopped(struct dh *h, const char *sock_dir)
{
    struct stat st;
    ck_assert_int_eq(stat(h->sock, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0660);
    ck_assert_uint_eq(st.st_uid, geteuid() == 0 ? NOBODY : geteuid());
    ck_assert_int_eq(stat(sock_dir, &st), 0);
    ck_assert_uint_eq(st.st_mode & 0777, 0750);
    json_t *r = dh_call(h, "{\"id\":1,\"cmd\":\"status\"}"); /* root is always allowed */
    ck_assert_ptr_nonnull(r);
    ck_assert(json_is_true(json_object_get(r, "ok")));
    json_t *res = json_object_get(r, "result");
    ck_assert_int_eq(json_integer_value(json_object_get(res, "pid")), h->pid);
    json_decref(r);
    ck_assert_int_eq(dh_stop(h), 0);
    ck_assert_int_ne(access(h->sock, F_OK), 0);
}

START_TEST(defaults_without_xdg_runtime_dir_serve_under_dot_run)
{
    struct dh h = {.notify_fd = -1};
    tu_tmpdir(h.dir, sizeof(h.dir));
    char run[80];
    tu_fmt(run, sizeof(run), "%s/run", h.dir);
    tu_sock_path(h.sock, sizeof(h.sock), "%s/control.sock", run);
    start_bare(&h, NULL);
    check_served_and_stopped(&h, run);
    dh_cleanup(&h);
}
END_TEST

START_TEST(defaults_with_xdg_runtime_dir_serve_under_it)
{
    struct dh h = {.notify_fd = -1};
    tu_tmpdir(h.dir, sizeof(h.dir));
    char run[80];
    tu_fmt(run, sizeof(run), "%s/kvferry", h.dir);
    tu_sock_path(h.sock, sizeof(h.sock), "%s/control.sock", run);
    start_bare(&h, h.dir);
    check_served_and_stopped(&h, run);
    dh_cleanup(&h);
}
END_TEST

/* $XDG_RUNTIME_DIR/kvferry/control.sock of 107 bytes serves; of 108 the daemon does not start,
 * and says which path is too long and what the limit is (no config: sockpath_addr's check). */
START_TEST(defaults_under_a_long_xdg_runtime_dir_serve_at_107_bytes_and_refuse_108)
{
    const char *leaf = "/kvferry/control.sock";
    for (int len = 107; len <= 108; len++) {
        struct dh h = {.notify_fd = -1};
        tu_tmpdir(h.dir, sizeof(h.dir));
        char xdg[256], run[256], want[512];
        int pad = len - (int)strlen(leaf) - (int)strlen(h.dir) - 1;
        tu_fmt(xdg, sizeof(xdg), "%s/%0*d", h.dir, pad, 0);
        ck_assert_int_eq(mkdir(xdg, 0777), 0);
        ck_assert_int_eq(chmod(xdg, 0777), 0); /* NOBODY makes kvferry/ there */
        tu_fmt(run, sizeof(run), "%s/kvferry", xdg);
        if (len == 107) {
            tu_sock_path(h.sock, sizeof(h.sock), "%s/control.sock", run);
            start_bare(&h, xdg);
            check_served_and_stopped(&h, run);
        } else {
            spawn_bare(&h, xdg);
            ck_assert_int_eq(dh_wait_exit(&h, 30000), 1);
            char cmd[256], out[8192];
            dh_sh(tu_fmt(cmd, sizeof(cmd), "cat %s", h.log), out, sizeof(out));
            tu_fmt(want, sizeof(want),
                   "control socket path %s/control.sock is 108 bytes: a unix socket path holds at "
                   "most 107",
                   run);
            ck_assert_msg(strstr(out, want), "log lacks \"%s\":\n%s", want, out);
        }
        dh_cleanup(&h);
    }
}
END_TEST

static Suite *defaults_suite(void)
{
    Suite *s = suite_create("defaults");
    TCase *tc = tcase_create("no_config");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, defaults_without_xdg_runtime_dir_serve_under_dot_run);
    tcase_add_test(tc, defaults_with_xdg_runtime_dir_serve_under_it);
    tcase_add_test(tc, defaults_under_a_long_xdg_runtime_dir_serve_at_107_bytes_and_refuse_108);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(defaults_suite()); }
