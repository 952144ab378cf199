/* bounce_host.c: gathers and scatters of the bounce path on the copy threads (bounce_host.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_drive.h"
#include "bounce_host.h"
#include "bounce_tl.h"
#include "copyeng.h"
#include "daemon.h"
#include "engine_ctx.h"
#include "engine_gen.h"
#include "move_exec.h"
#include "registry.h"
#include "xfer.h"

/* One copy job in flight: a gather (st) or a scatter (rx). */
struct bh_op {
    struct engine *e;
    uint64_t flow;
    struct stage *st;    /* gather: its stage, finished only after this completed */
    struct rx *rx;       /* scatter: its request (kept while scatters_running counts this) */
    uint32_t widx, serial;
    struct arena_grant g; /* scatter: the landing slot it reads */
    struct copyeng_job *job; /* until on_copied (NULL inline) */
    struct bh_op *next;
};

static void unlink_op(struct engine *e, struct bh_op *op)
{
    for (struct bh_op **pp = &e->host_ops; *pp; pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            return;
        }
}

void bh_scatter_ended(struct rx *rx, uint32_t widx, uint32_t serial, const struct arena_grant *g,
                       int status, const char *who)
{
    rx->scatters_running--;
    if (rx->state == RX_MOVING && serial == rx->scatter_serial && widx < rx->n_w) {
        struct rxw *w = &rx->w[widx];
        uint32_t i = 0;
        if (status == 0 && rx->e->tl) /* arena.timeline: off by default */
            btl_mark(rx->e->tl, BTL_SCATTER_DONE, rx->req_id, w->ctx_rank, g->ext_off);
        while (i < w->n_out && (w->out[i].slot != g->slot || w->out[i].generation != g->generation))
            i++;
        if (status < 0) {
            char msg[WIRE_TEXT_MAX];
            snprintf(msg, sizeof msg, "%s scatter of writer rank %u's extent [%llu, +%llu) failed: %s",
                     who, w->ctx_rank, (unsigned long long)g->ext_off,
                     (unsigned long long)g->length, strerror(-status));
            rx->e->drive->rx_fail(rx, KVF_E_INTERNAL, msg);
        } else if (i < w->n_out) {
            bland_landed(w, i);
        }
    }
    rx->e->drive->rx_writes_ended(rx); /* a failure held while scatters ran reaches the worker now */
}

static void on_copied(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j;
    struct bh_op *op = user;
    struct engine *e = op->e;
    unlink_op(e, op);
    if (op->st) {
        if (d->status == 0) {
            e->c.host_gathers++;
            e->c.bytes_host_gathered += op->st->g.length;
        }
        bstage_gathered(op->st, d->status);
    } else {
        if (d->status == 0) {
            e->c.host_scatters++;
            e->c.bytes_host_scattered += op->g.length;
        }
        bh_scatter_ended(op->rx, op->widx, op->serial, &op->g, d->status, "host");
    }
    free(op);
    e->drive->rx_sweep(e);
    e->drive->tx_sweep(e);
}

static int submit(struct engine *e, struct bh_op *op, const struct copyeng_part *part,
                  char *msg, size_t len)
{
    int rc = copyeng_submit(e->d->copy, part, 1, on_copied, op, &op->job);
    if (rc < 0) {
        snprintf(msg, len, "copy threads refused a %llu-byte %s: %s",
                 (unsigned long long)(part->hi - part->lo),
                 part->kind == COPYENG_GATHER ? "gather" : "scatter", strerror(-rc));
        free(op);
        return rc;
    }
    op->next = e->host_ops;
    e->host_ops = op;
    return MOVE_STARTED;
}

int bh_scatter(struct rx *rx, uint32_t widx, const struct arena_grant *g, char *msg, size_t len)
{
    struct engine *e = rx->e;
    const struct plan_writer *pw = &rx->plan.writers[widx];
    const struct copy_mem *dst = &rx->x->rank->mem;
    uint8_t *slot = e->arena_base + g->offset;
    if (!e->d->copy) {
        struct move_prog mp = {pw->ops, pw->n_ops, NULL, dst};
        return move_exec_of(MOVE_EXEC_HOST)->scatter(&mp, slot, g->ext_off, g->ext_off + g->length,
                                                     NULL, NULL, msg, len);
    }
    struct bh_op *op = calloc(1, sizeof *op);
    if (!op) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    *op = (struct bh_op){.e = e, .flow = rx->w[widx].flow, .rx = rx, .widx = widx,
                         .serial = rx->scatter_serial, .g = *g};
    struct copyeng_part part = {.kind = COPYENG_SCATTER, .ops = pw->ops, .n_ops = pw->n_ops,
                                .dst = dst, .buf = slot, .lo = g->ext_off,
                                .hi = g->ext_off + g->length};
    int rc = submit(e, op, &part, msg, len);
    if (rc == MOVE_STARTED) /* the request holds a failure until the scatters ended */
        rx->scatters_running++;
    return rc;
}

int bh_gather(struct stage *st, char *msg, size_t len)
{
    struct engine *e = st->e;
    struct tx *tx = st->tx;
    const struct copy_mem *src = &tx->send->rank->mem;
    if (!e->d->copy || st->g.length == 0) {
        struct move_prog mp = {tx->pw->ops, tx->pw->n_ops, src, NULL};
        return move_exec_of(MOVE_EXEC_HOST)->gather(&mp, st->g.ext_off,
                                                    st->g.ext_off + st->g.length, st->buf, NULL,
                                                    NULL, msg, len);
    }
    struct bh_op *op = calloc(1, sizeof *op);
    if (!op) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    *op = (struct bh_op){.e = e, .flow = tx->flow, .st = st};
    struct copyeng_part part = {.kind = COPYENG_GATHER, .ops = tx->pw->ops, .n_ops = tx->pw->n_ops,
                                .src = src, .buf = st->buf, .buf_pid = st->buf_pid,
                                .lo = st->g.ext_off,
                                .hi = st->g.ext_off + st->g.length};
    return submit(e, op, &part, msg, len);
}

void bh_gather_halt(struct stage *st)
{
    for (struct bh_op *op = st->e->host_ops; op; op = op->next)
        if (op->st == st)
            copyeng_halt(op->job);
}

bool bh_flow_busy(const struct engine *e, uint64_t flow)
{
    for (const struct bh_op *op = e->host_ops; op; op = op->next)
        if (op->rx && op->flow == flow)
            return true;
    return false;
}

void bh_stop(struct engine *e)
{
    if (e->host_ops)
        copyeng_quiesce(e->d->copy);
}
