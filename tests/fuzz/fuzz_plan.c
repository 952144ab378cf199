/* fuzz_plan.c: libFuzzer target for the planner. The input picks two preset instances (model,
 * tp, pp, adp, arrangement, view splits), mutates a few layout fields, and supplies block lists
 * (in and out of range, duplicates) and the DP rank; models with replicated KV heads, NHD/HND,
 * block sizes 16/32 per side, an omitted group. compat_check must never crash on any
 * layout; plan_build runs on layouts that pass layout_validate (the decoder's gate) and any plan
 * it returns must pass copy_check against both sides' pools and its own coverage check. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "compat.h"
#include "copy.h"
#include "plan.h"
#include "plan_internal.h"
#include "preset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct rd {
    const uint8_t *p;
    size_t n;
};

static uint32_t take(struct rd *r)
{
    uint32_t v = 0;
    for (int i = 0; i < 4; i++)
        v = v << 8 | (r->n ? (r->n--, *r->p++) : 0);
    return v;
}

static struct layout ctx[16], gen[16];
static uint32_t cidstore[16][LAYOUT_MAX_GROUPS][16], gidstore[LAYOUT_MAX_GROUPS][16];

static uint32_t build(struct rd *r, const char *model, struct layout *ranks, layout_role_t role)
{
    static const uint32_t tps[] = {1, 2, 4, 8};
    uint32_t b = take(r);
    char spec[200];
    uint32_t tp = tps[b % 4], pp = 1 + (b >> 2) % 2;
    snprintf(spec, sizeof(spec),
             "%s:tp=%u,pp=%u,adp=%u,arr=%s,state=%s,kv=%s,blocks=8,slots=2%s,order=%s,tpb=%u%s",
             model, tp, pp, (b >> 3) & 1, (b >> 4) & 1 ? "block" : "layer",
             (b >> 5) & 1 ? "split" : "joint", (b >> 6) & 1 ? "split" : "joint",
             (b >> 7) & 1 ? ",state_shard=replicated" : "", (b >> 8) & 1 ? "hnd" : "nhd",
             (b >> 9) & 1 ? 32 : 16, (b >> 10) % 8 == 0 ? ",omit=attn" : "");
    struct preset_spec s;
    char err[256];
    if (preset_parse(spec, &s, err, sizeof(err)) ||
        preset_build(&s, "f", role, -1, ranks, err, sizeof(err)))
        return 0;
    return tp * pp;
}

/* Overwrites one field of one layout with a fuzzer-chosen value. */
static void mutate(struct rd *r, struct layout *ls, uint32_t n)
{
    uint32_t a = take(r), v = take(r);
    struct layout *l = &ls[a % n];
    struct layout_group *g = &l->groups[(a >> 4) % (l->n_groups ? l->n_groups : 1)];
    struct layout_view *vw = &g->views[(a >> 6) % LAYOUT_MAX_VIEWS];
    struct layout_tensor *t = &vw->tensors[(a >> 8) % LAYOUT_MAX_TENSORS];
    switch ((a >> 12) % 16) {
    case 0: t->outer = v % 130; break;
    case 1: t->heads = v % 130; break;
    case 2: t->inner = v % 70000; break;
    case 3: t->global_heads = v % 130; break;
    case 4: t->shard = (shard_mode_t)(v % 2); break;
    case 5: t->dtype = (dtype_t)(v % 5); break;
    case 6: t->offset = v; break;
    case 7: vw->item_stride = v; break;
    case 8: vw->pool = v % 20; break;
    case 9: g->n_items = v % 20; break;
    case 10: g->layers[v % (g->n_layers ? g->n_layers : 1)] = (uint16_t)(v % 300); break;
    case 11: l->tp_rank = v % 5; break;
    case 12: g->kind = (group_kind_t)(v % 2); break;
    case 13: t->order = (tensor_order_t)(v % 3); break;
    case 14: l->layer_map[v % LAYOUT_MAX_LAYERS] = (uint8_t)((v >> 8) % 4); break;
    default: l->tokens_per_block = v % 130; break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rd r = {data, size};
    static const char *models[] = {"tiny", "kimi-linear-48b", "tiny", "qwen3-next-80b",
                                   "llama-3-70b", "nemotron-h"};
    const char *model = models[take(&r) % 6];
    uint32_t nc = build(&r, model, ctx, ROLE_CONTEXT), ng = build(&r, model, gen, ROLE_GENERATION);
    if (!nc || !ng)
        return 0;
    uint32_t nmut = take(&r) % 4;
    for (uint32_t i = 0; i < nmut; i++) {
        if (take(&r) & 1)
            mutate(&r, ctx, nc);
        else
            mutate(&r, gen, ng);
    }
    char msg[512];
    compat_reason_t reason;
    uint32_t gr = take(&r) % ng;
    (void)compat_check(&gen[gr], ctx, nc, &reason, msg, sizeof(msg));
    for (uint32_t i = 0; i < nc; i++)
        if (layout_validate(&ctx[i], msg, sizeof(msg)))
            return 0;
    if (layout_validate(&gen[gr], msg, sizeof(msg)))
        return 0;
    uint32_t n_ctx = take(&r) % 9, n_gen = take(&r) % 9;
    struct plan_ids cids[16] = {0};
    struct plan_input in = {.gen = &gen[gr], .ctx = ctx, .n_ctx = nc, .ctx_ids = cids,
                            .ctx_dp_rank = (int32_t)(take(&r) % 4) - 1};
    for (uint32_t c = 0; c < nc; c++)
        for (uint32_t g = 0; g < ctx[c].n_groups; g++) {
            uint32_t n = ctx[c].groups[g].kind == GROUP_STATE ? 1 : n_ctx;
            for (uint32_t k = 0; k < n; k++)
                cidstore[c][g][k] = take(&r) % (ctx[c].groups[g].n_items + 1);
            cids[c].n[g] = n;
            cids[c].ids[g] = cidstore[c][g];
        }
    for (uint32_t g = 0; g < gen[gr].n_groups; g++) {
        uint32_t n = gen[gr].groups[g].kind == GROUP_STATE ? 1 : n_gen;
        for (uint32_t k = 0; k < n; k++)
            gidstore[g][k] = take(&r) % (gen[gr].groups[g].n_items + 1);
        in.gen_ids.n[g] = n;
        in.gen_ids.ids[g] = gidstore[g];
    }
    struct plan p;
    struct plan_error pe;
    if (plan_build(&in, &p, &pe))
        return 0;
    static uint8_t dummy;
    struct copy_mem gm = {gen[gr].n_pools, {0}, {0}};
    for (uint32_t i = 0; i < gen[gr].n_pools; i++)
        gm.base[i] = &dummy, gm.size[i] = gen[gr].pools[i].bytes;
    for (uint32_t w = 0; w < p.n_writers; w++) {
        const struct plan_writer *wr = &p.writers[w];
        const struct layout *cl = &ctx[wr->ctx_rank];
        struct copy_mem cm = {cl->n_pools, {0}, {0}};
        for (uint32_t i = 0; i < cl->n_pools; i++)
            cm.base[i] = &dummy, cm.size[i] = cl->pools[i].bytes;
        if (copy_check(wr->ops, wr->n_ops, &cm, 's') || copy_check(wr->ops, wr->n_ops, &gm, 'd'))
            __builtin_trap();
    }
    if (plan_cover_check(&p, &gen[gr], &in.gen_ids, 0, msg, sizeof(msg)))
        __builtin_trap();
    plan_done(&p);
    return 0;
}
