/* kvk_subst.h: host side of copy programs kept per plan template (docs/PLANNING.md
 * "Templates"), pure C like kvk_tasks.h: a template's ops at item 0 (one per block, never
 * folded, so their split into tasks is the same for every request of the shape) and, per op,
 * where each side's id term comes from: offset = template offset + ids[slot] * istride. A
 * request then uploads only its ids (a few KB); the GPU adds them while it expands the tasks
 * (kvk_tmpl.cu), with kvk_subst_op below, the one definition for host and GPU.
 * Bounds: every slot has a limit (the region's item count); kvk_tmpl_build raises the pools'
 * needs to what the largest id in range reaches, so the launch's pool check (kvk_tasks_check_mem)
 * holds for every request, and kvk_tmpl_check_ids refuses an id past its limit before anything
 * is uploaded. Ownership: kvk_tmpl_build's result owns its arrays (kvk_tmpl_done). */
#ifndef KVF_KVK_SUBST_H
#define KVF_KVK_SUBST_H

#include <stdint.h>

#include "kvk_tasks.h"
#include "plan_template.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KVK_MAX_SLOTS (1u << 20) /* ids one request may bring (4 MiB of table) */

/* One op's id terms (both sides resolved: a template program copies pool to pool). */
struct kvk_subst {
    uint64_t src_istride, dst_istride;
    uint32_t src_slot, dst_slot;
};

struct kvk_tmpl {
    struct kvk_tasks t;       /* owned: index of the ops at item 0 (no per-task arrays); its
                               * need_src / need_dst are for the largest ids in range */
    struct kvk_subst *subst;  /* owned, t.n_ops */
    uint32_t *limit;          /* owned, n_slots: every id of slot s is below limit[s] */
    uint32_t n_slots;
};

/* Validates ops (as kvk_tasks_index does) and their slots (slot < n_slots, limit > 0, no
 * overflow at the largest id), indexes the tasks (task_bytes / piece_align as there) and takes
 * each op's alignment down to what its strides allow. 0 or -EINVAL / -E2BIG / -ENOMEM with
 * kvk_last_error(). */
int kvk_tmpl_build(const struct copy_op *ops, const struct kvk_subst *subst, uint32_t n_ops,
                   const uint32_t *limit, uint32_t n_slots, uint32_t task_bytes,
                   uint32_t piece_align, struct kvk_tmpl *ret);
/* 0 when n == n_slots and every id is below its slot's limit, else -ERANGE (named). */
int kvk_tmpl_check_ids(const struct kvk_tmpl *t, const uint32_t *ids, uint32_t n);
void kvk_tmpl_done(struct kvk_tmpl *t);

/* A template writer's slots (plan_template_slots) as kvk_tmpl_build's tables: *sub (n_ops)
 * and *limit (n_slots: a slot's lowest region limit; a slot no op reads takes any id), both
 * owned (free()). 0 or -ENOMEM. */
int kvk_subst_tables(const struct plan_tslot *ts, uint32_t n_ops, uint32_t n_slots,
                     struct kvk_subst **sub, uint32_t **limit);

/* Op o of a template with the request's ids added (the one formula, host and GPU). */
static inline KVK_HD void kvk_subst_op(const struct kvk_op *o, const struct kvk_subst *s,
                                       const uint32_t *ids, struct kvk_op *ret)
{
    *ret = *o;
    ret->src_off += (uint64_t)ids[s->src_slot] * s->src_istride;
    ret->dst_off += (uint64_t)ids[s->dst_slot] * s->dst_istride;
}

/* Task k of template t for ids, self-contained (what the GPU's expand writes): host twin of the
 * expand kernel, for tests. k < t->t.n_tasks. */
void kvk_tmpl_ftask(const struct kvk_tmpl *t, const uint32_t *ids, uint32_t k,
                    struct kvk_ftask *ret);

#ifdef __cplusplus
}
#endif
#endif
