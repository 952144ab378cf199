/* daemon_harness.c: one real kvferryd for the integration tests (declared, with what each does, in
 * tests/integration/daemon_harness.h). Built once into libkvferry-testsupport.a, linked into every
 * test. */
#include "integration/daemon_harness.h"
#include "monotonic.h"

int64_t dh_now_ms(void) { return mono_now_ms(); }

void dh_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    ck_assert_int_eq(fclose(f), 0);
}

void dh_config(struct dh *h, const char *extra)
{
    char text[4096];
    tu_fmt(text, sizeof(text), "sockets.dir: \"%s/run\"\n%s", h->dir, extra ? extra : "");
    dh_write_file(h->cfg, text);
}

bool dh_wait_notify(struct dh *h, const char *needle, int timeout_ms)
{
    if (strstr(h->notes, needle))
        return true;
    int64_t end = dh_now_ms() + tu_ms((unsigned)timeout_ms);
    while (dh_now_ms() < end) {
        struct pollfd p = {h->notify_fd, POLLIN, 0};
        if (poll(&p, 1, (int)(end - dh_now_ms())) <= 0)
            continue;
        char buf[1024];
        ssize_t n = recv(h->notify_fd, buf, sizeof(buf) - 1, 0);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        size_t room = sizeof(h->notes) - h->notes_len - 1;
        int w = snprintf(h->notes + h->notes_len, room, "%s|", buf);
        if (w > 0 && (size_t)w < room)
            h->notes_len += (size_t)w;
        if (strstr(buf, needle))
            return true;
    }
    return false;
}

void dh_notify_open(struct dh *h)
{
    tu_sock_path(h->notify_path, sizeof(h->notify_path), "%s/notify", h->dir);
    h->notify_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(h->notify_fd, 0);
    struct sockaddr_un sa = tu_sun(h->notify_path);
    ck_assert_int_eq(bind(h->notify_fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(chmod(h->notify_path, 0666), 0);
}

void dh_start_full(struct dh *h, const char *extra, const char *watchdog_usec,
                   const char *const *wrapper, int ready_timeout_ms)
{
    memset(h, 0, sizeof(*h));
    tu_tmpdir(h->dir, sizeof(h->dir));
    tu_fmt(h->cfg, sizeof(h->cfg), "%s/kvferry.yaml", h->dir);
    tu_sock_path(h->sock, sizeof(h->sock), "%s/run/control.sock", h->dir);
    tu_fmt(h->log, sizeof(h->log), "%s/kvferryd.log", h->dir);
    dh_config(h, extra);
    dh_notify_open(h);
    char bin[256];
    tu_bin("kvferryd", bin, sizeof(bin));
    h->pid = fork();
    ck_assert_int_ge(h->pid, 0);
    if (h->pid == 0) {
        /* A failed test ends its process without cleanup: take the daemon down with it. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        int fd = open(h->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0)
            dup2(fd, 2);
        setenv("NOTIFY_SOCKET", h->notify_path, 1);
        unsetenv("WATCHDOG_PID");
        if (watchdog_usec)
            setenv("WATCHDOG_USEC", watchdog_usec, 1);
        else
            unsetenv("WATCHDOG_USEC");
        const char *argv[32];
        int n = 0;
        for (; wrapper && wrapper[n]; n++)
            argv[n] = wrapper[n];
        argv[n++] = bin;
        argv[n++] = "--config";
        argv[n++] = h->cfg;
        argv[n] = NULL;
        execvp(argv[0], (char *const *)argv);
        _exit(127);
    }
    ck_assert_msg(dh_wait_notify(h, "READY=1", ready_timeout_ms), "no READY=1 from kvferryd");
}

void dh_start(struct dh *h, const char *extra)
{
    dh_start_full(h, extra, NULL, NULL, 10000);
}

int dh_wait_exit(struct dh *h, int timeout_ms)
{
    int64_t end = dh_now_ms() + tu_ms((unsigned)timeout_ms);
    int st;
    while (dh_now_ms() < end) {
        pid_t r = waitpid(h->pid, &st, WNOHANG);
        if (r == h->pid) {
            h->pid = 0;
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        usleep(10000);
    }
    kill(h->pid, SIGKILL);
    waitpid(h->pid, &st, 0);
    h->pid = 0;
    return -1;
}

int dh_stop(struct dh *h)
{
    if (h->pid <= 0)
        return -1;
    kill(h->pid, SIGTERM);
    return dh_wait_exit(h, 60000);
}

void dh_cleanup(struct dh *h)
{
    if (h->pid > 0)
        dh_stop(h);
    if (h->notify_fd > 0)
        close(h->notify_fd);
    char cmd[200];
    tu_fmt(cmd, sizeof(cmd), "rm -rf '%s'", h->dir);
    (void)!system(cmd);
}

int dh_connect(const struct dh *h)
{
    struct sockaddr_un sa = tu_sun(h->sock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    return fd;
}

int dh_read_line(int fd, char *buf, size_t len, int timeout_ms)
{
    size_t n = 0;
    int64_t end = dh_now_ms() + tu_ms((unsigned)timeout_ms);
    while (n + 1 < len) {
        struct pollfd p = {fd, POLLIN, 0};
        int left = (int)(end - dh_now_ms());
        if (left <= 0 || poll(&p, 1, left) <= 0)
            return -ETIMEDOUT;
        ssize_t r = recv(fd, buf + n, 1, 0);
        if (r < 0)
            return -errno;
        if (r == 0)
            break;
        if (buf[n] == '\n')
            break;
        n++;
    }
    buf[n] = '\0';
    return (int)n;
}

json_t *dh_call_fd(int fd, const char *line)
{
    char buf[65536];
    if (send(fd, line, strlen(line), MSG_NOSIGNAL) >= 0)
        (void)!send(fd, "\n", 1, MSG_NOSIGNAL);
    if (dh_read_line(fd, buf, sizeof(buf), 5000) <= 0)
        return NULL;
    return json_loads(buf, 0, NULL);
}

json_t *dh_call(const struct dh *h, const char *line)
{
    int fd = dh_connect(h);
    if (fd < 0)
        return NULL;
    json_t *j = dh_call_fd(fd, line);
    close(fd);
    return j;
}

int dh_sh(const char *cmd, char *out, size_t len)
{
    return tu_sh(cmd, out, len);
}
