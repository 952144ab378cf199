/* plan_internal.h: helpers shared by compat.c and the plan_*.c files; not part of any contract.
 * Pure; thread-safe on data the caller owns. */
#ifndef KVF_PLAN_INTERNAL_H
#define KVF_PLAN_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "plan.h"

/* The group of that name in l (and its index in *idx when idx is not NULL), or NULL. */
const struct layout_group *compat_find_group(const struct layout *l, const char *name,
                                             uint32_t *idx);

/* "context rank 1 (tp 1/2 pp 0/1)" (+ " adp" under attention-DP) into buf; returns buf. */
const char *compat_rank_desc(const struct layout *l, const char *side, char *buf, size_t n);

/* The layer-map and omission rules (compat_cover.c), run by compat_check after the per-group
 * checks: 0, or -EINVAL with *reason (COMPAT_LAYER_MAP, COMPAT_OMITTED) and msg. */
int compat_cover_rules(const struct layout *gen, const struct layout *ctx, uint32_t n_ctx,
                       compat_reason_t *reason, char *msg, size_t msglen);

/* Fills *err (when not NULL) and returns -EINVAL: plan_build's one way to refuse. */
__attribute__((format(printf, 4, 5))) int plan_set_err(struct plan_error *err, kvf_error_t code,
                                                       compat_reason_t reason, const char *fmt,
                                                       ...);

/* Where a run of a template's plan lies (plan_template.h): generation item dst_k of the
 * region (group, view, layer) numbered dst_reg, and context item src_k of the source region
 * src_reg of the writer's rank (PLAN_TREG_NONE: source unresolved). A run's offsets are then
 * that region's base + id * item stride + a part that no id changes. */
#define PLAN_TREG_NONE 0xffffffffu
struct plan_tag {
    uint32_t dst_k, dst_reg, src_k, src_reg;
};

/* A growing copy program of one writer (plan_compress.c). Runs are appended in canonical order;
 * the extent is packed, so each run's ext_off is the current length. Tagged (a template's
 * build): every run carries `cur`, the tag its caller set, and runs merge only within one tag,
 * so no op spans two items and the program's shape never depends on the ids' values. */
struct plan_opvec {
    struct copy_op *ops; /* owned */
    uint32_t n, cap;
    uint64_t bytes, state_bytes, kv_bytes;
    struct copy_op pend;  /* the run being extended; not yet in ops */
    bool has_pend;
    bool tagged;
    struct plan_tag *tags; /* owned; tags[i] of ops[i] when tagged */
    struct plan_tag cur, pend_tag;
};

/* Appends one run of len bytes: src (src_pool may be PLAN_POOL_UNKNOWN, then src_off is ignored)
 * and dst. A run continuing the pending run on all three sides extends it; a finished run of
 * the same len as the last op at its constant src and dst strides raises its count.
 * plan_opvec_finish() flushes the pending run: call it before reading ops. 0 or -ENOMEM. */
int plan_opvec_add(struct plan_opvec *v, uint32_t src_pool, uint64_t src_off, uint32_t dst_pool,
                   uint64_t dst_off, uint64_t len, bool state);
/* Appends count rows of len bytes at constant strides (src_stride, dst_stride): one op, or one
 * run when the rows are contiguous on both sides. A later run continuing the strides raises its
 * count as plan_opvec_add's runs do. 0 or -ENOMEM. */
int plan_opvec_add_rows(struct plan_opvec *v, uint32_t src_pool, uint64_t src_off,
                        int64_t src_stride, uint32_t dst_pool, uint64_t dst_off,
                        int64_t dst_stride, uint64_t len, uint64_t count, bool state);
int plan_opvec_finish(struct plan_opvec *v);
void plan_opvec_done(struct plan_opvec *v);

/* Rule 8: every destination byte of the generation rank's request (gen, ids) is written exactly
 * once by the plan, and the extents tile their byte counts. last_rows: 0, or the rows written of
 * each paged group's last block (a prompt ending inside it, plan_input.tokens): that block's
 * other rows must stay unwritten. 0, -EINVAL (msg says where) or -ENOMEM. ids are assumed
 * validated (in range). */
int plan_cover_check(const struct plan *p, const struct layout *gen, const struct plan_ids *ids,
                     uint32_t last_rows, char *msg, size_t msglen);
/* The same check by sorting every run (plan_cover_check's fallback where its bitmap would be
 * too large; tests run both on the same plans). */
int plan_cover_check_sorted(const struct plan *p, const struct layout *gen,
                            const struct plan_ids *ids, uint32_t last_rows, char *msg,
                            size_t msglen);

/* Declared aliasing: no two destination regions of the request (gen, ids) overlap (only aliased
 * views are examined). 0, -EINVAL (msg names both items) or -ENOMEM. ids validated. */
int plan_alias_check(const struct layout *gen, const struct plan_ids *ids, char *msg,
                     size_t msglen);

/* Numbering of regions for tags: generation region (group g, view v, local layer l) is
 * gen_at[g] + v * n_layers(g) + l; the context rank c's (group cg, view v, layer l) is
 * ctx_at[c * LAYOUT_MAX_GROUPS + cg] + v * n_layers(cg) + l (plan_template.c fills them). */
struct plan_tix {
    uint32_t gen_at[LAYOUT_MAX_GROUPS];
    const uint32_t *ctx_at; /* borrowed; n_ctx * LAYOUT_MAX_GROUPS */
};

/* plan_build with tags (tix not NULL): the same plan for in's ids, checked the same way
 * (coverage included), its ops merged only within a tag; tags_ret[w] (owned, n_ops of writer
 * w) says where each op lies. tix NULL: plan_build itself (tags_ret untouched). */
int plan_build_tagged(const struct plan_input *in, const struct plan_tix *tix, struct plan *ret,
                      struct plan_tag ***tags_ret, struct plan_error *err);
/* plan_build_tagged that also fills marks (allocated by the caller, plan_marks.c): below[c][L]
 * for every global layer id L a group holds, the extent bytes of context rank c's layers below
 * L + 1 (the rest is made cumulative by plan_marks_build). marks NULL: plan_build_tagged. */
int plan_build_marked(const struct plan_input *in, const struct plan_tix *tix, struct plan *ret,
                      struct plan_tag ***tags_ret, struct plan_marks *marks,
                      struct plan_error *err);

#endif
