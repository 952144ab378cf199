/* engine_lost.c: peers lost a moment ago (a bounded `lost` list for `peers`), and the death
 * watch that ends the hold on a frozen peer's landing slots (see engine_lost.h).
 *
 * A peer lost for silence while it could put straight into our memory over shared memory keeps
 * its quarantined slots (engine_quar.c, quar_peer_frozen): if it was only stopped, a put it was
 * inside would finish when it runs again. It ends when the peer fences its writes on a new link
 * (engine_fence.c); once its process has exited no put of it can land, so the hold ends then
 * too. The process is the one the handshake named, known by a pidfd the link
 * opened while it answered (link_proc.c), so a pid reused since cannot pass for it; polled here
 * on the loop. Where pidfd_open is missing or refused, the link read the process's start time
 * instead (link_peer_proc_start): its pid is polled every LOST_POLL_MS (link_proc_alive: gone,
 * a zombie, or a pid reused by a process with another start time all mean it exited). Without
 * either (another pid namespace or boot, an older peer) the slots stay held until it is heard
 * again, and the `lost` row says why. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon.h"
#include "engine_lost.h"
#include "engine_peer.h"
#include "engine_quar.h"

struct elost {
    struct engine *e;
    struct elost *next;
    uint64_t key;
    char peer[160], addr[256];
    uint64_t lost_at, seen_before; /* engine_now at the loss; silence then */
    int err;
    bool held;
    const char *why; /* static: what the hold waits for */
    int pidfd;       /* owned while watched, -1 */
    uint32_t pid;
    uint64_t start;  /* polled: the process start time its pid must still have */
    union {
        uv_poll_t poll;   /* the pidfd */
        uv_timer_t timer; /* polled: no pidfd */
    } h;
    bool polled;
    uint64_t retry_at, retry_ms; /* held with an address: when to dial it next, and the backoff */
    bool handle;   /* h initialised: closed by drop() */
    bool watching; /* waiting for the exit */
    bool closing;
};

static unsigned count(const struct engine *e, bool watched)
{
    unsigned n = 0;
    for (const struct elost *g = e->lost; g; g = g->next)
        n += !watched || g->watching;
    return n;
}

static void closed_cb(uv_handle_t *h)
{
    struct elost *g = h->data;
    if (g->pidfd >= 0)
        close(g->pidfd);
    free(g);
}

/* Unlinked already; frees now or from the close callback. */
static void drop(struct elost *g)
{
    if (!g->handle) {
        if (g->pidfd >= 0)
            close(g->pidfd);
        free(g);
        return;
    }
    g->closing = true;
    if (g->polled)
        uv_timer_stop(&g->h.timer);
    else
        uv_poll_stop(&g->h.poll);
    uv_close((uv_handle_t *)&g->h, closed_cb);
}

static void unlink_drop(struct engine *e, struct elost *g)
{
    for (struct elost **pp = &e->lost; *pp; pp = &(*pp)->next)
        if (*pp == g) {
            *pp = g->next;
            break;
        }
    drop(g);
}

/* The watch failed: the slots stay held until the peer fences its writes on a new link. */
static void watch_failed(struct elost *g, const char *how)
{
    log_warn("engine: lost peer %s: watching its process %u failed (%s): its slots stay "
             "held until it fences its writes on a new link", g->peer, g->pid, how);
    g->why = "the watch on its process failed";
    g->watching = false;
}

static void exited(struct elost *g)
{
    struct engine *e = g->e;
    uint64_t held = e->arena ? arena_owner_bytes(e->arena, g->key) : 0;
    e->c.peers_exited_reclaimed++;
    log_warn("engine: lost peer %s: its process %u exited %llu ms after the loss: no put of it "
             "can land any more, reclaiming its held landing slots (%llu KiB)", g->peer, g->pid,
             (unsigned long long)(engine_now(e) - g->lost_at), (unsigned long long)(held >> 10));
    quar_peer_back(e, g->key); /* the next tick reclaims, after any scatter that reads them */
    g->held = g->watching = false;
    g->retry_at = 0;
    g->why = "its process exited: slots reclaimed";
}

static void exited_cb(uv_poll_t *h, int status, int events)
{
    (void)events; /* readable: the process exited; an error: the pidfd says nothing more */
    struct elost *g = h->data;
    if (g->closing)
        return;
    uv_poll_stop(h);
    if (status < 0)
        watch_failed(g, uv_strerror(status));
    else
        exited(g);
}

static void poll_cb(uv_timer_t *t)
{
    struct elost *g = t->data;
    if (g->closing)
        return;
    int alive = link_proc_alive(g->pid, g->start);
    if (alive > 0)
        return;
    uv_timer_stop(t);
    if (alive < 0)
        watch_failed(g, strerror(-alive));
    else
        exited(g);
}

static void prune(struct engine *e, uint64_t now)
{
    for (struct elost **pp = &e->lost; *pp;) {
        struct elost *g = *pp;
        if (!g->watching && !g->held && now - g->lost_at >= LOST_KEEP_MS) {
            *pp = g->next;
            drop(g);
        } else {
            pp = &g->next;
        }
    }
    while (count(e, false) > LOST_ROWS_MAX) { /* the oldest row not watched goes */
        struct elost *old = NULL;
        for (struct elost *g = e->lost; g; g = g->next)
            if (!g->watching)
                old = g; /* the list is newest first */
        if (!old)
            break;
        unlink_drop(e, old);
    }
}

/* Without a pidfd: the pid and start time polled on a timer. */
static void watch_polled(struct engine *e, struct elost *g, uint32_t pid, uint64_t start)
{
    g->pid = pid;
    g->start = start;
    if (count(e, true) >= LOST_WATCH_MAX || uv_timer_init(&e->d->loop, &g->h.timer) < 0) {
        g->why = "too many lost peers watched";
        return;
    }
    g->h.timer.data = g;
    g->handle = g->polled = true;
    if (uv_timer_start(&g->h.timer, poll_cb, LOST_POLL_MS, LOST_POLL_MS) < 0) {
        g->why = "the watch on its process failed";
        return;
    }
    g->watching = true;
    g->why = "held until it fences its writes on a new link or its process exits (no pidfd: its "
             "pid and start time polled)";
}

static void watch(struct engine *e, struct elost *g, struct link_peer *lp)
{
    const char *why = NULL;
    uint32_t pid = link_peer_pid(lp);
    uint64_t start;
    if (link_peer_proc_start(lp, &pid, &start)) {
        watch_polled(e, g, pid, start);
        return;
    }
    int fd = link_peer_take_pidfd(lp, &why);
    if (fd < 0) {
        g->why = why;
        log_warn("engine: lost peer %s keeps its quarantined landing slots until it is heard "
                 "again: %s", g->peer, why);
        return;
    }
    g->pid = pid;
    if (count(e, true) >= LOST_WATCH_MAX || uv_poll_init(&e->d->loop, &g->h.poll, fd) < 0) {
        close(fd);
        g->why = "too many lost peers watched";
        return;
    }
    g->pidfd = fd;
    g->h.poll.data = g;
    g->handle = true;
    if (uv_poll_start(&g->h.poll, UV_READABLE, exited_cb) < 0) {
        g->why = "the watch on its process failed";
        return;
    }
    g->watching = true;
    g->why = "held until it fences its writes on a new link or its process exits";
}

void lost_add(struct engine *e, const struct epeer *p, struct link_peer *lp, int err, bool held,
              uint64_t key)
{
    uint64_t now = engine_now(e);
    prune(e, now);
    struct elost *g = NULL;
    for (struct elost *x = e->lost; x; x = x->next)
        if (x->key == key)
            g = x;
    if (!g) {
        if (!(g = calloc(1, sizeof *g)))
            return; /* only the row and the early reclaim are lost: the hold stays */
        g->e = e;
        g->key = key;
        g->pidfd = -1;
        g->next = e->lost;
        e->lost = g;
    }
    snprintf(g->peer, sizeof g->peer, "%s", link_peer_id(lp));
    snprintf(g->addr, sizeof g->addr, "%s", p->addr[0] ? p->addr : "-");
    g->lost_at = now;
    g->seen_before = link_peer_silent_ms(lp);
    g->err = err;
    if (held) {
        g->held = true;
        g->retry_ms = LOST_RETRY_MS;
        g->retry_at = now + g->retry_ms;
        engine_due(e, EPART_LOST, g->retry_at);
        if (!g->handle)
            watch(e, g, lp);
    } else if (!g->watching) {
        g->why = "nothing held";
    }
}

uint64_t lost_redial(struct engine *e, uint64_t now)
{
    for (struct elost *g = e->lost; g; g = g->next) {
        if (!g->held || !g->retry_at || now < g->retry_at)
            continue;
        if (!strcmp(g->addr, "-")) { /* it dialed us: it will again, or exit */
            g->retry_at = 0;
            continue;
        }
        g->retry_ms = g->retry_ms * 2 < LOST_RETRY_MAX_MS ? g->retry_ms * 2 : LOST_RETRY_MAX_MS;
        g->retry_at = now + g->retry_ms;
        struct epeer *p;
        int rc = epeer_get(e, g->addr, &p); /* up: its fence ends the hold (engine_fence.c) */
        if (rc < 0)
            log_debug("engine: lost peer %s at %s: dialing it again failed: %s", g->peer,
                      g->addr, strerror(-rc));
    }
    uint64_t next = 0;
    for (const struct elost *g = e->lost; g; g = g->next)
        if (g->held && g->retry_at && (!next || g->retry_at < next))
            next = g->retry_at;
    return next;
}

void lost_back(struct engine *e, uint64_t key)
{
    for (struct elost **pp = &e->lost; *pp;) {
        struct elost *g = *pp;
        if (g->key == key) {
            *pp = g->next;
            drop(g);
        } else {
            pp = &g->next;
        }
    }
}

const struct elost *lost_find(const struct engine *e, uint64_t key, const char **id,
                              const char **why)
{
    for (const struct elost *g = e->lost; g; g = g->next)
        if (g->key == key) {
            *id = g->peer;
            *why = g->why ? g->why : "";
            return g;
        }
    return NULL;
}

void lost_json(struct engine *e, json_t *o)
{
    uint64_t now = engine_now(e);
    prune(e, now);
    json_t *a = json_array();
    for (const struct elost *g = e->lost; g; g = g->next)
        json_array_append_new(
            a, json_pack("{s:s,s:s,s:s,s:I,s:I,s:s,s:b,s:b,s:s}", "peer", g->peer, "addr",
                         g->addr, "state", "lost", "seen_ms",
                         (json_int_t)(g->seen_before + now - g->lost_at), "lost_ms",
                         (json_int_t)(now - g->lost_at), "reason", strerror(-g->err), "held",
                         g->held, "watching_exit", g->watching, "why", g->why ? g->why : ""));
    json_object_set_new(o, "lost", a);
}

void lost_stop(struct engine *e)
{
    while (e->lost) {
        struct elost *g = e->lost;
        e->lost = g->next;
        drop(g);
    }
}
