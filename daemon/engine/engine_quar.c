/* engine_quar.c: when quarantined landing slots come back (docs/DESIGN.md §6), and the context
 * side's "drained" acknowledgement that makes it safe.
 *
 * Generation side: a writer's reservation closed while chunks may still be coming keeps its
 * slots QUARANTINED under the writer's flow id (the arena's quarantine key). They are reclaimed
 * when the context daemon acknowledges the flow drained (a CANCEL carrying the flow, sent after
 * its last chunk of that flow completed), or ENGINE_RECLAIM_MS after the peer was lost (the link
 * force-closes the endpoint first), never before, and never while a GPU scatter of the flow still
 * reads one of them (engine_gpu.c).
 * Context side: every flow that ends failed is acknowledged with that CANCEL once none of its
 * chunks is in flight (at once if none was); a NACK or CANCEL for a flow it does not know is
 * acknowledged at once.
 * Fragment flows have no slots, but their puts write straight into the generation rank's pools:
 * a failed one is held the same way (quar_hold_pools), and the request's FAILED reaches the worker
 * only when no put can still land (pools_drained), so it never reuses blocks under them. The
 * context side counts a fragment job still in flight like a chunk (frag_ctx.c).
 * Flow ids start at a random 64-bit value per daemon run, so a daemon that is both a generation
 * and a context daemon tells its own flows (generation side) from its peers' (context side). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "engine_drive.h"
#include "bounce_host.h"
#include "daemon.h"
#include "engine_ctx.h"
#include "engine_gen.h"
#include "engine_gpu.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "engine_share.h"
#include "mempin.h"
#include "registry.h"
#include "xfer.h"

void quar_init_flows(struct engine *e)
{
    uint64_t r;
    if (getrandom(&r, sizeof r, 0) != sizeof r)
        r = (uint64_t)getpid() << 32 ^ uv_hrtime();
    e->flow_base = r >> 1; /* room to count up without wrapping in practice */
    e->next_flow = e->flow_base;
}

bool quar_own_flow(const struct engine *e, uint64_t flow)
{
    return flow - e->flow_base - 1 < e->next_flow - e->flow_base;
}

/* ---- generation side ---- */

void quar_add(struct engine *e, uint64_t flow, struct epeer *peer)
{
    struct qflow *q = calloc(1, sizeof *q);
    if (!q) { /* cannot wait for the ack: the slots come back with the peer's loss or never */
        log_error("engine: out of memory tracking quarantined flow %llu", (unsigned long long)flow);
        return;
    }
    q->flow = flow;
    q->peer = peer;
    if (!peer) /* already lost */
        q->at_ms = engine_now(e) + ENGINE_RECLAIM_MS;
    q->next = e->qflows;
    e->qflows = q;
    engine_due(e, EPART_QUAR, ENGINE_DUE_NEXT);
}

/* One of rx's failed fragment flows can land no put any more; the last one reports the held
 * failure to the worker. */
static void pools_drained(struct rx *rx)
{
    if (rx->frag_wait == 0 || --rx->frag_wait > 0)
        return;
    rx->e->drive->rx_writes_ended(rx); /* unless its worker was told already (gone, the daemon stopping) */
}

void quar_frag_moving(struct rxw *w)
{
    w->rx->e->drive->rxw_set_state(w, RXW_MOVING); /* from now a failure is held (engine_recv_writing) */
}

/* Pins the requesting rank's pools for a held fragment flow: a worker that disconnects now has
 * its pools unmapped only once no put of the flow can land (reclaim unpins). Over tcp UCX
 * emulates the puts with active messages that write to the address without a registration
 * check, so an unmapped (or remapped) pool would take them. */
static void pin_pools(struct qflow *q, const struct rx *rx)
{
    const struct copy_mem *m = rx->x && rx->x->rank ? &rx->x->rank->mem : NULL;
    if (!m || m->n == 0 || !(q->pins = calloc(m->n, sizeof *q->pins)))
        return;
    for (uint32_t i = 0; i < m->n; i++)
        if (m->base[i] && mempin_ref(m->base[i], m->size[i]) == 0)
            q->pins[q->n_pins++] = m->base[i];
}

static void unpin_pools(struct qflow *q)
{
    for (uint32_t i = 0; i < q->n_pins; i++)
        mempin_unref(q->pins[i]);
    free(q->pins);
    q->pins = NULL;
    q->n_pins = 0;
}

void quar_hold_pools(struct engine *e, const struct rxw *w, kvf_error_t code)
{
    struct rx *rx = w->rx;
    /* a replan's old flows write the same blocks of the same request: not held */
    if (code == KVF_OK || !w->path || !w->path->writing ||
        (w->state != RXW_MOVING && w->state != RXW_NACKED) || rx->state != RX_ENDED)
        return;
    uint64_t flow = w->flow;
    struct epeer *peer = w->peer;
    struct qflow *q = calloc(1, sizeof *q);
    if (!q) { /* cannot wait for the ack: reported now, as before pools had a quarantine */
        log_error("engine: out of memory holding fragment flow %llu", (unsigned long long)flow);
        return;
    }
    q->flow = flow;
    q->peer = peer;
    q->rx = rx;
    pin_pools(q, rx);
    q->at_ms = engine_now(e) + (peer ? (uint64_t)e->d->cfg.deadlines_transfer_ms
                                     : ENGINE_RECLAIM_MS);
    rx->frag_wait++;
    e->c.frag_holds++;
    q->next = e->qflows;
    e->qflows = q;
    engine_due(e, EPART_QUAR, ENGINE_DUE_NEXT);
}

static void reclaim(struct engine *e, struct qflow *q, const char *why)
{
    if (q->rx) { /* a fragment flow: no put of it can land any more */
        struct rx *rx = q->rx;
        q->rx = NULL;
        unpin_pools(q);
        log_debug("engine: fragment flow %llu of request %llu drained (%s)",
                  (unsigned long long)q->flow, (unsigned long long)rx->req_id, why);
        pools_drained(rx);
        return;
    }
    uint32_t n = e->arena ? arena_reclaim_peer(e->arena, q->flow) : 0;
    if (n)
        log_debug("engine: reclaimed %u quarantined slot(s) of flow %llu (%s)", n,
                  (unsigned long long)q->flow, why);
    e->c.slots_reclaimed += n;
}

void quar_acked(struct engine *e, struct epeer *p, uint64_t flow)
{
    for (struct qflow **pp = &e->qflows; *pp; pp = &(*pp)->next) {
        struct qflow *q = *pp;
        if (q->flow == flow && q->peer == p) {
            if (egpu_flow_busy(e, flow) || bh_flow_busy(e, flow)) { /* a GPU scatter still reads a slot: next tick */
                q->at_ms = engine_now(e);
                engine_due(e, EPART_QUAR, ENGINE_DUE_NEXT);
                return;
            }
            reclaim(e, q, "drained");
            *pp = q->next;
            free(q);
            return;
        }
    }
}

void quar_peer_down(struct engine *e, struct epeer *p)
{
    for (struct qflow *q = e->qflows; q; q = q->next)
        if (q->peer == p) {
            q->peer = NULL;
            q->at_ms = engine_now(e) + ENGINE_RECLAIM_MS;
            engine_due(e, EPART_QUAR, ENGINE_DUE_NEXT);
        }
    for (struct dack *d = e->dacks; d; d = d->next)
        if (d->peer == p)
            d->peer = NULL;
}

void quar_peer_frozen(struct engine *e, struct epeer *p, uint64_t key)
{
    for (struct qflow *q = e->qflows; q; q = q->next)
        if (q->peer == p)
            q->hold_key = key;
}

void quar_peer_back(struct engine *e, uint64_t key)
{
    bstage_hold_peer_back(e, key); /* and the staging it could read */
    for (struct qflow *q = e->qflows; q; q = q->next)
        if (q->hold_key == key) {
            q->hold_key = 0; /* reclaimed by the next tick, after any GPU scatter */
            q->at_ms = engine_now(e);
        }
    engine_due(e, EPART_QUAR, ENGINE_DUE_NEXT);
}

bool quar_held_for(const struct engine *e, uint64_t key)
{
    for (const struct qflow *q = e->qflows; q; q = q->next)
        if (q->hold_key == key)
            return true;
    return false;
}

static bool timed(const struct engine *e);

uint64_t quar_tick(struct engine *e, uint64_t now)
{
    for (struct qflow **pp = &e->qflows; *pp;) {
        struct qflow *q = *pp;
        if (q->at_ms && !q->hold_key && now >= q->at_ms && !egpu_flow_busy(e, q->flow) &&
            !bh_flow_busy(e, q->flow)) {
            if (q->rx && q->peer)
                log_warn("engine: fragment flow %llu: no drain ack from its context daemon "
                         "within deadlines.transfer; its request is reported now",
                         (unsigned long long)q->flow);
            reclaim(e, q, q->peer ? "no ack" : "peer lost");
            *pp = q->next;
            free(q);
        } else {
            pp = &q->next;
        }
    }
    return timed(e) ? ENGINE_DUE_NEXT : 0;
}

/* Whether a quarantined flow waits for a time (its own, or a GPU scatter that still reads). */
static bool timed(const struct engine *e)
{
    for (const struct qflow *q = e->qflows; q; q = q->next)
        if (q->at_ms && !q->hold_key)
            return true;
    return false;
}

void quar_pools_stop(struct engine *e)
{
    for (struct qflow **pp = &e->qflows; *pp;) {
        struct qflow *q = *pp;
        if (q->rx) {
            reclaim(e, q, "endpoints closed");
            *pp = q->next;
            free(q);
        } else {
            pp = &q->next;
        }
    }
}

/* ---- context side ---- */

static void send_ack(struct epeer *p, uint64_t flow, uint64_t req_id, uint32_t writer)
{
    if (!p || !p->up)
        return;
    struct wire_msg m = {.type = WIRE_CANCEL};
    m.u.cancel.req_id = req_id;
    m.u.cancel.writer = writer;
    engine_send_msg(p, flow, &m);
}

void quar_flow_ended(struct engine *e, struct epeer *p, uint64_t flow, uint64_t req_id,
                     uint32_t writer, uint32_t in_flight, struct dack **ret)
{
    *ret = NULL;
    if (!p)
        return;
    if (in_flight == 0) {
        send_ack(p, flow, req_id, writer);
        return;
    }
    struct dack *d = calloc(1, sizeof *d);
    if (!d)
        return; /* the generation side reclaims when this peer goes */
    d->peer = p;
    d->key = share_key(p);
    d->flow = flow;
    d->req_id = req_id;
    d->writer = writer;
    d->n = in_flight;
    d->next = e->dacks;
    e->dacks = d;
    *ret = d;
}

void quar_stage_done(struct engine *e, struct dack *d)
{
    if (!d || --d->n > 0)
        return;
    send_ack(d->peer, d->flow, d->req_id, d->writer);
    for (struct dack **pp = &e->dacks; *pp; pp = &(*pp)->next)
        if (*pp == d) {
            *pp = d->next;
            break;
        }
    free(d);
}

void quar_ack_unknown(struct epeer *p, uint64_t flow, const struct wire_msg *m)
{
    if (m->type == WIRE_NACK)
        send_ack(p, flow, m->u.nack.req_id, m->u.nack.writer);
    else if (m->type == WIRE_CANCEL)
        send_ack(p, flow, m->u.cancel.req_id, m->u.cancel.writer);
}

void quar_free_all(struct engine *e)
{
    quar_pools_stop(e);
    while (e->qflows) {
        struct qflow *q = e->qflows;
        e->qflows = q->next;
        free(q);
    }
    while (e->dacks) {
        struct dack *d = e->dacks;
        e->dacks = d->next;
        free(d);
    }
}
