/* kvk_subst.c: template programs' host tables (kvk_subst.h). Pure C, no CUDA. */
#include "kvk_subst.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static uint32_t align_of(uint64_t v)
{
    if (v == 0 || (v & 15) == 0)
        return 16;
    return (uint32_t)(v & -v);
}

/* What one side of op o at the largest id reaches: end at item 0 + (limit - 1) * istride. */
static int reach(uint64_t end0, uint64_t istride, uint32_t limit, uint64_t *need)
{
    uint64_t add, end;
    if (__builtin_mul_overflow((uint64_t)(limit - 1), istride, &add) ||
        __builtin_add_overflow(end0, add, &end))
        return -1;
    if (end > *need)
        *need = end;
    return 0;
}

/* [lo, hi) end of one side of an op (count >= 1, len >= 1), as kvk_tasks checks it. */
static uint64_t side_end(const struct copy_op *o, uint64_t off, int64_t stride)
{
    __int128 last = (__int128)off + (__int128)stride * (__int128)(o->count - 1);
    return (uint64_t)((last > (__int128)off ? last : (__int128)off) + (__int128)o->len);
}

int kvk_tmpl_build(const struct copy_op *ops, const struct kvk_subst *subst, uint32_t n_ops,
                   const uint32_t *limit, uint32_t n_slots, uint32_t task_bytes,
                   uint32_t piece_align, struct kvk_tmpl *ret)
{
    struct kvk_tmpl t;
    memset(&t, 0, sizeof(t));
    if (n_slots > KVK_MAX_SLOTS || (n_slots && !limit) || (n_ops && !subst))
        return kvk_fail(-EINVAL, "template program: %u slots (at most %u), tables missing",
                        n_slots, KVK_MAX_SLOTS);
    int rc = kvk_tasks_index(ops, n_ops, task_bytes, piece_align, &t.t);
    if (rc < 0)
        return rc;
    if (t.t.src_unknown) {
        kvk_tmpl_done(&t);
        return kvk_fail(-EINVAL, "template program with unresolved sources");
    }
    memset(t.t.need_src, 0, sizeof(t.t.need_src)); /* recomputed for the largest ids */
    memset(t.t.need_dst, 0, sizeof(t.t.need_dst));
    t.subst = malloc((n_ops ? n_ops : 1) * sizeof(*t.subst));
    t.limit = malloc((n_slots ? n_slots : 1) * sizeof(*t.limit));
    if (!t.subst || !t.limit) {
        kvk_tmpl_done(&t);
        return kvk_fail(-ENOMEM, "template program of %u ops: out of memory", n_ops);
    }
    memcpy(t.subst, subst, n_ops * sizeof(*subst));
    memcpy(t.limit, limit, n_slots * sizeof(*limit));
    t.n_slots = n_slots;
    for (uint32_t i = 0; i < n_ops; i++) {
        const struct copy_op *o = &ops[i];
        const struct kvk_subst *s = &subst[i];
        bool bad = s->src_slot >= n_slots || s->dst_slot >= n_slots;
        if (!bad && (o->len == 0 || o->count == 0))
            continue;
        if (bad || limit[s->src_slot] == 0 || limit[s->dst_slot] == 0 ||
            reach(side_end(o, o->src_off, o->src_stride), s->src_istride, limit[s->src_slot],
                  &t.t.need_src[o->src_pool]) ||
            reach(side_end(o, o->dst_off, o->dst_stride), s->dst_istride, limit[s->dst_slot],
                  &t.t.need_dst[o->dst_pool])) {
            kvk_tmpl_done(&t);
            return kvk_fail(-EINVAL, "template program op %u: slots %u/%u of %u, or its "
                            "largest id overflows", i, s->src_slot, s->dst_slot, n_slots);
        }
        uint32_t a = align_of(s->src_istride | s->dst_istride);
        if (a < t.t.ops[i].align)
            t.t.ops[i].align = a; /* the offsets any id gives share this much */
    }
    *ret = t;
    return 0;
}

int kvk_tmpl_check_ids(const struct kvk_tmpl *t, const uint32_t *ids, uint32_t n)
{
    if (n != t->n_slots || (n && !ids))
        return kvk_fail(-ERANGE, "%u ids for a template program of %u slots", n, t->n_slots);
    for (uint32_t s = 0; s < n; s++)
        if (ids[s] >= t->limit[s])
            return kvk_fail(-ERANGE, "id %u of slot %u: the region has %u items", ids[s], s,
                            t->limit[s]);
    return 0;
}

int kvk_subst_tables(const struct plan_tslot *ts, uint32_t n_ops, uint32_t n_slots,
                     struct kvk_subst **sub, uint32_t **limit)
{
    struct kvk_subst *s = malloc((n_ops ? n_ops : 1) * sizeof(*s));
    uint32_t *l = malloc((n_slots ? n_slots : 1) * sizeof(*l));
    if (!s || !l) {
        free(s);
        free(l);
        return kvk_fail(-ENOMEM, "template program tables: out of memory");
    }
    for (uint32_t i = 0; i < n_slots; i++)
        l[i] = UINT32_MAX;
    for (uint32_t i = 0; i < n_ops; i++) {
        s[i] = (struct kvk_subst){ts[i].src_istride, ts[i].dst_istride, ts[i].src_slot,
                                  ts[i].dst_slot};
        if (ts[i].src_slot < n_slots && ts[i].src_limit < l[ts[i].src_slot])
            l[ts[i].src_slot] = ts[i].src_limit;
        if (ts[i].dst_slot < n_slots && ts[i].dst_limit < l[ts[i].dst_slot])
            l[ts[i].dst_slot] = ts[i].dst_limit;
    }
    *sub = s;
    *limit = l;
    return 0;
}

void kvk_tmpl_done(struct kvk_tmpl *t)
{
    if (!t)
        return;
    kvk_tasks_done(&t->t);
    free(t->subst);
    free(t->limit);
    memset(t, 0, sizeof(*t));
}

void kvk_tmpl_ftask(const struct kvk_tmpl *t, const uint32_t *ids, uint32_t k,
                    struct kvk_ftask *ret)
{
    uint32_t a = kvk_op_of_task(t->t.op_first, t->t.n_ops, k);
    struct kvk_op o;
    uint64_t pos;
    uint32_t bytes;
    kvk_subst_op(&t->t.ops[a], &t->subst[a], ids, &o);
    kvk_op_task(&o, k - t->t.op_first[a], &pos, &bytes);
    kvk_ftask_of(&o, pos, bytes, ret);
}
