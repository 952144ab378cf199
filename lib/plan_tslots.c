/* plan_tslots.c: the id slots of a template's ops (plan_template.h, plan_template_slots), what a
 * program kept per template needs to add a request's ids itself. */
#include <errno.h>

#include "plan_internal.h"
#include "plan_template.h"

/* First slot of each group: the groups' counts laid end to end after `at`. */
static uint32_t bases(const struct plan_ids *ids, uint32_t at, uint32_t *ret)
{
    for (uint32_t g = 0; g < LAYOUT_MAX_GROUPS; g++) {
        ret[g] = at;
        at += ids->n[g];
    }
    return at;
}

int plan_template_slots(const struct plan_template *t, uint32_t w, const struct plan_ids *gen,
                        const struct plan_ids *ctx, struct plan_tslot *ret, uint32_t *n_slots)
{
    if (w >= t->plan.n_writers || !gen || !ctx)
        return -EINVAL;
    const struct plan_writer *pw = &t->plan.writers[w];
    const struct plan_treg *cregs = t->ctx_regs ? t->ctx_regs[pw->ctx_rank] : NULL;
    uint32_t gb[LAYOUT_MAX_GROUPS], cb[LAYOUT_MAX_GROUPS];
    uint32_t n = bases(ctx, bases(gen, 0, gb), cb);
    for (uint32_t i = 0; i < pw->n_ops; i++) {
        const struct plan_tag *tg = &t->tags[w][i];
        const struct plan_treg *r = &t->gen_regs[tg->dst_reg];
        if (tg->src_reg == PLAN_TREG_NONE || !cregs || tg->dst_k >= gen->n[r->group])
            return -EINVAL; /* an unresolved source: such a program only scatters */
        struct plan_tslot s = {.dst_istride = r->istride, .dst_slot = gb[r->group] + tg->dst_k,
                               .dst_limit = (uint32_t)r->n_items};
        r = &cregs[tg->src_reg];
        if (tg->src_k >= ctx->n[r->group] || !ctx->ids[r->group])
            return -EINVAL;
        s.src_istride = r->istride;
        s.src_slot = cb[r->group] + tg->src_k;
        s.src_limit = (uint32_t)r->n_items;
        ret[i] = s;
    }
    *n_slots = n;
    return 0;
}

uint32_t plan_tslot_ids(const struct plan_ids *gen, const struct plan_ids *ctx, uint32_t *out,
                        uint32_t cap)
{
    uint32_t n = 0;
    for (int side = 0; side < 2; side++) {
        const struct plan_ids *ids = side ? ctx : gen;
        for (uint32_t g = 0; g < LAYOUT_MAX_GROUPS; g++)
            for (uint32_t k = 0; k < ids->n[g]; k++, n++)
                if (n < cap)
                    out[n] = ids->ids[g] ? ids->ids[g][k] : 0;
    }
    return n;
}
