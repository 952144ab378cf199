/* engine_local.c: a writer of a remote request that is registered at this very daemon (a
 * context instance spread over daemons, whose home is elsewhere, with some ranks here). Its
 * part of the request moves pool to pool like the local path: when the rank's SEND is here
 * (now or later), the writer is planned again with the SEND's ids (the generation side's plan
 * knows no context ids), both programs are bounds-checked against the mapped pools, and
 * copy_direct runs; the SEND counts one reader served. No UCX, no arena. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_drive.h"
#include "copy.h"
#include "daemon.h"
#include "engine_gen.h"
#include "move_exec.h"
#include "plan_request.h"
#include "registry.h"
#include "xfer.h"
#include "xstream.h"

static bool live(const struct xfer *s)
{
    return s->state == XFER_WAITING || s->state == XFER_COPYING;
}

static void run(struct rxw *w, struct xfer *s)
{
    struct rx *rx = w->rx;
    struct xfer *x = rx->x;
    char msg[WIRE_TEXT_MAX];
    if (s->rank->gpu || x->rank->gpu) { /* copy_direct is a CPU copy of host pools */
        snprintf(msg, sizeof msg, "context rank %u is registered at this daemon while its "
                 "instance spans daemons, and GPU pools cannot take that path: register the "
                 "generation instance on another daemon", w->ctx_rank);
        rx->e->drive->rx_fail(rx, KVF_E_NO_ROUTE, msg);
        return;
    }
    struct plan_ids *ids = plan_ctx_ids_new(rx->ctx_layouts, rx->n_ctx);
    if (!ids) {
        rx->e->drive->rx_fail(rx, KVF_E_INTERNAL, "out of memory");
        return;
    }
    plan_ids_of(s->items.n_groups, s->items.counts, s->items.ids, &ids[w->ctx_rank]);
    struct plan_input pin = {.gen = &x->rank->layout,
                             .ctx = rx->ctx_layouts,
                             .n_ctx = rx->n_ctx,
                             .ctx_ids = ids,
                             .ctx_dp_rank = x->ctx_dp_rank,
                             .tokens = x->tokens};
    plan_ids_of(x->items.n_groups, x->items.counts, x->items.ids, &pin.gen_ids);
    struct plan pl;
    char pmsg[sizeof(((struct plan_error *)0)->message)];
    kvf_error_t code = plan_request(&pin, &pl, pmsg, sizeof pmsg);
    free(ids);
    if (code != KVF_OK) {
        rx->e->drive->rx_fail(rx, code, pmsg);
        return;
    }
    const struct plan_writer *pw = NULL;
    for (uint32_t i = 0; i < pl.n_writers && !pw; i++)
        if (pl.writers[i].ctx_rank == w->ctx_rank)
            pw = &pl.writers[i];
    if (!pw || pw->bytes != w->extent) {
        snprintf(msg, sizeof msg, "local writer rank %u: %llu bytes now, %llu when planned",
                 w->ctx_rank, pw ? (unsigned long long)pw->bytes : 0ull,
                 (unsigned long long)w->extent);
        plan_done(&pl);
        rx->e->drive->rx_fail(rx, KVF_E_BOUND_VIOLATION, msg);
        return;
    }
    const struct move_exec *ex = move_exec_of(MOVE_EXEC_HOST);
    struct move_prog mp = {pw->ops, pw->n_ops, &s->rank->mem, &x->rank->mem};
    char emsg[160];
    if (ex->check(&mp, 's', emsg, sizeof emsg) < 0 || ex->check(&mp, 'd', emsg, sizeof emsg) < 0) {
        snprintf(msg, sizeof msg, "plan of local writer rank %u leaves the mapped pools",
                 w->ctx_rank);
        plan_done(&pl);
        rx->e->drive->rx_fail(rx, KVF_E_BOUND_VIOLATION, msg);
        return;
    }
    int rc = ex->direct(&mp, NULL, NULL, emsg, sizeof emsg);
    plan_done(&pl);
    if (rc != MOVE_DONE) { /* a local writer's completion is wired for inline executors only */
        snprintf(msg, sizeof msg, "%s copy of local writer rank %u: %s", ex->name, w->ctx_rank,
                 rc < 0 ? emsg : "completes asynchronously, which this path does not take yet");
        rx->e->drive->rx_fail(rx, KVF_E_INTERNAL, msg);
        return;
    }
    if (!w->rx->e->drive->rxw_set_state(w, RXW_DONE))
        return;
    w->scattered = w->extent;
    rx->e->c.bytes_local_writers += w->extent;
    if (rx->x)
        rx->x->bytes_done += w->extent;
    rx->e->req.ops->served(rx->e->req.t, s, w->extent);
    rx->e->drive->rx_check_done(rx);
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

void local_start(struct rxw *w)
{
    if (w->rx->state != RX_MOVING || w->state != RXW_IDLE)
        return;
    struct xfer *s = find_send(w);
    if (s && xstream_final(s)) /* a streaming SEND: once its last layer is final */
        run(w, s); /* else local_send_arrived runs it; the request's deadline bounds the wait */
}

void local_send_arrived(struct engine *e, struct xfer *s)
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
