/* ready.c: waiting for a test daemon's READY=1 (declared, with what each does, in
 * tests/integration/ready.h). Built once into libkvferry-testsupport.a, linked into every test. */
#include "integration/ready.h"
#include "monotonic.h"

int64_t tr_now_ms(void) { return mono_now_ms(); }

void tr_open(struct tr_notify *n, const char *dir)
{
    tu_sock_path(n->path, sizeof n->path, "%s/notify", dir);
    unlink(n->path);
    n->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(n->fd, 0);
    struct sockaddr_un sa = tu_sun(n->path);
    ck_assert_int_eq(bind(n->fd, (struct sockaddr *)&sa, sizeof sa), 0);
}

void tr_child_env(const struct tr_notify *n)
{
    setenv("NOTIFY_SOCKET", n->path, 1);
    unsetenv("WATCHDOG_PID");
    unsetenv("WATCHDOG_USEC");
}

int tr_wait_ready(struct tr_notify *n, pid_t pid, int timeout_ms, int *status)
{
    int64_t end = tr_now_ms() + tu_ms((unsigned)timeout_ms);
    for (;;) {
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            if (status)
                *status = st;
            return 0;
        }
        int64_t left = end - tr_now_ms();
        if (left <= 0)
            return -1;
        /* short polls: an exit is seen within 50 ms though no datagram comes */
        struct pollfd p = {n->fd, POLLIN, 0};
        if (poll(&p, 1, left < 50 ? (int)left : 50) <= 0)
            continue;
        char buf[1024];
        ssize_t r = recv(n->fd, buf, sizeof buf - 1, 0);
        if (r <= 0)
            continue;
        buf[r] = '\0';
        if (strstr(buf, "READY=1"))
            return 1;
    }
}

void tr_close(struct tr_notify *n)
{
    if (n->fd > 0)
        close(n->fd);
    n->fd = -1;
    unlink(n->path);
}
