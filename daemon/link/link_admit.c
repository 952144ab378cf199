/* link_admit.c: who may hold a slot in the link's table of endpoints (issue 25). Loop thread.
 *
 * Anyone who reaches the listen port gets an endpoint before proving anything, so inbound
 * endpoints are admitted in two stages. Unproven ones (the handshake not finished) have slots of
 * their own: at most max_unauth at once, max_unauth_per_addr from one address, each closed at
 * its short deadline (unauth_timeout_ms, link_peers_check_deadlines). At PROOF one moves to the
 * proven table (max_peers, shared with our outbound endpoints), which strangers never fill: a
 * flood costs real peers nothing but the unproven slots, and real peers from other addresses
 * still get in. A connection over a cap is rejected (ucp_listener_reject, outside UCX's
 * callback, after the progress round), which UCX 1.13 survives only with link_ucsfix.c. */
#include "link_int.h"

#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

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
    return l->npeers - l->n_unauth;
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
    p->unauth = 0;
}

void link_admit_status(const struct link *l, json_t *o)
{
    json_object_set_new(o, "unproven_endpoints", json_integer(l->n_unauth));
    json_object_set_new(o, "ucx_stale_event_filter", json_boolean(link_ucsfix_active()));
    json_object_set_new(o, "ucx_stale_events_dropped",
                        json_integer((json_int_t)link_ucsfix_dropped()));
    json_object_set_new(
        o, "admission",
        json_pack("{s:I,s:I,s:I,s:I,s:I}", "max_peers", (json_int_t)l->cfg.max_peers,
                  "max_unproven", (json_int_t)l->cfg.max_unauth, "max_unproven_per_address",
                  (json_int_t)l->cfg.max_unauth_per_addr, "unproven_timeout_ms",
                  (json_int_t)l->cfg.unauth_timeout_ms, "handshake_timeout_ms",
                  (json_int_t)l->cfg.handshake_timeout_ms));
}
