/* link_admit.c: who may hold a slot in the link's table of endpoints (issue 25). Loop thread.
 *
 * Anyone who reaches the listen port gets an endpoint before proving anything, so inbound
 * endpoints are admitted in two stages. Unproven ones (the handshake not finished) have slots of
 * their own: at most max_unauth at once, max_unauth_per_addr from one address, each closed at
 * its short deadline (unauth_timeout_ms, link_peers_check_deadlines). At READY one moves to the
 * proven table (max_peers, shared with our outbound endpoints), which strangers never fill: a
 * flood costs real peers nothing but the unproven slots.
 *
 * Refusing safely (UCX 1.13.1, docs/UCX.md trap 18): ucp_listener_reject lets a peer abort us.
 * The reject switches the socket's async handler to EVWRITE under the async lock; the async
 * thread sees it writable, cannot take the lock and queues a "missed" event keyed by the fd; the
 * reject sends and destroys the endpoint, the fd is closed and the next connection the listener
 * accepts gets the same fd; the missed EVWRITE is then dispatched to that fresh endpoint, whose
 * send asserts (tcp_sockcm_ep.c:416). An accepted endpoint has the same hazard until its first
 * message left: ucp_ep_create switches its handler to EVWRITE and the async thread sends; closing
 * it at once (the next progress round) still aborted us within seconds of a flood. So a refused
 * connection is accepted (ucp_ep_create, the path every peer takes) and force-closed only after
 * a progress round has run and LINK_REFUSE_MS have passed: by then the async thread has sent,
 * the handler waits for EVREAD alone, and a stale EVREAD on a reused fd is harmless (a receive
 * that finds nothing). The flood measured that way: no abort (docs/UCX.md trap 18). */
#include "link_int.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#define LINK_REFUSE_MS 100 /* a refused endpoint lives this long at least (see above) */

/* Whether "host:port" strings a and b name the same host. */
static int admit_same_host(const char *a, const char *b)
{
    const char *ca = strrchr(a, ':'), *cb = strrchr(b, ':');
    size_t la = ca ? (size_t)(ca - a) : strlen(a), lb = cb ? (size_t)(cb - b) : strlen(b);
    return la == lb && !memcmp(a, b, la);
}

void link_admit_log(struct link *l, const char *addr, const char *what)
{
    uint64_t now = uv_now(l->loop);
    if (l->refuse_logged_ms && now - l->refuse_logged_ms < 1000) {
        l->refuse_unlogged++;
        return;
    }
    log_warn("link: connection from %s %s; %llu more connections refused or failed before the "
             "handshake since the last report", addr, what, (unsigned long long)l->refuse_unlogged);
    l->refuse_logged_ms = now;
    l->refuse_unlogged = 0;
}

static void admit_log(struct link *l, const char *addr, const char *why, unsigned limit)
{
    char what[160];
    snprintf(what, sizeof what, "refused: %s (%u is the limit)", why, limit);
    link_admit_log(l, addr, what);
}

unsigned link_admit_proven_count(const struct link *l)
{
    return l->npeers - l->n_unauth - l->n_refused;
}

int link_admit_inbound(struct link *l, const char *addr)
{
    if (l->n_unauth >= l->cfg.max_unauth) {
        l->st.conns_refused_unauth++;
        admit_log(l, addr, "endpoints that have not proven the cluster secret",
                  l->cfg.max_unauth);
        return -EBUSY;
    }
    unsigned same = 0;
    for (const struct link_peer *p = l->peers; p; p = p->next)
        same += p->unauth && admit_same_host(p->addr, addr);
    if (same >= l->cfg.max_unauth_per_addr) {
        l->st.conns_refused_addr++;
        admit_log(l, addr, "unproven endpoints from this address", l->cfg.max_unauth_per_addr);
        return -EBUSY;
    }
    return 0;
}

void link_admit_refused(struct link_peer *p)
{
    p->refused_at = p->link->st.progress_calls + 1; /* never 0 */
    p->deadline_ms = uv_now(p->link->loop) + LINK_REFUSE_MS;
    p->link->n_refused++;
}

int link_admit_proven(struct link_peer *p)
{
    struct link *l = p->link;
    if (!p->unauth)
        return 0;
    p->unauth = 0;
    l->n_unauth--;
    if (link_admit_proven_count(l) <= l->cfg.max_peers)
        return 0;
    l->st.conns_refused_table++;
    admit_log(l, p->addr, "the table of proven peers is full", l->cfg.max_peers);
    return -EBUSY;
}

void link_admit_release(struct link_peer *p)
{
    if (p->unauth)
        p->link->n_unauth--;
    if (p->refused_at)
        p->link->n_refused--;
    p->unauth = 0;
    p->refused_at = 0;
}

void link_admit_reap(struct link *l)
{
    if (!l->n_refused)
        return;
    /* progress_calls counts ucp_worker_progress rounds; refused_at is the count a round after
     * the one that accepted reaches: close once it ran and the time passed (the tick comes
     * every 100 ms at most; while tearing down, no listener is left to reuse the fd) */
    uint64_t now = uv_now(l->loop);
    for (struct link_peer *p = l->peers; p; p = p->next)
        if (p->refused_at && p->state < LINK_PEER_FAILED &&
            (l->freeing || (l->st.progress_calls >= p->refused_at && now >= p->deadline_ms)))
            link_peer_fail(p, -EBUSY);
}

void link_admit_status(const struct link *l, json_t *o)
{
    json_object_set_new(o, "unproven_endpoints", json_integer(l->n_unauth));
    json_object_set_new(o, "refused_endpoints_closing", json_integer(l->n_refused));
    json_object_set_new(
        o, "admission",
        json_pack("{s:I,s:I,s:I,s:I,s:I}", "max_peers", (json_int_t)l->cfg.max_peers,
                  "max_unproven", (json_int_t)l->cfg.max_unauth, "max_unproven_per_address",
                  (json_int_t)l->cfg.max_unauth_per_addr, "unproven_timeout_ms",
                  (json_int_t)l->cfg.unauth_timeout_ms, "handshake_timeout_ms",
                  (json_int_t)l->cfg.handshake_timeout_ms));
}
