/* plan_build.c: the planner (docs/DESIGN.md §4). For one request and one generation rank: which
 * context ranks write, which bytes of which region each writes, and where they land.
 *
 * Semantics (decided by the lead; compat.c checks the preconditions):
 * - Groups match by name, tensors by (group name, tensor name); views may differ between sides.
 *   The plan maps tensor rows, never views.
 * - Layers (rule 1): each generation layer is read from the one context PP stage holding it.
 * - Heads (rule 4): rank r of a side with tp_eff shards holds global heads
 *   [r*G/tp_eff, (r+1)*G/tp_eff) of a sharded tensor, all G otherwise. A generation rank reads
 *   from every context rank of the stage whose head range meets its own (fan-in, head split).
 *   With tp_eff > G on the context (replicated head groups: head h held by the rep = tp_eff/G
 *   ranks h*rep .. h*rep+rep-1), each head the generation rank needs has one writer, holder
 *   (h + i) % rep of those, i = gen_tp_rank % (gen tp_eff / G) when the generation side
 *   replicates too, else 0: deterministic, and spread over the holders (TP16->TP8 of 8 heads
 *   reads ranks 0, 3, 4, 7, ...).
 * - Replicated data (rule 5): a context tensor every rank holds in full (replicated, G == 1, or
 *   an attention-DP context) has ONE writer: under context attention-DP the DP rank that ran
 *   the request (plan_input.ctx_dp_rank == its tp_rank), else context tp rank gen_tp_rank % ctx_tp,
 *   in the stage holding the layer. It supplies the generation rank's head range.
 * - Blocks (rule 6): suffix-aligned. Generation block k of n_gen is context block
 *   n_ctx - n_gen + k. With different tokens_per_block (rule 10; ct context, gt generation,
 *   one dividing the other, outer the token axis) tokens map instead: generation row (k, o) is
 *   request token T = n_ctx*ct - (n_gen - k)*gt + o, context block T / ct row T % ct; the
 *   context's blocks must end on a generation block boundary (n_ctx*ct a multiple of gt) and
 *   hold n_gen*gt tokens, else BAD_REQUEST. With the prompt's token count (plan_input.tokens)
 *   both lists map from token 0 instead: generation row (k, o) is token
 *   T = (ceil(tokens/gt) - n_gen + k)*gt + o, context block T/ct - (ceil(tokens/ct) - n_ctx);
 *   rows with T >= tokens are not written, so a prompt ending inside a block moves exactly.
 * - Row order (rule 10): each side's rows (outer o, head h) sit where its tensor's order says
 *   (NHD [o][h], HND [h][o]); when order or block size differ between the sides the program is
 *   emitted row by row in generation memory order (runs that continue merge again).
 *   n_gen > n_ctx, ids >= n_items, duplicate ids, more than PLAN_MAX_IDS ids
 *   and a state group without exactly one slot id are BAD_REQUEST. So is an attention-DP
 *   context without a valid ctx_dp_rank (reason COMPAT_DP_RANK): the DP rank belongs to the
 *   request, not to the peer, so it must never become a cached PEER_INCOMPATIBLE verdict.
 * - Canonical order of a writer's extent (rule 9): (global layer id ascending, generation
 *   group index, generation view index, item in request order, tensor index within the view,
 *   outer, head run). Each writer's extent is its subsequence of that order, packed. Layer
 *   first, so the layers below any id are a prefix of every extent: a streaming SEND (issue 28)
 *   moves the prefix its final layers cover (plan_marks).
 * - Coverage (rule 8): plan_cover_check() runs on every plan; a failure is INTERNAL.
 * - Declared aliasing: plan_alias_check() refuses, as BAD_REQUEST naming both items, a request
 *   whose destination regions in aliased views overlap (before any run is emitted).
 * - Writers are listed by ascending context rank; a rank with nothing to send is not a writer.
 *   Without context ids (the generation daemon) sources stay unresolved; extents and
 *   destinations are the same as the context daemon's.
 * Layouts are assumed to have passed layout_validate (the decoder runs it); compat_check
 * still bounds every array index. A plan is capped at PLAN_MAX_RUNS copy runs.
 * A template's build (plan_build_tagged, plan_template.h) tags every run with the generation
 * and context items it lies in and merges runs only within one item: the same bytes, in ops
 * whose shape no id value changes. The request's checks are plan_check.c's.
 * Pure; thread-safe. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

#define set_err plan_set_err /* plan_internal.h: the one way to refuse */

/* One writer of one (generation group, layer, view, tensor). */
struct wsrc {
    uint32_t c;                      /* context rank */
    const struct layout *cl;         /* its layout */
    const struct layout_view *cv;    /* context view holding the tensor */
    const struct layout_tensor *ct;
    uint32_t li;                     /* context local layer index */
    const uint32_t *cids;            /* the context rank's ids of the group (all), or NULL */
    uint32_t n_cids;                 /* how many */
    uint32_t h0, h1, clo;            /* global heads [h0, h1); context rank's first head */
    uint32_t cgi;                    /* the group's index in the context layout */
};

/* Most copy runs one plan may emit before compression: bounds planning time and memory against
 * pathological layouts. Counted as (outer rows x writers) per tensor and item, before merging
 * whole tensors: a kimi-k3 8k request counts about 4 x 10^5. */
#define PLAN_MAX_RUNS (1ull << 24)

struct bctx {
    const struct plan_input *in;
    struct plan_error *err;
    struct plan_opvec *vecs;         /* one per context rank */
    uint64_t runs;                   /* emitted so far */
    const struct plan_tix *tix;      /* a template's build: runs are tagged; else NULL */
    uint32_t dst_k, dst_reg;         /* the generation item and region being emitted */
};

/* Tags the next run of writer w (a template's build only): the generation item being
 * emitted, and context item kc of w's region (unresolved sources: none). */
static void tag(struct bctx *b, const struct wsrc *w, uint32_t kc)
{
    if (!b->tix)
        return;
    uint32_t src = PLAN_TREG_NONE;
    if (w->cids) {
        const struct layout_group *cg = &w->cl->groups[w->cgi];
        src = b->tix->ctx_at[w->c * LAYOUT_MAX_GROUPS + w->cgi] +
              (uint32_t)(w->cv - cg->views) * cg->n_layers + w->li;
    }
    b->vecs[w->c].cur = (struct plan_tag){b->dst_k, b->dst_reg, w->cids ? kc : 0, src};
}

static const struct layout_tensor *ctx_tensor(const struct layout_group *g, const char *name,
                                              const struct layout_view **view)
{
    for (uint32_t v = 0; v < g->n_views; v++)
        for (uint32_t t = 0; t < g->views[v].n_tensors; t++)
            if (strncmp(g->views[v].tensors[t].name, name, LAYOUT_SHORT_MAX) == 0) {
                *view = &g->views[v];
                return &g->views[v].tensors[t];
            }
    return NULL;
}

static void head_range(const struct layout *l, const struct layout_tensor *t, uint32_t *lo,
                       uint32_t *hi)
{
    *lo = layout_first_head(l, t);
    *hi = *lo + t->heads;
}

/* Fills one writer for context rank c, or returns 1 when it has no heads to give. */
static int make_writer(struct bctx *b, const struct layout_group *gg, uint32_t n_gen, uint32_t c,
                       uint32_t layer, uint32_t glo, uint32_t ghi, const char *tname,
                       bool full, struct wsrc *w)
{
    const struct layout *cl = &b->in->ctx[c];
    uint32_t cgi;
    const struct layout_group *cg = compat_find_group(cl, gg->name, &cgi);
    if (!cg)
        return set_err(b->err, KVF_E_INTERNAL, COMPAT_OK, "groups.%.*s missing on context rank %"
                       PRIu32, LAYOUT_SHORT_MAX, gg->name, c);
    const struct layout_view *cv = NULL;
    const struct layout_tensor *ct = ctx_tensor(cg, tname, &cv);
    if (!ct)
        return set_err(b->err, KVF_E_INTERNAL, COMPAT_OK, "tensor %.*s missing on context rank %"
                       PRIu32, LAYOUT_SHORT_MAX, tname, c);
    uint32_t clo = 0, chi = ct->global_heads;
    if (!full)
        head_range(cl, ct, &clo, &chi);
    uint32_t h0 = glo > clo ? glo : clo, h1 = ghi < chi ? ghi : chi;
    if (h0 >= h1)
        return 1;
    uint32_t li = 0;
    while (li < cg->n_layers && cg->layers[li] != layer)
        li++;
    if (li == cg->n_layers)
        return set_err(b->err, KVF_E_INTERNAL, COMPAT_OK, "layer %" PRIu32 " missing on context "
                       "rank %" PRIu32, layer, c);
    const uint32_t *cids = NULL;
    const struct plan_ids *ids = b->in->ctx_ids ? &b->in->ctx_ids[c] : NULL;
    uint64_t gtb = b->in->gen->tokens_per_block, ctb = cl->tokens_per_block;
    uint64_t tok = b->in->tokens;
    if (ids && gg->kind == GROUP_PAGED && tok && ctb != gtb) {
        /* from token 0: the context's blocks are the last n of ceil(tok/ctb) and must hold the
         * first token the generation's blocks need; checked where the ids are known (the
         * context daemon), a rank known by count only cannot be told from an unknown one */
        uint64_t nc = (tok + ctb - 1) / ctb, first = ((tok + gtb - 1) / gtb - n_gen) * gtb;
        if (ids->ids[cgi] && ids->n[cgi] > nc)
            return set_err(b->err, KVF_E_BAD_REQUEST, COMPAT_OK,
                           "groups.%.*s: context rank %" PRIu32 " holds %" PRIu32 " blocks of %"
                           PRIu64 " tokens, more than the request's %" PRIu64 " tokens fill",
                           LAYOUT_SHORT_MAX, gg->name, c, ids->n[cgi], ctb, tok);
        if (ids->ids[cgi] && (nc - ids->n[cgi]) * ctb > first)
            return set_err(b->err, KVF_E_BAD_REQUEST, COMPAT_OK,
                           "groups.%.*s: generation asks for %" PRIu32 " blocks of %" PRIu64
                           " tokens from token %" PRIu64 ", context rank %" PRIu32 " holds the "
                           "last %" PRIu32 " of %" PRIu64 " blocks of %" PRIu64 " (from token %"
                           PRIu64 ")",
                           LAYOUT_SHORT_MAX, gg->name, n_gen, gtb, first, c, ids->n[cgi], nc, ctb,
                           (nc - ids->n[cgi]) * ctb);
    } else if (ids && gg->kind == GROUP_PAGED) {
        if ((uint64_t)ids->n[cgi] * ctb < (uint64_t)n_gen * gtb)
            return set_err(b->err, KVF_E_BAD_REQUEST, COMPAT_OK,
                           "groups.%.*s: generation asks for %" PRIu32 " blocks of %" PRIu64
                           " tokens, context rank %" PRIu32 " holds %" PRIu32 " of %" PRIu64,
                           LAYOUT_SHORT_MAX, gg->name, n_gen, gtb, c, ids->n[cgi], ctb);
        if (((uint64_t)ids->n[cgi] * ctb) % gtb)
            return set_err(b->err, KVF_E_BAD_REQUEST, COMPAT_OK,
                           "groups.%.*s: context rank %" PRIu32 " holds %" PRIu32 " blocks of %"
                           PRIu64 " tokens, which do not end on a generation block of %" PRIu64
                           " tokens; the RECV must give the request's token count (tokens) to "
                           "move a prompt that ends inside a block",
                           LAYOUT_SHORT_MAX, gg->name, c, ids->n[cgi], ctb, gtb);
    }
    if (ids && ids->ids[cgi])
        cids = ids->ids[cgi];
    *w = (struct wsrc){c, cl, cv, ct, li, cids, ids ? ids->n[cgi] : 0, h0, h1, clo, cgi};
    return 0;
}

/* The writers of tensor gt of layer `layer` (rules 1, 4, 5). */
static int tensor_writers(struct bctx *b, const struct layout_group *gg, uint32_t n_gen,
                          uint32_t layer, const struct layout_tensor *gt, struct wsrc *ws,
                          uint32_t *nw)
{
    const struct layout *gen = b->in->gen, *ctx = b->in->ctx;
    uint32_t tp = ctx[0].tp_size, pp = ctx[0].pp_size, stage = pp;
    for (uint32_t p = 0; p < pp && stage == pp; p++) {
        const struct layout_group *cg = compat_find_group(&ctx[p * tp], gg->name, NULL);
        for (uint32_t i = 0; cg && i < cg->n_layers; i++)
            if (cg->layers[i] == layer)
                stage = p;
    }
    if (stage == pp)
        return set_err(b->err, KVF_E_INTERNAL, COMPAT_OK, "layer %" PRIu32 " in no context stage",
                       layer);
    const struct layout_view *cv0;
    const struct layout_group *cg0 = compat_find_group(&ctx[stage * tp], gg->name, NULL);
    const struct layout_tensor *ct0 = ctx_tensor(cg0, gt->name, &cv0);
    if (!ct0)
        return set_err(b->err, KVF_E_INTERNAL, COMPAT_OK, "tensor %.*s missing in stage %" PRIu32,
                       LAYOUT_SHORT_MAX, gt->name, stage);
    uint32_t glo, ghi;
    head_range(gen, gt, &glo, &ghi);
    bool full = ctx[0].attention_dp || tp == 1 || ct0->shard == SHARD_REPLICATED ||
                ct0->global_heads == 1;
    *nw = 0;
    if (full) {
        uint32_t r = ctx[0].attention_dp ? (uint32_t)b->in->ctx_dp_rank : gen->tp_rank % tp;
        int rc = make_writer(b, gg, n_gen, stage * tp + r, layer, glo, ghi, gt->name, true, ws);
        if (rc < 0)
            return rc;
        *nw = rc == 0;
        return 0;
    }
    uint32_t G = ct0->global_heads, ctpe = layout_tp_eff(&ctx[0]), gtpe = layout_tp_eff(gen);
    /* replicated head groups (ctpe > G): one holder per needed head; else every rank whose
     * head range meets ours */
    uint32_t rep = ctpe > G ? ctpe / G : 0, i = gtpe > G ? gen->tp_rank % (gtpe / G) : 0;
    for (uint32_t j = 0; j < (rep ? ghi - glo : tp); j++) {
        uint32_t h = glo + j, r = rep ? h * rep + (h + i) % rep : j;
        int rc = make_writer(b, gg, n_gen, stage * tp + r, layer, rep ? h : glo, rep ? h + 1 : ghi,
                             gt->name, false, &ws[*nw]);
        if (rc < 0)
            return rc;
        if (rc == 0)
            (*nw)++;
    }
    return 0;
}

/* Token mode (plan_input.tokens given and block sizes differ): blocks map from token 0. */
static bool by_tokens(const struct bctx *b, const struct wsrc *w)
{
    return b->in->tokens && b->in->ctx[w->c].tokens_per_block != b->in->gen->tokens_per_block;
}

/* The request token of generation row (k, o) of a paged group (rule 6, rule 10): from token 0
 * in token mode, else from the end of the context's blocks. */
static uint64_t gen_token(const struct bctx *b, const struct wsrc *w, uint32_t n_gen, uint32_t k,
                          uint32_t o)
{
    uint64_t gtb = b->in->gen->tokens_per_block, ctb = b->in->ctx[w->c].tokens_per_block;
    if (by_tokens(b, w))
        return ((b->in->tokens + gtb - 1) / gtb - n_gen + k) * gtb + o;
    return (uint64_t)w->n_cids * ctb - (uint64_t)(n_gen - k) * gtb + o;
}

/* Rows of generation block k (of n_gen) that carry prompt tokens: all but in token mode's last
 * block, which ends at the prompt's last token. */
static uint32_t gen_rows(const struct bctx *b, const struct wsrc *w, uint32_t n_gen, uint32_t k,
                         uint32_t outer)
{
    if (!by_tokens(b, w))
        return outer;
    uint64_t left = b->in->tokens - gen_token(b, w, n_gen, k, 0);
    return left < outer ? (uint32_t)left : outer;
}

/* Context item index and row of generation row (k, o) of a paged group; state groups: item 0,
 * same row. */
static void ctx_row(const struct bctx *b, bool paged, const struct wsrc *w, uint32_t n_gen,
                    uint32_t k, uint32_t o, uint32_t *kc, uint32_t *oc)
{
    if (!paged) {
        *kc = 0;
        *oc = o;
        return;
    }
    uint64_t ctb = b->in->ctx[w->c].tokens_per_block, t = gen_token(b, w, n_gen, k, o);
    uint64_t skip = by_tokens(b, w) ? (b->in->tokens + ctb - 1) / ctb - w->n_cids : 0;
    *kc = (uint32_t)(t / ctb - skip);
    *oc = (uint32_t)(t % ctb);
}

/* Source of generation row (k, o), global head h, of writer w: unresolved without ids. */
static void src_row(struct bctx *b, bool paged, const struct wsrc *w, uint32_t n_gen,
                    uint32_t k, uint32_t o, uint32_t h, uint32_t *sp, uint64_t *so)
{
    uint32_t kc, oc;
    *sp = PLAN_POOL_UNKNOWN;
    *so = 0;
    tag(b, w, 0);
    if (!w->cids)
        return;
    ctx_row(b, paged, w, n_gen, k, o, &kc, &oc);
    tag(b, w, kc);
    struct layout_loc cat = layout_region_at(w->cl, w->cv, w->li, w->cids[kc]);
    *sp = cat.pool;
    *so = cat.off + layout_row_off(w->ct, oc, h - w->clo);
}

/* Row by row, in generation memory order: order or block size differ between the sides.
 * Generation NHD: per token, per writer, its heads (one run, or rows strided by a head-major
 * context's block). Generation HND: per writer, per head, its tokens in pieces that stay in one
 * context block (rows strided by a token-major context's heads). */
static int emit_rows(struct bctx *b, const struct layout_tensor *gt, const struct wsrc *ws,
                     uint32_t nw, uint32_t glo, struct layout_loc gat, uint32_t n_gen, uint32_t k,
                     bool paged, bool state)
{
    uint64_t in = gt->inner;
    uint32_t rows = paged && nw ? gen_rows(b, &ws[0], n_gen, k, gt->outer) : gt->outer;
    if (gt->order != ORDER_HND) {
        for (uint32_t o = 0; o < rows; o++)
            for (uint32_t i = 0; i < nw; i++) {
                const struct wsrc *w = &ws[i];
                uint32_t sp;
                uint64_t so;
                src_row(b, paged, w, n_gen, k, o, w->h0, &sp, &so);
                int64_t ss = w->ct->order == ORDER_HND ? (int64_t)(w->ct->outer * in) : (int64_t)in;
                uint64_t d = gat.off + layout_row_off(gt, o, w->h0 - glo);
                if (plan_opvec_add_rows(&b->vecs[w->c], sp, so, ss, gat.pool, d, (int64_t)in, in,
                                        w->h1 - w->h0, state))
                    return -ENOMEM;
            }
        return 0;
    }
    uint64_t gtb = b->in->gen->tokens_per_block;
    for (uint32_t i = 0; i < nw; i++) {
        const struct wsrc *w = &ws[i];
        uint64_t ctb = b->in->ctx[w->c].tokens_per_block;
        for (uint32_t h = w->h0; h < w->h1; h++)
            for (uint32_t o = 0; o < rows;) {
                /* rows up to the end of the context block holding row o */
                uint32_t n = rows - o;
                if (paged && ctb < gtb) {
                    uint64_t left = ctb - gen_token(b, w, n_gen, k, o) % ctb;
                    n = n < left ? n : (uint32_t)left;
                }
                uint32_t sp;
                uint64_t so;
                src_row(b, paged, w, n_gen, k, o, h, &sp, &so);
                int64_t ss = w->ct->order == ORDER_HND ? (int64_t)in : (int64_t)(w->ct->heads * in);
                uint64_t d = gat.off + layout_row_off(gt, o, h - glo);
                if (plan_opvec_add_rows(&b->vecs[w->c], sp, so, ss, gat.pool, d, (int64_t)in, in,
                                        n, state))
                    return -ENOMEM;
                o += n;
            }
    }
    return 0;
}

/* Emits every run of (group g, local layer l, view v) in canonical order. */
static int emit_view(struct bctx *b, uint32_t g, uint32_t l, uint32_t v)
{
    const struct layout *gen = b->in->gen;
    const struct layout_group *gg = &gen->groups[g];
    const struct layout_view *gv = &gg->views[v];
    uint32_t n_gen = b->in->gen_ids.n[g];
    const uint32_t *gids = b->in->gen_ids.ids[g];
    bool state = gg->kind == GROUP_STATE, paged = !state;
    struct wsrc ws[LAYOUT_MAX_TENSORS][LAYOUT_MAX_TP];
    uint32_t nw[LAYOUT_MAX_TENSORS], glo[LAYOUT_MAX_TENSORS], ghi[LAYOUT_MAX_TENSORS];
    bool rows[LAYOUT_MAX_TENSORS];
    if (n_gen == 0)
        return 0;
    uint64_t per_item = 0;
    for (uint32_t t = 0; t < gv->n_tensors; t++) {
        const struct layout_tensor *gt = &gv->tensors[t];
        int rc = tensor_writers(b, gg, n_gen, gg->layers[l], gt, ws[t], &nw[t]);
        if (rc)
            return rc;
        head_range(gen, gt, &glo[t], &ghi[t]);
        rows[t] = false;
        for (uint32_t i = 0; i < nw[t]; i++)
            rows[t] |= ws[t][i].ct->order != gt->order || ws[t][i].ct->outer != gt->outer;
        rows[t] |= gt->order == ORDER_HND && nw[t] > 0;
        /* runs emit_rows / the loop below make: tokens x writers, or for a head-major
         * generation tensor heads x the context blocks one generation block spans */
        uint64_t ctb = b->in->ctx[0].tokens_per_block, gtb = gen->tokens_per_block;
        uint64_t pieces = paged && ctb < gtb ? gtb / ctb : 1;
        per_item += rows[t] && gt->order == ORDER_HND ? (uint64_t)gt->heads * pieces
                                                      : (uint64_t)gt->outer * nw[t];
    }
    b->runs += per_item * n_gen;
    if (b->runs > PLAN_MAX_RUNS)
        return set_err(b->err, KVF_E_BAD_REQUEST, COMPAT_OK,
                       "groups.%.*s: the plan needs more than %llu copy runs",
                       LAYOUT_SHORT_MAX, gg->name, (unsigned long long)PLAN_MAX_RUNS);
    for (uint32_t k = 0; k < n_gen; k++) {
        struct layout_loc gat = layout_region_at(gen, gv, l, gids[k]);
        if (b->tix) {
            b->dst_k = k;
            b->dst_reg = b->tix->gen_at[g] + v * gg->n_layers + l;
        }
        for (uint32_t t = 0; t < gv->n_tensors; t++) {
            const struct layout_tensor *gt = &gv->tensors[t];
            if (rows[t] && !(nw[t] == 1 && ws[t][0].h1 - ws[t][0].h0 == gt->heads &&
                             ws[t][0].ct->heads == gt->heads && ws[t][0].ct->order == gt->order &&
                             ws[t][0].ct->outer == gt->outer)) {
                if (emit_rows(b, gt, ws[t], nw[t], glo[t], gat, n_gen, k, paged, state))
                    return -ENOMEM;
                continue;
            }
            /* NHD on both sides, same block size (the common case). One writer holding all
             * heads on both sides: the tensor is one contiguous run (MLA latent, matched TP,
             * or HND both sides); emit it once, not row by row. */
            uint32_t outer = gt->outer, nrows = 1;
            if (nw[t] == 1 && ws[t][0].h1 - ws[t][0].h0 == gt->heads &&
                ws[t][0].h1 - ws[t][0].h0 == ws[t][0].ct->heads) {
                nrows = outer;
                outer = 1;
            }
            for (uint32_t o = 0; o < outer; o++)
                for (uint32_t i = 0; i < nw[t]; i++) {
                    const struct wsrc *w = &ws[t][i];
                    const struct layout_tensor *ct = w->ct;
                    uint32_t sp = PLAN_POOL_UNKNOWN;
                    uint64_t so = 0;
                    uint32_t kc = paged ? w->n_cids - n_gen + k : 0;
                    tag(b, w, kc);
                    if (w->cids) {
                        struct layout_loc cat = layout_region_at(w->cl, w->cv, w->li, w->cids[kc]);
                        sp = cat.pool;
                        so = cat.off + ct->offset +
                             ((uint64_t)o * ct->heads + (w->h0 - w->clo)) * ct->inner;
                    }
                    uint64_t d = gat.off + gt->offset +
                                 ((uint64_t)o * gt->heads + (w->h0 - glo[t])) * gt->inner;
                    if (plan_opvec_add(&b->vecs[w->c], sp, so, gat.pool, d,
                                       (uint64_t)nrows * (w->h1 - w->h0) * gt->inner, state))
                        return -ENOMEM;
                }
        }
    }
    return 0;
}

/* Who writes, for input gin without context ids, checked as its caller needs: plan_build's set,
 * from the same walk (tensor_writers) without emitting a run. A writer of any (group with items,
 * layer, view, tensor) sends at least one row (inner > 0, every generation block has a row with
 * a prompt token), so it has bytes in the plan. The context's ids never change who writes (they
 * are only checked), nor do the generation's id values or the token count: only counts. */
static int writers_walk(const struct plan_input *gin, uint8_t *writers, struct plan_error *err)
{
    struct bctx b = {gin, err, NULL, 0, NULL, 0, 0};
    struct wsrc ws[LAYOUT_MAX_TP];
    memset(writers, 0, gin->n_ctx);
    const struct layout *gen = gin->gen;
    for (uint32_t g = 0; g < gen->n_groups; g++) {
        const struct layout_group *gg = &gen->groups[g];
        for (uint32_t l = 0; gin->gen_ids.n[g] && l < gg->n_layers; l++)
            for (uint32_t v = 0; v < gg->n_views; v++)
                for (uint32_t t = 0; t < gg->views[v].n_tensors; t++) {
                    uint32_t nw;
                    int rc = tensor_writers(&b, gg, gin->gen_ids.n[g], gg->layers[l],
                                            &gg->views[v].tensors[t], ws, &nw);
                    if (rc)
                        return rc;
                    for (uint32_t i = 0; i < nw; i++)
                        writers[ws[i].c] = 1;
                }
    }
    return 0;
}

int plan_writers(const struct plan_input *in, uint8_t *writers, struct plan_error *err)
{
    if (!in)
        return set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK, "plan input incomplete");
    struct plan_input gin = *in;
    gin.ctx_ids = NULL;
    int rc = plan_check_request(&gin, err);
    return rc ? rc : writers_walk(&gin, writers, err);
}

int plan_writers_of_shape(const struct plan_input *in, uint8_t *writers, struct plan_error *err)
{
    int rc = plan_check_shape(in, err);
    if (rc)
        return rc;
    struct plan_input gin = *in;
    gin.ctx_ids = NULL;
    gin.tokens = 0; /* the walk reads neither; a refused request's may be out of range */
    return writers_walk(&gin, writers, err);
}

int plan_build(const struct plan_input *in, struct plan *ret, struct plan_error *err)
{
    return plan_build_tagged(in, NULL, ret, NULL, err);
}

int plan_build_tagged(const struct plan_input *in, const struct plan_tix *tix, struct plan *ret,
                      struct plan_tag ***tags_ret, struct plan_error *err)
{
    return plan_build_marked(in, tix, ret, tags_ret, NULL, err);
}

int plan_build_marked(const struct plan_input *in, const struct plan_tix *tix, struct plan *ret,
                      struct plan_tag ***tags_ret, struct plan_marks *marks,
                      struct plan_error *err)
{
    char msg[sizeof(err->message)];
    int rc = plan_check_request(in, err);
    if (rc)
        return rc;
    struct bctx b = {in, err, calloc(in->n_ctx, sizeof(struct plan_opvec)), 0, tix, 0, 0};
    struct plan p = {.gen_rank = layout_rank(in->gen)};
    struct plan_tag **tags = NULL;
    if (!b.vecs)
        goto nomem;
    for (uint32_t c = 0; tix && c < in->n_ctx; c++)
        b.vecs[c].tagged = true;
    const struct layout *gen = in->gen;
    uint32_t at[LAYOUT_MAX_GROUPS] = {0}; /* per group, its next local layer: merged by id */
    for (;;) {
        uint32_t g = gen->n_groups;
        for (uint32_t k = 0; k < gen->n_groups; k++)
            if (at[k] < gen->groups[k].n_layers &&
                (g == gen->n_groups ||
                 gen->groups[k].layers[at[k]] < gen->groups[g].layers[at[g]]))
                g = k;
        if (g == gen->n_groups)
            break;
        uint32_t l = at[g]++;
        for (uint32_t v = 0; v < gen->groups[g].n_views; v++) {
            rc = emit_view(&b, g, l, v);
            if (rc == -ENOMEM)
                goto nomem;
            if (rc)
                goto fail;
        }
        for (uint32_t c = 0; marks && c < in->n_ctx; c++) /* below the next id: up to here */
            marks->below[c * (LAYOUT_MAX_LAYERS + 1) + gen->groups[g].layers[l] + 1] =
                b.vecs[c].bytes;
    }
    for (uint32_t c = 0; c < in->n_ctx; c++) {
        if (plan_opvec_finish(&b.vecs[c]))
            goto nomem;
        p.n_writers += b.vecs[c].bytes > 0;
    }
    p.writers = calloc(p.n_writers ? p.n_writers : 1, sizeof(*p.writers));
    if (!p.writers)
        goto nomem;
    if (tix && !(tags = calloc(p.n_writers ? p.n_writers : 1, sizeof(*tags))))
        goto nomem;
    for (uint32_t c = 0, w = 0; c < in->n_ctx; c++) {
        struct plan_opvec *v = &b.vecs[c];
        if (v->bytes == 0)
            continue;
        if (tags)
            tags[w] = v->tags;
        p.writers[w++] = (struct plan_writer){c, v->bytes, v->state_bytes, v->kv_bytes, v->n, v->ops};
        p.total_bytes += v->bytes;
        p.state_bytes += v->state_bytes;
        p.kv_bytes += v->kv_bytes;
        *v = (struct plan_opvec){0};
    }
    uint64_t gtb = gen->tokens_per_block;
    uint32_t last_rows = in->tokens && in->ctx[0].tokens_per_block != gtb
                             ? (uint32_t)(in->tokens % gtb) : 0;
    rc = plan_cover_check(&p, gen, &in->gen_ids, last_rows, msg, sizeof(msg));
    if (rc == -ENOMEM)
        goto nomem;
    if (rc) {
        set_err(err, KVF_E_INTERNAL, COMPAT_OK, "plan coverage: %s", msg);
        goto fail;
    }
    free(b.vecs);
    *ret = p;
    if (tags_ret)
        *tags_ret = tags;
    return 0;
nomem:
    set_err(err, KVF_E_INTERNAL, COMPAT_OK, "out of memory while planning");
    rc = -ENOMEM;
fail:
    for (uint32_t c = 0; b.vecs && c < in->n_ctx; c++)
        plan_opvec_done(&b.vecs[c]);
    free(b.vecs);
    for (uint32_t w = 0; tags && w < p.n_writers; w++)
        free(tags[w]);
    free(tags);
    plan_done(&p);
    return rc < 0 ? rc : -EINVAL;
}

void plan_done(struct plan *p)
{
    if (!p)
        return;
    for (uint32_t w = 0; w < p->n_writers && p->writers; w++)
        free(p->writers[w].ops);
    free(p->writers);
    *p = (struct plan){0};
}
