/* engine_peer.c: the engine's peers (see engine.h). One struct epeer per link peer: outbound
 * ones made on demand by "host:port" (the home of a table, the daemon hosting a writer), inbound
 * ones when their handshake finishes. A lost peer fails what used it (PEER_LOST, or
 * PEER_UNREACHABLE when it never came up), its quarantined landing slots are reclaimed a little
 * later (engine_quar.c: the link force-closes the endpoint first), and the next request connects
 * again. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "egpu_peer.h"
#include "engine_ctx.h"
#include "engine_fence.h"
#include "engine_gen.h"
#include "engine_lost.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "engine_share.h"
#include "engine_tab.h"

static struct epeer *epeer_new(struct engine *e, struct link_peer *lp, const char *addr)
{
    struct epeer *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->e = e;
    p->lp = lp;
    p->key = ++e->next_key;
    p->outbound = addr != NULL;
    snprintf(p->addr, sizeof p->addr, "%s", addr ? addr : "");
    p->since_ms = engine_now(e);
    p->next = e->peers;
    e->peers = p;
    link_peer_set_data(lp, p);
    return p;
}

int epeer_get(struct engine *e, const char *addr, struct epeer **ret)
{
    if (!e->link)
        return -ENOTCONN;
    for (struct epeer *p = e->peers; p; p = p->next)
        if (p->lp && p->outbound && strcmp(p->addr, addr) == 0) {
            *ret = p;
            return 0;
        }
    struct link_peer *lp;
    int rc = link_connect(e->link, addr, &lp);
    if (rc < 0)
        return rc;
    struct epeer *p = link_peer_data(lp);
    if (!p && !(p = epeer_new(e, lp, addr)))
        return -ENOMEM;
    if (link_peer_state(lp) == LINK_PEER_READY)
        p->up = true;
    *ret = p;
    return 0;
}

struct epeer *epeer_of(struct engine *e, struct link_peer *lp)
{
    struct epeer *p = link_peer_data(lp);
    return p ? p : epeer_new(e, lp, NULL);
}

void epeer_forget(struct engine *e, struct epeer *p)
{
    for (struct epeer **pp = &e->peers; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    laycache_clear(&p->lc);
    free(p);
}

void epeer_free_all(struct engine *e)
{
    while (e->peers) {
        struct epeer *p = e->peers;
        e->peers = p->next;
        laycache_clear(&p->lc);
        free(p);
    }
}

json_t *epeer_json(const struct epeer *p)
{
    struct link_peer *lp = p->lp;
    const char *state = !lp                    ? "closed"
                        : link_peer_suspect(lp) ? "suspect" /* missed keepalives, not yet lost */
                                                : link_peer_state_to_string(link_peer_state(lp));
    json_t *o = json_pack(
        "{s:s,s:s,s:s,s:s,s:b,s:b,s:i,s:I,s:I,s:I,s:I,s:I}", "peer", lp ? link_peer_id(lp) : "",
        "addr", p->addr[0] ? p->addr : "-", "direction", p->outbound ? "out" : "in", "state",
        state, "same_host",
        lp ? link_peer_same_host(lp) : 0, "put_fast", lp ? link_peer_put_fast(lp) : 0, "requests",
        (int)p->users, "chunks_sent", (json_int_t)p->chunks_sent, "chunks_recv",
        (json_int_t)p->chunks_recv, "bytes_sent", (json_int_t)p->bytes_sent, "bytes_recv",
        (json_int_t)p->bytes_recv, "age_ms", (json_int_t)(engine_now(p->e) - p->since_ms));
    if (o) /* last PING or PONG heard */
        json_object_set_new(o, "seen_ms", json_integer(lp ? (json_int_t)link_peer_silent_ms(lp) : -1));
    return o;
}
