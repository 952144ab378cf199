/* preset_build.c: instantiates every rank's layout of an instance from a parsed preset spec
 * (preset.h, docs/DESIGN.md §9). Pure; writes only the caller's ranks[] array.
 *
 * Groups: the model's state group (kind state, one slot per request, n_items = slots) and its
 * attention group (kind paged, n_items = blocks), in that order, each when the model has one;
 * layers per the model's pattern (preset_models.h). Every layout carries the model's layer map.
 * Local heads of a sharded tensor of G heads over tp_eff shards: G / tp_eff, or 1 when tp_eff
 * is a multiple of G (replicated head groups); anything else is refused naming the tensor.
 * W is the conv width: the model's, or W-1 with conv=w-1. es: ssm element size.
 *  KDA (kimi), per layer: conv bf16 [3][H_local][hd*W*2], ssm [1][H_local][hd*hd*es].
 *  GDN (qwen3-next): conv_qk bf16 [2][Hk_local][dk*W*2], conv_v bf16 [1][Hv_local][dv*W*2],
 *    ssm [1][Hv_local][dk*dv*es] (dk = dv = hd).
 *  Mamba2 (nemotron-h): conv_x bf16 [1][H_local][hd*W*2], conv_bc bf16 [2][G_local][N*W*2],
 *    ssm [1][H_local][hd*N*es].
 *    state=joint: view "state" holding the conv tensors then ssm; state=split: views "conv"
 *    and "ssm". Under adp=1 state is one shard of full heads (SHARD_SHARDED, tp_eff 1); with
 *    state_shard=replicated (adp=0) it is full heads marked SHARD_REPLICATED. ssm fp32 unless
 *    dtype= says otherwise.
 *  MLA (kimi, deepseek-v3), per layer, replicated (heads = global_heads = 1):
 *    kv=joint: view "kv", region tpb*1152 holding "kv_c" [tpb][1][1024] at offset 0 then
 *    "k_pe" [tpb][1][128] at offset tpb*1024 (tensor-major inside the block);
 *    kv=split: views "kv_c" [tpb][1][1024] and "k_pe" [tpb][1][128].
 *  GQA (qwen3-next, nemotron-h, llama-3-70b), per layer: "k" and "v" bf16 [tpb][KV_local][d*2]
 *    (order=hnd: [KV_local][tpb][d*2]); kv=joint: one view "kv" (k then v), split: "k", "v".
 *  Every view has its own pool, sized exactly: n_layers * n_items * region_bytes, host pools in
 *  CPU mode (device -1), else CUDA pools on `device`. arr=layer: layer_stride = n_items * region,
 *  item_stride = region; arr=block: item_stride = n_layers * region, layer_stride = region.
 *  A group with no layers on a PP stage keeps its views with 0-byte pools. omit=GROUP leaves
 *  that group out of every rank (the layer map still names it).
 *  pools=layer / layer_joint (per_layer_pools): the group's views become per-layer views; one
 *  pool of n_items * region per (view, layer), or one per layer of n_items * sum(regions) with
 *  the views side by side (view v at n_items * the regions of views before it); item_stride =
 *  region. A group with no layers on the stage then has no pools.
 *  Every layout carries the model's layer map; under PP (pp > 1) also its stage_layers. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "layout_regions.h"
#include "preset.h"
#include "preset_models.h"

static void set_name(char *dst, size_t cap, const char *src)
{
    snprintf(dst, cap, "%s", src);
}

static struct layout_tensor tensor(const char *name, uint64_t offset, uint32_t outer,
                                   uint32_t heads, uint32_t inner, uint32_t global_heads,
                                   shard_mode_t shard, dtype_t dtype)
{
    struct layout_tensor t = {.offset = offset, .outer = outer, .heads = heads, .inner = inner,
                              .global_heads = global_heads, .shard = shard, .dtype = dtype};
    set_name(t.name, sizeof(t.name), name);
    return t;
}

/* Appends a view with its own pool, laid out per the arrangement. */
static int add_view(struct layout *l, struct layout_group *g, const char *name, bool block_major,
                    const struct layout_tensor *ts, uint32_t n_ts, const char *capkey, char *err,
                    size_t errlen)
{
    struct layout_view *v = &g->views[g->n_views++];
    set_name(v->name, sizeof(v->name), name);
    v->n_tensors = n_ts;
    uint64_t region = 0;
    for (uint32_t i = 0; i < n_ts; i++) {
        v->tensors[i] = ts[i];
        region += (uint64_t)ts[i].outer * ts[i].heads * ts[i].inner;
    }
    unsigned __int128 bytes = (unsigned __int128)region * g->n_items * g->n_layers;
    if (bytes > LAYOUT_U64_MAX_JSON || (unsigned __int128)region * g->n_items > LAYOUT_U64_MAX_JSON)
        return err_inval(err, errlen, "%s: group %s view %s would need more than 2^53 bytes",
                         capkey, g->name, name);
    v->region_bytes = region;
    v->pool = l->n_pools;
    v->base = 0;
    if (block_major) {
        v->layer_stride = region;
        v->item_stride = (uint64_t)g->n_layers * region;
    } else {
        v->layer_stride = (uint64_t)g->n_items * region;
        v->item_stride = region;
    }
    struct layout_pool *p = &l->pools[l->n_pools++];
    p->kind = l->device >= 0 ? POOL_CUDA : POOL_HOST;
    p->device = l->device >= 0 ? l->device : -1;
    p->bytes = (uint64_t)bytes;
    return 0;
}

/* Local heads of a sharded tensor of g heads; 0 when tp_eff fits neither way. */
static uint32_t local_heads(uint32_t g, uint32_t tp_eff)
{
    if (g % tp_eff == 0)
        return g / tp_eff;
    return tp_eff % g == 0 ? 1 : 0;
}

/* Appends a head-structured tensor of g global heads to ts[*n] at offset *at. */
static int add_tensor(struct layout_tensor *ts, uint32_t *n, uint64_t *at, const char *name,
                      uint32_t outer, uint32_t g, uint32_t inner, bool full, shard_mode_t sh,
                      dtype_t dt, uint32_t tp_eff, const char *model, char *err, size_t errlen)
{
    uint32_t h = full ? g : local_heads(g, tp_eff);
    if (!h)
        return err_inval(err, errlen, "tp: %u shards fit neither way the %u heads of %s tensor %s",
                         tp_eff, g, model, name);
    ts[*n] = tensor(name, *at, outer, h, inner, g, sh, dt);
    *at += (uint64_t)outer * h * inner;
    (*n)++;
    return 0;
}

static int build_state(const struct preset_spec *s, const struct preset_model *m, struct layout *l,
                       struct layout_group *g, char *err, size_t errlen)
{
    uint32_t hd = s->head_dim ? s->head_dim : m->head_dim;
    dtype_t sdt = s->ssm_dtype >= 0 ? (dtype_t)s->ssm_dtype : DTYPE_FP32;
    uint32_t es = dtype_size(sdt), w = m->conv_w - (s->conv_wm1 ? 1 : 0);
    uint32_t tpe = layout_tp_eff(l);
    bool full = !s->adp && s->state_replicated;
    shard_mode_t sh = full ? SHARD_REPLICATED : SHARD_SHARDED;
    struct layout_tensor ts[LAYOUT_MAX_TENSORS];
    uint32_t n = 0;
    uint64_t at = 0;
    int rc = 0;
#define T(nm, outer, gh, inner, dt) \
    if (!rc) \
    rc = add_tensor(ts, &n, &at, nm, outer, gh, inner, full, sh, dt, tpe, m->name, err, errlen)
    switch (m->state) {
    case PRESET_STATE_KDA:
        T("conv", 3, m->heads, hd * w * 2, DTYPE_BF16);
        T("ssm", 1, m->heads, hd * hd * es, sdt);
        break;
    case PRESET_STATE_GDN:
        T("conv_qk", 2, m->k_heads, hd * w * 2, DTYPE_BF16);
        T("conv_v", 1, m->heads, hd * w * 2, DTYPE_BF16);
        T("ssm", 1, m->heads, hd * hd * es, sdt);
        break;
    case PRESET_STATE_MAMBA2:
        T("conv_x", 1, m->heads, hd * w * 2, DTYPE_BF16);
        T("conv_bc", 2, m->k_heads, m->k_dim * w * 2, DTYPE_BF16);
        T("ssm", 1, m->heads, hd * m->k_dim * es, sdt);
        break;
    case PRESET_STATE_NONE:
        break;
    }
#undef T
    if (rc)
        return rc;
    if (!s->state_split)
        return add_view(l, g, "state", s->block_major, ts, n, "slots", err, errlen);
    /* split: the conv tensors in one view, ssm (the last) in another, each from offset 0 */
    ts[n - 1].offset = 0;
    rc = add_view(l, g, "conv", s->block_major, ts, n - 1, "slots", err, errlen);
    return rc ? rc : add_view(l, g, "ssm", s->block_major, &ts[n - 1], 1, "slots", err, errlen);
}

static int build_attn(const struct preset_spec *s, const struct preset_model *m, struct layout *l,
                      struct layout_group *g, char *err, size_t errlen)
{
    uint32_t tpb = s->tpb;
    struct layout_tensor a, b;
    const char *na = "kv_c", *nb = "k_pe";
    if (m->kv_heads == 0) {
        a = tensor("kv_c", 0, tpb, 1, PRESET_MLA_KV_C * 2, 1, SHARD_REPLICATED, DTYPE_BF16);
        b = tensor("k_pe", 0, tpb, 1, PRESET_MLA_K_PE * 2, 1, SHARD_REPLICATED, DTYPE_BF16);
    } else {
        uint32_t h = local_heads(m->kv_heads, layout_tp_eff(l));
        if (!h)
            return err_inval(err, errlen, "tp: %u shards fit neither way the %u KV heads of %s",
                             layout_tp_eff(l), m->kv_heads, m->name);
        a = tensor("k", 0, tpb, h, m->kv_dim * 2, m->kv_heads, SHARD_SHARDED, DTYPE_BF16);
        b = tensor("v", 0, tpb, h, m->kv_dim * 2, m->kv_heads, SHARD_SHARDED, DTYPE_BF16);
        na = "k";
        nb = "v";
    }
    a.order = b.order = s->hnd ? ORDER_HND : ORDER_NHD;
    if (!s->kv_split) {
        b.offset = (uint64_t)a.outer * a.heads * a.inner;
        struct layout_tensor ts[2] = {a, b};
        return add_view(l, g, "kv", s->block_major, ts, 2, "blocks", err, errlen);
    }
    int rc = add_view(l, g, na, s->block_major, &a, 1, "blocks", err, errlen);
    return rc ? rc : add_view(l, g, nb, s->block_major, &b, 1, "blocks", err, errlen);
}

/* Rebuilds group g's pools, the last ones added from `first`, as per-layer views. */
static int per_layer_pools(struct layout *l, struct layout_group *g, uint32_t first, bool joint,
                           char *err, size_t errlen)
{
    uint64_t sum = 0;
    for (uint32_t v = 0; v < g->n_views; v++)
        sum += g->views[v].region_bytes;
    uint32_t need = joint ? g->n_layers : g->n_layers * g->n_views;
    if (first + need > LAYOUT_MAX_POOLS)
        return err_inval(err, errlen, "pools: group %s needs %u pools, over %d", g->name,
                         first + need, LAYOUT_MAX_POOLS);
    if (l->n_addrs + g->n_layers * g->n_views > LAYOUT_MAX_LAYER_ADDRS)
        return err_inval(err, errlen, "pools: group %s needs more than %d per-layer entries",
                         g->name, LAYOUT_MAX_LAYER_ADDRS);
    l->n_pools = first;
    struct layout_pool proto = {l->device >= 0 ? POOL_CUDA : POOL_HOST, l->device >= 0 ? l->device : -1, 0};
    uint64_t before = 0;
    for (uint32_t v = 0; v < g->n_views; v++) {
        struct layout_view *vw = &g->views[v];
        vw->per_layer = true;
        vw->addr_at = l->n_addrs;
        vw->pool = 0;
        vw->base = vw->layer_stride = 0;
        vw->item_stride = vw->region_bytes;
        for (uint32_t k = 0; k < g->n_layers; k++) {
            struct layout_addr *a = &l->addrs[l->n_addrs++];
            a->pool = joint ? first + k : first + v * g->n_layers + k;
            a->base = joint ? before * g->n_items : 0;
            l->pools[a->pool] = proto;
            l->pools[a->pool].bytes = (uint64_t)g->n_items * (joint ? sum : vw->region_bytes);
        }
        before += vw->region_bytes;
    }
    l->n_pools = first + need;
    return 0;
}

/* Global layers [*lo, *hi) of PP stage `p`. */
static void stage_range(const struct preset_spec *s, const struct preset_model *m, uint32_t p,
                        uint32_t *lo, uint32_t *hi)
{
    uint32_t start = 0, n = 0;
    for (uint32_t i = 0; i <= p; i++) {
        start += n;
        if (s->n_pp_layers)
            n = s->pp_layers[i];
        else
            n = m->n_layers / s->pp + (i < m->n_layers % s->pp ? 1 : 0);
    }
    *lo = start;
    *hi = start + n;
}

static int build_rank(const struct preset_spec *s, const struct preset_model *m,
                      const char *instance, layout_role_t role, int32_t device, uint32_t pp_rank,
                      uint32_t tp_rank, struct layout *l, char *err, size_t errlen)
{
    memset(l, 0, sizeof(*l));
    if (strlen(instance) >= sizeof(l->instance))
        return err_inval(err, errlen, "instance: longer than %zu bytes", sizeof(l->instance) - 1);
    set_name(l->instance, sizeof(l->instance), instance);
    l->role = role;
    l->tp_size = s->tp;
    l->tp_rank = tp_rank;
    l->pp_size = s->pp;
    l->pp_rank = pp_rank;
    l->attention_dp = s->adp;
    l->device = device;
    if (s->fingerprint[0])
        set_name(l->fingerprint, sizeof(l->fingerprint), s->fingerprint);
    else
        snprintf(l->fingerprint, sizeof(l->fingerprint), "%s/v1", m->name);
    l->tokens_per_block = s->tpb;
    l->n_layers_total = m->n_layers;
    struct layout_group *sg = NULL, *ag = NULL;
    const char *names[2] = {m->state_group, m->attn_group};
    for (int i = 0; i < 2; i++) {
        if (!names[i])
            continue;
        uint32_t mi = l->n_map_groups++;
        set_name(l->map_groups[mi], sizeof(l->map_groups[mi]), names[i]);
        for (uint32_t id = 0; id < m->n_layers; id++)
            if (preset_layer_kind(m, id) == (i == 0 ? 'S' : 'A'))
                l->layer_map[id] = (uint8_t)(mi + 1);
        if (strcmp(names[i], s->omit) == 0)
            continue;
        struct layout_group *g = &l->groups[l->n_groups++];
        set_name(g->name, sizeof(g->name), names[i]);
        g->kind = i == 0 ? GROUP_STATE : GROUP_PAGED;
        g->n_items = i == 0 ? s->n_slots : s->n_blocks;
        *(i == 0 ? &sg : &ag) = g;
    }
    if (l->n_groups == 0)
        return err_inval(err, errlen, "omit: %s would leave no group", s->omit);
    uint32_t lo, hi;
    stage_range(s, m, pp_rank, &lo, &hi);
    if (s->pp > 1) {
        l->stage_first = lo;
        l->stage_count = hi - lo;
    }
    for (uint32_t id = lo; id < hi; id++) {
        char k = preset_layer_kind(m, id);
        struct layout_group *g = k == 'S' ? sg : k == 'A' ? ag : NULL;
        if (g)
            g->layers[g->n_layers++] = (uint16_t)id;
    }
    bool joint = s->pools == PRESET_POOLS_LAYER_JOINT;
    int rc = sg ? build_state(s, m, l, sg, err, errlen) : 0;
    if (!rc && sg && s->pools != PRESET_POOLS_VIEW)
        rc = per_layer_pools(l, sg, 0, joint, err, errlen);
    uint32_t first = l->n_pools;
    if (!rc && ag)
        rc = build_attn(s, m, l, ag, err, errlen);
    if (!rc && ag && s->pools != PRESET_POOLS_VIEW)
        rc = per_layer_pools(l, ag, first, joint, err, errlen);
    if (!rc && l->n_pools == 0)
        return err_inval(err, errlen, "pools: stage %u holds no layers", pp_rank);
    return rc;
}

int preset_build(const struct preset_spec *s, const char *instance, layout_role_t role,
                 int32_t device, struct layout *ranks, char *err, size_t errlen)
{
    if (!s || !instance || !ranks)
        return err_inval(err, errlen, "preset_build: NULL argument");
    const struct preset_model *m = preset_model_find(s->model);
    if (!m)
        return err_inval(err, errlen, "model: \"%s\" is not a known preset", s->model);
    if (s->tp == 0 || s->pp == 0 || (uint64_t)s->tp * s->pp > LAYOUT_MAX_TP)
        return err_inval(err, errlen, "tp: tp %u x pp %u is outside 1..%d ranks", s->tp, s->pp,
                    LAYOUT_MAX_TP);
    if (s->n_pp_layers && s->n_pp_layers != s->pp)
        return err_inval(err, errlen, "pp_layers: %u stages but pp=%u", s->n_pp_layers, s->pp);
    if (!s->n_pp_layers && s->pp > m->n_layers)
        return err_inval(err, errlen, "pp: %u stages for %u layers", s->pp, m->n_layers);
    if (s->n_pp_layers) {
        uint64_t sum = 0;
        for (uint32_t i = 0; i < s->n_pp_layers; i++)
            sum += s->pp_layers[i];
        if (sum != m->n_layers)
            return err_inval(err, errlen, "pp_layers: sum %llu != %u layers",
                             (unsigned long long)sum, m->n_layers);
    }
    if (s->ssm_dtype >= 0 && dtype_size((dtype_t)s->ssm_dtype) == 0)
        return err_inval(err, errlen, "dtype: %d is not a dtype", s->ssm_dtype);
    if (device < -1)
        return err_inval(err, errlen, "device: %d is below -1", device);
    if (s->omit[0] && !((m->state_group && !strcmp(s->omit, m->state_group)) ||
                        (m->attn_group && !strcmp(s->omit, m->attn_group))))
        return err_inval(err, errlen, "omit: %s has no group \"%s\"", m->name, s->omit);
    for (uint32_t p = 0; p < s->pp; p++)
        for (uint32_t t = 0; t < s->tp; t++) {
            struct layout *l = &ranks[p * s->tp + t];
            int rc = build_rank(s, m, instance, role, device, p, t, l, err, errlen);
            if (!rc)
                rc = layout_validate(l, err, errlen);
            if (rc)
                return rc;
        }
    return 0;
}
