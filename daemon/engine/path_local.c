/* path_local.c: the local row of path.h: a writer of a remote request that is registered at
 * this very daemon (a context instance spread over daemons, whose home is elsewhere, with some
 * ranks here). When the rank's SEND is here (now or later, once a streaming SEND's last layer
 * is final), the writer is planned again with the SEND's ids, its program is bounds-checked
 * against both ranks' mapped pools, and it moves pool to pool by the same-daemon path's copy
 * that the request side's local path uses (move_local.h): inline on the loop below
 * MOVE_LOCAL_INLINE_MAX bytes, else on the copy threads, counted in rx->scatters_running (the
 * request holds a failure until the copy ended) and reading its SEND until then: a SEND that
 * ends meanwhile halts the copy and fails the request. The SEND counts one reader served once
 * the bytes are in place. Nothing goes on the wire; no arena, no UCX. GPU pools are refused
 * (NO_ROUTE): their same-daemon copies are the request side's kernels (request/xfer_gpu.c).
 * Loop thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "daemon.h"
#include "engine_drive.h"
#include "engine_gen.h"
#include "move_exec.h"
#include "move_local.h"
#include "path.h"
#include "plan_request.h"
#include "registry.h"
#include "xfer.h"
#include "xstream.h"

/* A local writer's copy on the copy threads. */
struct plocal {
    struct engine *e;
    struct rx *rx;        /* alive while this runs (scatters_running) */
    uint32_t widx;
    struct xfer *send;    /* borrowed: NULL once it ended (path_local_send_end) */
    struct copyeng_job *job;
    struct plocal *next;
};

static bool live(const struct xfer *s)
{
    return s->state == XFER_WAITING || s->state == XFER_COPYING;
}

/* w's program replanned with its SEND's ids (the generation side's plan knows no context ids),
 * bounds-checked against both ranks' mapped pools; *pl is then owned by the caller. NULL: rx
 * failed. */
static const struct plan_writer *plan_writer(struct rxw *w, struct xfer *s, struct plan *pl)
{
    struct rx *rx = w->rx;
    struct xfer *x = rx->x;
    char msg[WIRE_TEXT_MAX];
    if (s->rank->gpu || x->rank->gpu) { /* move_local.h copies host pools */
        snprintf(msg, sizeof msg, "context rank %u is registered at this daemon while its "
                 "instance spans daemons, and GPU pools cannot take that path: register the "
                 "generation instance on another daemon", w->ctx_rank);
        rx->e->drive->rx_fail(rx, KVF_E_NO_ROUTE, msg);
        return NULL;
    }
    struct plan_ids *ids = plan_ctx_ids_new(rx->ctx_layouts, rx->n_ctx);
    if (!ids) {
        rx->e->drive->rx_fail(rx, KVF_E_INTERNAL, "out of memory");
        return NULL;
    }
    plan_ids_of(s->items.n_groups, s->items.counts, s->items.ids, &ids[w->ctx_rank]);
    struct plan_input pin = {.gen = &x->rank->layout,
                             .ctx = rx->ctx_layouts,
                             .n_ctx = rx->n_ctx,
                             .ctx_ids = ids,
                             .ctx_dp_rank = x->ctx_dp_rank,
                             .tokens = x->tokens};
    plan_ids_of(x->items.n_groups, x->items.counts, x->items.ids, &pin.gen_ids);
    char pmsg[sizeof(((struct plan_error *)0)->message)];
    kvf_error_t code = plan_request(&pin, pl, pmsg, sizeof pmsg);
    free(ids);
    if (code != KVF_OK) {
        rx->e->drive->rx_fail(rx, code, pmsg);
        return NULL;
    }
    const struct plan_writer *pw = NULL;
    for (uint32_t i = 0; i < pl->n_writers && !pw; i++)
        if (pl->writers[i].ctx_rank == w->ctx_rank)
            pw = &pl->writers[i];
    if (!pw || pw->bytes != w->extent) {
        snprintf(msg, sizeof msg, "local writer rank %u: %llu bytes now, %llu when planned",
                 w->ctx_rank, pw ? (unsigned long long)pw->bytes : 0ull,
                 (unsigned long long)w->extent);
        plan_done(pl);
        rx->e->drive->rx_fail(rx, KVF_E_BOUND_VIOLATION, msg);
        return NULL;
    }
    const struct move_exec *ex = move_exec_of(MOVE_EXEC_HOST);
    struct move_prog mp = {pw->ops, pw->n_ops, &s->rank->mem, &x->rank->mem};
    char emsg[160];
    if (ex->check(&mp, 's', emsg, sizeof emsg) < 0 || ex->check(&mp, 'd', emsg, sizeof emsg) < 0) {
        snprintf(msg, sizeof msg, "plan of local writer rank %u leaves the mapped pools",
                 w->ctx_rank);
        plan_done(pl);
        rx->e->drive->rx_fail(rx, KVF_E_BOUND_VIOLATION, msg);
        return NULL;
    }
    return pw;
}

/* w's bytes are in place: the writer is done and its SEND has one reader served. */
static void landed(struct rxw *w, struct xfer *s)
{
    struct rx *rx = w->rx;
    if (!rx->e->drive->rxw_set_state(w, RXW_DONE))
        return;
    w->scattered = w->extent;
    rx->e->c.bytes_local_writers += w->extent;
    if (rx->x)
        rx->x->bytes_done += w->extent;
    rx->e->req.ops->served(rx->e->req.t, s, w->extent);
    rx->e->drive->rx_check_done(rx);
}

static void unlink_op(struct plocal *op)
{
    for (struct plocal **pp = &op->e->plocals; *pp; pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            return;
        }
}

/* The copy threads ended a writer's copy (also at engine stop: copyeng_quiesce). */
static void copied(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j;
    struct plocal *op = user;
    struct rx *rx = op->rx;
    struct engine *e = op->e;
    unlink_op(op);
    rx->scatters_running--; /* its write into the pools ended */
    struct rxw *w = &rx->w[op->widx];
    if (rx->state == RX_MOVING && w->state == RXW_MOVING) {
        char msg[WIRE_TEXT_MAX];
        if (!op->send) {
            snprintf(msg, sizeof msg, "context rank %u's SEND ended while this daemon copied "
                     "it", w->ctx_rank);
            e->drive->rx_fail(rx, KVF_E_CANCELLED, msg);
        } else if (d->status < 0) {
            snprintf(msg, sizeof msg, "copy of local writer rank %u: %s", w->ctx_rank,
                     strerror(-d->status));
            e->drive->rx_fail(rx, KVF_E_CANCELLED, msg);
        } else {
            landed(w, op->send);
        }
    }
    free(op);
    e->drive->rx_writes_ended(rx); /* a failure held meanwhile reaches the worker now */
    e->drive->rx_sweep(e);
}

static void run(struct rxw *w, struct xfer *s)
{
    struct rx *rx = w->rx;
    struct plan pl;
    const struct plan_writer *pw = plan_writer(w, s, &pl);
    if (!pw)
        return;
    struct engine *e = rx->e;
    struct plocal *op = calloc(1, sizeof *op);
    char msg[WIRE_TEXT_MAX];
    uint64_t busy = 0;
    struct move_local_part part = {pw->ops, pw->n_ops, &s->rank->mem};
    int rc = op ? move_local_run(e->d->copy, &part, 1, &rx->x->rank->mem, pw->bytes, copied, op,
                                 &op->job, &busy, msg, sizeof msg)
                : -1;
    plan_done(&pl);
    if (rc < 0) {
        free(op);
        if (!op)
            snprintf(msg, sizeof msg, "out of memory");
        e->drive->rx_fail(rx, KVF_E_INTERNAL, msg);
        return;
    }
    if (rc == MOVE_DONE) { /* inline: the bytes are in place */
        free(op);
        landed(w, s);
        return;
    }
    *op = (struct plocal){e, rx, w->idx, s, op->job, e->plocals};
    e->plocals = op;
    rx->scatters_running++; /* the request holds a failure until this write ended */
    e->drive->rxw_set_state(w, RXW_MOVING);
}

/* The local rank's SEND of this request, or NULL while it has not come. */
static struct xfer *find_send(struct rxw *w)
{
    struct engine *e = w->rx->e;
    struct reg_instance *in = registry_find(e->req.reg, w->rx->ctx_instance);
    if (!in || w->ctx_rank >= in->n_ranks || !in->ranks[w->ctx_rank])
        return NULL;
    return e->req.ops->find_send(e->req.t, in->ranks[w->ctx_rank], w->rx->req_id);
}

static void start(struct rxw *w)
{
    if (w->rx->state != RX_MOVING || w->state != RXW_IDLE)
        return;
    struct xfer *s = find_send(w);
    if (s && xstream_final(s)) /* a streaming SEND: once its last layer is final */
        run(w, s); /* else path_local_send_arrived runs it; the request's deadline bounds it */
}

void path_local_send_arrived(struct engine *e, struct xfer *s)
{
    /* run() may end and free s (its last reader served): the key is copied, and s looked up
     * again after each run */
    char inst[sizeof s->ctx_instance];
    snprintf(inst, sizeof inst, "%s", s->ctx_instance);
    uint64_t id = s->req_id;
    struct reg_rank *rank = s->rank;
    uint32_t pos = 0;
    for (struct rx *rx; s && (rx = ix_rx_next(e, inst, id, &pos));)
        for (uint32_t i = 0; s && i < rx->n_w && rx->state == RX_MOVING; i++) {
            struct rxw *w = &rx->w[i];
            if (rxw_local(w) && w->state == RXW_IDLE && layout_rank(&rank->layout) == w->ctx_rank &&
                live(s) && xstream_final(s)) {
                run(w, s);
                s = e->req.ops->find_send(e->req.t, rank, id);
            }
        }
}

void path_local_send_end(struct engine *e, struct xfer *s)
{
    for (struct plocal *op = e->plocals; op; op = op->next)
        if (op->send == s) { /* the worker may reuse its blocks: stop reading them */
            op->send = NULL;
            copyeng_halt(op->job);
        }
}

void path_local_stop(struct engine *e)
{
    if (e->plocals) /* their callbacks run in here */
        copyeng_quiesce(e->d->copy);
}

const struct path_row path_local_row = {
    .name = "local",
    .kind = PATH_LOCAL,
    .wire = WIRE_PATH_BOUNCE, /* never sent */
    .start = start,
};
