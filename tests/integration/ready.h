/* ready.h: waiting for a test's kvferryd to say READY=1 (bodies in tests/support/ready.c). The
 * fixture binds a datagram socket, the daemon gets it as NOTIFY_SOCKET (as systemd would give it),
 * and the test reads sd_notify messages from it. A daemon is only stopped after READY=1: its
 * sockets appear before it is ready (GPU and UCX start after them), so a socket file is no proof of
 * a start. */
#ifndef KVF_READY_H
#define KVF_READY_H

#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>

#include "testutil.h"

struct tr_notify {
    int fd;
    char path[TU_SUN_PATH_MAX + 1];
};

int64_t tr_now_ms(void);

/* Binds <dir>/notify (a stale one is replaced). */
void tr_open(struct tr_notify *n, const char *dir);

/* In the daemon's child, before exec. */
void tr_child_env(const struct tr_notify *n);

/* Waits for READY=1 from pid: 1 when it came; 0 when pid exited first (reaped, its wait status
 * in *status when status is not NULL); -1 after timeout_ms. */
int tr_wait_ready(struct tr_notify *n, pid_t pid, int timeout_ms, int *status);

void tr_close(struct tr_notify *n);

#endif
