/* frame.c: frame reassembly over a stream socket (see frame.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"


int frame_reader_init(struct frame_reader *r, const struct proto_limits *lim)
{
    memset(r, 0, sizeof *r);
    r->lim = *lim;
    r->cap = FRAME_BUF_INITIAL < lim->max_frame ? FRAME_BUF_INITIAL : lim->max_frame;
    r->buf = malloc(r->cap);
    if (!r->buf)
        return -ENOMEM;
    for (unsigned i = 0; i < FDPASS_MAX_FDS; i++)
        r->fds[i] = -1;
    return 0;
}

void frame_reader_done(struct frame_reader *r)
{
    if (!r)
        return;
    free(r->buf);
    r->buf = NULL;
    fdpass_close_all(r->fds, r->nfds);
    r->nfds = 0;
}

/* Bytes the frame in progress needs in total (header alone until the header is in). */
static size_t frame_need(const struct frame_reader *r)
{
    size_t have = r->len - r->off;
    if (have < PROTO_HDR_SIZE)
        return PROTO_HDR_SIZE;
    struct proto_hdr h;
    if (proto_hdr_decode(r->buf + r->off, have, &r->lim, &h, NULL, 0))
        return PROTO_HDR_SIZE; /* refused by frame_reader_next */
    return PROTO_HDR_SIZE + (size_t)h.length;
}

size_t frame_reader_want(const struct frame_reader *r)
{
    size_t need = frame_need(r);
    size_t held = r->len - r->off;
    if (need < held + 1)
        need = held + 1;
    if (need < FRAME_BUF_INITIAL)
        need = FRAME_BUF_INITIAL;
    if (need > r->lim.max_frame)
        need = r->lim.max_frame;
    return need > r->cap ? need : r->cap;
}

void frame_reader_trim(struct frame_reader *r)
{
    if (r->len != r->off || r->cap <= FRAME_BUF_INITIAL)
        return;
    uint8_t *nb = realloc(r->buf, FRAME_BUF_INITIAL);
    if (!nb)
        return; /* keeps the larger buffer */
    r->base += r->off;
    r->off = r->len = 0;
    r->buf = nb;
    r->cap = FRAME_BUF_INITIAL;
}

ssize_t frame_reader_fill(struct frame_reader *r, int sock, int flags)
{
    if (r->off > 0) { /* compact */
        memmove(r->buf, r->buf + r->off, r->len - r->off);
        r->len -= r->off;
        r->base += r->off;
        r->off = 0;
    }
    size_t need = frame_reader_want(r);
    if (need > r->cap) {
        uint8_t *nb = realloc(r->buf, need);
        if (!nb)
            return -ENOMEM;
        r->buf = nb;
        r->cap = need;
    }
    if (r->len >= r->cap)
        return -EMSGSIZE; /* cannot happen: a full buffer always holds a whole frame */
    int fds[FDPASS_MAX_FDS];
    unsigned nfds = 0;
    bool lost;
    ssize_t n = fdpass_recv(sock, r->buf + r->len, r->cap - r->len, fds, FDPASS_MAX_FDS, &nfds,
                            flags, &lost);
    if (n < 0)
        return n;
    if (lost)
        r->lost_mark = r->base + r->len + (size_t)n;
    if (r->nfds + nfds > FDPASS_MAX_FDS) {
        fdpass_close_all(fds, nfds);
        return -EMSGSIZE;
    }
    memcpy(r->fds + r->nfds, fds, nfds * sizeof(int));
    r->nfds += nfds;
    r->len += (size_t)n;
    if (nfds)
        r->fd_mark = r->base + r->len;
    return n;
}

int frame_reader_next(struct frame_reader *r, const uint8_t **frame, size_t *len, char *err,
                      size_t errlen)
{
    size_t have = r->len - r->off;
    if (have < PROTO_HDR_SIZE)
        return 0;
    struct proto_hdr h;
    int rc = proto_hdr_decode(r->buf + r->off, have, &r->lim, &h, err, errlen);
    if (rc)
        return rc;
    size_t total = PROTO_HDR_SIZE + (size_t)h.length;
    if (have < total)
        return 0;
    *frame = r->buf + r->off;
    *len = total;
    r->last_start = r->base + r->off;
    r->off += total;
    r->last_end = r->base + r->off;
    return 1;
}

bool frame_reader_frame_has_fds(const struct frame_reader *r)
{
    return r->nfds > 0 && r->fd_mark > r->last_start && r->fd_mark <= r->last_end;
}

bool frame_reader_frame_lost_fds(const struct frame_reader *r)
{
    return r->lost_mark > r->last_start && r->lost_mark <= r->last_end;
}

unsigned frame_reader_take_fds(struct frame_reader *r, int *fds, unsigned max)
{
    unsigned n = r->nfds < max ? r->nfds : max;
    memcpy(fds, r->fds, n * sizeof(int));
    memmove(r->fds, r->fds + n, (r->nfds - n) * sizeof(int));
    r->nfds -= n;
    for (unsigned i = r->nfds; i < FDPASS_MAX_FDS; i++)
        r->fds[i] = -1;
    return n;
}
