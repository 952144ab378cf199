/* outq.c: a worker connection's queue of frames waiting for socket room (see
 * outq.h). Frames leave in order, up to OUTQ_IOV at a time in one sendmsg. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "outq.h"

#define OUTQ_IOV 64 /* frames per sendmsg */

void outq_done(struct wconn_outq *q)
{
    for (uint32_t i = 0; i < q->n; i++)
        free(q->ring[(q->head + i) % q->cap].buf);
    free(q->ring);
    memset(q, 0, sizeof *q);
}

int outq_push(struct wconn_outq *q, uint8_t *buf, size_t len, size_t off)
{
    if (q->n == q->cap) {
        uint32_t ncap = q->cap ? q->cap * 2 : 64;
        struct outq_frame *nr = malloc(ncap * sizeof *nr);
        if (!nr) {
            free(buf);
            return -ENOMEM;
        }
        for (uint32_t i = 0; i < q->n; i++)
            nr[i] = q->ring[(q->head + i) % q->cap];
        free(q->ring);
        q->ring = nr;
        q->cap = ncap;
        q->head = 0;
    }
    if (q->n == 0)
        q->head_off = off;
    q->ring[(q->head + q->n) % q->cap] = (struct outq_frame){buf, len};
    q->n++;
    q->bytes += len - (q->n == 1 ? off : 0);
    q->queued_total++;
    if (q->n > q->peak)
        q->peak = q->n;
    return 0;
}

static void pop_head(struct wconn_outq *q)
{
    free(q->ring[q->head].buf);
    q->head = (q->head + 1) % q->cap;
    q->n--;
    q->head_off = 0;
}

int outq_flush(struct wconn_outq *q, int fd, uint64_t now_ms)
{
    while (q->n > 0) {
        struct iovec iov[OUTQ_IOV];
        unsigned k = 0;
        size_t total = 0;
        for (; k < OUTQ_IOV && k < q->n; k++) {
            const struct outq_frame *f = &q->ring[(q->head + k) % q->cap];
            size_t skip = k == 0 ? q->head_off : 0;
            iov[k] = (struct iovec){f->buf + skip, f->len - skip};
            total += f->len - skip;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = k};
        ssize_t n = sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            return -errno;
        }
        q->progress_ms = now_ms;
        q->bytes -= (uint64_t)n;
        size_t left = (size_t)n;
        while (left > 0) {
            size_t rest = q->ring[q->head].len - q->head_off;
            if (left < rest) {
                q->head_off += left;
                break;
            }
            left -= rest;
            pop_head(q);
        }
        if ((size_t)n < total)
            break; /* a short write: the socket is full */
    }
    return (int)q->n;
}

void outq_drop_unstarted(struct wconn_outq *q)
{
    uint32_t keep = q->n > 0 && q->head_off > 0 ? 1 : 0;
    while (q->n > keep) {
        uint32_t last = (q->head + q->n - 1) % q->cap;
        q->bytes -= q->ring[last].len;
        free(q->ring[last].buf);
        q->n--;
    }
    if (q->n == 0)
        q->head_off = 0;
}
