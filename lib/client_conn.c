/* client_conn.c: libkvferry's connection to kvferryd: socket, HELLO/WELCOME, REGISTER with the
 * pools' fds, frame I/O, loss and reconnect with backoff. Runs with c->mu held (client_int.h). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/uio.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#include "client_int.h"
#include "client_why.h"
#include "fdpass.h"

void client_sync_fds(struct kvf_client *c)
{
    uint64_t v;
    /* event fd: readable exactly while events are queued */
    if (c->q_len > 0) {
        v = 1;
        struct pollfd p = {.fd = c->evfd, .events = POLLIN};
        if (poll(&p, 1, 0) == 0 && write(c->evfd, &v, sizeof v) < 0) {
            /* the counter is saturated: it is readable anyway */
        }
    } else if (read(c->evfd, &v, sizeof v) < 0) {
        /* EAGAIN: already clear */
    }
    /* reconnect timer: armed while a reconnect is scheduled */
    struct itimerspec its;
    memset(&its, 0, sizeof its);
    if (c->sock < 0 && c->next_attempt_ms >= 0) {
        int64_t at = c->next_attempt_ms > 0 ? c->next_attempt_ms : 1;
        its.it_value.tv_sec = at / 1000;
        its.it_value.tv_nsec = (at % 1000) * 1000000;
    }
    timerfd_settime(c->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

/* Closes the socket. quiet: a failed (re)connect attempt, nothing to report. */
static void conn_drop(struct kvf_client *c, const char *why, bool quiet)
{
    if (c->sock < 0)
        return;
    snprintf(c->lost_why, sizeof c->lost_why, "%s", why);
    epoll_ctl(c->epfd, EPOLL_CTL_DEL, c->sock, NULL);
    close(c->sock);
    c->sock = -1;
    if (c->rd_live)
        frame_reader_done(&c->rd);
    c->rd_live = false;
    c->got_welcome = c->got_registered = false;
    c->registered = false;
    if (!quiet) {
        char msg[KVF_MESSAGE_MAX];
        snprintf(msg, sizeof msg, "lost the daemon connection (%s); request state unknown", why);
        client_fail_all(c, KVF_E_PEER_LOST, msg);
        snprintf(msg, sizeof msg, "lost the daemon connection: %s", why);
        client_queue_event(c, 0, KVF_EV_DISCONNECTED, KVF_E_PEER_LOST, 0, msg, 0);
        if (!c->no_reconnect) {
            c->backoff_ms = c->backoff_min_ms;
            c->next_attempt_ms = mono_now_ms() + c->backoff_ms;
        }
    }
    client_sync_fds(c);
}

void client_conn_lost(struct kvf_client *c, const char *why) { conn_drop(c, why, false); }

/* Writes the whole frame. While the socket is full it reads what the daemon sends into the
 * event queue, so a worker that only sends and cancels still drains its events and neither
 * side waits on the other. 0, -ETIMEDOUT, -ENOTCONN (dropped while reading) or -errno. */
static int send_all(struct kvf_client *c, const uint8_t *buf, size_t len, const int *fds,
                    unsigned nfds)
{
    int64_t deadline = mono_now_ms() + c->timeout_ms;
    size_t off = 0;
    int rc = 0;
    c->sending = true;
    while (off < len) {
        ssize_t n = fdpass_send_some(c->sock, buf + off, len - off, fds, off == 0 ? nfds : 0,
                                     MSG_DONTWAIT);
        if (n > 0) {
            off += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
            rc = -errno;
            break;
        }
        if (client_conn_pump(c)) {
            rc = -ENOTCONN;
            break;
        }
        int64_t left = deadline - mono_now_ms();
        if (left <= 0) {
            rc = -ETIMEDOUT;
            break;
        }
        struct pollfd p = {.fd = c->sock, .events = POLLIN | POLLOUT};
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
            rc = -errno;
            break;
        }
    }
    c->sending = false;
    return rc;
}

int client_conn_send(struct kvf_client *c, struct proto_msg *m, const int *fds, unsigned nfds)
{
    if (c->sock < 0)
        return -ENOTCONN;
    m->seq = ++c->seq;
    uint8_t *buf;
    size_t len;
    int rc = proto_encode(m, &c->lim, &buf, &len);
    if (rc)
        return rc; /* our caller's bad arguments; the connection is fine */
    rc = send_all(c, buf, len, fds, nfds);
    free(buf);
    if (rc && c->sock >= 0) {
        /* a daemon that refused us wrote why before it closed: read that first */
        if (rc != -ETIMEDOUT)
            client_conn_pump(c);
        char why[96];
        snprintf(why, sizeof why, "write: %s", strerror(-rc));
        client_conn_lost(c, why);
    }
    if (rc)
        return -ENOTCONN;
    if (c->pong_owed && !c->sending) {
        c->pong_owed = false;
        struct proto_msg pong = {.type = PROTO_PONG};
        return client_conn_send(c, &pong, NULL, 0);
    }
    return 0;
}

static int handle_frame(struct kvf_client *c, const uint8_t *f, size_t len)
{
    struct proto_msg m;
    char err[256];
    int rc = proto_decode(f, len, &c->rd.lim, &m, err, sizeof err);
    if (rc) {
        char why[300];
        snprintf(why, sizeof why, "bad frame from the daemon: %s", err);
        client_conn_lost(c, why);
        return -ENOTCONN;
    }
    switch (m.type) {
    case PROTO_WELCOME:
        c->welcome = m.u.welcome;
        c->got_welcome = true;
        break;
    case PROTO_REGISTERED:
        c->registered_reply = m.u.registered;
        c->got_registered = true;
        break;
    case PROTO_EVENT:
        client_on_event(c, &m.u.event);
        break;
    case PROTO_PING: {
        if (c->sending) { /* inside a frame being written: answer after it */
            c->pong_owed = true;
            break;
        }
        struct proto_msg pong = {.type = PROTO_PONG};
        if (client_conn_send(c, &pong, NULL, 0))
            return -ENOTCONN;
        break;
    }
    case PROTO_PONG:
        break;
    case PROTO_ERROR: {
        char why[PROTO_MSG_MAX + 64];
        snprintf(why, sizeof why, "daemon closed it: %s: %s",
                 kvf_error_to_string((kvf_error_t)m.u.error.error), m.u.error.message);
        client_conn_lost(c, why);
        return -ENOTCONN;
    }
    default: {
        char why[96];
        snprintf(why, sizeof why, "unexpected %s frame from the daemon", proto_type_to_string(m.type));
        proto_msg_done(&m);
        client_conn_lost(c, why);
        return -ENOTCONN;
    }
    }
    proto_msg_done(&m);
    return 0;
}

int client_conn_pump(struct kvf_client *c)
{
    while (c->sock >= 0) {
        ssize_t n = frame_reader_fill(&c->rd, c->sock, MSG_DONTWAIT);
        if (n == -EAGAIN)
            return 0;
        if (n <= 0) {
            client_conn_lost(c, n == 0 ? "the daemon closed the connection" : strerror((int)-n));
            return -ENOTCONN;
        }
        if (c->rd.nfds) { /* the daemon never sends fds */
            client_conn_lost(c, "unexpected fds from the daemon");
            return -ENOTCONN;
        }
        const uint8_t *f;
        size_t len;
        char err[256];
        int rc;
        while ((rc = frame_reader_next(&c->rd, &f, &len, err, sizeof err)) == 1)
            if (handle_frame(c, f, len))
                return -ENOTCONN;
        if (rc < 0) {
            client_conn_lost(c, err);
            return -ENOTCONN;
        }
    }
    return -ENOTCONN;
}

int client_conn_wait(struct kvf_client *c, bool (*pred)(const struct kvf_client *), int64_t deadline)
{
    for (;;) {
        if (client_conn_pump(c))
            return -ENOTCONN;
        if (pred(c))
            return 0;
        int64_t left = deadline - mono_now_ms();
        if (left <= 0)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = c->sock, .events = POLLIN};
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR)
            return -errno;
    }
}

static bool have_welcome(const struct kvf_client *c) { return c->got_welcome; }
bool client_have_registered(const struct kvf_client *c) { return c->got_registered; }

int client_conn_register(struct kvf_client *c, char *err, size_t errlen)
{
    struct proto_msg m;
    memset(&m, 0, sizeof m);
    m.type = PROTO_REGISTER;
    m.u.reg.n_pools = c->n_pools;
    m.u.reg.pools = calloc(c->n_pools, sizeof(*m.u.reg.pools));
    int *fds = malloc(client_pool_fds(c->pools, c->n_pools) * sizeof(int) + 1);
    unsigned nfds = 0; /* check_pools kept the total within PROTO_REGISTER_MAX_FDS */
    if (!m.u.reg.pools || !fds) {
        free(m.u.reg.pools);
        free(fds);
        snprintf(err, errlen, "out of memory for REGISTER");
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < c->n_pools; i++) {
        const struct kvf_pool *p = &c->pools[i];
        struct proto_pool *q = &m.u.reg.pools[i];
        q->kind = (uint32_t)p->kind;
        q->device = p->kind == KVF_POOL_HOST ? -1 : p->device;
        q->bytes = p->bytes;
        if (p->kind == KVF_POOL_HOST) {
            fds[nfds++] = p->fd;
        } else if (p->kind == KVF_POOL_CUDA_VMM) {
            q->kind = PROTO_POOL_CUDA_VMM;
            q->offset = p->offset;
            q->n_fds = p->n_fds;
            q->chunk_bytes = p->chunk_bytes;
            for (uint32_t k = 0; k < p->n_fds; k++)
                fds[nfds++] = p->fds[k];
        } else {
            q->offset = p->offset;
            memcpy(q->ipc_handle, p->ipc_handle, PROTO_IPC_HANDLE);
        }
    }
    snprintf(m.u.reg.home, sizeof m.u.reg.home, "%s", c->home);
    m.u.reg.json = c->layout_json; /* borrowed: not released below */
    m.u.reg.json_len = c->layout_len;
    c->got_registered = false;
    /* a frame carries PROTO_FDS_MAX fds: the first ones go ahead in FDS frames (proto.h) */
    int rc = 0;
    unsigned sent = 0;
    while (!rc && nfds - sent > PROTO_FDS_MAX) {
        unsigned n = nfds - sent - PROTO_FDS_MAX < PROTO_FDS_MAX ? nfds - sent - PROTO_FDS_MAX
                                                                 : PROTO_FDS_MAX;
        struct proto_msg f = {.type = PROTO_FDS, .u.fds.n = n};
        rc = client_conn_send(c, &f, fds + sent, n);
        sent += n;
    }
    if (!rc)
        rc = client_conn_send(c, &m, fds + sent, nfds - sent);
    free(fds);
    free(m.u.reg.pools);
    if (rc) {
        snprintf(err, errlen, "sending REGISTER: %s", c->sock < 0 ? c->lost_why : strerror(-rc));
        return rc;
    }
    rc = client_conn_wait(c, client_have_registered, mono_now_ms() + c->timeout_ms);
    if (rc) { /* the daemon's reason when it closed us (limits, a bad frame) */
        snprintf(err, errlen, "waiting for REGISTERED: %s",
                 c->sock < 0 && c->lost_why[0] ? c->lost_why : strerror(-rc));
        return rc;
    }
    if (c->registered_reply.status != KVF_OK) {
        snprintf(err, errlen, "%s: %s", kvf_error_to_string((kvf_error_t)c->registered_reply.status),
                 c->registered_reply.message);
        return -EINVAL;
    }
    c->registered = true;
    return 0;
}

int client_conn_open(struct kvf_client *c, char *err, size_t errlen)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t plen = strlen(c->path);
    if (plen >= sizeof sa.sun_path) {
        snprintf(err, errlen,
                 "worker socket path is %zu bytes, above the unix socket limit of %zu: %s", plen,
                 sizeof sa.sun_path - 1, c->path);
        return -ENAMETOOLONG;
    }
    memcpy(sa.sun_path, c->path, plen + 1);
    int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s < 0)
        return -errno;
    if (connect(s, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(s);
        char why[PATH_MAX + 256];
        client_why(c->path, e, why, sizeof why);
        snprintf(err, errlen, "connect %s: %s%s%s", c->path, strerror(e), why[0] ? ": " : "",
                 why);
        return -e;
    }
    struct proto_limits dl;
    proto_limits_init(&dl, 0, 0);
    int rc = frame_reader_init(&c->rd, &dl);
    if (rc) {
        close(s);
        return rc;
    }
    c->rd_live = true;
    c->sock = s;
    c->lim = dl;
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = s};
    epoll_ctl(c->epfd, EPOLL_CTL_ADD, s, &ev);

    struct proto_msg hello = {.type = PROTO_HELLO};
    hello.u.hello.version_min = PROTO_CONV_MIN;
    /* 2 only for a worker that reads held ends (options.held_events); an older daemon says 1 */
    hello.u.hello.version_max = c->held_events ? PROTO_CONV_HELD : PROTO_CONV_MIN;
    hello.u.hello.pid = (uint32_t)getpid();
    snprintf(hello.u.hello.name, sizeof hello.u.hello.name, "%s", c->name);
    rc = client_conn_send(c, &hello, NULL, 0);
    if (!rc)
        rc = client_conn_wait(c, have_welcome, mono_now_ms() + c->timeout_ms);
    if (rc) {
        /* the daemon's reason (an ERROR frame: version, access, limits) when it gave one */
        snprintf(err, errlen, "handshake with %s: %s", c->path,
                 c->sock < 0 && c->lost_why[0] ? c->lost_why : strerror(-rc));
        goto err_drop;
    }
    if (c->welcome.version < PROTO_CONV_MIN || c->welcome.version > PROTO_CONV_MAX) {
        snprintf(err, errlen, "daemon speaks protocol %u, this library %d..%d",
                 c->welcome.version, PROTO_CONV_MIN, PROTO_CONV_MAX);
        rc = -EPROTO;
        goto err_drop;
    }
    proto_limits_init(&c->lim, c->welcome.max_frame, c->welcome.max_blocks);
    c->max_inflight = c->welcome.max_inflight ? c->welcome.max_inflight : 1;
    c->epoch = c->welcome.epoch;
    if (c->layout_json) {
        rc = client_conn_register(c, err, errlen);
        if (!rc && c->n_events)
            rc = client_conn_events(c, err, errlen);
        if (rc)
            goto err_drop;
    }
    return 0;

err_drop:
    conn_drop(c, err, true);
    return rc;
}

int client_conn_maybe_reconnect(struct kvf_client *c)
{
    if (c->sock >= 0)
        return 0;
    if (c->next_attempt_ms < 0 || mono_now_ms() < c->next_attempt_ms)
        return -ENOTCONN;
    char err[KVF_MESSAGE_MAX - 64];
    uint64_t old_epoch = c->epoch;
    int rc = client_conn_open(c, err, sizeof err);
    if (rc) {
        c->backoff_ms = c->backoff_ms * 2 > c->backoff_max_ms ? c->backoff_max_ms : c->backoff_ms * 2;
        c->next_attempt_ms = mono_now_ms() + c->backoff_ms;
        client_sync_fds(c);
        return -ENOTCONN;
    }
    c->next_attempt_ms = -1;
    char msg[KVF_MESSAGE_MAX];
    snprintf(msg, sizeof msg, "reconnected to %.*s (daemon epoch %llu)%s", /* fits sun_path */
             (int)sizeof(((struct sockaddr_un *)0)->sun_path), c->path,
             (unsigned long long)c->epoch, c->registered ? ", registered again" : "");
    client_queue_event(c, 0, KVF_EV_RECONNECTED, KVF_OK, 0, msg, 0);
    client_held_epoch(c, old_epoch); /* a new daemon holds nothing of the old one's */
    client_sync_fds(c);
    return 0;
}
