/* engine_ctx.c: the context side of a remote request (see engine.h, docs/DESIGN.md §7).
 * A RECV_REQ (one generation rank, one writer of ours) and the rank's SEND meet by (instance,
 * request id) in either order (the SEND waits in the request table, reqtab.h; the flow in
 * engine_ix.h's waiting index). The flow plans with its
 * own ids against the instance's table (this daemon must be the home: it holds the table), checks
 * the extent against the RECV_REQ's, then moves a chunk into every granted landing slot, in
 * extent order, up to arena.window at once (bounce_stage.c: put from the pools, or gathered into
 * a staging slot first; a GPU writer's chunks gathered by a kernel, engine_gpu.c).
 * After the last chunk completed: WRITER_DONE, and the SEND is
 * told one reader was served (transfers.h decides SENT). Waiting for the SEND is bounded by
 * deadlines.send_wait, the moving by deadlines.transfer. */
#include <endian.h>
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounce_host.h"
#include "bounce_tl.h"
#include "copy.h"
#include "daemon.h"
#include "engine_ctx.h"
#include "frag_ctx.h"
#include "engine_gone.h"
#include "engine_gpu.h"
#include "engine_nack.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "engine_tab.h"
#include "path.h"
#include "plan_request.h"
#include "readers.h"
#include "registry.h"
#include "require.h"
#include "stream_gate.h"
#include "xfer.h"
#include "xstream.h"


/* ---- the flow's state machine (engine_ctx.h draws it) ---- */

enum tx_deadline { TXD_KEEP, TXD_SEND_WAIT, TXD_TRANSFER };

/* One row per state: its name, the deadline its phase starts, and the states it may go to. */
static const struct {
    const char *name;
    enum tx_deadline deadline;
    bool to[TX__COUNT];
} tx_states[TX__COUNT] = {
    [TX_SEND_WAIT] = {"send_wait", TXD_SEND_WAIT, /* set by tx_begin, the first state */
                      {[TX_TABLE_WAIT] = true, [TX_REFETCH] = true, [TX_MOVING] = true,
                       [TX_FAILED] = true}},
    [TX_TABLE_WAIT] = {"table_wait", TXD_KEEP, {[TX_MOVING] = true, [TX_FAILED] = true}},
    [TX_REFETCH] = {"refetch", TXD_KEEP, {[TX_MOVING] = true, [TX_FAILED] = true}},
    [TX_MOVING] = {"moving", TXD_TRANSFER, {[TX_DONE] = true, [TX_FAILED] = true}},
    [TX_DONE] = {"done", TXD_KEEP, {}},
    [TX_FAILED] = {"failed", TXD_KEEP, {}},
};

const char *tx_state_to_string(enum tx_state s)
{
    return (unsigned)s < TX__COUNT ? tx_states[s].name : "unknown";
}

bool tx_state_edge_ok(enum tx_state from, enum tx_state to)
{
    return (unsigned)from < TX__COUNT && (unsigned)to < TX__COUNT && tx_states[from].to[to];
}

/* The deadline of the phase tx enters (requeued in e->tx_due). False: out of memory. */
static bool tx_phase_deadline(struct tx *tx, enum tx_deadline d)
{
    const struct kvf_config *cfg = &tx->e->d->cfg;
    if (d == TXD_KEEP)
        return true;
    tx->deadline_ms = engine_now(tx->e) + (uint64_t)(d == TXD_SEND_WAIT ? cfg->deadlines_send_wait_ms
                                                                        : cfg->deadlines_transfer_ms);
    return dheap_update(&tx->e->tx_due, &tx->due, tx->deadline_ms) == 0;
}

/* Moves tx along an edge of its machine, starting its phase's deadline. An illegal edge is an
 * invariant failure (require.h: fatal in debug and under KVF_FATAL_INVARIANTS=1); otherwise
 * the flow fails INTERNAL and false says the caller must stop. */
static bool tx_set_state(struct tx *tx, enum tx_state to)
{
    enum tx_state from = tx->state;
    if (!KVF_REQUIRE(tx_state_edge_ok(from, to), "engine: flow %llu: illegal edge %s -> %s",
                     (unsigned long long)tx->flow, tx_state_to_string(from),
                     tx_state_to_string(to))) {
        if (!tx_ended(tx))
            ctx_tx_fail(tx, KVF_E_INTERNAL, true, "flow state %s cannot go to %s",
                        tx_state_to_string(from), tx_state_to_string(to));
        return false;
    }
    log_debug("engine: flow %llu: %s -> %s", (unsigned long long)tx->flow,
              tx_state_to_string(from), tx_state_to_string(to));
    tx->state = to;
    if (!tx_phase_deadline(tx, tx_states[to].deadline)) {
        ctx_tx_fail(tx, KVF_E_INTERNAL, true, "out of memory queueing its deadline");
        return false;
    }
    return true;
}

void ctx_tx_fail(struct tx *tx, kvf_error_t code, bool nack, const char *fmt, ...)
{
    if (tx_ended(tx))
        return;
    char msg[WIRE_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct engine *e = tx->e;
    tx_set_state(tx, TX_FAILED);
    e->c.flows_failed++;
    if (code == KVF_E_BOUND_VIOLATION)
        e->c.bound_violations++;
    log_req(
        LOG_LVL_INFO, tx->rr.u.recv_req.req_id, tx->peer ? tx->peer->addr : NULL,
        tx->rr.u.recv_req.ctx_instance, "engine: flow %llu (request %llu of %s, writer %u): %s: %s",
        (unsigned long long)tx->flow, (unsigned long long)tx->rr.u.recv_req.req_id,
        tx->rr.u.recv_req.ctx_instance, tx->rr.u.recv_req.writer, kvf_error_to_string(code), msg);
    tx->err.code = code;
    tx->err.told = nack && tx->peer && tx->peer->up;
    if (tx->err.told)
        engine_send_nack(tx->peer, tx->flow, tx->rr.u.recv_req.req_id, tx->rr.u.recv_req.writer,
                         code, tx->err.why, msg);
    uint32_t n = tx->frag ? 1 : 0; /* a fragment job's puts in flight: acked when they ended */
    for (struct stage *st = e->stages; st; st = st->next)
        n += st->tx == tx;
    struct dack *d;
    quar_flow_ended(e, tx->peer, tx->flow, tx->rr.u.recv_req.req_id, tx->rr.u.recv_req.writer, n,
                    &d);
    for (struct stage *st = e->stages; st; st = st->next)
        if (st->tx == tx) {
            st->tx = NULL;
            st->dack = d;
            bh_gather_halt(st); /* a copy into the peer's slot stops writing it */
        }
    frag_ctx_tx_gone(e, tx, d);
    nack_flow_ended(tx); /* last: a failure counted while it read may end its SEND now */
}

void ctx_tx_done(struct tx *tx)
{
    struct engine *e = tx->e;
    const struct wire_recv_req *q = &tx->rr.u.recv_req;
    if (!tx_set_state(tx, TX_DONE))
        return;
    e->c.flows_done++;
    struct wire_msg m = {.type = WIRE_WRITER_DONE};
    m.u.writer_done.req_id = q->req_id;
    m.u.writer_done.writer = q->writer;
    m.u.writer_done.bytes = tx->pw->bytes;
    if (tx->peer)
        engine_send_msg(tx->peer, tx->flow, &m);
    struct xfer *s = tx->send;
    tx->send = NULL;
    if (s)
        e->req.ops->served(e->req.t, s, tx->pw->bytes);
    xfer_phases_served(e->req.phases,
                       tx->peer && tx->peer->lp ? link_peer_id(tx->peer->lp) : "unknown",
                       tx->pw->bytes, (size_t)e->d->cfg.metrics_max_label_values);
}

static struct tx *find_tx(struct engine *e, struct epeer *p, uint64_t flow)
{
    return ix_tx_find(e, p, flow);
}

/* ---- meeting and planning ---- */

/* The part of tx's plan that its writer moves, checked against the RECV_REQ and the writer's
 * pools; tx owns the plan from here (TX_MOVING). False: tx failed. */
static bool plan_mine(struct tx *tx)
{
    struct xfer *s = tx->send;
    const struct wire_recv_req *q = &tx->rr.u.recv_req;
    if (!tx_set_state(tx, TX_MOVING)) /* owns the plan from here (ctx_sweep frees it) */
        return false;
    tx->bx = bexec_of(s->rank); /* the executor for the pools the plan is checked against */
    for (uint32_t w = 0; w < tx->plan.n_writers && !tx->pw; w++)
        if (tx->plan.writers[w].ctx_rank == q->writer)
            tx->pw = &tx->plan.writers[w];
    if (!tx->pw) {
        ctx_tx_fail(tx, KVF_E_BAD_REQUEST, true,
                    "context rank %u writes nothing for generation rank %u", q->writer,
                    layout_rank(tx->gen));
        return false;
    }
    if (tx->pw->bytes != q->extent_bytes) {
        ctx_tx_fail(tx, KVF_E_BOUND_VIOLATION, true,
                    "extent of writer %u is %llu bytes here, the RECV_REQ says %llu", q->writer,
                    (unsigned long long)tx->pw->bytes, (unsigned long long)q->extent_bytes);
        return false;
    }
    if (copy_check(tx->pw->ops, tx->pw->n_ops, registry_rank_mem(s->rank), 's') < 0) {
        ctx_tx_fail(tx, KVF_E_BOUND_VIOLATION, true, "plan of writer %u leaves its mapped pools",
                    q->writer);
        return false;
    }
    return true;
}

/* Plans the flow against the context instance's table, then starts moving. */
static void plan_with(struct tx *tx, const struct itable *tab)
{
    struct engine *e = tx->e;
    struct xfer *s = tx->send;
    const struct wire_recv_req *q = &tx->rr.u.recv_req;
    if (tab->epoch != q->table_epoch) {
        e->c.stale_epochs++;
        tx->err.why = WIRE_NACK_STALE_TABLE;
        ctx_tx_fail(tx, KVF_E_UNKNOWN_INSTANCE, true,
                "stale table: context instance %s is at epoch "
                "%llu, the request planned with epoch %llu (refetch the table)",
                q->ctx_instance, (unsigned long long)tab->epoch,
                (unsigned long long)q->table_epoch);
        return;
    }
    if (q->writer >= tab->n) {
        ctx_tx_fail(tx, KVF_E_BAD_REQUEST, true, "writer %u of a %u-rank instance", q->writer, tab->n);
        return;
    }
    struct plan_ids *ctx_ids = plan_ctx_ids_new(tab->ranks, tab->n);
    if (!ctx_ids) {
        ctx_tx_fail(tx, KVF_E_INTERNAL, true, "out of memory");
        return;
    }
    plan_ids_of(s->items.n_groups, s->items.counts, s->items.ids, &ctx_ids[q->writer]);
    struct plan_input pin = {.gen = tx->gen,
                             .ctx = tab->ranks,
                             .n_ctx = tab->n,
                             .ctx_ids = ctx_ids,
                             .ctx_dp_rank = q->ctx_dp_rank,
                             .tokens = q->tokens};
    for (uint32_t g = 0; g < q->n_groups; g++) {
        pin.gen_ids.n[g] = q->n_ids[g];
        pin.gen_ids.ids[g] = q->ids[g];
    }
    char pmsg[sizeof(((struct plan_error *)0)->message)];
    kvf_error_t code = s->stream ? stream_gate_plan(tx, &pin, &tx->plan, pmsg, sizeof pmsg)
                                 : plan_request(&pin, &tx->plan, pmsg, sizeof pmsg);
    if (code == KVF_OK && !s->n_readers && !s->derived) /* the worker left the count to us */
        s->derived = readers_remote(&s->readers, &pin, q->writer);
    free(ctx_ids);
    if (code != KVF_OK) {
        ctx_tx_fail(tx, code, true, "%s", pmsg);
        return;
    }
    if (!plan_mine(tx)) /* moving: deadlines.transfer from here (tx_set_state) */
        return;
    char gmsg[WIRE_TEXT_MAX];
    kvf_error_t gcode = tx->bx->tx_plan ? tx->bx->tx_plan(tx, gmsg, sizeof gmsg) : KVF_OK;
    if (gcode != KVF_OK) { /* e.g. GPU pools: gathered by kernels into the page-locked slots */
        ctx_tx_fail(tx, gcode, true, "%s", gmsg);
        return;
    }
    const struct path_row *row = path_of_wire(q->path); /* path_bounce.c, frag_gen.c */
    if (!s->stream || stream_gate_serve_now(tx, row->landing)) /* else once its SEND's layers are final */
        row->serve(tx);
}

/* The instance's table: held here (this daemon is its home), else fetched from the rank's home
 * (cached; ctx_table_ready continues). */
static void get_table(struct tx *tx)
{
    struct engine *e = tx->e;
    const struct wire_recv_req *q = &tx->rr.u.recv_req;
    if (!tx->home[0]) {
        struct itable *t;
        char msg[WIRE_TEXT_MAX];
        if (home_table(e, q->ctx_instance, &t, msg, sizeof msg) < 0) {
            /* a sibling rank served its part and left after the generation daemon planned:
             * the table it planned with is still the last one built here, and this writer's
             * layout in it is unchanged */
            struct itable *last = e->home_tab;
            if (last && last->epoch == q->table_epoch &&
                strcmp(last->instance, q->ctx_instance) == 0) {
                plan_with(tx, last);
                return;
            }
            ctx_tx_fail(tx, KVF_E_UNKNOWN_INSTANCE, true, "%s", msg);
            return;
        }
        plan_with(tx, t); /* t is the home's, borrowed */
        return;
    }
    int err;
    struct itable *t = tab_get(e, q->ctx_instance, tx->home, &err);
    if (err < 0) {
        ctx_tx_fail(tx, KVF_E_PEER_UNREACHABLE, true, "home %s of %s: %s", tx->home, q->ctx_instance,
                strerror(-err));
    } else if (!t) {
        if (tx->state == TX_SEND_WAIT) /* a refetch waits in TX_REFETCH */
            tx_set_state(tx, TX_TABLE_WAIT);
    } else if (t->epoch != q->table_epoch && tx->state == TX_SEND_WAIT) {
        if (!tx_set_state(tx, TX_REFETCH)) /* our cached copy may be the stale one */
            return;
        tab_drop(e, t);
        get_table(tx);
    } else {
        plan_with(tx, t);
    }
}

void ctx_table_ready(struct engine *e, struct itable *tab, int err, const char *msg)
{
    for (struct tx *tx = e->txs; tx; tx = tx->next) {
        if ((tx->state != TX_TABLE_WAIT && tx->state != TX_REFETCH) ||
            strcmp(tx->home, tab->home) != 0 ||
            strcmp(tx->rr.u.recv_req.ctx_instance, tab->instance) != 0)
            continue;
        if (err)
            ctx_tx_fail(tx, (kvf_error_t)err, true, "%s", msg);
        else
            plan_with(tx, tab);
    }
}

static void meet(struct tx *tx, struct xfer *s)
{
    struct engine *e = tx->e;
    if (nack_beyond_readers(tx, s)) /* a reader more than the SEND has */
        return;
    tx->send = s;
    if (!s->peer[0] && tx->peer && tx->peer->lp) /* kvferryctl transfers: who reads it */
        snprintf(s->peer, sizeof s->peer, "%s", link_peer_id(tx->peer->lp));
    const char *home = s->rank->home;
    if (home[0] && !(e->self_addr[0] && strcmp(home, e->self_addr) == 0))
        snprintf(tx->home, sizeof tx->home, "%s", home);
    get_table(tx);
}

static struct xfer *find_send(struct engine *e, const struct wire_recv_req *q)
{
    struct reg_instance *in = registry_find(e->req.reg, q->ctx_instance);
    if (!in || q->writer >= in->n_ranks || !in->ranks[q->writer])
        return NULL;
    return e->req.ops->find_send(e->req.t, in->ranks[q->writer], q->req_id);
}

/* Whether a RECV_REQ may become a flow here: not draining, its writer registered, the peer
 * under peers.max_inflight, its flow id not in flight (*dup: the flow that is). KVF_OK, or the
 * refusal with its message. */
static kvf_error_t recv_req_admit(struct engine *e, struct epeer *p, uint64_t flow,
                                  const struct wire_recv_req *q, struct tx **dup, char *msg,
                                  size_t len)
{
    struct reg_instance *in =
        e->req.t ? registry_find(e->req.reg, q->ctx_instance) : NULL;
    uint32_t n = 0;
    for (struct tx *t = e->txs; t; t = t->next)
        n += t->peer == p && !tx_ended(t);
    *dup = NULL;
    if (e->draining || e->stopping) {
        snprintf(msg, len, "the context daemon is draining");
        return KVF_E_NO_ROUTE;
    }
    if (!in || q->writer >= in->n_ranks || !in->ranks[q->writer])
        return gone_or_unknown(e, q->ctx_instance, q->writer, msg, len);
    if ((int64_t)n >= e->d->cfg.peers_max_inflight) {
        snprintf(msg, len, "%u requests in flight from this peer: peers.max_inflight is %lld", n,
                 (long long)e->d->cfg.peers_max_inflight);
        return KVF_E_NO_ROUTE;
    }
    if ((*dup = find_tx(e, p, flow))) {
        snprintf(msg, len, "flow %llu came again while it was in flight: both refused",
                 (unsigned long long)flow);
        return KVF_E_BAD_REQUEST;
    }
    return KVF_OK;
}

/* An admitted flow: its grants queued, its send_wait deadline, then it meets its SEND (or waits
 * for it). tx->gen is set; takes the decoded message m. */
static void tx_begin(struct engine *e, struct tx *tx, struct epeer *p, uint64_t flow,
                     struct wire_msg *m)
{
    const struct wire_recv_req *q = &m->u.recv_req;
    tx->e = e;
    tx->peer = p;
    p->users++;
    tx->flow = flow;
    tx->rr = *m;
    for (uint32_t i = 0; i < q->n_grants; i++) {
        tx->q[tx->q_len++] = q->grants[i];
        if (e->tl) /* arena.timeline: off by default */
            btl_mark(e->tl, BTL_GRANT_RX, q->req_id, q->writer, q->grants[i].ext_off);
    }
    tx->deadline_ms = engine_now(e) + e->d->cfg.deadlines_send_wait_ms;
    dheap_node_init(&tx->due);
    bool queued = dheap_update(&e->tx_due, &tx->due, tx->deadline_ms) == 0;
    tx->next = e->txs;
    e->txs = tx;
    e->c.flows++;
    engine_kick_tick(e);
    if (!queued || ix_tx_add(e, tx) < 0) {
        ctx_tx_fail(tx, KVF_E_INTERNAL, true, "out of memory");
        return;
    }
    struct xfer *s = find_send(e, &tx->rr.u.recv_req);
    if (s)
        meet(tx, s);
    else if (ix_tx_wait(e, tx) < 0)
        ctx_tx_fail(tx, KVF_E_INTERNAL, true, "out of memory");
}

void ctx_on_recv_req(struct engine *e, struct epeer *p, uint64_t flow, struct wire_msg *m)
{
    const struct wire_recv_req *q = &m->u.recv_req;
    char msg[WIRE_TEXT_MAX], lerr[300];
    /* Before any refusal below: the sender counts a sent layout as kept (engine_laycache.h). */
    bool decoded;
    const struct layout *gl = laycache_take(&p->lc, q, &decoded, lerr, sizeof lerr);
    e->c.layouts_decoded += decoded;
    e->c.layouts_missed += !gl && !q->gen_json_len;
    struct tx *dup;
    kvf_error_t code = recv_req_admit(e, p, flow, q, &dup, msg, sizeof msg);
    struct tx *tx = code == KVF_OK ? calloc(1, sizeof *tx) : NULL;
    if (code == KVF_OK && !tx) {
        code = KVF_E_INTERNAL;
        snprintf(msg, sizeof msg, "out of memory");
    }
    if (gl && tx) {
        tx->gen = gl; /* the reference laycache_take gave */
        gl = NULL;
    } else if (!gl && code == KVF_OK) {
        code = KVF_E_BAD_REQUEST;
        snprintf(msg, sizeof msg, "generation layout: %s", lerr);
    }
    if (dup && code != KVF_OK) {
        /* the generation side ends the flow it holds under that id at this NACK: so does this
         * side (its chunks drained, its reader counted there), else it could still be served */
        ctx_tx_fail(dup, code, true, "%s", msg);
    } else if (code != KVF_OK) {
        struct dack *d;
        engine_send_nack(p, flow, q->req_id, q->writer, code, WIRE_NACK_PLAIN, msg);
        quar_flow_ended(e, p, flow, q->req_id, q->writer, 0, &d); /* nothing was sent */
    }
    if (code != KVF_OK) {
        laycache_unref(gl);
        if (tx)
            laycache_unref(tx->gen);
        free(tx);
        wire_msg_done(m);
        return;
    }
    tx_begin(e, tx, p, flow, m);
}

void ctx_send_arrived(struct engine *e, struct xfer *s)
{
    for (struct tx *tx; (tx = ix_tx_take_waiting(e, s->ctx_instance, s->req_id,
                                                 layout_rank(&s->rank->layout)));)
        meet(tx, s);
    ctx_sweep(e);
}

void ctx_on_grant(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m)
{
    struct tx *tx = find_tx(e, p, flow);
    if (!tx)
        return;
    const struct wire_grant_msg *gm = &m->u.grant;
    if (tx->q_len + gm->n_grants > ENGINE_MAX_CREDITS) {
        ctx_tx_fail(tx, KVF_E_BOUND_VIOLATION, true, "%u grants outstanding, at most %u",
                tx->q_len + gm->n_grants, ENGINE_MAX_CREDITS);
        return;
    }
    for (uint32_t i = 0; i < gm->n_grants; i++) {
        tx->q[(tx->q_head + tx->q_len++) % ENGINE_MAX_CREDITS] = gm->grants[i];
        if (e->tl) /* arena.timeline: off by default */
            btl_mark(e->tl, BTL_GRANT_RX, gm->req_id, gm->writer, gm->grants[i].ext_off);
    }
    bstage_pump(tx);
}

void ctx_on_nack(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m)
{
    struct tx *tx = find_tx(e, p, flow);
    if (tx)
        ctx_tx_fail(tx, m->u.nack.code, false, "the generation daemon: %s", m->u.nack.message);
    else
        quar_ack_unknown(p, flow, m); /* ended already: nothing of it in flight */
}

void ctx_on_cancel(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m)
{
    struct tx *tx = find_tx(e, p, flow);
    if (tx)
        ctx_tx_fail(tx, KVF_E_CANCELLED, false, "cancelled by the generation daemon");
    else
        quar_ack_unknown(p, flow, m);
}

static void send_gone(struct engine *e, struct tx *tx, struct xfer *s, kvf_error_t err)
{
    frag_ctx_send_gone(e, tx, s);
    tx->send = NULL;
    ctx_tx_fail(tx, err != KVF_OK ? err : KVF_E_CANCELLED, true,
                "the context rank's SEND ended before this reader was served (%s)",
                kvf_error_to_string(err));
}

/* Every SEND ends here: its flows come from the request index, not a walk of every flow in
 * flight. They are gathered first (failing one may change the index); a request with more
 * readers than the array falls back to the walk. */
void ctx_xfer_end(struct engine *e, struct xfer *s, kvf_error_t err)
{
    struct tx *mine[64];
    uint32_t n = ix_send_flows(e, s, mine, 64);
    if (n <= 64) {
        for (uint32_t i = 0; i < n; i++)
            send_gone(e, mine[i], s, err);
        return;
    }
    for (struct tx *tx = e->txs; tx; tx = tx->next)
        if (tx->send == s)
            send_gone(e, tx, s, err);
}

void ctx_peer_down(struct engine *e, struct epeer *p, int err)
{
    for (struct tx *tx = e->txs; tx; tx = tx->next) {
        if (tx->peer != p)
            continue;
        /* its reader will not come; one failed and NACKed here is not answered by a lost
         * daemon (a READER_NACK that overtook the loss counts it twice: rare, and the SEND
         * ends FAILED either way) */
        /* one beyond the SEND's readers is no reader */
        bool nacked = tx->err.told && tx->err.why != WIRE_NACK_NOT_READER;
        struct xfer *reading = !tx_ended(tx) || nacked ? tx->send : NULL;
        bool waiting = !tx_ended(tx) && !tx->send; /* its SEND had not come */
        ctx_tx_fail(tx, KVF_E_PEER_LOST, false, "generation daemon lost: %s", strerror(-err));
        if (waiting)
            nack_wait_lost(tx, err);
        else
            nack_flow_lost(tx, reading, err);
        tx->peer = NULL;
        p->users--;
    }
}

void ctx_tick(struct engine *e, uint64_t now)
{
    for (struct dheap_node *nd; (nd = dheap_pop_due(&e->tx_due, now));) {
        struct tx *tx = (struct tx *)((char *)nd - offsetof(struct tx, due));
        if (tx_ended(tx))
            continue;
        if (tx->state == TX_SEND_WAIT)
            ctx_tx_fail(tx, KVF_E_TIMEOUT, true,
                    "context rank %u did not SEND request %llu within "
                    "deadlines.send_wait",
                    tx->rr.u.recv_req.writer, (unsigned long long)tx->rr.u.recv_req.req_id);
        else if (tx->state != TX_MOVING) /* its phase kept send_wait's deadline */
            ctx_tx_fail(tx, KVF_E_TIMEOUT, true,
                    "the table of %s from its home %s did not come within deadlines.send_wait",
                    tx->rr.u.recv_req.ctx_instance, tx->home[0] ? tx->home : "(this daemon)");
        else
            ctx_tx_fail(tx, KVF_E_TIMEOUT, true,
                    "moving %llu of %llu bytes exceeded "
                    "deadlines.transfer",
                    (unsigned long long)(tx->pw ? tx->pw->bytes - tx->completed : 0),
                    (unsigned long long)(tx->pw ? tx->pw->bytes : 0));
    }
}

void ctx_fail_all(struct engine *e, kvf_error_t code, const char *why)
{
    for (struct tx *tx = e->txs; tx; tx = tx->next)
        ctx_tx_fail(tx, code, true, "%s", why);
}

void ctx_sweep(struct engine *e)
{
    for (struct tx **pp = &e->txs; *pp;) {
        struct tx *tx = *pp;
        if (!tx_ended(tx)) {
            pp = &tx->next;
            continue;
        }
        *pp = tx->next;
        dheap_remove(&e->tx_due, &tx->due);
        ix_tx_del(e, tx);
        if (tx->peer)
            tx->peer->users--;
        if (tx->gpu)
            egpu_tx_gone(tx); /* its program is freed when its kernels ended */
        plan_done(&tx->plan); /* zeroed unless planned (plan_request writes it on success) */
        laycache_unref(tx->gen);
        wire_msg_done(&tx->rr);
        free(tx);
    }
}
