/* check_logsink.c: the daemon's log writer thread (daemon/base/logsink.h). Lines reach stderr in
 * order; with stderr a pipe nobody reads, logging never blocks the caller: the queue fills to
 * its bound, later lines are dropped and counted, and once the pipe is read again the writer
 * says how many were dropped; a stop with the output still blocked returns within its drain
 * time. Under systemd (stderr the journal's stream) entries go to journald's socket through
 * sd_journal_sendv with the request's fields: tested in a private mount namespace whose
 * /run/systemd/journal/socket is the test's own (skipped, saying why, where that cannot be made). */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "log.h"
#include "logsink.h"
#include "monotonic.h"
#include "testutil.h"

START_TEST(lines_reach_stderr_in_order_through_the_thread)
{
    char dir[64], path[100];
    tu_tmpdir(dir, sizeof dir);
    tu_fmt(path, sizeof path, "%s/stderr", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    dup2(fd, 2);
    close(fd);
    unsetenv("JOURNAL_STREAM");
    ck_assert_int_eq(logsink_start(), 0);
    for (int i = 0; i < 1000; i++)
        log_warn("line %d", i);
    logsink_stop(tu_ms(10000));
    struct logsink_stats st;
    logsink_get_stats(&st);
    ck_assert_uint_eq(st.written, 1000);
    ck_assert_uint_eq(st.dropped, 0);
    FILE *f = fopen(path, "r");
    char line[256];
    int next = 0;
    while (fgets(line, sizeof line, f)) {
        char want[32];
        snprintf(want, sizeof want, "warn: line %d\n", next);
        ck_assert_msg(strstr(line, want), "line %d: %s", next, line);
        next++;
    }
    fclose(f);
    ck_assert_int_eq(next, 1000);
}
END_TEST

START_TEST(a_blocked_output_never_blocks_the_logger_and_drops_are_reported)
{
    int p[2];
    ck_assert_int_eq(pipe2(p, O_CLOEXEC), 0);
    signal(SIGPIPE, SIG_IGN); /* as the daemon: the writer meets the closed pipe at the end */
    dup2(p[1], 2);
    close(p[1]);
    unsetenv("JOURNAL_STREAM");
    ck_assert_int_eq(logsink_start(), 0);
    char pad[200];
    memset(pad, 'x', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    /* a 64 KiB pipe and a 256 KiB queue hold about 1500 of these: 20000 would block for good */
    int64_t t0 = mono_now_ms();
    for (int i = 0; i < 20000; i++)
        log_info("line %d %s", i, pad);
    int64_t took = mono_now_ms() - t0;
    struct logsink_stats st;
    logsink_get_stats(&st);
    ck_assert_uint_gt(st.dropped, 10000);
    ck_assert_uint_le(st.queued_bytes, LOGSINK_MAX_BYTES);
    ck_assert_msg(took < (int64_t)tu_ms(5000), "20000 log calls took %lld ms", (long long)took);
    /* stop while blocked: returns after its drain time, the thread stays stuck */
    t0 = mono_now_ms();
    logsink_stop(200);
    ck_assert_int_lt(mono_now_ms() - t0, tu_ms(3000));
    log_warn("after the stop: queued or dropped, never written here");
    /* read again: everything queued comes out, then the count of what was dropped */
    char buf[65536];
    size_t have = 0;
    char *rep = NULL;
    for (int64_t end = mono_now_ms() + tu_ms(10000); !rep && mono_now_ms() < end;) {
        ssize_t n = read(p[0], buf + have, sizeof buf - 1 - have);
        ck_assert_int_gt(n, 0);
        have += (size_t)n;
        buf[have] = '\0';
        rep = strstr(buf, "line(s) dropped: the log output was blocked");
        if (!rep && have > sizeof buf / 2) { /* keep the tail only */
            memmove(buf, buf + have - 1024, 1024);
            have = 1024;
        }
    }
    ck_assert_msg(rep != NULL, "no drop report");
    while (rep > buf && rep[-1] != ':') /* "warn: log: N line(s)" */
        rep--;
    unsigned long long reported = strtoull(rep + 1, NULL, 10);
    logsink_get_stats(&st);
    ck_assert_uint_ge(reported, 1); /* the first report (drops go on while it is written) */
    ck_assert_uint_le(reported, st.dropped);
    close(p[0]);
}
END_TEST

/* The value of field key in a native-protocol datagram ("KEY=value\n" fields), or NULL. */
static const char *field(const char *d, size_t n, const char *key, char *buf, size_t len)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(d + i, '\n', n - i);
        if (!nl)
            return NULL;
        if ((size_t)(nl - d - i) > kl && !memcmp(d + i, key, kl) && d[i + kl] == '=') {
            snprintf(buf, len, "%.*s", (int)(nl - d - i - kl - 1), d + i + kl + 1);
            return buf;
        }
        i = (size_t)(nl - d) + 1;
    }
    return NULL;
}

/* Child: a private /run with the test's journal socket; exit 0 ok, 77 cannot make it. */
static int journal_child(const char *errfile)
{
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("tmpfs", "/run", "tmpfs", 0, "size=1m") < 0 || mkdir("/run/systemd", 0755) < 0 ||
        mkdir("/run/systemd/journal", 0755) < 0)
        return 77;
    int j = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = tu_sun("/run/systemd/journal/socket");
    if (bind(j, (struct sockaddr *)&sa, sizeof sa) < 0)
        return 77;
    int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    close(fd);
    struct stat st;
    fstat(2, &st);
    char js[64];
    snprintf(js, sizeof js, "%lu:%lu", (unsigned long)st.st_dev, (unsigned long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    log_set_tag("kvftest");
    ck_assert_int_eq(logsink_start(), 0);
    log_req(LOG_LVL_INFO, 42, "10.0.0.2:40123", "ctx0", "engine: request %d failed", 42);
    log_error("config: two errors");
    logsink_stop(tu_ms(10000));
    char d[4096], v[256];
    ssize_t n = recv(j, d, sizeof d, MSG_DONTWAIT);
    ck_assert_int_gt(n, 0);
    ck_assert_str_eq(field(d, (size_t)n, "MESSAGE", v, sizeof v), "engine: request 42 failed");
    ck_assert_str_eq(field(d, (size_t)n, "PRIORITY", v, sizeof v), "6");
    ck_assert_str_eq(field(d, (size_t)n, "SYSLOG_IDENTIFIER", v, sizeof v), "kvftest");
    ck_assert_str_eq(field(d, (size_t)n, "REQ_ID", v, sizeof v), "42");
    ck_assert_str_eq(field(d, (size_t)n, "PEER", v, sizeof v), "10.0.0.2:40123");
    ck_assert_str_eq(field(d, (size_t)n, "INSTANCE", v, sizeof v), "ctx0");
    n = recv(j, d, sizeof d, MSG_DONTWAIT);
    ck_assert_int_gt(n, 0);
    ck_assert_str_eq(field(d, (size_t)n, "MESSAGE", v, sizeof v), "config: two errors");
    ck_assert_str_eq(field(d, (size_t)n, "PRIORITY", v, sizeof v), "3");
    ck_assert_ptr_null(field(d, (size_t)n, "REQ_ID", v, sizeof v));
    /* journald not listening (its socket refuses): the line reaches the stream, with its
     * priority (sd_journal_sendv itself drops entries silently when the socket file is gone) */
    close(j);
    ck_assert_int_eq(logsink_start(), 0);
    log_warn("after");
    logsink_stop(tu_ms(10000));
    FILE *f = fopen(errfile, "r");
    char out[256] = "";
    ck_assert_ptr_nonnull(fgets(out, sizeof out, f));
    fclose(f);
    ck_assert_str_eq(out, "<4>after\n");
    return 0;
}

START_TEST(under_systemd_entries_go_to_the_journal_by_sd_journal_sendv)
{
    char dir[64], errfile[100];
    tu_tmpdir(dir, sizeof dir);
    tu_fmt(errfile, sizeof errfile, "%s/stderr", dir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(journal_child(errfile));
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFEXITED(st));
    if (WEXITSTATUS(st) == 77) {
        fprintf(stderr, "skipped: no private mount namespace here (needs root) for a journal "
                        "socket at /run/systemd/journal/socket\n");
        return;
    }
    ck_assert_int_eq(WEXITSTATUS(st), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("logsink");
    TCase *t = tcase_create("logsink");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, lines_reach_stderr_in_order_through_the_thread);
    tcase_add_test(t, a_blocked_output_never_blocks_the_logger_and_drops_are_reported);
    tcase_add_test(t, under_systemd_entries_go_to_the_journal_by_sd_journal_sendv);
    suite_add_tcase(s, t);
    return tu_run(s);
}
