/* frag_gen.c: the fragment path's generation side (docs/DESIGN.md §5; the context side is
 * frag_ctx.c): zero-copy, for payloads below the gate. Each generation rank's host pools are
 * registered with UCX when the rank registers; the gates choose the path of a planned request
 * by the payload kind, never by a byte count alone (a payload that carries recurrent state goes
 * fragment below gates.min_bytes, a plain-KV payload below gates.min_blocks blocks), every
 * decision counted by reason, a fallback to bounce for unregistered pools logged once at
 * warning level; the RECV_REQ carries the pools' rkeys and base addresses, and the writer's
 * daemon puts its extent straight into them, flushed before WRITER_DONE. No landing slots, no
 * scatter. From the RECV_REQ on a failure is held until no put can land any more
 * (engine_quar.c). The path's row (path.h) is here. Loop thread only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "engine_drive.h"
#include "engine_gen.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "frag_ctx.h"
#include "frag_gen.h"
#include "path.h"
#include "registry.h"
#include "xfer.h"

/* ---- registrations ---- */

static struct fragreg *reg_find(struct engine *e, const struct reg_rank *rk)
{
    for (struct fragreg *f = e->fragregs; f; f = f->next)
        if (f->rk == rk)
            return f;
    return NULL;
}

void frag_gen_rank_registered(struct engine *e, struct reg_rank *rk)
{
    if (!e->link || rk->layout.role != ROLE_GENERATION || rk->gpu)
        return; /* GPU pools: UCX here reaches host memory only; they take the bounce path */
    struct fragreg *f = calloc(1, sizeof *f);
    if (!f)
        return;
    f->rk = rk;
    for (uint32_t p = 0; p < rk->mem.n; p++) {
        int rc = rk->mem.base[p]
                     ? link_mem_register(e->link, rk->mem.base[p], rk->mem.size[p], &f->m[p])
                     : -EINVAL;
        if (rc < 0) {
            log_warn("engine: %s rank %u pool %u: UCX registration failed (%s): its requests take "
                     "the bounce path",
                     rk->layout.instance, layout_rank(&rk->layout), p, strerror(-rc));
            for (uint32_t q = 0; q < p; q++)
                link_mreg_free(e->link, f->m[q]);
            free(f);
            return;
        }
        f->n++;
    }
    f->next = e->fragregs;
    e->fragregs = f;
}

void frag_gen_rank_removed(struct engine *e, struct reg_rank *rk)
{
    for (struct fragreg **pp = &e->fragregs; *pp; pp = &(*pp)->next)
        if ((*pp)->rk == rk) {
            struct fragreg *f = *pp;
            *pp = f->next;
            for (uint32_t p = 0; p < f->n; p++)
                link_mreg_free(e->link, f->m[p]);
            free(f);
            return;
        }
}

void frag_gen_free_all(struct engine *e)
{
    while (e->fragregs) {
        struct fragreg *f = e->fragregs;
        e->fragregs = f->next;
        for (uint32_t p = 0; p < f->n; p++)
            link_mreg_free(e->link, f->m[p]);
        free(f);
    }
}

/* ---- the gates ---- */

/* The path of a planned request (same for every writer). */
wire_path_t frag_gen_choose(struct engine *e, const struct xfer *x, const struct plan *pl,
                            const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    const struct kvf_config *cfg = &e->d->cfg;
    bool state = pl->state_bytes > 0;
    bool below;
    if (state) {
        below = pl->total_bytes < cfg->gates_min_bytes;
    } else {
        uint32_t blocks = 0;
        for (uint32_t g = 0; g < x->rank->layout.n_groups && g < x->items.n_groups; g++)
            if (x->rank->layout.groups[g].kind == GROUP_PAGED && x->items.counts[g] > blocks)
                blocks = x->items.counts[g];
        below = (int64_t)blocks < cfg->gates_min_blocks;
    }
    if (!below) {
        if (state)
            e->c.path_bounce_gate_bytes++;
        else
            e->c.path_bounce_gate_blocks++;
        *why = state ? "state payload at or above gates.min_bytes"
                     : "blocks at or above gates.min_blocks";
        return WIRE_PATH_BOUNCE;
    }
    struct fragreg *f = reg_find(e, x->rank);
    if (!f || f->n != x->rank->layout.n_pools) {
        e->c.path_bounce_no_rkeys++;
        *why = "below the gate, but the pools are not registered with UCX";
        if (!e->warned_frag) {
            e->warned_frag = true;
            log_warn("engine: %s rank %u: fragment path wanted (payload below the gate) but its "
                     "pools are not registered with UCX: falling back to bounce (logged once)",
                     x->rank->layout.instance, layout_rank(&x->rank->layout));
        }
        return WIRE_PATH_BOUNCE;
    }
    if (state)
        e->c.path_fragment_state++;
    else
        e->c.path_fragment_kv++;
    *why = state ? "state payload below gates.min_bytes" : "blocks below gates.min_blocks";
    return WIRE_PATH_FRAGMENT;
}

/* ---- the path's row: a writer of a request ---- */

/* Fills the RECV_REQ's rkeys for the rank's pools. 0 or -ENOENT. */
static int fill_rkeys(struct engine *e, const struct xfer *x, struct wire_recv_req *q)
{
    struct fragreg *f = reg_find(e, x->rank);
    if (!f)
        return -ENOENT;
    q->n_rkeys = f->n;
    for (uint32_t p = 0; p < f->n; p++) {
        size_t len;
        q->rkeys[p].pool = p;
        q->rkeys[p].remote_base = (uint64_t)(uintptr_t)x->rank->mem.base[p];
        q->rkeys[p].blob = link_mreg_rkey(f->m[p], &len);
        q->rkeys[p].blob_len = (uint32_t)len;
    }
    return 0;
}

static void start(struct rxw *w)
{
    int rc = w->rx->e->drive->rx_send_req(w, NULL, 0);
    if (rc == 0) {
        quar_frag_moving(w); /* from now a failure is held until the puts drained */
        return;
    }
    char msg[WIRE_TEXT_MAX];
    snprintf(msg, sizeof msg, "could not send RECV_REQ to context rank %u's daemon: %s",
             w->ctx_rank, strerror(-rc));
    w->rx->e->drive->rx_fail(w->rx, KVF_E_PEER_LOST, msg);
}

static int fill_req(struct rxw *w, struct wire_recv_req *q)
{
    return fill_rkeys(w->rx->e, w->rx->x, q);
}

static void writer_done(struct rxw *w, struct epeer *p)
{
    struct engine *e = w->rx->e;
    w->scattered = w->extent; /* its puts were flushed before WRITER_DONE */
    if (w->rx->x)
        w->rx->x->bytes_done += w->extent;
    p->bytes_recv += w->extent;
    e->c.bytes_landed += w->extent;
    w->rx->e->drive->rx_check_done(w->rx);
}

static bool writing(const struct rxw *w)
{
    return w->state == RXW_MOVING || w->state == RXW_DONE || w->state == RXW_NACKED;
}

const struct path_row path_frag_row = {
    .name = "fragment",
    .kind = PATH_FRAGMENT,
    .wire = WIRE_PATH_FRAGMENT,
    .start = start,
    .fill_req = fill_req,
    .writer_done = writer_done,
    .writing = writing,
    .serve = frag_ctx_serve, /* frag_ctx.c */
};
