/* frame.h: reassembles protocol frames (proto.h) from a unix stream socket, with the fds that
 * came along. The header is checked as soon as its 24 bytes are in, so an oversized or foreign
 * frame is refused before its body is read; the buffer never grows past limits.max_frame.
 * Fds received are held until taken (frame_reader_take_fds) and closed by frame_reader_done.
 * One reader per connection; not thread-safe (the owner serializes). */
#ifndef KVF_FRAME_H
#define KVF_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fdpass.h"
#include "proto.h"

#define FRAME_BUF_INITIAL 16384u /* every reader's buffer to begin with */

struct frame_reader {
    struct proto_limits lim;
    uint8_t *buf;           /* owned */
    size_t off, len, cap;   /* consumed bytes, filled bytes, allocated bytes */
    int fds[FDPASS_MAX_FDS];
    unsigned nfds;          /* received, not yet taken; owned */
    uint64_t base;          /* stream offset of buf[0] */
    uint64_t fd_mark;       /* stream offset just past the read that brought the pending fds */
    uint64_t lost_mark;     /* the same for the last read whose fds this process could not take */
    uint64_t last_start, last_end; /* stream range of the frame frame_reader_next returned last */
};

int frame_reader_init(struct frame_reader *r, const struct proto_limits *lim);
/* Frees the buffer and closes fds not taken. Accepts NULL. */
void frame_reader_done(struct frame_reader *r);

/* One recvmsg (flags, e.g. MSG_DONTWAIT) into the buffer. Returns bytes read (> 0), 0 at EOF,
 * or -errno: -EAGAIN, -EBADMSG (bad or too many fds: all closed), -EMSGSIZE (more pending fds
 * than FDPASS_MAX_FDS). Fds this process had no room for are noted (frame_reader_frame_lost_fds)
 * and the bytes kept. */
ssize_t frame_reader_fill(struct frame_reader *r, int sock, int flags);

/* The buffer size the next frame_reader_fill grows to (at least the current one): a frame's
 * whole length once its header is in. For budgets of memory held by partial frames. */
size_t frame_reader_want(const struct frame_reader *r);
/* With no partial frame held, gives a grown buffer back (down to FRAME_BUF_INITIAL). */
void frame_reader_trim(struct frame_reader *r);

/* The next complete frame: returns 1 with *frame / *len pointing into the buffer (valid until
 * the next fill or next call), 0 when more bytes are needed, or -EPROTO / -EMSGSIZE with err
 * when the header is bad (the connection should be dropped). */
int frame_reader_next(struct frame_reader *r, const uint8_t **frame, size_t *len, char *err,
                      size_t errlen);

/* Whether the pending fds came with the frame frame_reader_next returned last. The kernel ends
 * a read right after the bytes that carried fds, and a sender attaches fds to a frame's first
 * byte, so the fds belong to the frame holding the last byte of that read; frames that ended
 * before it (pipelined ahead of it) own none. */
bool frame_reader_frame_has_fds(const struct frame_reader *r);

/* Whether fds sent with the frame frame_reader_next returned last were lost because this
 * process was out of descriptors (fdpass_recv's ret_lost): the sender is not at fault. */
bool frame_reader_frame_lost_fds(const struct frame_reader *r);

/* Moves up to max pending fds into fds[] (ownership passes to the caller); returns how many. */
unsigned frame_reader_take_fds(struct frame_reader *r, int *fds, unsigned max);

#endif
