/* engine_gen.c: the generation side of a remote request (see engine.h, docs/DESIGN.md §7).
 * RECV naming a context home -> the instance's table (cached, else TABLE_REQ to the home within
 * deadlines.lookup) -> plan (compat first: PEER_INCOMPATIBLE to this rank only, verdict cached
 * per epoch) -> per writer: connect to its daemon, reserve landing credits (first credit within
 * arena.reserve_timeout), RECV_REQ with the generation layout, ids and the first grants; every
 * CHUNK is checked against its grant (slot, generation, offset, length: else BOUND_VIOLATION and
 * nothing scattered), scattered into the rank's pools, its credit returned and the next asked;
 * when every writer's extent is scattered: DONE to the rank. The whole request is bounded by
 * the RECV's deadline (deadlines.send_wait or its own) plus deadlines.transfer.
 * GPU pools: a kernel scatters each chunk (engine_gpu.c), its slot held until it ended; a failure
 * meanwhile reaches the worker only then (held by the request: xfer_hold). The request
 * owns its rx (x->rx): freed with it (engine_recv_free, from transfers_reap). */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "daemon.h"
#include "engine_gen.h"
#include "engine_gpu.h"
#include "engine_linkwait.h"
#include "engine_nack.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "engine_share.h"
#include "engine_tab.h"
#include "move_exec.h"
#include "plan_request.h"
#include "registry.h"
#include "require.h"
#include "xfer.h"

static void rx_fail(struct rx *rx, kvf_error_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Whether w's landing reservation is open: a remote bounce writer from its start to release. */
static bool holds_resv(const struct rxw *w)
{
    return w->path && w->path->landing && w->state != RXW_IDLE && w->state != RXW_CLOSED;
}

/* Closes the writers' reservations (quarantining slots a chunk may still be coming to) and,
 * with cancel, tells the writers' daemons to stop. */
static void release(struct rx *rx, kvf_error_t code, const char *msg)
{
    struct engine *e = rx->e;
    for (uint32_t i = 0; i < rx->n_w; i++) {
        struct rxw *w = &rx->w[i];
        if (w->state == RXW_CLOSED) /* timed out: holds nothing */
            continue;
        bool sent = w->state == RXW_MOVING || w->state == RXW_DONE;
        bool in_flight = (sent || w->state == RXW_NACKED) && w->n_out > 0;
        if (code != KVF_OK && sent && w->peer && w->peer->up)
            engine_send_nack(w->peer, w->flow, rx->req_id, w->ctx_rank, code, WIRE_NACK_PLAIN, msg);
        if (holds_resv(w)) {
            /* chunks may still come: quarantined until the writer's daemon acks the drain */
            arena_resv_close(e->arena, &w->resv, in_flight);
            if (in_flight)
                quar_add(e, w->flow, w->peer);
        }
        if (code != KVF_OK) /* fragment puts may still land in the rank's pools */
            quar_hold_pools(e, w, code);
        w->state = RXW_CLOSED; /* an edge from every state but closed */
        w->n_out = 0;
    }
}

static void rx_fail(struct rx *rx, kvf_error_t code, const char *fmt, ...)
{
    if (rx->state == RX_ENDED)
        return;
    char msg[WIRE_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    engine_recv_rx_set_state(rx, RX_ENDED);
    rx->e->c.remote_failed++;
    if (code == KVF_E_BOUND_VIOLATION)
        rx->e->c.bound_violations++;
    log_req(LOG_LVL_INFO, rx->req_id, rx->home, rx->ctx_instance,
            "engine: request %llu from %s failed: %s: %s", (unsigned long long)rx->req_id,
            rx->ctx_instance, kvf_error_to_string(code), msg);
    nack_readers(rx, code, msg); /* the writers' SENDs learn this reader will not come */
    release(rx, code, msg);
    struct xfer *x = rx->x;
    if (x && (rx->scatters_running > 0 || rx->frag_wait > 0)) {
        /* scatters or fragment puts may still write into the rank's pools: it hears of the
         * failure when they ended (engine_recv_writes_ended), never under them, or at once flagged
         * HELD when only peers' puts are left (xfer_held.c) */
        xfer_hold(x, code, msg);
        if (rx->scatters_running == 0) /* peers' puts only: a worker that can hear it, now */
            rx->e->req.ops->held_end(rx->t, x);   /* (flagged HELD; RELEASED once they drained) */
        return;
    }
    rx->x = NULL;
    if (x)
        rx->e->req.ops->end(rx->t, x, code, 0, msg);
}

static void rx_done(struct rx *rx)
{
    engine_recv_rx_set_state(rx, RX_ENDED);
    rx->e->c.remote_done++;
    rx->e->c.last_wall_ns = rx->moving_ns ? uv_hrtime() - rx->moving_ns : 0;
    rx->e->c.last_bytes = rx->plan.total_bytes;
    release(rx, KVF_OK, "");
    struct xfer *x = rx->x;
    rx->x = NULL;
    if (x)
        rx->e->req.ops->end(rx->t, x, KVF_OK, rx->plan.total_bytes, "");
}

static void check_done(struct rx *rx);

void gen_rx_fail(struct rx *rx, kvf_error_t code, const char *msg)
{
    rx_fail(rx, code, "%s", msg);
}

void gen_check_done(struct rx *rx)
{
    check_done(rx);
}

static void check_done(struct rx *rx)
{
    if (rx->state != RX_MOVING)
        return;
    for (uint32_t i = 0; i < rx->n_w; i++)
        if (rx->w[i].scattered < rx->w[i].extent)
            return;
    rx_done(rx);
}

/* ---- planning ---- */

static void start_writer(struct rxw *w);

/* rx planned but its plan cannot run, no writer set up yet: its plan's writers learn it. */
static void unplanned_fail(struct rx *rx, const struct itable *tab, kvf_error_t code,
                           const char *msg)
{
    nack_unplanned(rx, tab, NULL, code, msg);
    rx_fail(rx, code, "%s", msg);
}

/* rx was refused against a table cached before its RECV came (code, msg): the instance may have
 * re-registered in another shape since (a new epoch: attention-DP or not, another TP), which no
 * context daemon can say, since nothing was asked of one. True: the home is asked again, once,
 * and rx waits for the answer (gen_table_ready plans it again); false: the refusal stands. */
static bool rx_refetch(struct rx *rx, struct itable *tab, kvf_error_t code, const char *msg)
{
    if (!rx->tab_cached || rx->refetched)
        return false;
    rx->tab_cached = false;
    rx->refetched = true;
    log_req(LOG_LVL_INFO, rx->req_id, rx->home, rx->ctx_instance,
            "engine: request %llu from %s refused against the cached table (epoch %llu): %s: %s; "
            "asking the home again", (unsigned long long)rx->req_id, rx->ctx_instance,
            (unsigned long long)tab->epoch, kvf_error_to_string(code), msg);
    int err;
    if (tab_refetch(rx->e, tab, &err) < 0)
        rx_fail(rx, KVF_E_PEER_UNREACHABLE, "home %s of context instance %s: %s", rx->home,
                rx->ctx_instance, strerror(-err));
    return true;
}

/* Plans rx against the context instance's table: a verdict cached for this rank, the plan, its
 * bounds against the rank's pools. False: rx failed (and the writers its shape reads were told),
 * or waits for the table again (rx_refetch). */
static bool rx_plan(struct rx *rx, struct itable *tab)
{
    struct xfer *x = rx->x;
    for (uint32_t i = 0; i < tab->n_bad; i++)
        if (tab->bad[i].worker_id == x->rank->worker_id) {
            if (rx_refetch(rx, tab, (kvf_error_t)tab->bad[i].code, tab->bad[i].msg))
                return false;
            nack_refused(rx, tab, (kvf_error_t)tab->bad[i].code, tab->bad[i].msg);
            rx_fail(rx, tab->bad[i].code, "%s (verdict cached for epoch %llu)", tab->bad[i].msg,
                    (unsigned long long)tab->epoch);
            return false;
        }
    struct plan_input pin = {.gen = &x->rank->layout,
                             .ctx = tab->ranks,
                             .n_ctx = tab->n,
                             .ctx_ids = NULL,
                             .ctx_dp_rank = x->ctx_dp_rank,
                             .tokens = x->tokens};
    plan_ids_of(x->items.n_groups, x->items.counts, x->items.ids, &pin.gen_ids);
    char msg[sizeof(((struct plan_error *)0)->message)];
    kvf_error_t code = rx->e->d->cfg.arena_cut_at_layers /* grants end at layer boundaries */
                           ? plan_request_marked(&pin, &rx->plan, &rx->marks, msg, sizeof msg)
                           : plan_request(&pin, &rx->plan, msg, sizeof msg);
    if (code != KVF_OK && rx_refetch(rx, tab, code, msg))
        return false;
    if (code != KVF_OK) {
        if (code == KVF_E_PEER_INCOMPATIBLE && tab->n_bad < sizeof tab->bad / sizeof tab->bad[0]) {
            struct tab_verdict *v = &tab->bad[tab->n_bad++];
            v->worker_id = x->rank->worker_id;
            v->code = code;
            snprintf(v->msg, sizeof v->msg, "%s", msg);
        }
        if (code == KVF_E_PEER_INCOMPATIBLE) /* refuses every writer: their SENDs end now */
            nack_refused(rx, tab, code, msg);
        else /* the writers its shape reads */
            nack_unplanned(rx, tab, &pin, code, msg);
        rx_fail(rx, code, "%s", msg);
        return false;
    }
    rx->planned = true;
    x->bytes_planned = rx->plan.total_bytes; /* progress for kvferryctl transfers */
    rx->epoch = tab->epoch;
    for (uint32_t i = 0; i < rx->plan.n_writers; i++) {
        const struct plan_writer *pw = &rx->plan.writers[i];
        if (copy_check(pw->ops, pw->n_ops, registry_rank_mem(x->rank), 'd') < 0) {
            snprintf(msg, sizeof msg, "plan of writer rank %u leaves the mapped pools",
                     pw->ctx_rank);
            unplanned_fail(rx, tab, KVF_E_BOUND_VIOLATION, msg);
            return false;
        }
    }
    return true;
}

/* One rxw per writer of the plan: its flow, and its daemon (a peer, or none for a writer of
 * ours, whose layouts the local path then reads from a copy of the table). False: rx failed. */
static bool rx_writers(struct rx *rx, struct itable *tab)
{
    struct engine *e = rx->e;
    for (uint32_t i = 0; i < rx->n_w; i++) {
        struct rxw *w = &rx->w[i];
        const struct plan_writer *pw = &rx->plan.writers[i];
        w->kind = RESV_LANDING;
        w->rx = rx;
        w->idx = i;
        w->ctx_rank = pw->ctx_rank;
        w->extent = pw->bytes;
        w->flow = ++e->next_flow;
        if (engine_is_self(e, tab->addrs[pw->ctx_rank])) { /* a writer of ours: no UCX */
            w->path = path_of(PATH_LOCAL);
            if (!rx->ctx_layouts) {
                rx->ctx_layouts = malloc(tab->n * sizeof *rx->ctx_layouts);
                if (!rx->ctx_layouts) {
                    rx_fail(rx, KVF_E_INTERNAL, "out of memory");
                    return false;
                }
                memcpy(rx->ctx_layouts, tab->ranks, tab->n * sizeof *rx->ctx_layouts);
                rx->n_ctx = tab->n;
            }
            continue;
        }
        int rc = epeer_get(e, tab->addrs[pw->ctx_rank], &w->peer);
        if (rc < 0) {
            w->peer = NULL;
            rx_fail(rx, KVF_E_PEER_UNREACHABLE, "context rank %u's daemon %s: %s", pw->ctx_rank,
                    tab->addrs[pw->ctx_rank], strerror(-rc));
            return false;
        }
        w->peer->users++;
    }
    return true;
}

/* The table came: plan (rx_plan), choose the path, make the writers (rx_writers), start the
 * executor's part (e.g. GPU programs), then ask every writer whose daemon is up. */
static void plan_rx(struct rx *rx, struct itable *tab)
{
    struct engine *e = rx->e;
    struct xfer *x = rx->x;
    xfer_phase_mark(&x->lookup_ns); /* the context instance's table is known */
    if (!rx_plan(rx, tab))
        return;
    rx->bx = bexec_of(x->rank); /* the executor for the pools the plan was checked against */
    rx->w = calloc(rx->plan.n_writers ? rx->plan.n_writers : 1, sizeof *rx->w);
    if (!rx->w) {
        unplanned_fail(rx, tab, KVF_E_INTERNAL, "out of memory");
        return;
    }
    rx->n_w = rx->plan.n_writers;
    rx->path = path_choose(e, x, tab, &rx->plan, &rx->path_why);
    log_debug("engine: rx req %llu: path %s (%s)", (unsigned long long)rx->req_id, rx->path->name,
              rx->path_why);
    for (uint32_t i = 0; i < rx->n_w; i++)
        rx->w[i].path = rx->path;
    if (!engine_recv_rx_set_state(rx, RX_CONNECT) || !rx_writers(rx, tab))
        return;
    if (ix_w_add(e, rx) < 0) {
        rx_fail(rx, KVF_E_INTERNAL, "out of memory");
        return;
    }
    char gmsg[WIRE_TEXT_MAX];
    kvf_error_t gcode = rx->bx->rx_start ? rx->bx->rx_start(rx, gmsg, sizeof gmsg) : KVF_OK;
    if (gcode != KVF_OK) { /* e.g. GPU pools: one program per writer, scattered by kernels */
        rx_fail(rx, gcode, "%s", gmsg);
        return;
    }
    if (!engine_recv_rx_set_state(rx, RX_MOVING))
        return;
    if (rx->n_w == 0) {
        check_done(rx);
        return;
    }
    for (uint32_t i = 0; i < rx->n_w && rx->state == RX_MOVING; i++)
        if (!rx->w[i].peer || rx->w[i].peer->up) /* a local writer has no peer */
            start_writer(&rx->w[i]);
}

void gen_ask(struct rxw *w)
{
    struct engine *e = w->rx->e;
    uint32_t win = engine_window(e);
    if (!holds_resv(w) || w->resv.state == RESV_WAITING || w->resv.granted >= w->extent ||
        w->resv.held >= win)
        return;
    int rc = arena_want(e->arena, &w->resv, win - w->resv.held, engine_now(e));
    if (rc < 0)
        rx_fail(w->rx, rc == -EAGAIN ? KVF_E_TIMEOUT : KVF_E_INTERNAL,
                "landing credits for writer rank %u refused: %s", w->ctx_rank, strerror(-rc));
}

static void start_writer(struct rxw *w)
{
    if (w->state != RXW_IDLE || w->rx->state != RX_MOVING)
        return;
    w->path->start(w); /* its row: path_local.c, path_bounce.c, frag_gen.c */
}

/* Starts the request over with a fresh table: the writers' flows end (their slots quarantined
 * until drained), new flows are planned from the refetched table. */
static void rx_replan(struct rx *rx)
{
    struct engine *e = rx->e;
    log_req(LOG_LVL_INFO, rx->req_id, rx->home, rx->ctx_instance,
            "engine: request %llu from %s: the table was stale, replanning with a fresh one",
            (unsigned long long)rx->req_id, rx->ctx_instance);
    release(rx, KVF_E_CANCELLED, "replanned with a fresh table");
    if (rx->gpu)
        egpu_rx_gone(rx);
    rx->scatter_serial++; /* scatters still running belong to the old plan */
    for (uint32_t i = 0; i < rx->n_w; i++)
        if (rx->w[i].peer)
            rx->w[i].peer->users--;
    if (rx->planned)
        plan_done(&rx->plan);
    plan_marks_done(&rx->marks);
    rx->planned = false;
    ix_w_del(e, rx);
    free(rx->w);
    rx->w = NULL;
    rx->n_w = 0;
    free(rx->gen_json);
    rx->gen_json = NULL;
    free(rx->ctx_layouts);
    rx->ctx_layouts = NULL;
    rx->retried = true;
    rx->tab_cached = false; /* the table comes after the stale NACK: the instance's current one */
    e->c.replans++;
    if (!engine_recv_rx_set_state(rx, RX_LOOKUP))
        return;
    int err;
    struct itable *tab = tab_get(e, rx->ctx_instance, rx->home, &err);
    if (err < 0)
        rx_fail(rx, KVF_E_PEER_UNREACHABLE, "home %s of context instance %s: %s", rx->home,
                rx->ctx_instance, strerror(-err));
    else if (tab)
        plan_rx(rx, tab);
}

void gen_table_ready(struct engine *e, struct itable *tab, int err, const char *msg)
{
    for (struct rx *rx = e->rxs; rx; rx = rx->next) {
        if (rx->state != RX_LOOKUP || strcmp(rx->ctx_instance, tab->instance) != 0 ||
            strcmp(rx->home, tab->home) != 0)
            continue;
        if (err)
            rx_fail(rx, (kvf_error_t)err, "%s", msg);
        else
            plan_rx(rx, tab);
    }
}

void gen_recv(struct engine *e, struct transfers *t, struct xfer *x, const char *home)
{
    const struct kvf_config *cfg = &e->d->cfg;
    char msg[WIRE_TEXT_MAX];
    kvf_error_t code = KVF_OK;
    const char *wait_why;
    if (!e->link && linkwait_waiting(e, &wait_why)) {
        code = KVF_E_NO_ROUTE;
        snprintf(msg, sizeof msg, "context instance %s is homed at %s, but this daemon's link "
                 "has not started: %s", x->ctx_instance, home, wait_why);
    } else if (!e->link) {
        code = KVF_E_NO_ROUTE;
        snprintf(msg, sizeof msg,
                 "context instance %s is homed at %s, but this daemon refuses "
                 "inter-daemon traffic: set cluster.secret_file",
                 x->ctx_instance, home);
    } else if (e->draining || e->stopping) {
        code = KVF_E_NO_ROUTE;
        snprintf(msg, sizeof msg, "the daemon is draining: no new requests");
    } else if (e->self_addr[0] && strcmp(home, e->self_addr) == 0) {
        code = KVF_E_UNKNOWN_INSTANCE;
        snprintf(msg, sizeof msg,
                 "context instance %s names this daemon (%s) as its home, but it "
                 "is not registered here",
                 x->ctx_instance, home);
    }
    struct rx *rx = code == KVF_OK ? calloc(1, sizeof *rx) : NULL;
    if (code == KVF_OK && !rx) {
        code = KVF_E_INTERNAL;
        snprintf(msg, sizeof msg, "out of memory");
    }
    if (code != KVF_OK) {
        e->req.ops->end(t, x, code, 0, msg);
        return;
    }
    uint64_t now = engine_now(e);
    dheap_node_init(&rx->due);
    rx->e = e;
    rx->t = t;
    rx->x = x;
    rx->req_id = x->req_id;
    snprintf(rx->home, sizeof rx->home, "%s", home);
    snprintf(rx->ctx_instance, sizeof rx->ctx_instance, "%s", x->ctx_instance);
    rx->started_ms = now;
    rx->t0_ns = uv_hrtime();
    /* x->deadline_ms: the RECV's own deadline or deadlines.send_wait for the SEND to come;
     * then the bytes have deadlines.transfer. One clock: this one (transfers.c leaves the
     * deadline of a RECV the engine follows to gen_tick). */
    rx->deadline_ms = x->deadline_ms + cfg->deadlines_transfer_ms;
    x->deadline_ms = rx->deadline_ms;
    if (dheap_update(&e->rx_due, &rx->due, rx->deadline_ms) < 0 || ix_rx_add(e, rx) < 0) {
        dheap_remove(&e->rx_due, &rx->due);
        free(rx);
        e->req.ops->end(t, x, KVF_E_INTERNAL, 0, "out of memory");
        return;
    }
    x->rx = rx;
    rx->next = e->rxs;
    if (e->rxs)
        e->rxs->prev = rx;
    e->rxs = rx;
    e->c.remote_recvs++;
    engine_kick_tick(e);
    int err;
    struct itable *tab = tab_get(e, rx->ctx_instance, home, &err);
    rx->tab_cached = tab != NULL;
    if (err < 0)
        rx_fail(rx, KVF_E_PEER_UNREACHABLE, "home %s of context instance %s: %s", home,
                rx->ctx_instance, strerror(-err));
    else if (tab)
        plan_rx(rx, tab);
}

/* ---- credits ---- */

int gen_send_recv_req(struct rxw *w, const struct wire_grant *g, uint32_t n)
{
    struct rx *rx = w->rx;
    struct xfer *x = rx->x;
    struct wire_msg m = {.type = WIRE_RECV_REQ};
    struct wire_recv_req *q = &m.u.recv_req;
    q->req_id = rx->req_id;
    snprintf(q->ctx_instance, sizeof q->ctx_instance, "%s", rx->ctx_instance);
    q->table_epoch = rx->epoch;
    q->ctx_dp_rank = x->ctx_dp_rank;
    q->tokens = x->tokens;
    q->writer = w->ctx_rank;
    q->n_groups = x->items.n_groups;
    const uint32_t *p = x->items.ids;
    for (uint32_t i = 0; i < q->n_groups; i++) {
        q->n_ids[i] = x->items.counts[i];
        q->ids[i] = p;
        p += x->items.counts[i];
    }
    q->path = w->path->wire;
    q->extent_bytes = w->extent;
    q->n_grants = n;
    if (n)
        memcpy(q->grants, g, n * sizeof *g);
    if (w->path->fill_req && w->path->fill_req(w, q) < 0)
        return -ENOENT;
    /* The layout once per (peer, registration); later RECV_REQs name it (engine_laycache.h). */
    q->layout_id = x->rank->worker_id;
    bool held = laycache_place(&w->peer->lc, q->layout_id, w->flow, &q->layout_slot);
    if (!held && !rx->gen_json) {
        json_t *o = layout_to_jobj(&x->rank->layout);
        rx->gen_json = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
    }
    if (!held && rx->gen_json) {
        q->gen_json = rx->gen_json;
        q->gen_json_len = (uint32_t)strlen(rx->gen_json);
    }
    int rc = held || rx->gen_json ? engine_send_msg(w->peer, w->flow, &m) : -ENOMEM;
    if (rc < 0 && !held)
        laycache_forget(&w->peer->lc, q->layout_slot);
    else if (rc >= 0)
        (*(held ? &rx->e->c.layouts_referenced : &rx->e->c.layouts_sent))++;
    return rc;
}

void gen_on_grant(struct rxw *w, const struct arena_grant *g, uint32_t n)
{
    struct rx *rx = w->rx;
    if (rx->state != RX_MOVING)
        return;
    struct wire_grant wg[WIRE_MAX_GRANTS];
    for (uint32_t i = 0; i < n; i++) {
        if (w->n_out < ENGINE_MAX_CREDITS)
            w->out[w->n_out++] = g[i];
        wg[i] =
            (struct wire_grant){g[i].slot, g[i].generation, g[i].offset, g[i].length, g[i].ext_off};
    }
    int rc;
    if (w->state == RXW_CREDIT) {
        rc = gen_send_recv_req(w, wg, n);
        if (rc == 0 && !engine_recv_rxw_set_state(w, RXW_MOVING))
            return;
    } else {
        struct wire_msg m = {.type = WIRE_GRANT};
        m.u.grant.req_id = rx->req_id;
        m.u.grant.writer = w->ctx_rank;
        m.u.grant.n_grants = n;
        memcpy(m.u.grant.grants, wg, n * sizeof *wg);
        rc = engine_send_msg(w->peer, w->flow, &m);
    }
    if (rc < 0)
        rx_fail(rx, KVF_E_PEER_LOST, "could not send credits to context rank %u's daemon: %s",
                w->ctx_rank, strerror(-rc));
}

void gen_on_timeout(struct rxw *w)
{
    char why[512];
    share_why(w->rx->e, w->resv.owner, why, sizeof why);
    if (!engine_recv_rxw_set_state(w, RXW_CLOSED)) /* timed out: it holds nothing */
        return;
    rx_fail(w->rx, KVF_E_TIMEOUT,
            "no landing slot for writer rank %u within arena.reserve_timeout (%s)", w->ctx_rank,
            why);
}

/* ---- chunks ---- */

struct rxw *gen_find_w(struct engine *e, struct epeer *p, uint64_t flow)
{
    return ix_w_find(e, p, flow, true);
}

void gen_on_writer_done(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m)
{
    struct rxw *w = gen_find_w(e, p, flow);
    if (!w)
        return;
    if (w->state == RXW_MOVING && !engine_recv_rxw_set_state(w, RXW_DONE))
        return;
    if (m->u.writer_done.bytes != w->extent) {
        rx_fail(w->rx, KVF_E_BOUND_VIOLATION,
                "writer rank %u reports %llu bytes, the plan's "
                "extent is %llu",
                w->ctx_rank, (unsigned long long)m->u.writer_done.bytes,
                (unsigned long long)w->extent);
        return;
    }
    if (w->path->writer_done) /* e.g. fragment: its puts were flushed before WRITER_DONE */
        w->path->writer_done(w, p);
}

void gen_on_nack(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m)
{
    struct rxw *w = gen_find_w(e, p, flow);
    if (!w && !(w = ix_w_find(e, p, flow, false)))
        return;
    struct rx *rx = w->rx;
    if (m->u.nack.code == KVF_E_UNKNOWN_INSTANCE) {
        /* maybe a stale epoch: the next request refetches the table */
        for (struct itable *t = e->tables; t; t = t->next)
            if (t->state == TAB_READY && strcmp(t->instance, rx->ctx_instance) == 0 &&
                strcmp(t->home, rx->home) == 0) {
                e->c.stale_epochs++;
                tab_drop(e, t);
                break;
            }
    }
    /* the writer's side ended it: no NACK back (it acks the drain) */
    if ((w->state == RXW_MOVING || w->state == RXW_DONE) &&
        !engine_recv_rxw_set_state(w, RXW_NACKED))
        return;
    w->not_reader = m->u.nack.reason == WIRE_NACK_NOT_READER;
    if (m->u.nack.reason == WIRE_NACK_STALE_TABLE && !rx->retried && rx->x) {
        rx_replan(rx); /* once: the instance re-registered since our table was fetched */
        return;
    }
    rx_fail(rx, m->u.nack.code, "context rank %u's daemon: %s", w->ctx_rank, m->u.nack.message);
}

void engine_recv_end(struct rx *rx, kvf_error_t err)
{
    if (rx->state != RX_ENDED) {
        kvf_error_t code = err != KVF_OK ? err : KVF_E_CANCELLED;
        engine_recv_rx_set_state(rx, RX_ENDED);
        rx->e->c.remote_failed++;
        nack_readers(rx, code, nack_why_ended(code)); /* while rx->x still names the reader */
        release(rx, code, nack_why_ended(code));
    }
    rx->x = NULL;
}

void gen_peer_up(struct engine *e, struct epeer *p)
{
    for (struct rx *rx = e->rxs; rx; rx = rx->next)
        for (uint32_t i = 0; rx->state == RX_MOVING && i < rx->n_w; i++)
            if (rx->w[i].peer == p)
                start_writer(&rx->w[i]);
}

void gen_peer_down(struct engine *e, struct epeer *p, int err)
{
    for (struct rx *rx = e->rxs; rx; rx = rx->next) {
        for (uint32_t i = 0; i < rx->n_w; i++) {
            struct rxw *w = &rx->w[i];
            if (w->peer != p)
                continue;
            if (rx->state != RX_ENDED)
                rx_fail(rx, p->up ? KVF_E_PEER_LOST : KVF_E_PEER_UNREACHABLE,
                        "context rank %u's daemon %s %s: %s", w->ctx_rank,
                        p->addr[0] ? p->addr : link_peer_id(p->lp),
                        p->up ? "was lost" : "is unreachable", strerror(-err));
        }
        for (uint32_t i = 0; i < rx->n_w; i++)
            if (rx->w[i].peer == p) {
                rx->w[i].peer = NULL;
                p->users--;
            }
    }
}

void gen_tick(struct engine *e, uint64_t now)
{
    for (struct dheap_node *nd; (nd = dheap_pop_due(&e->rx_due, now));) {
        struct rx *rx = (struct rx *)((char *)nd - offsetof(struct rx, due));
        if (rx->state == RX_ENDED)
            continue;
        uint64_t got = 0, want = 0;
        for (uint32_t i = 0; i < rx->n_w; i++)
            got += rx->w[i].scattered, want += rx->w[i].extent;
        rx_fail(rx, KVF_E_TIMEOUT,
                "request did not complete within %llu ms (%s; %llu of %llu "
                "bytes landed)",
                (unsigned long long)(rx->deadline_ms - rx->started_ms), rx_state_to_string(rx->state),
                (unsigned long long)got, (unsigned long long)want);
    }
}

void gen_fail_all(struct engine *e, kvf_error_t code, const char *why)
{
    for (struct rx *rx = e->rxs; rx; rx = rx->next)
        rx_fail(rx, code, "%s", why);
}
