/* notify.h: systemd readiness and watchdog (sd_notify from libsystemd). Messages go to
 * $NOTIFY_SOCKET when set and are dropped otherwise. The watchdog is a uv timer at half of
 * $WATCHDOG_USEC (sd_watchdog_enabled) that sends WATCHDOG=1 while the loop runs, so a wedged
 * loop gets restarted. struct notify lives inside struct daemon; loop thread only. */
#ifndef KVF_NOTIFY_H
#define KVF_NOTIFY_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

struct notify {
    uv_timer_t watchdog;
    bool watchdog_inited;
    uint64_t watchdog_usec; /* 0: watchdog off */
    uint64_t watchdog_sent; /* WATCHDOG=1 messages sent */
};

/* Inits the timer on `loop` and starts it when systemd asked for a watchdog. 0 or -errno. */
int notify_start(struct notify *n, uv_loop_t *loop);
void notify_stop(struct notify *n);

/* READY=1 with a STATUS= line. */
void notify_ready(const char *status);
void notify_status(const char *status);
/* RELOADING=1 with MONOTONIC_USEC=now; notify_ready() ends the reload. */
void notify_reloading(void);
void notify_stopping(const char *status);

#endif
