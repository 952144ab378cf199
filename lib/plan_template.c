/* plan_template.c: see plan_template.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "plan_template.h"

/* The shape words of in (plan_template.h) into out[0..cap); returns how many there are. */
static uint32_t shape_words(const struct plan_input *in, uint64_t *out, uint32_t cap)
{
    uint32_t n = 0;
#define PUT(x) do { uint64_t x_ = (x); if (n < cap) out[n] = x_; n++; } while (0)
    const struct layout *gen = in->gen;
    bool by_tokens = false;
    for (uint32_t c = 0; c < in->n_ctx; c++)
        by_tokens |= in->ctx[c].tokens_per_block != gen->tokens_per_block;
    PUT(gen->n_groups);
    for (uint32_t g = 0; g < gen->n_groups; g++)
        PUT(in->gen_ids.n[g]);
    PUT((uint32_t)in->ctx_dp_rank);
    PUT(by_tokens ? in->tokens : 0); /* read only in token mode */
    PUT(in->n_ctx);
    PUT(in->ctx_ids != NULL);
    for (uint32_t c = 0; in->ctx_ids && c < in->n_ctx; c++) {
        uint64_t known = 0;
        for (uint32_t g = 0; g < in->ctx[c].n_groups; g++)
            known |= (uint64_t)(in->ctx_ids[c].ids[g] != NULL) << g;
        PUT(known);
        for (uint32_t g = 0; g < in->ctx[c].n_groups; g++)
            PUT(in->ctx_ids[c].n[g]);
    }
#undef PUT
    return n;
}

int plan_template_shape(const struct plan_input *in, uint64_t **ret, uint32_t *n_ret)
{
    uint32_t n = shape_words(in, NULL, 0);
    uint64_t *w = malloc((size_t)n * sizeof *w);
    if (!w)
        return -ENOMEM;
    shape_words(in, w, n);
    *ret = w;
    *n_ret = n;
    return 0;
}

/* Every region of l, numbered as plan_tix says; *at_ret[g] the first of group g. */
static struct plan_treg *regions(const struct layout *l, uint32_t *at_ret, uint32_t *n_ret)
{
    uint32_t n = 0;
    for (uint32_t g = 0; g < l->n_groups; g++) {
        at_ret[g] = n;
        n += l->groups[g].n_views * l->groups[g].n_layers;
    }
    struct plan_treg *r = calloc(n ? n : 1, sizeof *r);
    for (uint32_t g = 0, i = 0; r && g < l->n_groups; g++) {
        const struct layout_group *gr = &l->groups[g];
        for (uint32_t v = 0; v < gr->n_views; v++)
            for (uint32_t li = 0; li < gr->n_layers; li++, i++) {
                struct layout_loc at = layout_region_at(l, &gr->views[v], li, 0);
                r[i] = (struct plan_treg){at.pool, g, at.off, gr->views[v].item_stride,
                                          gr->views[v].region_bytes, gr->n_items};
            }
    }
    *n_ret = n;
    return r;
}

/* The bytes [lo, hi) an op's runs reach on one side; false on overflow. */
static bool op_span(uint64_t off, int64_t stride, uint64_t count, uint64_t len, uint64_t *lo,
                    uint64_t *hi)
{
    uint64_t a = stride < 0 ? -(uint64_t)stride : (uint64_t)stride, span;
    if (count == 0 || __builtin_mul_overflow(count - 1, a, &span))
        return false;
    if (stride < 0) {
        if (span > off)
            return false;
        *lo = off - span;
        return !__builtin_add_overflow(off, len, hi);
    }
    *lo = off;
    return !__builtin_add_overflow(off, span, hi) && !__builtin_add_overflow(*hi, len, hi);
}

/* Moves one side of op o to item 0 of its region r (item id): refuses an op that leaves the
 * region, which would make its structure depend on which ids are adjacent. */
static bool to_item0(const struct plan_treg *r, uint32_t pool, uint64_t id, uint64_t *off,
                     int64_t stride, uint64_t count, uint64_t len)
{
    uint64_t lo, hi, base = r->base + id * r->istride;
    if (pool != r->pool || !op_span(*off, stride, count, len, &lo, &hi) || lo < base ||
        hi > base + r->bytes)
        return false;
    *off -= id * r->istride;
    return true;
}

/* Writer w's ops of the first plan into the template's own copy at item 0. */
static int own_ops(struct plan_template *t, const struct plan *first, uint32_t w,
                   const struct plan_input *in, struct plan_error *err)
{
    const struct plan_writer *pw = &first->writers[w];
    struct copy_op *ops = malloc((pw->n_ops ? pw->n_ops : 1) * sizeof *ops);
    if (!ops)
        return -ENOMEM;
    memcpy(ops, pw->ops, pw->n_ops * sizeof *ops);
    t->plan.writers[w] = *pw;
    t->plan.writers[w].ops = ops;
    uint32_t c = pw->ctx_rank;
    for (uint32_t i = 0; i < pw->n_ops; i++) {
        const struct plan_tag *tg = &t->tags[w][i];
        struct copy_op *o = &ops[i];
        const struct plan_treg *r = &t->gen_regs[tg->dst_reg];
        bool ok = to_item0(r, o->dst_pool, in->gen_ids.ids[r->group][tg->dst_k], &o->dst_off,
                           o->dst_stride, o->count, o->len);
        if (ok && tg->src_reg != PLAN_TREG_NONE) {
            r = &t->ctx_regs[c][tg->src_reg];
            ok = to_item0(r, o->src_pool, in->ctx_ids[c].ids[r->group][tg->src_k], &o->src_off,
                          o->src_stride, o->count, o->len);
        }
        if (!ok)
            return plan_set_err(err, KVF_E_INTERNAL, COMPAT_OK,
                                "plan template: op %u of writer rank %u leaves its item's region",
                                i, c);
    }
    return 0;
}

/* Folds op o into *l when it continues it exactly, as plan_compress.c would have merged the
 * runs of consecutive or evenly spaced ids: contiguous on both sides (one longer run), or one
 * more repetition of l's len at l's strides. The extent is packed in op order, so it always
 * continues. An unknown source never blocks a merge (its offsets stay 0). True: folded. */
static bool fold(struct copy_op *l, const struct copy_op *o)
{
    bool unk = o->src_pool == PLAN_POOL_UNKNOWN;
    if (l->src_pool != o->src_pool || l->dst_pool != o->dst_pool)
        return false;
    if (l->count == 1 && o->count == 1 && (unk || o->src_off == l->src_off + l->len) &&
        o->dst_off == l->dst_off + l->len) {
        l->len += o->len;
        return true;
    }
    if (o->len != l->len)
        return false;
    int64_t ss = unk ? 0 : (int64_t)(o->src_off - l->src_off);
    int64_t ds = (int64_t)(o->dst_off - l->dst_off);
    if (l->count == 1) { /* the second repetition fixes the strides */
        if (o->count > 1 && (ds != o->dst_stride || (!unk && ss != o->src_stride)))
            return false;
        l->src_stride = ss;
        l->dst_stride = ds;
        l->count += o->count;
        return true;
    }
    if (o->count > 1 && (o->dst_stride != l->dst_stride || (!unk && o->src_stride != l->src_stride)))
        return false;
    if ((unk || o->src_off == l->src_off + l->count * (uint64_t)l->src_stride) &&
        o->dst_off == l->dst_off + l->count * (uint64_t)l->dst_stride) {
        l->count += o->count;
        return true;
    }
    return false;
}

/* The ids of in substituted into t's ops (no checks: the caller made them); with merge, the
 * ops that then continue each other folded (fold), so the program has plan_build's size, not
 * one op per block. */
static int substitute(const struct plan_template *t, const struct plan_input *in, bool merge,
                      struct plan *ret)
{
    struct plan p = t->plan;
    p.writers = calloc(p.n_writers ? p.n_writers : 1, sizeof *p.writers);
    if (!p.writers)
        return -ENOMEM;
    for (uint32_t w = 0; w < p.n_writers; w++) {
        const struct plan_writer *tw = &t->plan.writers[w];
        struct copy_op *ops = malloc((tw->n_ops ? tw->n_ops : 1) * sizeof *ops);
        if (!ops) {
            plan_done(&p);
            return -ENOMEM;
        }
        p.writers[w] = *tw;
        p.writers[w].ops = ops;
        p.writers[w].n_ops = 0; /* grows as the ops are substituted and folded */
        const struct plan_tag *tags = t->tags[w];
        const struct plan_treg *cr = t->ctx_regs[tw->ctx_rank];
        const struct plan_ids *cids = in->ctx_ids ? &in->ctx_ids[tw->ctx_rank] : NULL;
        for (uint32_t i = 0; i < tw->n_ops; i++) {
            struct copy_op o = tw->ops[i];
            const struct plan_treg *r = &t->gen_regs[tags[i].dst_reg];
            o.dst_off += (uint64_t)in->gen_ids.ids[r->group][tags[i].dst_k] * r->istride;
            if (tags[i].src_reg != PLAN_TREG_NONE) {
                r = &cr[tags[i].src_reg];
                o.src_off += (uint64_t)cids->ids[r->group][tags[i].src_k] * r->istride;
            }
            if (!merge || !p.writers[w].n_ops || !fold(&ops[p.writers[w].n_ops - 1], &o))
                ops[p.writers[w].n_ops++] = o;
        }
    }
    *ret = p;
    return 0;
}

static int nomem(struct plan_error *err)
{
    plan_set_err(err, KVF_E_INTERNAL, COMPAT_OK, "out of memory while planning");
    return -ENOMEM;
}

int plan_template_build(const struct plan_input *in, struct plan_template *ret, struct plan *first,
                        struct plan_error *err)
{
    if (!in || !in->gen || !in->ctx || in->n_ctx == 0)
        return plan_set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK, "plan input incomplete");
    struct plan_template t = {.n_ctx = in->n_ctx};
    struct plan_tix tix;
    struct plan p = {0};
    uint32_t n_reg, *ctx_at = calloc((size_t)in->n_ctx * LAYOUT_MAX_GROUPS, sizeof *ctx_at);
    t.ctx_regs = calloc(in->n_ctx, sizeof *t.ctx_regs);
    t.gen_regs = regions(in->gen, tix.gen_at, &n_reg);
    if (!ctx_at || !t.ctx_regs || !t.gen_regs)
        goto nomem;
    t.bytes = sizeof t + n_reg * sizeof *t.gen_regs;
    for (uint32_t c = 0; c < in->n_ctx; c++) { /* numbering only; tables for writers below */
        uint32_t n = 0;
        for (uint32_t g = 0; g < in->ctx[c].n_groups; g++) {
            ctx_at[c * LAYOUT_MAX_GROUPS + g] = n;
            n += in->ctx[c].groups[g].n_views * in->ctx[c].groups[g].n_layers;
        }
    }
    tix.ctx_at = ctx_at;
    int rc = plan_build_tagged(in, &tix, &p, &t.tags, err);
    if (rc) {
        plan_template_done(&t);
        free(ctx_at);
        return rc;
    }
    t.plan = p;
    t.plan.writers = calloc(p.n_writers ? p.n_writers : 1, sizeof *t.plan.writers);
    if (!t.plan.writers || plan_template_shape(in, &t.shape, &t.n_shape))
        goto nomem;
    t.bytes += t.n_shape * sizeof *t.shape;
    for (uint32_t w = 0; w < p.n_writers; w++) {
        uint32_t c = p.writers[w].ctx_rank, at[LAYOUT_MAX_GROUPS];
        if (in->ctx_ids && !(t.ctx_regs[c] = regions(&in->ctx[c], at, &n_reg)))
            goto nomem;
        t.bytes += in->ctx_ids ? n_reg * sizeof(struct plan_treg) : 0;
        t.bytes += p.writers[w].n_ops * (sizeof(struct copy_op) + sizeof(struct plan_tag));
        if ((rc = own_ops(&t, &p, w, in, err)))
            goto fail;
    }
    /* the substitution gives back this very plan, op for op */
    struct plan chk;
    if (substitute(&t, in, false, &chk))
        goto nomem;
    bool same = true;
    for (uint32_t w = 0; w < p.n_writers; w++)
        same &= memcmp(chk.writers[w].ops, p.writers[w].ops,
                       p.writers[w].n_ops * sizeof(struct copy_op)) == 0;
    plan_done(&chk);
    if (!same) {
        rc = plan_set_err(err, KVF_E_INTERNAL, COMPAT_OK,
                          "plan template: substituting the ids does not give the plan back");
        goto fail;
    }
    /* the first request's plan as every hit's: its ops folded */
    struct plan folded;
    if (substitute(&t, in, true, &folded))
        goto nomem;
    plan_done(&p);
    free(ctx_at);
    *ret = t;
    *first = folded;
    return 0;
nomem:
    rc = nomem(err);
fail:
    plan_template_done(&t);
    plan_done(&p);
    free(ctx_at);
    return rc;
}

int plan_template_instantiate(const struct plan_template *t, const struct plan_input *in,
                              struct plan *ret, struct plan_error *err)
{
    if (!in || !in->gen || !in->ctx || in->n_ctx != t->n_ctx)
        return plan_set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK,
                            "plan input incomplete or not of the template's shape");
    uint64_t buf[256], *w = buf;
    uint32_t n = shape_words(in, buf, 256);
    if (n > 256) {
        if (!(w = malloc((size_t)n * sizeof *w)))
            return nomem(err);
        shape_words(in, w, n);
    }
    bool same = n == t->n_shape && memcmp(w, t->shape, n * sizeof *w) == 0;
    if (w != buf)
        free(w);
    if (!same)
        return plan_set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK,
                            "the request is not of the plan template's shape");
    struct plan_input pin = *in;
    pin.compat_known = true; /* the template was built on these layouts (the caller's key) */
    int rc = plan_check_request(&pin, err);
    if (rc)
        return rc;
    return substitute(t, in, true, ret) ? nomem(err) : 0;
}

int plan_template_substitute(const struct plan_template *t, const struct plan_input *in,
                             struct plan *ret)
{
    return substitute(t, in, true, ret) ? -ENOMEM : 0;
}

int plan_template_fits(const struct plan_template *t, uint32_t w, const struct copy_mem *mem,
                       char side)
{
    if (w >= t->plan.n_writers || !mem || (side != 's' && side != 'd'))
        return -ERANGE;
    const struct plan_writer *pw = &t->plan.writers[w];
    for (uint32_t i = 0; i < pw->n_ops; i++) {
        const struct plan_tag *tg = &t->tags[w][i];
        uint32_t ri = side == 'd' ? tg->dst_reg : tg->src_reg;
        if (ri == PLAN_TREG_NONE)
            return -ERANGE; /* an unresolved source is never executed */
        const struct plan_treg *r = side == 'd' ? &t->gen_regs[ri] : &t->ctx_regs[pw->ctx_rank][ri];
        uint64_t reach;
        if (r->pool >= mem->n || !mem->base[r->pool] || r->n_items == 0 ||
            __builtin_mul_overflow(r->n_items - 1, r->istride, &reach) ||
            __builtin_add_overflow(reach, r->base, &reach) ||
            __builtin_add_overflow(reach, r->bytes, &reach) || reach > mem->size[r->pool])
            return -ERANGE;
    }
    return 0;
}

void plan_template_done(struct plan_template *t)
{
    if (!t)
        return;
    for (uint32_t w = 0; t->tags && w < t->plan.n_writers; w++)
        free(t->tags[w]);
    free(t->tags);
    plan_done(&t->plan);
    for (uint32_t c = 0; t->ctx_regs && c < t->n_ctx; c++)
        free(t->ctx_regs[c]);
    free(t->ctx_regs);
    free(t->gen_regs);
    free(t->shape);
    *t = (struct plan_template){0};
}
