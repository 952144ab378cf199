/* outq.h: the frames the daemon owes one worker connection (events, replies) while its
 * socket is full. A burst of events never costs a connection: frames wait here, bounded by
 * workers.event_queue, and leave as the socket takes them (writable callbacks of the
 * connection's poll handle). Owned by its struct wconn; loop thread only. */
#ifndef KVF_WORKER_OUTQ_H
#define KVF_WORKER_OUTQ_H

#include <stddef.h>
#include <stdint.h>

struct outq_frame {
    uint8_t *buf; /* owned: one encoded frame */
    size_t len;
};

struct wconn_outq {
    struct outq_frame *ring;   /* owned */
    uint32_t head, n, cap;
    size_t head_off;           /* bytes of ring[head] already written */
    uint64_t bytes;            /* queued, not yet written */
    uint64_t progress_ms;      /* when the queue last became non-empty or moved */
    uint32_t peak;             /* most frames queued at once */
    uint64_t queued_total;     /* frames that had to wait */
};

/* Frees every queued frame. Accepts an empty queue. */
void outq_done(struct wconn_outq *q);
/* Takes ownership of buf (also on error: freed). off: bytes already written. 0 or -ENOMEM. */
int outq_push(struct wconn_outq *q, uint8_t *buf, size_t len, size_t off);
/* Writes what the socket takes now. Returns the number of frames left (0: empty) or -errno
 * of a failed write (-EPIPE: the worker is gone). */
int outq_flush(struct wconn_outq *q, int fd, uint64_t now_ms);
/* Forgets frames not yet begun (the one half written stays, so the stream stays whole). */
void outq_drop_unstarted(struct wconn_outq *q);

#endif
