/* compat.c: the compatibility checker (docs/DESIGN.md §4 rules 1, 4, 7). Decides, before any byte
 * moves, whether one generation rank can be planned against a context instance's table.
 *
 * Semantics (decided by the lead; plan_build.c relies on every one of them):
 * - Groups match across sides by name; tensors match by (group name, tensor name). Views may
 *   differ between sides (joint vs split, layer- vs block-major, other pools): only the set of
 *   tensor names of a group must be equal.
 * - Every layer the generation rank holds must be held by exactly one context PP stage, in the
 *   group of the same name (a layer held in a group of the other kind is COMPAT_LAYER_KIND).
 * - Per matched tensor: dtype, outer, inner (bytes per head) and global_heads equal, each side
 *   self-consistent (sharded with tp_eff > 1: heads * tp_eff == global_heads; else all heads),
 *   and the size invariant: bytes_per_rank x shards equal, where shards = tp_eff for
 *   head-structured tensors (global_heads > 1) and 1 for global_heads == 1 (the MLA latent).
 *   This refuses full (replicated) slots with different TP, attention-DP on one side only with
 *   full slots, and replicated-vs-sharded mix-ups.
 * - The larger tp_eff must be a multiple of the smaller (COMPAT_TP_RATIO).
 * Messages name the field, both values and both ranks. Pure; thread-safe. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "compat.h"
#include "plan_internal.h"

static const char *const reason_names[COMPAT__COUNT] = {
    [COMPAT_OK] = "ok",
    [COMPAT_FINGERPRINT] = "fingerprint",
    [COMPAT_TOKENS_PER_BLOCK] = "tokens_per_block",
    [COMPAT_GROUP_MISSING] = "group_missing",
    [COMPAT_LAYER_KIND] = "layer_kind",
    [COMPAT_UNCOVERED_LAYER] = "uncovered_layer",
    [COMPAT_VIEW_MISMATCH] = "view_mismatch",
    [COMPAT_DTYPE] = "dtype",
    [COMPAT_HEAD_GEOMETRY] = "head_geometry",
    [COMPAT_SIZE_INVARIANT] = "size_invariant",
    [COMPAT_TP_RATIO] = "tp_ratio",
    [COMPAT_TABLE] = "table",
    [COMPAT_DP_RANK] = "dp_rank",
    [COMPAT_LAYER_MAP] = "layer_map",
    [COMPAT_OMITTED] = "omitted",
};

const char *compat_reason_to_string(compat_reason_t r)
{
    if ((unsigned)r >= COMPAT__COUNT)
        return "unknown";
    return reason_names[r];
}

struct cctx {
    compat_reason_t *reason;
    char *msg;
    size_t msglen;
};

__attribute__((format(printf, 3, 4))) static int fail(struct cctx *cc, compat_reason_t r,
                                                      const char *fmt, ...)
{
    if (cc->reason)
        *cc->reason = r;
    if (cc->msg && cc->msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(cc->msg, cc->msglen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

const char *compat_rank_desc(const struct layout *l, const char *side, char *buf, size_t n)
{
    snprintf(buf, n, "%s rank %" PRIu32 " (tp %" PRIu32 "/%" PRIu32 " pp %" PRIu32 "/%" PRIu32
                     "%s)",
             side, layout_rank(l), l->tp_rank, l->tp_size, l->pp_rank, l->pp_size,
             l->attention_dp ? " adp" : "");
    return buf;
}

#define rank_desc compat_rank_desc
#define CTXD(l) rank_desc((l), "context", cbuf, sizeof(cbuf))
#define GEND(l) rank_desc((l), "generation", gbuf, sizeof(gbuf))

/* Array bounds of one layout, so later code may index without fear. */
static int check_bounds(struct cctx *cc, const struct layout *l, const char *side)
{
    char b[96];
    if (l->n_groups > LAYOUT_MAX_GROUPS || l->n_pools > LAYOUT_MAX_POOLS || l->tp_size == 0 ||
        l->pp_size == 0 || l->tp_rank >= l->tp_size || l->pp_rank >= l->pp_size ||
        l->tp_size > LAYOUT_MAX_TP || l->pp_size > LAYOUT_MAX_PP)
        return fail(cc, COMPAT_TABLE, "%s: counts or ranks out of range",
                    rank_desc(l, side, b, sizeof(b)));
    for (uint32_t a = 0; a < l->n_addrs && a < LAYOUT_MAX_LAYER_ADDRS; a++)
        if (l->addrs[a].pool >= l->n_pools)
            return fail(cc, COMPAT_TABLE, "%s: per-layer entry %u names pool %u of %u",
                        rank_desc(l, side, b, sizeof(b)), a, l->addrs[a].pool, l->n_pools);
    for (uint32_t g = 0; g < l->n_groups; g++) {
        const struct layout_group *gr = &l->groups[g];
        if (gr->n_layers > LAYOUT_MAX_LAYERS || gr->n_views > LAYOUT_MAX_VIEWS)
            return fail(cc, COMPAT_TABLE, "groups.%.*s: counts out of range on %s",
                        LAYOUT_SHORT_MAX, gr->name, rank_desc(l, side, b, sizeof(b)));
        for (uint32_t v = 0; v < gr->n_views; v++) {
            const struct layout_view *vw = &gr->views[v];
            if (vw->n_tensors > LAYOUT_MAX_TENSORS || vw->pool >= l->n_pools ||
                (vw->per_layer && (uint64_t)vw->addr_at + gr->n_layers > l->n_addrs) ||
                l->n_addrs > LAYOUT_MAX_LAYER_ADDRS)
                return fail(cc, COMPAT_TABLE, "groups.%.*s view %.*s: pool or tensor count out of "
                                              "range on %s",
                            LAYOUT_SHORT_MAX, gr->name, LAYOUT_SHORT_MAX, vw->name,
                            rank_desc(l, side, b, sizeof(b)));
            for (uint32_t t = 0; t < vw->n_tensors; t++)
                if (vw->tensors[t].heads == 0 || vw->tensors[t].global_heads == 0)
                    return fail(cc, COMPAT_TABLE, "groups.%.*s tensor %.*s: zero heads on %s",
                                LAYOUT_SHORT_MAX, gr->name, LAYOUT_SHORT_MAX,
                                vw->tensors[t].name, rank_desc(l, side, b, sizeof(b)));
        }
    }
    return 0;
}

const struct layout_group *compat_find_group(const struct layout *l, const char *name,
                                             uint32_t *idx)
{
    for (uint32_t g = 0; g < l->n_groups; g++)
        if (strncmp(l->groups[g].name, name, LAYOUT_SHORT_MAX) == 0) {
            if (idx)
                *idx = g;
            return &l->groups[g];
        }
    return NULL;
}

static bool group_holds(const struct layout_group *g, uint32_t layer)
{
    for (uint32_t i = 0; i < g->n_layers; i++)
        if (g->layers[i] == layer)
            return true;
    return false;
}

static const struct layout_tensor *find_tensor(const struct layout_group *g, const char *name)
{
    for (uint32_t v = 0; v < g->n_views; v++)
        for (uint32_t t = 0; t < g->views[v].n_tensors; t++)
            if (strncmp(g->views[v].tensors[t].name, name, LAYOUT_SHORT_MAX) == 0)
                return &g->views[v].tensors[t];
    return NULL;
}

static uint32_t count_tensors(const struct layout_group *g)
{
    uint32_t n = 0;
    for (uint32_t v = 0; v < g->n_views; v++)
        n += g->views[v].n_tensors;
    return n;
}

/* Shards of a tensor for the size invariant (see the header comment): distinct shards, so a
 * sharded tensor with more ranks than heads counts global_heads shards of one head. */
static uint64_t tensor_shards(const struct layout *l, const struct layout_tensor *t)
{
    uint32_t tpe = layout_tp_eff(l);
    if (t->shard == SHARD_SHARDED && tpe > t->global_heads)
        return t->global_heads;
    return t->global_heads > 1 ? tpe : 1;
}

static bool heads_consistent(const struct layout *l, const struct layout_tensor *t)
{
    uint32_t tpe = layout_tp_eff(l);
    if (t->shard == SHARD_SHARDED && tpe > t->global_heads)
        return t->heads == 1 && tpe % t->global_heads == 0;
    if (t->shard == SHARD_SHARDED && tpe > 1)
        return (uint64_t)t->heads * tpe == t->global_heads;
    return t->heads == t->global_heads;
}

static int check_table(struct cctx *cc, const struct layout *ctx, uint32_t n_ctx)
{
    char cbuf[96], b2[96];
    if (!ctx || n_ctx == 0)
        return fail(cc, COMPAT_TABLE, "context table is empty");
    const struct layout *c0 = &ctx[0];
    if (check_bounds(cc, c0, "context"))
        return -EINVAL;
    if ((uint64_t)c0->tp_size * c0->pp_size != n_ctx)
        return fail(cc, COMPAT_TABLE, "context table has %" PRIu32 " ranks, %s says tp %" PRIu32
                                      " x pp %" PRIu32,
                    n_ctx, CTXD(c0), c0->tp_size, c0->pp_size);
    for (uint32_t i = 0; i < n_ctx; i++) {
        const struct layout *c = &ctx[i];
        if (check_bounds(cc, c, "context"))
            return -EINVAL;
        if (c->tp_size != c0->tp_size || c->pp_size != c0->pp_size ||
            c->attention_dp != c0->attention_dp)
            return fail(cc, COMPAT_TABLE, "context table: parallelism differs: %s vs %s",
                        CTXD(c), rank_desc(c0, "context", b2, sizeof(b2)));
        if (layout_rank(c) != i)
            return fail(cc, COMPAT_TABLE, "context table: entry %" PRIu32 " holds %s", i, CTXD(c));
        if (strncmp(c->fingerprint, c0->fingerprint, LAYOUT_FP_MAX) != 0)
            return fail(cc, COMPAT_TABLE, "context table: fingerprint differs: %s has %.*s, %s "
                                          "has %.*s",
                        CTXD(c), LAYOUT_FP_MAX, c->fingerprint,
                        rank_desc(c0, "context", b2, sizeof(b2)), LAYOUT_FP_MAX, c0->fingerprint);
        if (c->tokens_per_block != c0->tokens_per_block)
            return fail(cc, COMPAT_TABLE, "context table: tokens_per_block differs: %s has %" PRIu32
                                          ", %s has %" PRIu32,
                        CTXD(c), c->tokens_per_block, rank_desc(c0, "context", b2, sizeof(b2)),
                        c0->tokens_per_block);
        /* Ranks of one stage hold the same layers of every group. */
        const struct layout *s0 = &ctx[c->pp_rank * c->tp_size];
        for (uint32_t g = 0; g < c->n_groups; g++) {
            const struct layout_group *a = &c->groups[g];
            const struct layout_group *b = compat_find_group(s0, a->name, NULL);
            uint32_t nb = b ? b->n_layers : 0;
            if (a->n_layers != nb ||
                (nb && memcmp(a->layers, b->layers, nb * sizeof(a->layers[0])) != 0))
                return fail(cc, COMPAT_TABLE, "context table: groups.%.*s layers differ within "
                                              "stage %" PRIu32 ": %s vs %s",
                            LAYOUT_SHORT_MAX, a->name, c->pp_rank, CTXD(c),
                            rank_desc(s0, "context", b2, sizeof(b2)));
        }
    }
    return 0;
}

/* One matched tensor: generation tensor gt against context tensor ct of rank c. */
static int check_tensor(struct cctx *cc, const struct layout *gen, const struct layout_group *gg,
                        const struct layout_tensor *gt, const struct layout *c,
                        const struct layout_tensor *ct)
{
    char cbuf[96], gbuf[96];
    int n = LAYOUT_SHORT_MAX;
    const char *gname = gg->name;
    /* Rule 10: different block sizes convert when outer is each side's token axis. */
    if (gen->tokens_per_block != c->tokens_per_block) {
        if (gg->kind == GROUP_PAGED &&
            (gt->outer != gen->tokens_per_block || ct->outer != c->tokens_per_block))
            return fail(cc, COMPAT_TOKENS_PER_BLOCK,
                        "groups.%.*s tensor %.*s: tokens_per_block differs (%s has %" PRIu32
                        ", %s has %" PRIu32 ") but outer is not the token axis (%" PRIu32
                        " and %" PRIu32 ")",
                        n, gname, n, gt->name, CTXD(c), c->tokens_per_block, GEND(gen),
                        gen->tokens_per_block, ct->outer, gt->outer);
    }
    bool outer_ok = gt->outer == ct->outer ||
                    (gg->kind == GROUP_PAGED && gen->tokens_per_block != c->tokens_per_block);
    if (gt->dtype != ct->dtype)
        return fail(cc, COMPAT_DTYPE, "groups.%.*s tensor %.*s: dtype differs: %s has %s, %s has %s",
                    n, gname, n, gt->name, CTXD(c), dtype_to_string(ct->dtype), GEND(gen),
                    dtype_to_string(gt->dtype));
#define GEOM(field, what)                                                                          \
    if (gt->field != ct->field)                                                                    \
        return fail(cc, COMPAT_HEAD_GEOMETRY,                                                      \
                    "groups.%.*s tensor %.*s: " what " differ: %s has %" PRIu32 ", %s has %" PRIu32, \
                    n, gname, n, gt->name, CTXD(c), ct->field, GEND(gen), gt->field);
    GEOM(inner, "head inner bytes")
    if (!outer_ok)
        GEOM(outer, "outer counts")
    GEOM(global_heads, "global heads")
#undef GEOM
    if (!heads_consistent(c, ct))
        return fail(cc, COMPAT_HEAD_GEOMETRY, "groups.%.*s tensor %.*s: %s holds %" PRIu32
                                              " of %" PRIu32 " heads, %s",
                    n, gname, n, gt->name, CTXD(c), ct->heads, ct->global_heads,
                    ct->shard == SHARD_SHARDED ? "sharded" : "replicated");
    if (!heads_consistent(gen, gt))
        return fail(cc, COMPAT_HEAD_GEOMETRY, "groups.%.*s tensor %.*s: %s holds %" PRIu32
                                              " of %" PRIu32 " heads, %s",
                    n, gname, n, gt->name, GEND(gen), gt->heads, gt->global_heads,
                    gt->shard == SHARD_SHARDED ? "sharded" : "replicated");
    /* per token row when the block sizes differ (outer is the token axis then) */
    uint64_t cb = (uint64_t)(outer_ok && gt->outer != ct->outer ? 1 : ct->outer) * ct->heads * ct->inner;
    uint64_t gb = (uint64_t)(outer_ok && gt->outer != ct->outer ? 1 : gt->outer) * gt->heads * gt->inner;
    uint64_t cs = tensor_shards(c, ct), gs = tensor_shards(gen, gt);
    if (cb * cs != gb * gs)
        return fail(cc, COMPAT_SIZE_INVARIANT,
                    "groups.%.*s tensor %.*s: bytes per rank x shards differ: %s has %" PRIu64
                    " x %" PRIu64 " (%s), %s has %" PRIu64 " x %" PRIu64 " (%s)",
                    n, gname, n, gt->name, CTXD(c), cb, cs,
                    ct->shard == SHARD_SHARDED ? "sharded" : "replicated", GEND(gen), gb, gs,
                    gt->shard == SHARD_SHARDED ? "sharded" : "replicated");
    return 0;
}

static int check_group(struct cctx *cc, const struct layout *gen, const struct layout_group *gg,
                       const struct layout *ctx, uint32_t n_ctx)
{
    char cbuf[96], gbuf[96];
    int n = LAYOUT_SHORT_MAX;
    uint32_t tp = ctx[0].tp_size, pp = ctx[0].pp_size;
    bool any = false;
    for (uint32_t i = 0; i < n_ctx; i++) {
        const struct layout_group *cg = compat_find_group(&ctx[i], gg->name, NULL);
        if (!cg)
            continue;
        any = true;
        if (cg->kind != gg->kind)
            return fail(cc, COMPAT_LAYER_KIND, "groups.%.*s: kind differs: %s has %s, %s has %s",
                        n, gg->name, CTXD(&ctx[i]), group_kind_to_string(cg->kind), GEND(gen),
                        group_kind_to_string(gg->kind));
    }
    if (!any)
        return fail(cc, COMPAT_GROUP_MISSING, "groups.%.*s: no context rank has this group (%s "
                                              "has it)",
                    n, gg->name, GEND(gen));
    /* Rule 1: every generation layer in exactly one context stage. */
    for (uint32_t li = 0; li < gg->n_layers; li++) {
        uint32_t layer = gg->layers[li], holders = 0, first = 0;
        for (uint32_t p = 0; p < pp; p++) {
            const struct layout_group *cg = compat_find_group(&ctx[p * tp], gg->name, NULL);
            if (cg && group_holds(cg, layer)) {
                if (holders++ == 0)
                    first = p;
                else
                    return fail(cc, COMPAT_UNCOVERED_LAYER,
                                "groups.%.*s layer %" PRIu32 ": held by two context stages, pp %"
                                PRIu32 " and pp %" PRIu32 " (wanted by %s)",
                                n, gg->name, layer, first, p, GEND(gen));
            }
        }
        if (holders)
            continue;
        for (uint32_t p = 0; p < pp; p++) {
            const struct layout *c = &ctx[p * tp];
            for (uint32_t g = 0; g < c->n_groups; g++)
                if (c->groups[g].kind != gg->kind && group_holds(&c->groups[g], layer))
                    return fail(cc, COMPAT_LAYER_KIND,
                                "layer %" PRIu32 ": %s holds it in groups.%.*s (%s), %s in "
                                "groups.%.*s (%s)",
                                layer, CTXD(c), n, c->groups[g].name,
                                group_kind_to_string(c->groups[g].kind), GEND(gen), n, gg->name,
                                group_kind_to_string(gg->kind));
        }
        return fail(cc, COMPAT_UNCOVERED_LAYER, "groups.%.*s layer %" PRIu32 ": no context stage "
                                                "holds it (%s holds it; context pp %" PRIu32 ")",
                    n, gg->name, layer, GEND(gen), pp);
    }
    /* Tensors, against every context rank that holds layers of the group. */
    uint32_t gn = count_tensors(gg);
    for (uint32_t i = 0; i < n_ctx; i++) {
        const struct layout_group *cg = compat_find_group(&ctx[i], gg->name, NULL);
        if (!cg || cg->n_layers == 0)
            continue;
        for (uint32_t v = 0; v < gg->n_views; v++)
            for (uint32_t t = 0; t < gg->views[v].n_tensors; t++) {
                const struct layout_tensor *gt = &gg->views[v].tensors[t];
                const struct layout_tensor *ct = find_tensor(cg, gt->name);
                if (!ct)
                    return fail(cc, COMPAT_VIEW_MISMATCH, "groups.%.*s tensor %.*s: missing on "
                                                          "%s, present on %s",
                                n, gg->name, n, gt->name, CTXD(&ctx[i]), GEND(gen));
                int rc = check_tensor(cc, gen, gg, gt, &ctx[i], ct);
                if (rc)
                    return rc;
            }
        /* Rule 8: a tensor the context holds and the generation rank leaves out never moves. */
        for (uint32_t v = 0; v < cg->n_views; v++)
            for (uint32_t t = 0; t < cg->views[v].n_tensors; t++)
                if (!find_tensor(gg, cg->views[v].tensors[t].name))
                    return fail(cc, COMPAT_OMITTED,
                                "groups.%.*s tensor %.*s: omitted by %s (%s holds it in view %.*s)",
                                n, gg->name, n, cg->views[v].tensors[t].name, GEND(gen),
                                CTXD(&ctx[i]), n, cg->views[v].name);
        uint32_t cn = count_tensors(cg);
        if (cn != gn)
            return fail(cc, COMPAT_VIEW_MISMATCH, "groups.%.*s: tensor count differs: %s has %" PRIu32
                                                  ", %s has %" PRIu32,
                        n, gg->name, CTXD(&ctx[i]), cn, GEND(gen), gn);
    }
    return 0;
}

int compat_check(const struct layout *gen, const struct layout *ctx, uint32_t n_ctx,
                 compat_reason_t *reason, char *msg, size_t msglen)
{
    struct cctx cc = {reason, msg, msglen};
    char cbuf[96], gbuf[96];
    if (!gen)
        return fail(&cc, COMPAT_TABLE, "no generation layout");
    if (check_bounds(&cc, gen, "generation") || check_table(&cc, ctx, n_ctx))
        return -EINVAL;
    const struct layout *c0 = &ctx[0];
    if (strncmp(gen->fingerprint, c0->fingerprint, LAYOUT_FP_MAX) != 0)
        return fail(&cc, COMPAT_FINGERPRINT, "fingerprint differs: %s has %.*s, %s has %.*s",
                    CTXD(c0), LAYOUT_FP_MAX, c0->fingerprint, GEND(gen), LAYOUT_FP_MAX,
                    gen->fingerprint);
    uint32_t bt = gen->tokens_per_block, ctb = c0->tokens_per_block;
    if (bt == 0 || ctb == 0 || (bt % ctb && ctb % bt))
        return fail(&cc, COMPAT_TOKENS_PER_BLOCK,
                    "tokens_per_block: neither divides the other: %s has %" PRIu32 ", %s has %" PRIu32,
                    CTXD(c0), ctb, GEND(gen), bt);
    uint32_t ct = layout_tp_eff(c0), gt = layout_tp_eff(gen);
    uint32_t hi = ct > gt ? ct : gt, lo = ct > gt ? gt : ct;
    if (hi % lo != 0)
        return fail(&cc, COMPAT_TP_RATIO,
                    "tp shards: the larger is not a multiple of the smaller: %s has %" PRIu32
                    ", %s has %" PRIu32,
                    CTXD(c0), ct, GEND(gen), gt);
    for (uint32_t g = 0; g < gen->n_groups; g++) {
        int rc = check_group(&cc, gen, &gen->groups[g], ctx, n_ctx);
        if (rc)
            return rc;
    }
    if (compat_cover_rules(gen, ctx, n_ctx, reason, msg, msglen))
        return -EINVAL;
    if (reason)
        *reason = COMPAT_OK;
    if (msg && msglen)
        msg[0] = '\0';
    return 0;
}
