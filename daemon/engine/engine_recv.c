/* engine_recv.c: a RECV's engine part (struct rx, engine_gen.h) as one object: its state machine
 * and each writer's (the edge tables below and the one setter of each), its deadline, and its
 * life as a member of its request: the request (struct xfer, transfers.h) owns it (x->rx) and
 * frees it with itself (engine_recv_free, from transfers_reap); the engine says whether it still
 * writes into the rank's pools (a failure is then held by the request: the one held error,
 * xfer_hold) and when those writes ended (engine_recv_writes_ended). The protocol that moves it
 * along is engine_gen.c (and bounce_land.c per chunk). Loop thread only. */
#include <stdio.h>
#include <stdlib.h>

#include "daemon.h"
#include "engine.h"
#include "engine_gen.h"
#include "engine_gpu.h"
#include "engine_peer.h"
#include "require.h"
#include "xfer.h"
#include "xfer_phases.h"

/* ---- the state machines: names and allowed edges (engine_gen.h draws them) ---- */

static const char *const rx_names[RX__COUNT] = {"lookup", "connect", "moving", "ended"};

static const bool rx_edges[RX__COUNT][RX__COUNT] = {
    [RX_LOOKUP] = {[RX_CONNECT] = true, [RX_ENDED] = true},
    [RX_CONNECT] = {[RX_MOVING] = true, [RX_LOOKUP] = true, [RX_ENDED] = true},
    [RX_MOVING] = {[RX_LOOKUP] = true, [RX_ENDED] = true},
};

static const char *const rxw_names[RXW__COUNT] = {"idle", "credit", "moving",
                                                  "done", "nacked", "closed"};

static const bool rxw_edges[RXW__COUNT][RXW__COUNT] = {
    [RXW_IDLE] = {[RXW_CREDIT] = true, [RXW_MOVING] = true, [RXW_DONE] = true,
                  [RXW_CLOSED] = true},
    [RXW_CREDIT] = {[RXW_MOVING] = true, [RXW_CLOSED] = true},
    [RXW_MOVING] = {[RXW_DONE] = true, [RXW_NACKED] = true, [RXW_CLOSED] = true},
    [RXW_DONE] = {[RXW_NACKED] = true, [RXW_CLOSED] = true},
    [RXW_NACKED] = {[RXW_CLOSED] = true},
};

const char *rx_state_to_string(enum rx_state s)
{
    return (unsigned)s < RX__COUNT ? rx_names[s] : "unknown";
}

const char *rxw_state_to_string(enum rxw_state s)
{
    return (unsigned)s < RXW__COUNT ? rxw_names[s] : "unknown";
}

bool rx_state_edge_ok(enum rx_state from, enum rx_state to)
{
    return (unsigned)from < RX__COUNT && (unsigned)to < RX__COUNT && rx_edges[from][to];
}

bool rxw_state_edge_ok(enum rxw_state from, enum rxw_state to)
{
    return (unsigned)from < RXW__COUNT && (unsigned)to < RXW__COUNT && rxw_edges[from][to];
}

bool engine_recv_rx_set_state(struct rx *rx, enum rx_state to)
{
    if (!KVF_REQUIRE(rx_state_edge_ok(rx->state, to), "engine: rx req %llu: illegal edge %s -> %s",
                     (unsigned long long)rx->req_id, rx_state_to_string(rx->state),
                     rx_state_to_string(to))) {
        char msg[96];
        snprintf(msg, sizeof msg, "request state %s cannot go to %s",
                 rx_state_to_string(rx->state), rx_state_to_string(to));
        if (rx->state != RX_ENDED)
            gen_rx_fail(rx, KVF_E_INTERNAL, msg);
        return false;
    }
    log_debug("engine: rx req %llu: %s -> %s", (unsigned long long)rx->req_id,
              rx_state_to_string(rx->state), rx_state_to_string(to));
    if (rx->x && to == RX_CONNECT) /* phase stamps for xfer_phases.h: planned */
        xfer_phase_mark(&rx->x->validated_ns);
    if (rx->x && to == RX_MOVING)
        xfer_phase_mark(&rx->x->credit_ns);
    rx->state = to;
    return true;
}

bool engine_recv_rxw_set_state(struct rxw *w, enum rxw_state to)
{
    if (KVF_REQUIRE(rxw_state_edge_ok(w->state, to),
                    "engine: rx req %llu writer %u: illegal edge %s -> %s",
                    (unsigned long long)w->rx->req_id, w->ctx_rank, rxw_state_to_string(w->state),
                    rxw_state_to_string(to))) {
        log_debug("engine: rx req %llu writer %u: %s -> %s", (unsigned long long)w->rx->req_id,
                  w->ctx_rank, rxw_state_to_string(w->state), rxw_state_to_string(to));
        w->state = to;
        return true;
    }
    char msg[96];
    snprintf(msg, sizeof msg, "writer %u state %s cannot go to %s", w->ctx_rank,
             rxw_state_to_string(w->state), rxw_state_to_string(to));
    gen_rx_fail(w->rx, KVF_E_INTERNAL, msg);
    return false;
}

/* ---- the request's member ---- */

void engine_recv_writes_ended(struct rx *rx)
{
    struct xfer *x = rx->x;
    if (rx->state != RX_ENDED || rx->scatters_running > 0 || !x)
        return;
    if (rx->frag_wait > 0) { /* only peers' puts left: a worker that can hear it, now */
        rx->e->req.ops->held_end(rx->t, x);
        return;
    }
    rx->x = NULL;
    rx->e->req.ops->writes_ended(rx->t, x);
}

bool engine_recv_writing(const struct rx *rx)
{
    if (rx->scatters_running > 0 || rx->frag_wait > 0)
        return true;
    if (rx->state == RX_ENDED)
        return false;
    for (uint32_t i = 0; i < rx->n_w; i++) /* e.g. a moving fragment flow's puts may land */
        if (rx->w[i].path && rx->w[i].path->writing && rx->w[i].path->writing(&rx->w[i]))
            return true;
    return false;
}

bool engine_recv_held_remote(const struct rx *rx)
{
    return rx->scatters_running == 0 && engine_recv_writing(rx);
}

void engine_recv_stop(struct rx *rx, kvf_error_t err, const char *msg)
{
    gen_rx_fail(rx, err != KVF_OK ? err : KVF_E_CANCELLED, msg);
}

bool engine_recv_idle(const struct rx *rx)
{
    return rx->state == RX_ENDED && !rx->x && rx->scatters_running == 0 && rx->frag_wait == 0;
}

void engine_recv_sweep(struct engine *e)
{
    if (e->req.t) /* the ended requests whose part went idle, with their parts */
        e->req.ops->reap(e->req.t);
}

void engine_recv_free(struct rx *rx)
{
    struct engine *e = rx->e;
    dheap_remove(&e->rx_due, &rx->due);
    if (rx->prev)
        rx->prev->next = rx->next;
    else
        e->rxs = rx->next;
    if (rx->next)
        rx->next->prev = rx->prev;
    if (rx->gpu)
        egpu_rx_gone(rx);
    for (uint32_t i = 0; i < rx->n_w; i++)
        if (rx->w[i].peer)
            rx->w[i].peer->users--;
    if (rx->planned)
        plan_done(&rx->plan);
    plan_marks_done(&rx->marks);
    ix_w_del(e, rx);
    ix_rx_del(e, rx);
    free(rx->w);
    free(rx->gen_json);
    free(rx->ctx_layouts);
    free(rx);
}

const char *engine_recv_peer(const struct rx *rx)
{
    for (uint32_t i = 0; rx && i < rx->n_w; i++) {
        const struct epeer *p = rx->w[i].peer;
        if (p && p->lp && p->up)
            return link_peer_id(p->lp);
    }
    return NULL;
}

const char *engine_recv_path(const struct rx *rx)
{
    return rx && rx->path ? rx->path->name : "local";
}
