/* engine_fence.c: the proof that ends a returned peer's holds (docs/DESIGN.md §6 "Quarantine
 * that ends").
 *
 * A peer lost for silence while it could write our memory itself (shared-memory puts, the copy
 * threads' cma writes: alive_hold) keeps its quarantined landing slots and held pools
 * (engine_quar.c). Its process exiting ends that hold (engine_lost.c); so does the peer, heard
 * again under any link, proving that its writes into us from before ended. Hearing it is not
 * enough: a daemon thawed by SIGCONT runs its copy threads and its old flows at once, and its
 * loop learns that we dropped the old link only when its own keepalive says so, while it may
 * already answer a new link's handshake. So the generation side sends FENCE on the new link, and
 * the context side, which owns those writes, answers FENCE_DONE when none begun on another link
 * is in flight: it closes its other links to us of that direction first (we lost them: their
 * flows fail and stop writing), then waits until their chunks' copies, puts and fragment jobs
 * completed (the drain acks owed, engine_quar.c, and the stages and jobs still running). Only
 * then are the slots reclaimed, so no write of an old flow lands in a slot granted again. A
 * new link that goes down before its answer leaves the hold as it was. */
#include <stdlib.h>

#include "daemon.h"
#include "engine_ctx.h"
#include "engine_fence.h"
#include "frag_ctx.h"
#include "engine_lost.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "engine_share.h"

struct fence {
    struct epeer *p;   /* the new link it travels on */
    uint64_t key;      /* the peer daemon's share key */
    uint64_t serial;
    bool out;          /* sent by us (generation side); else owed to p (context side) */
    struct fence *next;
};

static void add(struct engine *e, struct epeer *p, uint64_t serial, bool out)
{
    struct fence *f = calloc(1, sizeof *f);
    if (!f) { /* no answer is waited for: the hold stays until its process exits */
        log_error("engine: out of memory tracking a fence with %s", link_peer_id(p->lp));
        return;
    }
    f->p = p;
    f->key = share_key(p);
    f->serial = serial;
    f->out = out;
    f->next = e->fences;
    e->fences = f;
    engine_due(e, EPART_FENCE, ENGINE_DUE_NEXT);
}

static void send_fence(struct epeer *p, wire_type_t type, uint64_t serial)
{
    struct wire_msg m = {.type = type};
    m.u.fence.serial = serial;
    engine_send_msg(p, 0, &m);
}

/* ---- generation side ---- */

void fence_peer_up(struct engine *e, struct epeer *p)
{
    uint64_t key = share_key(p);
    if (!quar_held_for(e, key)) {
        lost_back(e, key); /* nothing held: its lingering row and watch go */
        return;
    }
    uint64_t serial = ++e->fence_serial;
    log_info("engine: peer %s is back: the landing slots and pools held for it wait for its "
             "fence %llu (its writes from before this link ended)", link_peer_id(p->lp),
             (unsigned long long)serial);
    add(e, p, serial, true);
    send_fence(p, WIRE_FENCE, serial);
}

void fence_on_done(struct engine *e, struct epeer *p, const struct wire_msg *m)
{
    for (struct fence **pp = &e->fences; *pp; pp = &(*pp)->next) {
        struct fence *f = *pp;
        if (f->out && f->p == p && f->serial == m->u.fence.serial) {
            *pp = f->next;
            log_info("engine: peer %s: fence %llu done: its held landing slots and pools come "
                     "back", link_peer_id(p->lp), (unsigned long long)f->serial);
            quar_peer_back(e, f->key); /* the next tick reclaims, after any scatter */
            lost_back(e, f->key);
            free(f);
            return;
        }
    }
}

/* ---- context side ---- */

/* Whether a write into the daemon of key begun on another link than p may still be in flight:
 * a flow of another link not ended, a drain ack owed, a chunk's stage or a fragment job of a
 * flow of another link (or of one that ended). */
static bool writes_in_flight(const struct engine *e, const struct epeer *p, uint64_t key)
{
    for (const struct tx *tx = e->txs; tx; tx = tx->next)
        if (!tx_ended(tx) && tx->peer && tx->peer != p && share_key(tx->peer) == key)
            return true;
    for (const struct dack *d = e->dacks; d; d = d->next)
        if (d->key == key)
            return true;
    for (const struct stage *st = e->stages; st; st = st->next)
        if (st->hold_key == key && (!st->tx || st->tx->peer != p))
            return true;
    for (const struct fragjob *j = e->frags; j; j = j->next)
        if (!j->tx || (j->tx->peer != p && (!j->tx->peer || share_key(j->tx->peer) == key)))
            return true; /* a job whose flow ended names no peer: waited for, it ends soon */
    return false;
}

void fence_on_fence(struct engine *e, struct epeer *p, const struct wire_msg *m)
{
    uint64_t key = share_key(p);
    for (struct epeer *q = e->peers; q; q = q->next)
        if (q != p && q->lp && q->outbound == p->outbound && share_key(q) == key) {
            log_info("engine: peer %s fenced its writes from before on a new link: closing the "
                     "old one", link_peer_id(q->lp));
            link_peer_close(q->lp); /* its flows fail when the link reports it down */
        }
    add(e, p, m->u.fence.serial, false);
    fence_tick(e, 0);
}

uint64_t fence_tick(struct engine *e, uint64_t now)
{
    (void)now;
    for (struct fence **pp = &e->fences; *pp;) {
        struct fence *f = *pp;
        if (f->out || writes_in_flight(e, f->p, f->key)) {
            pp = &f->next;
            continue;
        }
        send_fence(f->p, WIRE_FENCE_DONE, f->serial);
        *pp = f->next;
        free(f);
    }
    return fence_pending(e) ? ENGINE_DUE_NEXT : 0; /* owed ones wait for their writes */
}

/* ---- both ---- */

void fence_peer_down(struct engine *e, struct epeer *p)
{
    for (struct fence **pp = &e->fences; *pp;) {
        struct fence *f = *pp;
        if (f->p == p) {
            *pp = f->next;
            free(f);
        } else {
            pp = &f->next;
        }
    }
}

bool fence_pending(const struct engine *e)
{
    for (const struct fence *f = e->fences; f; f = f->next)
        if (!f->out)
            return true;
    return false;
}

void fence_free_all(struct engine *e)
{
    while (e->fences) {
        struct fence *f = e->fences;
        e->fences = f->next;
        free(f);
    }
}
