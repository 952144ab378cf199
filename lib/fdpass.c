/* fdpass.c: sendmsg/recvmsg with SCM_RIGHTS (see fdpass.h). */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fdpass.h"
#include "monotonic.h"

void fdpass_close_all(int *fds, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (fds[i] >= 0)
            close(fds[i]);
        fds[i] = -1;
    }
}

/* Waits until sock is writable; 0, -ETIMEDOUT or -errno. */
static int wait_writable(int sock, int64_t deadline)
{
    for (;;) {
        int t = -1;
        if (deadline >= 0) {
            int64_t left = deadline - mono_now_ms();
            if (left <= 0)
                return -ETIMEDOUT;
            t = (int)left;
        }
        struct pollfd p = {.fd = sock, .events = POLLOUT};
        int n = poll(&p, 1, t);
        if (n > 0)
            return 0;
        if (n < 0 && errno != EINTR)
            return -errno;
    }
}

ssize_t fdpass_send_some(int sock, const void *buf, size_t len, const int *fds, unsigned nfds,
                         int flags)
{
    if (nfds > FDPASS_MAX_FDS) {
        errno = EINVAL;
        return -1;
    }
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int) * FDPASS_MAX_FDS)];
    } ctl;
    if (nfds) {
        memset(&ctl, 0, sizeof ctl);
        mh.msg_control = ctl.b;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * nfds);
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * nfds);
        memcpy(CMSG_DATA(c), fds, sizeof(int) * nfds);
    }
    return sendmsg(sock, &mh, flags | MSG_NOSIGNAL);
}

int fdpass_send(int sock, const void *buf, size_t len, const int *fds, unsigned nfds, int timeout_ms)
{
    if (nfds > FDPASS_MAX_FDS || (nfds && len == 0))
        return -EINVAL;
    int64_t deadline = timeout_ms < 0 ? -1 : mono_now_ms() + timeout_ms;
    const char *p = buf;
    size_t off = 0;
    while (off < len) {
        ssize_t n = fdpass_send_some(sock, p + off, len - off, fds, off == 0 ? nfds : 0, 0);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int rc = wait_writable(sock, deadline);
            if (rc)
                return rc;
            continue;
        }
        return n < 0 ? -errno : -EIO;
    }
    return 0;
}

ssize_t fdpass_recv(int sock, void *buf, size_t len, int *fds, unsigned maxfds, unsigned *nfds,
                    int flags, bool *ret_lost)
{
    union {
        struct cmsghdr h;
        /* room for more than we accept, so excess fds are seen (and closed) rather than dropped
         * by the kernel with only MSG_CTRUNC to tell */
        char b[CMSG_SPACE(sizeof(int) * FDPASS_MAX_FDS * 4)];
    } ctl;
    struct iovec iov = {.iov_base = buf, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                        .msg_controllen = sizeof ctl.b};
    *nfds = 0;
    if (ret_lost)
        *ret_lost = false;
    ssize_t n;
    do
        n = recvmsg(sock, &mh, flags | MSG_CMSG_CLOEXEC);
    while (n < 0 && errno == EINTR);
    if (n < 0)
        return -errno;
    unsigned got = 0;
    int bad = 0;
    int tmp[FDPASS_MAX_FDS * 4];
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < k; i++) {
                int fd;
                memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                if (got < sizeof tmp / sizeof tmp[0])
                    tmp[got++] = fd;
                else
                    close(fd);
            }
        } else {
            bad = 1; /* credentials or anything else we did not ask for */
        }
    }
    if ((mh.msg_flags & MSG_CTRUNC) && !bad && got < sizeof tmp / sizeof tmp[0]) {
        /* the kernel stops installing fds at the first it cannot (EMFILE, ENFILE) and says
         * MSG_CTRUNC; a sender's excess fills the buffer first (that case is below) */
        fdpass_close_all(tmp, got);
        if (!ret_lost)
            return -EMFILE;
        *ret_lost = true;
        return n;
    }
    if (bad || (mh.msg_flags & MSG_CTRUNC) || got > maxfds) {
        fdpass_close_all(tmp, got);
        return -EBADMSG;
    }
    memcpy(fds, tmp, got * sizeof(int));
    *nfds = got;
    return n;
}
