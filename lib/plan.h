/* plan.h: the transfer plan of one request and one generation rank (docs/DESIGN.md §4): its writers
 * (context ranks), each writer's extent in canonical order, and the copy program that maps
 * context pool bytes <-> extent bytes <-> generation pool bytes. Also the one byte accounting.
 * Pure: no I/O. Both daemons compute the same plan from the same inputs. */
#ifndef KVF_PLAN_H
#define KVF_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include "compat.h"
#include "kvferry.h"
#include "layout.h"

#define PLAN_POOL_UNKNOWN 0xffffffffu /* source side not resolved (ids unknown here) */
#define PLAN_MAX_IDS (1u << 20)       /* most item ids of one group in one request */
#define PLAN_MAX_TOKENS (1ull << 40)  /* most prompt tokens one request may declare */

/* One strided copy: `count` runs of `len` bytes. Run k reads/writes
 *   context pool src_pool at src_off + k * src_stride,
 *   extent bytes         at ext_off + k * len        (the extent is always packed),
 *   generation pool dst_pool at dst_off + k * dst_stride.
 * The same program serves gather (src -> ext), scatter (ext -> dst) and direct (src -> dst). */
struct copy_op {
    uint32_t src_pool, dst_pool;
    uint64_t src_off, ext_off, dst_off;
    uint64_t len, count;
    int64_t src_stride, dst_stride;
};

/* Item ids of one request on one rank, per group index of that rank's layout:
 * paged groups list block ids (n >= 0), state groups one slot id (n == 1). */
struct plan_ids {
    uint32_t n[LAYOUT_MAX_GROUPS];
    const uint32_t *ids[LAYOUT_MAX_GROUPS]; /* borrowed */
};

struct plan_writer {
    uint32_t ctx_rank;            /* index into the context table */
    uint64_t bytes;               /* extent length == sum of ops' len * count */
    uint64_t state_bytes, kv_bytes;
    uint32_t n_ops;
    struct copy_op *ops;          /* owned; ascending ext_off, tiling [0, bytes) */
};

struct plan {
    uint32_t gen_rank;
    uint64_t total_bytes, state_bytes, kv_bytes;
    uint32_t n_writers;
    struct plan_writer *writers;  /* owned */
};

struct plan_input {
    const struct layout *gen;      /* borrowed */
    struct plan_ids gen_ids;
    const struct layout *ctx;      /* the context instance's table, indexed by rank; borrowed */
    uint32_t n_ctx;
    /* Context ids per context rank (n_ctx entries), or NULL where unknown (the generation daemon
     * does not know them): then src offsets are unresolved (src_pool == PLAN_POOL_UNKNOWN) but
     * extents and destinations are exact. Entries with NULL ids but n set give the count. */
    const struct plan_ids *ctx_ids;
    int32_t ctx_dp_rank;           /* attention-DP context: the DP rank that ran it; else -1 */
    /* The request's prompt tokens, or 0 when the worker did not say. Used only where the sides'
     * tokens_per_block differ (docs/PLANNING.md "Conversions"): both block lists then map from
     * token 0 (n_ctx of the last ceil(tokens/ct) context blocks, n_gen of the last
     * ceil(tokens/gt) generation blocks) and rows past the last token are not written. Without
     * it, blocks map from the end of the context's and must end on a generation block. */
    uint64_t tokens;
    /* The caller has seen compat_check(gen, ctx, n_ctx) pass for these very layouts (a verdict
     * it keeps per registration: daemon/request/xfer_writers.h); it is not run again. */
    bool compat_known;
};

struct plan_error {
    kvf_error_t code;              /* PEER_INCOMPATIBLE, BAD_REQUEST, INTERNAL */
    compat_reason_t reason;        /* for PEER_INCOMPATIBLE (and COMPAT_DP_RANK: BAD_REQUEST) */
    char message[512];
};

/* Checks compatibility, then plans. Returns 0 and fills *ret (free with plan_done), or -EINVAL /
 * -ENOMEM with *err filled. Coverage of every generation byte exactly once is verified. */
int plan_build(const struct plan_input *in, struct plan *ret, struct plan_error *err);
void plan_done(struct plan *p);
/* Who writes, without the copy program: writers[c] (n_ctx entries) is 1 for each context rank
 * that is a writer of plan_build's plan for the same input, else 0. Checks what plan_build
 * checks before emitting (compatibility, the generation's ids, aliasing); context ids are not
 * needed and not looked at. 0, or -EINVAL / -ENOMEM with *err as plan_build fills it. For a
 * caller that must know whose SENDs to wait for before the context ids are all there. */
int plan_writers(const struct plan_input *in, uint8_t *writers, struct plan_error *err);
/* Who a generation rank of this shape reads, whatever its ids say: plan_writers for the same
 * layouts and per-group item counts, without the request's own checks (id values, duplicates,
 * token count, aliasing), which only decide whether it can be planned, never who writes. For a
 * reader whose request was refused: the writers it would have read learn it will not come. Still
 * needs compatible layouts (unless compat_known) and, for an attention-DP context, a valid
 * ctx_dp_rank (plan_check_shape); 0, or -EINVAL / -ENOMEM with *err as plan_build fills it. */
int plan_writers_of_shape(const struct plan_input *in, uint8_t *writers, struct plan_error *err);
/* What only the layouts decide: the input complete, compatibility (unless compat_known), an
 * attention-DP context's ctx_dp_rank. 0, or -EINVAL with *err as plan_build fills it. */
int plan_check_shape(const struct plan_input *in, struct plan_error *err);
/* What plan_build and plan_writers check before they walk the layouts (compatibility unless
 * compat_known, the request's ids and token count, declared aliasing): 0, or -EINVAL / -ENOMEM
 * with *err as plan_build fills it. For a caller that knows the writers already. */
int plan_check_request(const struct plan_input *in, struct plan_error *err);

/* Streaming (issue 28, plan_marks.c): per context rank c of a plan's input, the extent bytes
 * of its layers below each global layer id. The canonical order puts layers first, so when
 * every layer below L is final, the first below(c, L) bytes of c's extent are. */
struct plan_marks {
    uint32_t n_ctx;
    uint64_t *below; /* owned: n_ctx rows of LAYOUT_MAX_LAYERS + 1, cumulative */
};
/* plan_build that also fills *ret; the plan goes to *plan_ret (free with plan_done), or is
 * dropped when plan_ret is NULL. 0 or plan_build's errors (nothing to free then). */
int plan_marks_build(const struct plan_input *in, struct plan *plan_ret, struct plan_marks *ret,
                     struct plan_error *err);
/* Extent bytes of context rank c below layers_upto (clamped to LAYOUT_MAX_LAYERS); 0 for an
 * unknown rank. */
uint64_t plan_marks_below(const struct plan_marks *m, uint32_t c, uint32_t layers_upto);
void plan_marks_done(struct plan_marks *m);

/* The one accounting (DESIGN §4 rule 3): a request's bytes on one rank, summing every pool view of
 * every group, given the item count per group index. */
struct request_bytes {
    uint64_t total, state, kv;
};
void plan_bytes(const struct layout *l, const uint32_t n_items[LAYOUT_MAX_GROUPS],
                struct request_bytes *ret);
/* Items per group for a request of `tokens` tokens: ceil(tokens / tokens_per_block) blocks for
 * paged groups, 1 slot for state groups. */
void plan_items_for_tokens(const struct layout *l, uint64_t tokens, uint32_t ret[LAYOUT_MAX_GROUPS]);

#endif
