/* plan_compress.c: a writer's copy program grows run by run in canonical order and compresses
 * as it grows (plan_internal.h). Compression rules (decided by the lead):
 *   - a run that continues the previous one contiguously on all three sides (src, extent, dst)
 *     extends its len: runs are first coalesced into a pending run;
 *   - a finished (maximal) run of the same len as the last op, whose src and dst advance by
 *     that op's constant strides, raises its count (the second run of an op fixes the strides).
 * The extent side is always packed, so it always continues. An unknown source (the generation
 * daemon does not know the context's block ids) never blocks a merge; its offsets stay 0.
 * Strides may be negative (block ids in descending order). A tagged program (a template's)
 * applies both rules only between runs of one tag. Pure. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

static int grow(struct plan_opvec *v)
{
    uint32_t cap = v->cap ? v->cap * 2 : 16;
    if (cap <= v->cap)
        return -ENOMEM;
    struct copy_op *ops = realloc(v->ops, (size_t)cap * sizeof(*ops));
    if (!ops)
        return -ENOMEM;
    v->ops = ops;
    if (v->tagged) {
        struct plan_tag *tags = realloc(v->tags, (size_t)cap * sizeof(*tags));
        if (!tags)
            return -ENOMEM;
        v->tags = tags;
    }
    v->cap = cap;
    return 0;
}

static bool same_tag(const struct plan_tag *a, const struct plan_tag *b)
{
    return memcmp(a, b, sizeof *a) == 0;
}

/* Appends op r with tag (when tagged); room is there. */
static void push(struct plan_opvec *v, const struct copy_op *r, const struct plan_tag *tag)
{
    if (v->tagged)
        v->tags[v->n] = *tag;
    v->ops[v->n++] = *r;
}

/* Appends the finished run r as an op, or folds it into the last op as one more repetition. */
static int flush(struct plan_opvec *v, const struct copy_op *r, const struct plan_tag *tag)
{
    bool unk = r->src_pool == PLAN_POOL_UNKNOWN;
    if (v->n && (!v->tagged || same_tag(&v->tags[v->n - 1], tag))) {
        struct copy_op *o = &v->ops[v->n - 1];
        if (o->src_pool == r->src_pool && o->dst_pool == r->dst_pool && o->len == r->len) {
            if (o->count == 1) {
                o->src_stride = unk ? 0 : (int64_t)(r->src_off - o->src_off);
                o->dst_stride = (int64_t)(r->dst_off - o->dst_off);
                o->count = 2;
                return 0;
            }
            if ((unk || r->src_off == o->src_off + o->count * (uint64_t)o->src_stride) &&
                r->dst_off == o->dst_off + o->count * (uint64_t)o->dst_stride) {
                o->count++;
                return 0;
            }
        }
    }
    if (v->n == v->cap && grow(v))
        return -ENOMEM;
    push(v, r, tag);
    return 0;
}

int plan_opvec_add(struct plan_opvec *v, uint32_t src_pool, uint64_t src_off, uint32_t dst_pool,
                   uint64_t dst_off, uint64_t len, bool state)
{
    if (len == 0)
        return 0;
    bool unk = src_pool == PLAN_POOL_UNKNOWN;
    if (unk)
        src_off = 0;
    struct copy_op *p = &v->pend;
    if (v->has_pend && p->src_pool == src_pool && p->dst_pool == dst_pool &&
        (unk || src_off == p->src_off + p->len) && dst_off == p->dst_off + p->len &&
        (!v->tagged || same_tag(&v->pend_tag, &v->cur))) {
        p->len += len; /* continues the pending run on all three sides */
    } else {
        if (v->has_pend && flush(v, p, &v->pend_tag))
            return -ENOMEM;
        v->pend_tag = v->cur;
        *p = (struct copy_op){
            .src_pool = src_pool,
            .dst_pool = dst_pool,
            .src_off = src_off,
            .ext_off = v->bytes,
            .dst_off = dst_off,
            .len = len,
            .count = 1,
        };
        v->has_pend = true;
    }
    v->bytes += len;
    if (state)
        v->state_bytes += len;
    else
        v->kv_bytes += len;
    return 0;
}

int plan_opvec_add_rows(struct plan_opvec *v, uint32_t src_pool, uint64_t src_off,
                        int64_t src_stride, uint32_t dst_pool, uint64_t dst_off,
                        int64_t dst_stride, uint64_t len, uint64_t count, bool state)
{
    bool unk = src_pool == PLAN_POOL_UNKNOWN;
    if (count == 1 || (dst_stride == (int64_t)len && (unk || src_stride == (int64_t)len)))
        return plan_opvec_add(v, src_pool, src_off, dst_pool, dst_off, len * count, state);
    if (len == 0 || count == 0)
        return 0;
    if (v->has_pend && flush(v, &v->pend, &v->pend_tag))
        return -ENOMEM;
    v->has_pend = false;
    if (v->n == v->cap && grow(v))
        return -ENOMEM;
    if (v->tagged)
        v->tags[v->n] = v->cur;
    v->ops[v->n++] = (struct copy_op){
        .src_pool = src_pool,
        .dst_pool = dst_pool,
        .src_off = unk ? 0 : src_off,
        .ext_off = v->bytes,
        .dst_off = dst_off,
        .len = len,
        .count = count,
        .src_stride = unk ? 0 : src_stride,
        .dst_stride = dst_stride,
    };
    v->bytes += len * count;
    if (state)
        v->state_bytes += len * count;
    else
        v->kv_bytes += len * count;
    return 0;
}

int plan_opvec_finish(struct plan_opvec *v)
{
    if (v->has_pend && flush(v, &v->pend, &v->pend_tag))
        return -ENOMEM;
    v->has_pend = false;
    return 0;
}

void plan_opvec_done(struct plan_opvec *v)
{
    if (!v)
        return;
    free(v->ops);
    free(v->tags);
    *v = (struct plan_opvec){0};
}
