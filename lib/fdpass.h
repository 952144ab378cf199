/* fdpass.h: sending and receiving bytes with file descriptors attached (SCM_RIGHTS) over a unix
 * stream socket. Received fds are opened close-on-exec (MSG_CMSG_CLOEXEC); fds beyond what the
 * caller accepts, or arriving in a truncated control message, are closed, never leaked, and
 * reported. Any thread; no shared state. */
#ifndef KVF_FDPASS_H
#define KVF_FDPASS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define FDPASS_MAX_FDS 16 /* most fds one call carries (== LAYOUT_MAX_POOLS) */

/* Sends all len bytes, the fds attached to the first byte (nfds <= FDPASS_MAX_FDS; the fds stay
 * the caller's). Blocks on a blocking socket; on a non-blocking one retries on EAGAIN with
 * poll() for at most timeout_ms (-1: forever). MSG_NOSIGNAL. Returns 0 or -errno (-EPIPE when
 * the peer is gone, -ETIMEDOUT). */
int fdpass_send(int sock, const void *buf, size_t len, const int *fds, unsigned nfds, int timeout_ms);

/* One sendmsg of up to len bytes with flags (MSG_NOSIGNAL added), the fds (nfds <=
 * FDPASS_MAX_FDS, nfds 0 for none) attached to its first byte: the caller gives them with a
 * frame's first bytes only. Returns what sendmsg returns (bytes sent, or -1 with errno). */
ssize_t fdpass_send_some(int sock, const void *buf, size_t len, const int *fds, unsigned nfds,
                         int flags);

/* One recvmsg of up to len bytes (flags: e.g. MSG_DONTWAIT). Fds that came with the bytes are
 * stored in fds[] (up to maxfds) and counted in *nfds. Returns the byte count (0 at EOF) or
 * -errno. If more fds arrived than maxfds, or the control data was truncated (MSG_CTRUNC) with
 * its buffer full, or anything other than SCM_RIGHTS arrived, every received fd is closed,
 * *nfds is 0 and -EBADMSG is returned (the bytes read are lost: the caller drops the
 * connection). A truncation with room left in the buffer is the receiver's own fault: the
 * kernel could not install the fds (this process is at RLIMIT_NOFILE): then the fds that did
 * arrive are closed, *nfds is 0 and, with ret_lost, the bytes are returned and *ret_lost set
 * (the sender did nothing wrong); without ret_lost, -EMFILE. *ret_lost is false otherwise. */
ssize_t fdpass_recv(int sock, void *buf, size_t len, int *fds, unsigned maxfds, unsigned *nfds,
                    int flags, bool *ret_lost);

/* Closes n fds and sets them to -1. */
void fdpass_close_all(int *fds, unsigned n);

#endif
