/* wtest.c: the worker integration suites' daemon, sims and control socket (declared, with what each
 * does, in tests/integration/wtest.h). Built once into libkvferry-testsupport.a, linked into every
 * test. */
#include "integration/wtest.h"
#include "monotonic.h"

int64_t wt_now_ms(void) { return mono_now_ms(); }

int wt_answers(const char *path)
{
    struct sockaddr_un sa = tu_sun(path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int ok = 0;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
        write(fd, "{\"id\":1,\"cmd\":\"help\"}\n", 23) == 23) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        char b[16];
        ok = poll(&p, 1, 1000) == 1 && read(fd, b, sizeof b) > 0;
    }
    close(fd);
    return ok;
}

void wt_daemon_start(struct wenv *e)
{
    char bin[256], logp[160];
    tu_bin("kvferryd", bin, sizeof bin);
    tu_fmt(logp, sizeof logp, "%s/daemon.log", e->dir);
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM); /* a failed test does not leave a daemon behind */
        int fd = open(logp, O_WRONLY | O_CREAT | O_APPEND, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(bin, bin, "--config", e->cfg, (char *)NULL);
        _exit(127);
    }
    e->daemon = p;
    int up = 0;
    for (int64_t end = wt_now_ms() + tu_ms(5000); !(up = wt_answers(e->csock)) && wt_now_ms() < end;)
        usleep(10000);
    ck_assert_msg(up, "kvferryd did not come up (see %s)", logp);
}

void wt_start(struct wenv *e, const char *extra_yaml)
{
    signal(SIGPIPE, SIG_IGN);
    tu_tmpdir(e->dir, sizeof e->dir);
    tu_fmt(e->cfg, sizeof e->cfg, "%s/kvferry.yaml", e->dir);
    tu_sock_path(e->wsock, sizeof e->wsock, "%s/run/worker.sock", e->dir);
    tu_sock_path(e->csock, sizeof e->csock, "%s/run/control.sock", e->dir);
    FILE *f = fopen(e->cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "sockets:\n  dir: %s/run\n%s", e->dir,
            extra_yaml ? extra_yaml : "deadlines:\n  send_wait: 2s\n  transfer: 2s\n");
    fclose(f);
    wt_daemon_start(e);
}

int wt_wait(pid_t p, int timeout_ms)
{
    int64_t end = wt_now_ms() + tu_ms((unsigned)timeout_ms);
    int st;
    for (;;) {
        pid_t r = waitpid(p, &st, WNOHANG);
        if (r == p)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (wt_now_ms() > end) {
            kill(p, SIGKILL);
            waitpid(p, &st, 0);
            return -1;
        }
        usleep(5000);
    }
}

void wt_stop(struct wenv *e)
{
    if (e->daemon > 0) {
        kill(e->daemon, SIGTERM);
        int rc = wt_wait(e->daemon, 10000);
        ck_assert_msg(rc == 0, "kvferryd exited %d on SIGTERM", rc);
        e->daemon = 0;
    }
    char cmd[128];
    tu_fmt(cmd, sizeof cmd, "rm -rf %s", e->dir);
    ck_assert_int_eq(system(cmd), 0);
}

pid_t wt_sim(struct wenv *e, const char *log, ...)
{
    char bin[256], logp[200];
    tu_bin("kvferry-sim", bin, sizeof bin);
    tu_fmt(logp, sizeof logp, "%s/%s", e->dir, log);
    const char *av[48];
    int n = 0;
    av[n++] = bin;
    va_list ap;
    va_start(ap, log);
    const char *a;
    while ((a = va_arg(ap, const char *)) && n < 44)
        av[n++] = a;
    va_end(ap);
    av[n++] = "--socket";
    av[n++] = e->wsock;
    av[n] = NULL;
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(logp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        dup2(fd, 1);
        dup2(fd, 2);
        execv(bin, (char *const *)av);
        _exit(127);
    }
    return p;
}

char *wt_log(struct wenv *e, const char *log)
{
    char p[200];
    tu_fmt(p, sizeof p, "%s/%s", e->dir, log);
    FILE *f = fopen(p, "r");
    if (!f)
        return strdup("");
    char *buf = calloc(1, 1 << 16);
    size_t n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = 0;
    fclose(f);
    return buf;
}

json_t *wt_ctl(struct wenv *e, const char *cmd)
{
    struct sockaddr_un sa = tu_sun(e->csock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char line[128];
    int n = (int)strlen(tu_fmt(line, sizeof line, "{\"id\":1,\"cmd\":\"%s\"}\n", cmd));
    ck_assert_int_eq(write(fd, line, (size_t)n), n);
    char *buf = calloc(1, 1 << 20);
    size_t len = 0;
    while (len < (1 << 20) - 1 && !memchr(buf, '\n', len)) {
        ssize_t r = read(fd, buf + len, (1 << 20) - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(fd);
    json_t *reply = json_loads(buf, JSON_DISABLE_EOF_CHECK, NULL);
    free(buf);
    ck_assert_ptr_nonnull(reply);
    ck_assert(json_is_true(json_object_get(reply, "ok")));
    json_t *res = json_incref(json_object_get(reply, "result"));
    json_decref(reply);
    return res;
}

size_t wt_ctl_count(struct wenv *e, const char *cmd, const char *key)
{
    json_t *r = wt_ctl(e, cmd);
    size_t n = json_array_size(json_object_get(r, key));
    json_decref(r);
    return n;
}

long long wt_xfer_stat(struct wenv *e, const char *key)
{
    json_t *r = wt_ctl(e, "stats");
    json_t *v = json_object_get(json_object_get(json_object_get(r, "workers"), "transfers"), key);
    long long n = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
    json_decref(r);
    return n;
}

int wt_listed(struct wenv *e, const char *cmd, const char *key, const char *f1, const char *v1,
              const char *f2, const char *v2)
{
    json_t *r = wt_ctl(e, cmd);
    int seen = tj_lists(json_object_get(r, key), f1, v1, f2, v2);
    json_decref(r);
    return seen;
}

bool wt_until(struct wenv *e, int timeout_ms, bool (*done)(struct wenv *e, void *arg), void *arg)
{
    int64_t end = wt_now_ms() + tu_ms((unsigned)timeout_ms);
    bool held;
    while (!(held = done(e, arg)) && wt_now_ms() < end)
        usleep(10000);
    return held;
}

struct listed_q {
    const char *cmd, *key, *f1, *v1, *f2, *v2;
};

static bool listed(struct wenv *e, void *arg)
{
    const struct listed_q *q = arg;
    return wt_listed(e, q->cmd, q->key, q->f1, q->v1, q->f2, q->v2);
}

void wt_until_listed(struct wenv *e, int timeout_ms, const char *cmd, const char *key,
                     const char *f1, const char *v1, const char *f2, const char *v2)
{
    struct listed_q q = {cmd, key, f1, v1, f2, v2};
    ck_assert_msg(wt_until(e, timeout_ms, listed, &q),
                  "`%s` listed no %s with %s=%s%s%s%s%s within %d ms", cmd, key, f1, v1,
                  f2 ? " " : "", f2 ? f2 : "", f2 ? "=" : "", f2 ? v2 : "", timeout_ms);
}
