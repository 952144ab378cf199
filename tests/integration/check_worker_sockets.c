/* check_worker_sockets.c: sockets that cannot be held hostage, and refusals that say why (issue
 * 13 item 5, issue 14 "errors that say why"). A real kvferryd against floods of idle and
 * half-frame connections while real workers register and move a request, the per-uid limits of
 * both sockets (an ordinary user, uid 65534 in a forked child, against root), the reasons
 * kvf_connect reports, and kvferryctl's explanations of socket mistakes. */
#include <grp.h>
#include <sys/stat.h>

#include "wtest.h"
#include "wraw.h"

#define NOBODY 65534

static json_int_t stat_int(struct wenv *e, const char *key)
{
    return wr_workers_int(e, "stats", key);
}

static void wait_stat_ge(struct wenv *e, const char *key, json_int_t want, int timeout_ms)
{
    int64_t end = wt_now_ms() + timeout_ms;
    json_int_t v;
    while ((v = stat_int(e, key)) < want && wt_now_ms() < end)
        usleep(20000);
    ck_assert_msg(v >= want, "workers.%s is %lld, expected >= %lld", key, (long long)v,
                  (long long)want);
}

static json_int_t conns(struct wenv *e) { return wr_workers_int(e, "status", "connections"); }

static long rss_kib(pid_t p)
{
    char path[64], line[256];
    tu_fmt(path, sizeof path, "/proc/%d/status", (int)p);
    FILE *f = fopen(path, "r");
    long kib = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld", &kib) == 1)
            break;
    if (f)
        fclose(f);
    return kib;
}

/* Lets uid 65534 reach the sockets: the test dirs searchable (the sockets' mode is config). */
static void open_dirs(struct wenv *e)
{
    char run[128];
    tu_fmt(run, sizeof run, "%s/run", e->dir);
    ck_assert_int_eq(chmod(e->dir, 0755), 0);
    ck_assert_int_eq(chmod(run, 0755), 0);
}

static int become_nobody(void)
{
    return setgroups(0, NULL) == 0 && setgid(NOBODY) == 0 && setuid(NOBODY) == 0 ? 0 : -1;
}

/* Connects to the control socket; -errno on failure. */
static int ctl_connect(const char *path)
{
    struct sockaddr_un sa = tu_sun(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

/* A header announcing a REGISTER of `length` payload bytes. */
static void big_header(uint8_t h[PROTO_HDR_SIZE], uint32_t length)
{
    memset(h, 0, PROTO_HDR_SIZE);
    uint32_t magic = PROTO_MAGIC;
    uint16_t ver = PROTO_VERSION, type = PROTO_REGISTER;
    memcpy(h, &magic, 4);
    memcpy(h + 4, &ver, 2);
    memcpy(h + 6, &type, 2);
    memcpy(h + 12, &length, 4);
}

/* Sends up to n bytes of zeros; returns how many went before an error or the 3 s timeout. */
static size_t push_zeros(int fd, size_t n)
{
    struct timeval tv = {3, 0};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    static uint8_t zeros[1 << 16];
    size_t sent = 0;
    while (sent < n) {
        size_t k = n - sent < sizeof zeros ? n - sent : sizeof zeros;
        ssize_t w = send(fd, zeros, k, MSG_NOSIGNAL);
        if (w <= 0)
            break;
        sent += (size_t)w;
    }
    return sent;
}

/* The reason in the ERROR frame waiting on fd ("" if none came). Skips other frames. */
static void error_text(int fd, char *msg, size_t len)
{
    msg[0] = '\0';
    for (int i = 0; i < 8; i++) {
        uint32_t t = raw_next(fd, msg, len);
        if (t == PROTO_ERROR || t == 0)
            return;
        msg[0] = '\0';
    }
}

static void real_workers_move_a_request(struct wenv *e)
{
    pid_t c = wt_sim(e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec", "tiny",
                     "--rank", "0", "--requests", "1", "--readers", "1", (char *)NULL);
    pid_t g = wt_sim(e, "gen.log", "--role", "generation", "--instance", "gen", "--spec", "tiny",
                     "--rank", "0", "--requests", "1", "--ctx-instance", "ctx", (char *)NULL);
    int gq = wt_wait(g, 30000), gc = wt_wait(c, 30000);
    char *gl = wt_log(e, "gen.log"), *cl = wt_log(e, "ctx.log");
    ck_assert_msg(gq == 0 && gc == 0 && strstr(gl, "parity OK"), "gen %d ctx %d:\n%s\n%s", gq, gc,
                  gl, cl);
    free(gl);
    free(cl);
}

START_TEST(worker_idle_and_half_frame_floods_leave_room_for_real_workers)
{
    struct wenv e;
    wt_start(&e, "workers:\n  max_conns_per_uid: 256\n  hello_timeout: 60s\n  frame_timeout: 4s\n"
                 "  frame_memory: 128MiB\n"
                 "deadlines:\n  send_wait: 10s\n  transfer: 10s\n");
    long rss0 = rss_kib(e.daemon);
    enum { IDLE = 256, HALF = 48 };
    int idle[IDLE], half[HALF];
    for (int i = 0; i < IDLE; i++)
        idle[i] = raw_connect(&e); /* never a HELLO: workers.max_conns (256) is full */
    for (int i = 0; i < 500 && conns(&e) < IDLE; i++)
        usleep(10000); /* accepted in bursts of 64 per wakeup */
    ck_assert_int_eq(conns(&e), IDLE);
    /* 48 say HELLO (each evicting an idle one), then send 15 MiB of a 16 MiB frame */
    uint8_t h[PROTO_HDR_SIZE];
    big_header(h, (16u << 20) - PROTO_HDR_SIZE - 4096);
    int held = 0;
    int64_t t_half = 0;
    for (int i = 0; i < HALF; i++) {
        half[i] = raw_hello(&e);
        ck_assert_int_eq(send(half[i], h, sizeof h, MSG_NOSIGNAL), (ssize_t)sizeof h);
        if (push_zeros(half[i], 15u << 20) == 15u << 20) {
            held++;
            t_half = wt_now_ms();
        }
    }
    long rss1 = rss_kib(e.daemon);
    json_int_t mem = stat_int(&e, "frame_memory_bytes");
    printf("floods: %d of %d half frames held, frame memory %lld MiB (budget 128), daemon RSS "
           "+%ld MiB\n", held, HALF, (long long)(mem >> 20), (rss1 - rss0) / 1024);
    ck_assert_int_le(mem, 128 << 20);
    ck_assert_int_le(held, 8);
    ck_assert_int_ge(stat_int(&e, "frame_memory_refused"), HALF - 8);
    ck_assert_int_ge(stat_int(&e, "evicted"), 1); /* the others took the slots of the refused */
    ck_assert_int_lt(rss1 - rss0, 200 * 1024);
    /* the evicted and the refused were told why */
    char msg[600];
    error_text(idle[0], msg, sizeof msg);
    ck_assert_msg(strstr(msg, "evicted") && strstr(msg, "workers.max_conns"), "%s", msg);
    error_text(half[HALF - 1], msg, sizeof msg);
    ck_assert_msg(strstr(msg, "workers.frame_memory"), "%s", msg);

    real_workers_move_a_request(&e);

    /* the half frames that were held end at workers.frame_timeout, told why */
    wait_stat_ge(&e, "frame_timeouts", held, 15000);
    printf("floods: %d half frames closed %lld ms after their last byte (frame_timeout 4000 ms)\n",
           held, (long long)(wt_now_ms() - t_half));
    ck_assert_int_eq(stat_int(&e, "frame_memory_bytes"), 0);
    for (int i = 0; i < HALF && held; i++) {
        error_text(half[i], msg, sizeof msg);
        if (strstr(msg, "workers.frame_timeout"))
            held = 0;
    }
    ck_assert_msg(held == 0, "no half-frame connection was told workers.frame_timeout");
    for (int i = 0; i < IDLE; i++)
        close(idle[i]);
    for (int i = 0; i < HALF; i++)
        close(half[i]);
    wt_stop(&e);
}
END_TEST

START_TEST(worker_silent_connection_is_closed_at_hello_timeout_told_why)
{
    struct wenv e;
    wt_start(&e, "workers:\n  hello_timeout: 500ms\n");
    int64_t t0 = wt_now_ms();
    int fd = raw_connect(&e);
    char msg[600];
    error_text(fd, msg, sizeof msg);
    int64_t took = wt_now_ms() - t0;
    printf("hello_timeout 500 ms: closed after %lld ms\n", (long long)took);
    ck_assert_msg(strstr(msg, "workers.hello_timeout"), "%s", msg);
    ck_assert_int_ge(took, 450);
    ck_assert_int_lt(took, 3000);
    close(fd);
    /* the first frame must be a HELLO: a large one before it is refused at its header */
    fd = raw_connect(&e);
    uint8_t h[PROTO_HDR_SIZE];
    big_header(h, 1u << 20);
    ck_assert_int_eq(send(fd, h, sizeof h, MSG_NOSIGNAL), (ssize_t)sizeof h);
    expect_error_close(fd, "the first frame must be a HELLO");
    ck_assert_int_eq(stat_int(&e, "hello_timeouts"), 1);
    wt_stop(&e);
}
END_TEST

START_TEST(worker_per_uid_limit_names_itself_and_evicts_handshakes_first)
{
    struct wenv e;
    wt_start(&e, "workers:\n  max_conns_per_uid: 3\n");
    int a = raw_hello(&e), b = raw_hello(&e), idle = raw_connect(&e);
    int x = raw_hello(&e); /* evicts the one still in its handshake */
    char msg[600];
    error_text(idle, msg, sizeof msg);
    ck_assert_msg(strstr(msg, "evicted") && strstr(msg, "workers.max_conns_per_uid"), "%s", msg);
    close(idle);
    int y = raw_connect(&e);
    expect_error_close(y, "workers.max_conns_per_uid");
    /* kvf_connect says the same */
    char why[KVF_MESSAGE_MAX] = "";
    struct kvf_options o = {.no_reconnect = 1, .err = why, .errlen = sizeof why};
    struct kvf_client *c = NULL;
    ck_assert_int_ne(kvf_connect(e.wsock, &o, &c), 0);
    ck_assert_msg(strstr(why, "workers.max_conns_per_uid"), "kvf_connect said: %s", why);
    close(a);
    close(b);
    close(x);
    wt_stop(&e);
}
END_TEST

START_TEST(worker_refusals_reach_kvf_connect_err)
{
    struct wenv e;
    wt_start(&e, "sockets.mode: 0666\n");
    open_dirs(&e);
    /* access.allow_*: uid 65534 is not allowed; kvf_connect says so */
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t p = fork();
    if (p == 0) {
        char why[KVF_MESSAGE_MAX] = "no err";
        struct kvf_options o = {.no_reconnect = 1, .err = why, .errlen = sizeof why};
        struct kvf_client *c = NULL;
        int rc = become_nobody() < 0 ? -EPERM : kvf_connect(e.wsock, &o, &c);
        dprintf(pfd[1], "%d %s", rc, why);
        _exit(0);
    }
    close(pfd[1]);
    char buf[KVF_MESSAGE_MAX + 16] = "";
    ck_assert_int_ge(read(pfd[0], buf, sizeof buf - 1), 1);
    close(pfd[0]);
    ck_assert_int_eq(wt_wait(p, 5000), 0);
    ck_assert_msg(buf[0] == '-' && strstr(buf, "not allowed") && strstr(buf, "access.allow"),
                  "kvf_connect as uid 65534: %s", buf);
    /* another protocol version: the daemon says which it speaks */
    int fd = raw_connect(&e);
    struct proto_msg m = {.type = PROTO_HELLO};
    m.u.hello.version_min = m.u.hello.version_max = PROTO_VERSION + 7;
    raw_send_msg(fd, &m, NULL, 0);
    expect_error_close(fd, "not supported (this daemon speaks");
    /* the conversation: the highest both speak (2: held ends, only for a worker that offers it) */
    uint32_t offers[][3] = {{1, 1, 1}, {1, 2, 2}, {2, 9, 2}, {1, 9, 2}};
    for (size_t i = 0; i < sizeof offers / sizeof offers[0]; i++) {
        fd = raw_connect(&e);
        m.u.hello.version_min = offers[i][0];
        m.u.hello.version_max = offers[i][1];
        raw_send_msg(fd, &m, NULL, 0);
        char got[64] = "", want[64];
        ck_assert_uint_eq(raw_next(fd, got, sizeof got), PROTO_WELCOME);
        snprintf(want, sizeof want, "version %u", offers[i][2]);
        ck_assert_msg(!strcmp(got, want), "HELLO %u..%u: %s", offers[i][0], offers[i][1], got);
        close(fd);
    }
    wt_stop(&e);
}
END_TEST

START_TEST(control_ordinary_user_cannot_lock_root_out)
{
    struct wenv e;
    wt_start(&e, "sockets.mode: 0666\naccess:\n  allow_uids: [65534]\n"
                 "control:\n  max_conns: 16\n  max_conns_per_uid: 16\n");
    open_dirs(&e);
    int res[2], go[2];
    ck_assert_int_eq(pipe(res), 0);
    ck_assert_int_eq(pipe(go), 0);
    pid_t p = fork();
    if (p == 0) { /* uid 65534 takes every control connection it can, and holds them */
        close(res[0]);
        close(go[1]);
        int held = 0, fds[32], refused = 0;
        char line[512] = "";
        if (become_nobody() == 0)
            for (int i = 0; i < 32; i++) {
                int fd = ctl_connect(e.csock);
                if (fd < 0)
                    break;
                struct pollfd q = {.fd = fd, .events = POLLIN};
                if (poll(&q, 1, 200) == 1) { /* refused: one error line, then EOF */
                    ssize_t n = read(fd, line, sizeof line - 1);
                    line[n > 0 ? n : 0] = '\0';
                    refused++;
                    close(fd);
                    break;
                }
                fds[held++] = fd;
            }
        dprintf(res[1], "%d %d %s", held, refused, line);
        close(res[1]);
        char b;
        (void)!read(go[0], &b, 1); /* hold until the parent is done */
        _exit(fds[0] >= 0 ? 0 : 1);
    }
    close(res[1]);
    close(go[0]);
    char buf[600] = "";
    ck_assert_int_ge(read(res[0], buf, sizeof buf - 1), 1);
    close(res[0]);
    int held = 0, refused = 0;
    sscanf(buf, "%d %d", &held, &refused);
    ck_assert_msg(held == 16 && refused == 1 && strstr(buf, "control.max_conns"), "uid 65534: %s",
                  buf);
    /* control.max_conns is taken by uid 65534, yet root gets in (more than once) */
    int r1 = ctl_connect(e.csock), r2 = ctl_connect(e.csock);
    ck_assert_int_ge(r1, 0);
    ck_assert_int_ge(r2, 0);
    json_t *st = wt_ctl(&e, "stats");
    json_int_t refusals = json_integer_value(
        json_object_get(json_object_get(st, "control"), "connections_refused_limit"));
    ck_assert_int_eq(refusals, 1); /* uid 65534's 17th, never root */
    json_decref(st);
    close(r1);
    close(r2);
    ck_assert_int_eq(write(go[1], "x", 1), 1);
    close(go[1]);
    ck_assert_int_eq(wt_wait(p, 5000), 0);
    wt_stop(&e);
}
END_TEST

/* Runs kvferryctl --socket path status (as uid 65534 when nobody); its stderr, malloc'd. */
static char *ctl_stderr(struct wenv *e, const char *path, int nobody, int *rc)
{
    char bin[256], out[200];
    tu_bin("kvferryctl", bin, sizeof bin);
    tu_fmt(out, sizeof out, "%s/ctl.err", e->dir);
    pid_t p = fork();
    if (p == 0) {
        int fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        if (nobody && become_nobody() < 0)
            _exit(99);
        execl(bin, bin, "--socket", path, "status", (char *)NULL);
        _exit(127);
    }
    *rc = wt_wait(p, 10000);
    return wt_log(e, "ctl.err");
}

START_TEST(kvferryctl_explains_socket_mistakes_with_the_path_and_the_fix)
{
    struct wenv e;
    wt_start(&e, NULL); /* sockets 0660 root:root */
    open_dirs(&e);
    char path[100], *t;
    int rc;
    /* permission: the socket's mode and group keep uid 65534 out */
    t = ctl_stderr(&e, e.csock, 1, &rc);
    ck_assert_int_eq(rc, 3);
    ck_assert_msg(strstr(t, e.csock) && strstr(t, "mode 0660") && strstr(t, "not in its group") &&
                  strstr(t, "Fix:"), "%s", t);
    free(t);
    /* a directory, a regular file, a missing directory, a stale socket */
    tu_fmt(path, sizeof path, "%s/run", e.dir);
    t = ctl_stderr(&e, path, 0, &rc);
    ck_assert_msg(rc == 3 && strstr(t, "is a directory, not a socket") && strstr(t, "control.sock"),
                  "%s", t);
    free(t);
    tu_fmt(path, sizeof path, "%s/kvferry.yaml", e.dir);
    t = ctl_stderr(&e, path, 0, &rc);
    ck_assert_msg(rc == 3 && strstr(t, "is a regular file, not a socket"), "%s", t);
    free(t);
    tu_fmt(path, sizeof path, "%s/nodir/control.sock", e.dir);
    t = ctl_stderr(&e, path, 0, &rc);
    ck_assert_msg(rc == 3 && strstr(t, "does not exist") && strstr(t, "--config"), "%s", t);
    free(t);
    tu_fmt(path, sizeof path, "%s/stale.sock", e.dir);
    struct sockaddr_un sa = tu_sun(path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    close(s); /* bound, never listening: what a dead daemon leaves */
    t = ctl_stderr(&e, path, 0, &rc);
    ck_assert_msg(rc == 3 && strstr(t, "nobody listens"), "%s", t);
    free(t);
    wt_stop(&e);
}
END_TEST

static Suite *worker_sockets_suite(void)
{
    Suite *s = suite_create("worker_sockets");
    TCase *t = tcase_create("hostage");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, worker_idle_and_half_frame_floods_leave_room_for_real_workers);
    tcase_add_test(t, worker_silent_connection_is_closed_at_hello_timeout_told_why);
    tcase_add_test(t, worker_per_uid_limit_names_itself_and_evicts_handshakes_first);
    suite_add_tcase(s, t);
    TCase *w = tcase_create("why");
    tcase_set_timeout(w, 60);
    tcase_add_test(w, worker_refusals_reach_kvf_connect_err);
    tcase_add_test(w, control_ordinary_user_cannot_lock_root_out);
    tcase_add_test(w, kvferryctl_explains_socket_mistakes_with_the_path_and_the_fix);
    suite_add_tcase(s, w);
    return s;
}

int main(void) { return tu_run(worker_sockets_suite()); }
