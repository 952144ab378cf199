/* engine_linkwait.c: a link whose start waits for its interface (issue 26, chaos seeds 303 and
 * 808; tests/chaos/repro/start-while-link-down). UCX lists the interfaces that are up and
 * running once, at ucp_init, and refuses every connection that later arrives on another one
 * (link_ifstate.c): a daemon started while the interface of its listen address was down
 * refused every peer for as long as it ran, and answered `status` as if healthy. Re-making the
 * UCP context under a running link would mean re-making every registration and the arena the
 * engine's slots live in; instead the link's start waits: the daemon comes up (its workers and
 * the same-node path serve at once), the engine runs without a link (a RECV naming a remote
 * home fails NO_ROUTE saying why), `status` shows peers.link.state "waiting" with the
 * interface and why (kvferryctl status: LINK WAITING), and every LINKWAIT_POLL_MS the
 * interface is looked at again; once it is up and running the link starts (ucp_init then sees
 * it), the ranks registered meanwhile get their pools registered and their layouts forwarded,
 * and peers.link.waited_ms says how long it took. A wildcard listen address waits for nothing.
 * Loop thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "engine.h"
#include "engine_int.h"
#include "engine_linkwait.h"
#include "link.h"

struct linkwait {
    struct engine *e;
    linkwait_up_cb up;   /* engine.c's: starts the link and what registered meanwhile */
    uv_timer_t timer;
    uint64_t since_ms, warned_ms, waited_ms;
    bool waiting, closing;
    int last_rc; /* link_ifstate's last answer */
    char ifname[16]; /* IFNAMSIZ */
    char why[512];
};

static void closed_cb(uv_handle_t *h)
{
    free(h->data);
}

/* The interface's state, in lw->why; true: a link started now accepts on it. */
static bool ready(struct linkwait *lw)
{
    const struct kvf_config *cfg = &lw->e->d->cfg;
    int rc = link_ifstate(cfg->listen_address, lw->ifname, sizeof lw->ifname);
    if (rc == 0)
        snprintf(lw->why, sizeof lw->why,
                 "listen address %s is on interface %s, which is down or has no carrier: UCX "
                 "fixes its devices when the link starts, so it waits for %s to come up",
                 cfg->listen_address, lw->ifname, lw->ifname);
    else if (rc < 0)
        snprintf(lw->why, sizeof lw->why,
                 "listen address %s is on no interface of this host (%s): the link waits for it",
                 cfg->listen_address, strerror(-rc));
    lw->last_rc = rc;
    return rc > 0;
}

static void poll_cb(uv_timer_t *t)
{
    struct linkwait *lw = t->data;
    struct engine *e = lw->e;
    uint64_t now = engine_now(e);
    if (lw->closing || e->stopping)
        return;
    if (!ready(lw)) {
        if (now - lw->warned_ms >= LINKWAIT_WARN_MS) {
            lw->warned_ms = now;
            log_warn("engine: the link still waits (%llu s): %s",
                     (unsigned long long)((now - lw->since_ms) / 1000), lw->why);
        }
        return;
    }
    char err[400] = ""; /* fits lw->why with its words */
    int rc = lw->up(e, err, sizeof err);
    if (rc < 0 && !e->link) { /* e.g. the port taken meanwhile: tried again, said again */
        snprintf(lw->why, sizeof lw->why, "the link failed to start: %s", err);
        if (now - lw->warned_ms >= LINKWAIT_WARN_MS) {
            lw->warned_ms = now;
            log_error("engine: starting the link after its interface came up failed: %s", err);
        }
        return;
    }
    if (rc < 0) { /* its arenas (out of memory): no link rather than one with no slots */
        snprintf(lw->why, sizeof lw->why, "the link's arenas failed: %s", err);
        log_error("engine: %s: the daemon runs without a link", lw->why);
        e->link = link_free(e->link);
        uv_timer_stop(t);
        return;
    }
    lw->waiting = false;
    lw->waited_ms = now - lw->since_ms;
    uv_timer_stop(t);
    log_info("engine: interface %s is up: the link started after waiting %llu ms",
             lw->ifname[0] ? lw->ifname : "-", (unsigned long long)lw->waited_ms);
}

bool linkwait_start(struct engine *e, linkwait_up_cb up)
{
    struct linkwait *lw = calloc(1, sizeof *lw);
    if (!lw)
        return false; /* the link starts now, as before */
    lw->e = e;
    lw->up = up;
    const struct kvf_config *cfg = &e->d->cfg;
    if (cfg->listen_port <= 0 || ready(lw) || uv_timer_init(&e->d->loop, &lw->timer) < 0) {
        free(lw);
        return false;
    }
    lw->timer.data = lw;
    e->lw = lw;
    lw->waiting = true;
    e->c.link_waits++;
    lw->since_ms = lw->warned_ms = engine_now(e);
    uv_timer_start(&lw->timer, poll_cb, LINKWAIT_POLL_MS, LINKWAIT_POLL_MS);
    log_warn("engine: the link does not start yet: %s (status: peers.link.state waiting)", lw->why);
    return true;
}

bool linkwait_waiting(const struct engine *e, const char **why)
{
    if (why)
        *why = e->lw ? e->lw->why : "";
    return e->lw && e->lw->waiting;
}

void linkwait_json(const struct engine *e, json_t *o)
{
    const struct linkwait *lw = e->lw;
    if (!lw)
        return;
    if (lw->waiting) {
        json_object_set_new(o, "state", json_string("waiting"));
        json_object_set_new(o, "interface", json_string(lw->ifname[0] ? lw->ifname : "-"));
        json_object_set_new(o, "why", json_string(lw->why));
        json_object_set_new(o, "waiting_ms", json_integer((json_int_t)(engine_now(e) -
                                                                         lw->since_ms)));
    } else {
        json_object_set_new(o, "waited_ms", json_integer((json_int_t)lw->waited_ms));
    }
}

void linkwait_stop(struct engine *e)
{
    struct linkwait *lw = e->lw;
    if (!lw)
        return;
    e->lw = NULL;
    lw->closing = true;
    uv_timer_stop(&lw->timer);
    uv_close((uv_handle_t *)&lw->timer, closed_cb);
}
