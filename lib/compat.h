/* compat.h: the compatibility check run before any plan (docs/DESIGN.md §4 rule 7): a typed reason
 * and a message naming the field, both values and both ranks. Pure. */
#ifndef KVF_COMPAT_H
#define KVF_COMPAT_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"

typedef enum {
    COMPAT_OK = 0,
    COMPAT_FINGERPRINT,       /* model fingerprints differ */
    COMPAT_TOKENS_PER_BLOCK,  /* tokens_per_block: neither divides the other, or a paged tensor
                               * whose outer is not the token axis */
    COMPAT_GROUP_MISSING,     /* a generation group has no context group of the same name */
    COMPAT_LAYER_KIND,        /* a layer is paged on one side, state on the other */
    COMPAT_UNCOVERED_LAYER,   /* a generation layer no context stage holds (or two do) */
    COMPAT_VIEW_MISMATCH,     /* views / tensors of a group do not correspond */
    COMPAT_DTYPE,             /* element types differ */
    COMPAT_HEAD_GEOMETRY,     /* inner bytes per head, outer, or global heads differ */
    COMPAT_SIZE_INVARIANT,    /* region_bytes x shards differ (replicated vs sharded mix-up) */
    COMPAT_TP_RATIO,          /* the larger TP is not a multiple of the smaller */
    COMPAT_TABLE,             /* the context table is incomplete or inconsistent */
    COMPAT_DP_RANK,           /* attention-DP context without a valid DP rank (plan_build
                               * reports it as BAD_REQUEST: a request's fault, not the peer's) */
    COMPAT_LAYER_MAP,         /* the model's layer maps differ, or the context table does not
                               * hold what its map declares */
    COMPAT_OMITTED,           /* the generation rank omits a group, layer or tensor the context
                               * holds for the layers it holds (rule 8: no under-transfer) */
    COMPAT__COUNT
} compat_reason_t;

/* "fingerprint", "tokens_per_block", ... */
const char *compat_reason_to_string(compat_reason_t r);

/* 0 if the generation rank can be planned against the context table; else -EINVAL with *reason
 * and a message (both values, both ranks) in msg. */
int compat_check(const struct layout *gen, const struct layout *ctx, uint32_t n_ctx,
                 compat_reason_t *reason, char *msg, size_t msglen);

#endif
