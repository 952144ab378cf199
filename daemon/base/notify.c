/* notify.c: sd_notify messages and the watchdog timer. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "log.h"
#include "notify.h"

static void send_msg(const char *msg)
{
    int r = sd_notify(0, msg);
    if (r < 0)
        log_warn("sd_notify: %s", strerror(-r));
}

static void watchdog_cb(uv_timer_t *t)
{
    struct notify *n = t->data;
    send_msg("WATCHDOG=1");
    n->watchdog_sent++;
}

int notify_start(struct notify *n, uv_loop_t *loop)
{
    uint64_t usec = 0;
    int r = uv_timer_init(loop, &n->watchdog);
    if (r < 0)
        return r;
    n->watchdog_inited = true;
    n->watchdog.data = n;
    r = sd_watchdog_enabled(0, &usec);
    if (r <= 0 || usec == 0) {
        n->watchdog_usec = 0;
        return 0;
    }
    n->watchdog_usec = usec;
    uint64_t every_ms = usec / 2000;
    if (every_ms == 0)
        every_ms = 1;
    log_info("watchdog: WATCHDOG=1 every %llu ms", (unsigned long long)every_ms);
    return uv_timer_start(&n->watchdog, watchdog_cb, 0, every_ms);
}

void notify_stop(struct notify *n)
{
    if (n->watchdog_inited && !uv_is_closing((uv_handle_t *)&n->watchdog))
        uv_close((uv_handle_t *)&n->watchdog, NULL);
}

void notify_ready(const char *status)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "READY=1\nSTATUS=%s", status);
    send_msg(msg);
}

void notify_status(const char *status)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "STATUS=%s", status);
    send_msg(msg);
}

void notify_reloading(void)
{
    struct timespec ts;
    char msg[128];
    clock_gettime(CLOCK_MONOTONIC, &ts);
    snprintf(msg, sizeof(msg), "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading",
             (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000);
    send_msg(msg);
}

void notify_stopping(const char *status)
{
    char msg[512];
    snprintf(msg, sizeof(msg), "STOPPING=1\nSTATUS=%s", status);
    send_msg(msg);
}
