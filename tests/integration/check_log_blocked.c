/* check_log_blocked.c: a real kvferryd whose stderr is a FIFO nobody reads (issue 25 item 4).
 * Before, lib/log.c wrote on the loop thread: after about 64 KiB of log the loop stopped in
 * write(), `status` timed out and workers could not connect. Now lines queue for a writer
 * thread: with far more than the pipe and the queue hold logged (debug lines of thousands of
 * control connections), `status` still answers at once and a worker's HELLO is welcomed; once
 * the FIFO is read again the lines come out, followed by the count of those dropped. UCX's own
 * messages take the same way. */
#include <check.h>
#include <sys/mman.h>

#include "fdpass.h"
#include "kvferry.h"
#include "preset.h"
#include "proto.h"
#include "integration/daemon_harness.h"
#include "wtest.h"
#include "wraw.h"

#define CONNS 4000 /* two debug lines each: about 8x a 64 KiB pipe plus a 256 KiB queue */

/* One control connection opened and closed; false when the daemon did not take it in 2 s. */
static bool touch(const struct dh *h)
{
    struct sockaddr_un sa = tu_sun(h->sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = 2};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv); /* a full backlog: connect waits */
    bool ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0;
    close(fd);
    return ok;
}

START_TEST(a_log_output_nobody_reads_never_stalls_the_loop)
{
    struct dh h;
    char top[64], fifo[100], script[200];
    tu_tmpdir(top, sizeof top);
    tu_fmt(fifo, sizeof fifo, "%s/stderr.fifo", top);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    int rd = open(fifo, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* held, not read */
    ck_assert_int_ge(rd, 0);
    tu_fmt(script, sizeof script, "exec \"$0\" \"$@\" 2>'%s'", fifo);
    const char *const wrap[] = {"sh", "-c", script, NULL};
    /* room for the connections the loop has not yet seen close */
    dh_start_full(&h, "log.level: debug\ncontrol.max_conns: 8192\n", NULL, wrap, tu_ms(10000));
    int64_t t0 = dh_now_ms();
    for (int i = 0; i < CONNS; i++)
        ck_assert_msg(touch(&h), "connection %d not taken: the loop is stalled", i);
    int64_t flood_ms = dh_now_ms() - t0;
    /* the loop answers (once it took the connections queued before ours: slow under ASan) */
    t0 = dh_now_ms();
    json_t *r = NULL;
    while (!json_object_get(r, "result") && dh_now_ms() - t0 < tu_ms(10000)) {
        json_decref(r);
        r = dh_call(&h, "{\"id\":1,\"cmd\":\"status\"}");
    }
    int64_t status_ms = dh_now_ms() - t0;
    char *txt = r ? json_dumps(r, 0) : NULL;
    ck_assert_msg(json_object_get(r, "result"), "no status with the log output blocked: %s",
                  txt ? txt : "no reply");
    free(txt);
    json_decref(r);
    r = dh_call(&h, "{\"id\":2,\"cmd\":\"stats\"}");
    json_int_t dropped = json_integer_value(json_object_get(
        json_object_get(json_object_get(r, "result"), "daemon"), "log_lines_dropped"));
    json_decref(r);
    ck_assert_int_gt(dropped, 0); /* counted */
    struct wenv e = {0};
    tu_sock_path(e.wsock, sizeof e.wsock, "%s/run/worker.sock", h.dir);
    close(raw_hello(&e));
    printf("%d control connections in %lld ms with stderr blocked; status in %lld ms\n", CONNS,
           (long long)flood_ms, (long long)status_ms);
    /* read again: the lines come, then the count of the dropped ones */
    ck_assert_int_eq(fcntl(rd, F_SETFL, 0), 0);
    static char buf[1 << 16];
    size_t have = 0;
    char *rep = NULL;
    for (int64_t end = dh_now_ms() + tu_ms(10000); !rep && dh_now_ms() < end;) {
        struct pollfd p = {.fd = rd, .events = POLLIN};
        if (poll(&p, 1, 100) <= 0)
            continue;
        ssize_t n = read(rd, buf + have, sizeof buf - 1 - have);
        ck_assert_int_gt(n, 0);
        have += (size_t)n;
        buf[have] = '\0';
        rep = strstr(buf, "line(s) dropped: the log output was blocked");
        if (!rep && have > sizeof buf / 2) { /* keep the tail */
            memmove(buf, buf + have - 1024, 1024);
            have = 1024;
        }
    }
    ck_assert_msg(rep != NULL, "no report of dropped lines");
    while (rep > buf && rep[-1] != ':')
        rep--;
    ck_assert_uint_gt(strtoull(rep + 1, NULL, 10), 0);
    close(rd); /* the daemon's last lines meet a closed pipe: it exits all the same */
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
    char cmd[100];
    tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", top);
    (void)!system(cmd);
}
END_TEST

/* UCX's own messages (here its warning about an unused UCX_ variable) are the daemon's lines:
 * dated, leveled, queued like the others; before, UCX wrote "UCX  WARN ..." to stderr itself. */
START_TEST(ucx_messages_go_through_the_daemon_log)
{
    struct dh h;
    char top[64], sec[100], extra[200], cmd[300], out[4096];
    tu_tmpdir(top, sizeof top);
    tu_fmt(sec, sizeof sec, "%s/secret", top);
    dh_write_file(sec, "0123456789abcdef0123456789abcdef");
    ck_assert_int_eq(chmod(sec, 0600), 0);
    tu_fmt(extra, sizeof extra, "cluster.secret_file: \"%s\"\narena.size: 8MiB\narena.chunk: 1MiB\n",
           sec);
    const char *const wrap[] = {"env", "UCX_KVF_UNUSED_PROBE=1", NULL};
    dh_start_full(&h, extra, NULL, wrap, tu_ms(20000));
    ck_assert_int_eq(dh_stop(&h), 0);
    tu_fmt(cmd, sizeof cmd, "grep UCX_KVF_UNUSED_PROBE %s", h.log);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof out), 0);
    ck_assert_msg(strstr(out, "] warn: ucx: ") && !strstr(out, "UCX  WARN"), "%s", out);
    dh_cleanup(&h);
    tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", top);
    (void)!system(cmd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log_blocked");
    TCase *t = tcase_create("log_blocked");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, a_log_output_nobody_reads_never_stalls_the_loop);
    tcase_add_test(t, ucx_messages_go_through_the_daemon_log);
    suite_add_tcase(s, t);
    return tu_run(s);
}
