/* bounce_put.c: puts from the context rank's pools into landing slots (bounce_put.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bounce_put.h"
#include "bounce_exec.h"
#include "daemon.h"
#include "engine_ctx.h"
#include "engine_peer.h"
#include "mempin.h"
#include "registry.h"
#include "xfer.h"

/* One context rank's pools registered with UCX. */
struct bput_reg {
    const struct reg_rank *rk; /* borrowed until bput_rank_removed; NULL after (gone) */
    uint32_t n, refs;          /* refs: direct chunks in flight */
    struct copy_mem mem;       /* the mappings, copied: pinned while refs > 0 */
    struct link_mreg *m[LAYOUT_MAX_POOLS];
    struct bput_reg *next;
};

static void reg_free(struct engine *e, struct bput_reg *r)
{
    for (uint32_t p = 0; p < r->n; p++)
        link_mreg_free(e->link, r->m[p]);
    free(r);
}

void bput_rank_registered(struct engine *e, struct reg_rank *rk)
{
    if (!e || !e->link || rk->layout.role != ROLE_CONTEXT || rk->gpu)
        return; /* GPU pools: gathered by kernels (engine_gpu.c) */
    struct bput_reg *r = calloc(1, sizeof *r);
    if (!r)
        return; /* its chunks are gathered (counted as gather_no_registration) */
    r->rk = rk;
    r->mem = rk->mem;
    for (uint32_t p = 0; p < rk->mem.n; p++) {
        int rc = rk->mem.base[p]
                     ? link_mem_register(e->link, rk->mem.base[p], rk->mem.size[p], &r->m[p])
                     : -EINVAL;
        if (rc < 0) {
            log_warn("engine: %s rank %u pool %u: UCX registration failed (%s): its chunks are "
                     "gathered before the put",
                     rk->layout.instance, layout_rank(&rk->layout), p, strerror(-rc));
            reg_free(e, r);
            return;
        }
        r->n++;
    }
    r->next = e->bputs;
    e->bputs = r;
}

static void unlink_reg(struct engine *e, struct bput_reg *r)
{
    for (struct bput_reg **pp = &e->bputs; *pp; pp = &(*pp)->next)
        if (*pp == r) {
            *pp = r->next;
            return;
        }
}

void bput_rank_removed(struct engine *e, struct reg_rank *rk)
{
    for (struct bput_reg *r = e ? e->bputs : NULL; r; r = r->next)
        if (r->rk == rk) {
            r->rk = NULL;
            if (r->refs == 0) {
                unlink_reg(e, r);
                reg_free(e, r);
            }
            return;
        }
}

void bput_free_all(struct engine *e)
{
    while (e->bputs) {
        struct bput_reg *r = e->bputs;
        e->bputs = r->next;
        for (uint32_t p = 0; r->refs && p < r->mem.n; p++)
            mempin_unref(r->mem.base[p]);
        for (struct stage *st = e->stages; r->refs && st; st = st->next)
            if (st->breg == r) /* its flush completes at link_free: nothing left to drop */
                st->breg = NULL;
        reg_free(e, r);
    }
}

static struct bput_reg *reg_of(struct engine *e, const struct reg_rank *rk)
{
    for (struct bput_reg *r = e->bputs; r; r = r->next)
        if (r->rk == rk)
            return r;
    return NULL;
}

struct runs {
    uint64_t n;
};

static int count_run(void *arg, uint32_t pool, const uint8_t *src, uint64_t pos, uint64_t len)
{
    (void)pool, (void)src, (void)pos, (void)len;
    ((struct runs *)arg)->n++;
    return 0;
}

int bput_choose(struct stage *st)
{
    struct tx *tx = st->tx;
    const struct wire_grant *g = &st->g;
    struct engine *e = tx->e;
    uint64_t min_run = e->d->cfg.arena_direct_run;
    if (tx->bx->staging_only) /* kernels gather GPU pools: no UCX registration of them */
        return BPUT_GPU_POOLS;
    if (!link_peer_put_fast(tx->peer->lp) ||
        g->offset + g->length > link_peer_arena_bytes(tx->peer->lp))
        return BPUT_NO_PUT_LANES; /* the chunk travels as one active-message payload */
    if (min_run == 0)
        return BPUT_DIRECT_OFF;
    if (!reg_of(e, tx->send->rank))
        return BPUT_NO_REGISTRATION;
    struct runs n = {0};
    copy_src_runs(tx->pw->ops, tx->pw->n_ops, &tx->send->rank->mem, g->ext_off,
                  g->ext_off + g->length, count_run, &n);
    if (n.n == 0 || g->length / n.n < min_run)
        return BPUT_SMALL_RUNS;
    return 0;
}

struct put_walk {
    struct stage *st;
    struct bput_reg *r;
    struct link_peer *lp;
    link_done_cb cb;
    uint64_t puts;
};

static int put_run(void *arg, uint32_t pool, const uint8_t *src, uint64_t pos, uint64_t len)
{
    struct put_walk *w = arg;
    const struct wire_grant *g = &w->st->g;
    w->puts++;
    return link_put_from(w->lp, src, pool < w->r->n ? w->r->m[pool] : NULL, len,
                         g->offset + (pos - g->ext_off), w->cb, w->st);
}

int bput_start(struct stage *st, link_done_cb put_done)
{
    struct tx *tx = st->tx;
    struct engine *e = st->e;
    struct bput_reg *r = reg_of(e, tx->send->rank);
    if (!r)
        return -ENOENT;
    if (r->refs++ == 0) /* the pools stay mapped while a put from them is in flight */
        for (uint32_t p = 0; p < r->mem.n; p++)
            if (mempin_ref(r->mem.base[p], r->mem.size[p]) < 0) {
                while (p-- > 0)
                    mempin_unref(r->mem.base[p]);
                r->refs--;
                return -ENOMEM;
            }
    st->breg = r;
    struct put_walk w = {st, r, tx->peer->lp, put_done, 0};
    int rc = copy_src_runs(tx->pw->ops, tx->pw->n_ops, &tx->send->rank->mem, st->g.ext_off,
                           st->g.ext_off + st->g.length, put_run, &w);
    e->c.direct_puts += w.puts;
    return rc;
}

void bput_release(struct stage *st)
{
    struct bput_reg *r = st->breg;
    st->breg = NULL;
    if (!r || --r->refs > 0)
        return;
    for (uint32_t p = 0; p < r->mem.n; p++)
        mempin_unref(r->mem.base[p]);
    if (!r->rk) { /* the rank went while its puts were in flight */
        unlink_reg(st->e, r);
        reg_free(st->e, r);
    }
}
