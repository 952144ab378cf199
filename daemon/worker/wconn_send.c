/* wconn_send.c: frames out of a worker connection. A frame goes straight to the socket when
 * nothing waits; otherwise it joins the connection's queue (outq.h), which the poll
 * handle's writable callbacks drain. A full queue (workers.event_queue) or a queue nobody reads
 * (workers.read_timeout, wlimits.c) closes the connection, and the worker is told why:
 * at close, unsent events are dropped and an ERROR frame follows the last half-written frame. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "daemon.h"
#include "workers.h"

#define WCONN_FINAL_ROOM 4096 /* socket buffer added at close so the final ERROR fits */

static void arm(struct wconn *c, bool write)
{
    if (c->xc.closing || c->want_write == write)
        return;
    c->want_write = write;
    uv_poll_start(&c->poll, UV_READABLE | (write ? UV_WRITABLE : 0), wconn_readable);
}

void wconn_close_told(struct wconn *c, kvf_error_t error, const char *fmt, ...)
{
    if (c->xc.closing || c->why[0])
        return; /* the first reason is the one told */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->why, sizeof c->why, fmt, ap);
    va_end(ap);
    c->why_error = error;
    log_warn("worker %llu (pid %d uid %u): %s", (unsigned long long)c->xc.id, (int)c->peer.pid,
             (unsigned)c->peer.uid, c->why);
    wconn_close_later(c);
}

void wconn_send_frame(struct wconn *c, uint8_t *buf, size_t len)
{
    if (c->xc.closing || c->broken) {
        free(buf);
        return;
    }
    uint64_t now = uv_now(&c->w->d->loop);
    size_t off = 0;
    if (c->outq.n == 0) {
        ssize_t n = send(c->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n == (ssize_t)len) {
            free(buf);
            return;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            log_info("worker %llu (pid %u): write: %s: closing", (unsigned long long)c->xc.id, c->xc.pid,
                     strerror(errno));
            free(buf);
            wconn_close_later(c);
            return;
        }
        off = n > 0 ? (size_t)n : 0;
        c->outq.progress_ms = now;
    }
    if ((int64_t)c->outq.n >= c->w->d->cfg.workers_event_queue) {
        free(buf);
        c->w->counters.event_queue_full++;
        wconn_close_told(c, KVF_E_BAD_REQUEST, "disconnected: %u frames wait for this worker to "
                         "read them (workers.event_queue %lld)", c->outq.n,
                         (long long)c->w->d->cfg.workers_event_queue);
        return;
    }
    if (outq_push(&c->outq, buf, len, off)) {
        wconn_close_told(c, KVF_E_INTERNAL, "disconnected: out of memory queueing its events");
        return;
    }
    arm(c, true);
}

void wconn_writable(struct wconn *c)
{
    int r = outq_flush(&c->outq, c->fd, uv_now(&c->w->d->loop));
    if (r < 0) {
        wconn_close(c, strerror(-r));
        return;
    }
    if (r == 0)
        arm(c, false);
}

void wconn_send_final(struct wconn *c)
{
    if (c->why[0]) {
        outq_drop_unstarted(&c->outq);
        struct proto_msg m = {.type = PROTO_ERROR, .seq = ++c->seq};
        m.u.error.error = c->why_error;
        snprintf(m.u.error.message, sizeof m.u.error.message, "%s", c->why);
        uint8_t *buf;
        size_t len;
        if (proto_encode(&m, NULL, &buf, &len) == 0 && outq_push(&c->outq, buf, len, 0) == 0) {
            /* a worker that stopped reading left the socket full: make room for the reason */
            int sz = 0;
            socklen_t sl = sizeof sz;
            if (getsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sz, &sl) == 0) {
                sz = sz / 2 + (int)c->outq.bytes + WCONN_FINAL_ROOM; /* the kernel doubles it */
                if (setsockopt(c->fd, SOL_SOCKET, SO_SNDBUFFORCE, &sz, sizeof sz) < 0)
                    (void)!setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof sz);
            }
        }
    }
    if (c->outq.n > 0)
        (void)outq_flush(&c->outq, c->fd, uv_now(&c->w->d->loop));
    outq_done(&c->outq);
}
