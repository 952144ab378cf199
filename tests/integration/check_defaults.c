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

/* Starts build/kvferryd with no arguments in h->dir (cwd), with XDG_RUNTIME_DIR = xdg (NULL:
 * unset), as NOBODY when root. Waits for h->sock to appear. */
static void start_bare(struct dh *h, const char *xdg)
{
    char rel[256], bin[PATH_MAX];
    ck_assert_ptr_nonnull(realpath(tu_bin("kvferryd", rel, sizeof(rel)), bin));
    bool root = geteuid() == 0;
    snprintf(h->log, sizeof(h->log), "%s/kvferryd.log", h->dir);
    if (root)
        ck_assert_int_eq(chmod(h->dir, 0777), 0);
    h->pid = fork();
    ck_assert_int_ge(h->pid, 0);
    if (h->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int fd = open(h->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0)
            dup2(fd, 2);
        if (chdir(h->dir) != 0)
            _exit(126);
        unsetenv("NOTIFY_SOCKET");
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
    int64_t end = dh_now_ms() + 10000;
    while (access(h->sock, F_OK) != 0) {
        int st;
        ck_assert_msg(waitpid(h->pid, &st, WNOHANG) == 0, "kvferryd exited before its socket");
        ck_assert_msg(dh_now_ms() < end, "no socket %s", h->sock);
        usleep(20000);
    }
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
    snprintf(run, sizeof(run), "%s/run", h.dir);
    snprintf(h.sock, sizeof(h.sock), "%s/control.sock", run);
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
    snprintf(run, sizeof(run), "%s/kvferry", h.dir);
    snprintf(h.sock, sizeof(h.sock), "%s/control.sock", run);
    start_bare(&h, h.dir);
    check_served_and_stopped(&h, run);
    dh_cleanup(&h);
}
END_TEST

static Suite *defaults_suite(void)
{
    Suite *s = suite_create("defaults");
    TCase *tc = tcase_create("no_config");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, defaults_without_xdg_runtime_dir_serve_under_dot_run);
    tcase_add_test(tc, defaults_with_xdg_runtime_dir_serve_under_it);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(defaults_suite()); }
