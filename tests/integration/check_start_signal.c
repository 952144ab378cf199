/* check_start_signal.c: a stop signal that reaches kvferryd while it starts ends the start: the
 * daemon says STOPPING=1, never READY=1, and exits 0. (It used to announce READY=1 and stop
 * right after, unlinking its sockets: a supervisor or test trusting READY=1 then found no
 * worker socket, ENOENT, issue 16.) The signal is made pending before exec, so it is certain to
 * arrive during the start, whatever the machine's load. */
#include <check.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ready.h"
#include "testutil.h"

static void stop_signal_during_start(int sig)
{
    char top[64], cfg[128], log[128], bin[256], worker[TU_SUN_PATH_MAX + 1];
    tu_tmpdir(top, sizeof top);
    tu_fmt(cfg, sizeof cfg, "%s/kvferry.yaml", top);
    tu_fmt(log, sizeof log, "%s/log", top);
    tu_sock_path(worker, sizeof worker, "%s/worker.sock", top);
    tu_bin("kvferryd", bin, sizeof bin);
    FILE *f = fopen(cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "sockets:\n  dir: \"%s\"\nlog:\n  level: debug\n", top);
    fclose(f);
    struct tr_notify n;
    tr_open(&n, top);
    /* blocked across fork and exec: pending in the daemon from its first instruction */
    sigset_t s, old;
    sigemptyset(&s);
    sigaddset(&s, sig);
    ck_assert_int_eq(sigprocmask(SIG_BLOCK, &s, &old), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        tr_child_env(&n);
        execl(bin, bin, "--config", cfg, (char *)NULL);
        _exit(127);
    }
    ck_assert_int_eq(kill(pid, sig), 0);
    ck_assert_int_eq(sigprocmask(SIG_SETMASK, &old, NULL), 0);
    int st = -1;
    int up = tr_wait_ready(&n, pid, 30000, &st);
    if (up == 1) { /* the bug: READY=1, then the stop; reap it before failing */
        waitpid(pid, &st, 0);
        char cmd[160];
        ck_assert_int_eq(system(tu_fmt(cmd, sizeof cmd, "cat '%s' >&2", log)), 0);
    }
    ck_assert_msg(up == 0, "kvferryd said READY=1 though a stop signal came during its start");
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "exit status 0x%x", st);
    struct stat sb;
    ck_assert_msg(stat(worker, &sb) < 0, "the worker socket was left behind");
    tr_close(&n);
    char cmd[128];
    ck_assert_int_eq(system(tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", top)), 0);
}

START_TEST(sigterm_during_start_never_says_ready_and_exits_0) { stop_signal_during_start(SIGTERM); }
END_TEST

START_TEST(sigint_during_start_never_says_ready_and_exits_0) { stop_signal_during_start(SIGINT); }
END_TEST

int main(void)
{
    Suite *s = suite_create("start_signal");
    TCase *tc = tcase_create("start");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sigterm_during_start_never_says_ready_and_exits_0);
    tcase_add_test(tc, sigint_during_start_never_says_ready_and_exits_0);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
