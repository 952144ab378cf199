/* wlimits.c: the worker socket cannot be held hostage. Admission: workers.max_conns and
 * workers.max_conns_per_uid, where a connection still in its handshake (no HELLO yet) is evicted
 * to make room before anyone is refused. Deadlines, checked by one sweep timer: HELLO
 * (workers.hello_timeout), a begun frame's completion (workers.frame_timeout) and reading queued
 * events (workers.read_timeout). Memory: partial frames of all connections together stay within
 * workers.frame_memory (beyond each reader's first FRAME_BUF_INITIAL bytes). Access: decided
 * again at each frame and at each reload (access_current), so a reload that revokes a worker's
 * uid closes its connection. Everyone closed or refused here is told why. Loop thread only. */
#include <errno.h>
#include <stdio.h>

#include "daemon.h"
#include "workers.h"

#define SWEEP_MIN_MS 20
#define SWEEP_MAX_MS 500

static uint64_t sweep_every(const struct kvf_config *cfg)
{
    uint64_t t = cfg->workers_hello_timeout_ms;
    if (cfg->workers_frame_timeout_ms < t)
        t = cfg->workers_frame_timeout_ms;
    if (cfg->workers_read_timeout_ms < t)
        t = cfg->workers_read_timeout_ms;
    t /= 8; /* detection within an eighth of the shortest deadline */
    return t < SWEEP_MIN_MS ? SWEEP_MIN_MS : t > SWEEP_MAX_MS ? SWEEP_MAX_MS : t;
}

static void sweep_cb(uv_timer_t *h)
{
    struct workers *w = h->data;
    const struct kvf_config *cfg = &w->d->cfg;
    uv_update_time(&w->d->loop);
    uint64_t now = uv_now(&w->d->loop);
    for (struct wconn *c = w->conns; c; c = c->next) {
        if (c->xc.closing || c->broken)
            continue;
        if (!c->hello && now - c->connected_ms >= cfg->workers_hello_timeout_ms) {
            w->counters.hello_timeouts++;
            wconn_close_told(c, KVF_E_TIMEOUT, "no HELLO within %llu ms of connecting "
                             "(workers.hello_timeout)",
                             (unsigned long long)cfg->workers_hello_timeout_ms);
        } else if (c->frame_since_ms && now - c->frame_since_ms >= cfg->workers_frame_timeout_ms) {
            w->counters.frame_timeouts++;
            wconn_close_told(c, KVF_E_TIMEOUT, "a frame begun %llu ms ago is still incomplete "
                             "(workers.frame_timeout %llu ms)",
                             (unsigned long long)(now - c->frame_since_ms),
                             (unsigned long long)cfg->workers_frame_timeout_ms);
        } else if (c->outq.n > 0 && now - c->outq.progress_ms >= cfg->workers_read_timeout_ms) {
            w->counters.read_timeouts++;
            wconn_close_told(c, KVF_E_TIMEOUT, "disconnected: the worker read none of its %u "
                             "queued events for %llu ms (workers.read_timeout)", c->outq.n,
                             (unsigned long long)(now - c->outq.progress_ms));
        }
    }
    uv_timer_start(&w->sweep, sweep_cb, sweep_every(cfg), 0); /* the period follows reloads */
}

void wlimits_sweep_start(struct workers *w)
{
    uv_timer_start(&w->sweep, sweep_cb, sweep_every(&w->d->cfg), 0);
}

/* The oldest live connection still in its handshake; of uid when only_uid. */
static struct wconn *oldest_handshake(struct workers *w, bool only_uid, uid_t uid)
{
    struct wconn *best = NULL;
    for (struct wconn *c = w->conns; c; c = c->next)
        if (!c->xc.closing && !c->broken && !c->hello && (!only_uid || c->peer.uid == uid) &&
            (!best || c->connected_ms < best->connected_ms || (c->connected_ms ==
             best->connected_ms && c->xc.id < best->xc.id)))
            best = c;
    return best;
}

static void evict(struct workers *w, struct wconn *c, const char *limit)
{
    w->counters.evicted++;
    wconn_close_told(c, KVF_E_BAD_REQUEST, "evicted: no HELLO after %llu ms while the socket is at "
                     "%s", (unsigned long long)(uv_now(&w->d->loop) - c->connected_ms), limit);
    wconn_close(c, c->why); /* now: its slot is given to the new connection */
}

void wlimits_limits(void *ctx, struct unix_listener_limits *ret)
{
    const struct kvf_config *cfg = &((struct workers *)ctx)->d->cfg;
    *ret = (struct unix_listener_limits){.max_conns = cfg->workers_max_conns,
                                         .max_conns_per_uid = cfg->workers_max_conns_per_uid,
                                         .no_room = ", all past HELLO"};
}

void wlimits_count(void *ctx, uid_t uid, int64_t *all, int64_t *of_uid)
{
    struct workers *w = ctx;
    *all = *of_uid = 0;
    for (struct wconn *c = w->conns; c; c = c->next)
        if (!c->xc.closing) {
            (*all)++;
            *of_uid += c->peer.uid == uid;
        }
}

int wlimits_admit(void *ctx, const struct peer_cred *peer, char *msg, size_t len)
{
    (void)peer;
    if (((struct workers *)ctx)->draining) {
        snprintf(msg, len, "the daemon is draining: it takes no new workers");
        return -EUSERS;
    }
    return 0;
}

bool wlimits_make_room(void *ctx, bool only_uid, uid_t uid, const char *limit)
{
    struct workers *w = ctx;
    struct wconn *v = oldest_handshake(w, only_uid, uid);
    if (v)
        evict(w, v, limit);
    return v != NULL;
}

static size_t counted(size_t cap) { return cap > FRAME_BUF_INITIAL ? cap - FRAME_BUF_INITIAL : 0; }

static void recount(struct wconn *c)
{
    size_t now = counted(c->rd.cap);
    c->w->frame_bytes = c->w->frame_bytes - c->frame_counted + now;
    c->frame_counted = now;
}

bool wlimits_frame_room(struct wconn *c)
{
    struct workers *w = c->w;
    size_t want = counted(frame_reader_want(&c->rd));
    if (want <= c->frame_counted ||
        w->frame_bytes - c->frame_counted + want <= w->d->cfg.workers_frame_memory)
        return true;
    w->counters.frame_memory_refused++;
    wconn_close_told(c, KVF_E_BAD_REQUEST, "a frame of %zu bytes would pass the daemon's memory "
                     "for partial frames (workers.frame_memory %llu bytes, %llu in use): try "
                     "again later", frame_reader_want(&c->rd),
                     (unsigned long long)w->d->cfg.workers_frame_memory,
                     (unsigned long long)w->frame_bytes);
    return false;
}

void wlimits_frame_after(struct wconn *c)
{
    struct frame_reader *r = &c->rd;
    if (r->len == r->off) {
        c->frame_since_ms = 0;
        frame_reader_trim(r);
    } else if (!c->frame_since_ms || c->frame_at != r->base + r->off) {
        c->frame_at = r->base + r->off;
        uv_update_time(&c->w->d->loop);
        c->frame_since_ms = uv_now(&c->w->d->loop);
    }
    recount(c);
}

void wlimits_conn_gone(struct wconn *c)
{
    c->w->frame_bytes -= c->frame_counted;
    c->frame_counted = 0;
}

bool wlimits_access(struct wconn *c)
{
    if (access_current(&c->w->d->access, &c->peer))
        return true;
    if (!c->xc.closing && !c->broken) {
        c->w->counters.access_revoked++;
        wconn_close_told(c, KVF_E_BAD_REQUEST, "uid %u may no longer use the worker socket "
                         "(access.* changed by a reload)", (unsigned)c->peer.uid);
    }
    return false;
}
