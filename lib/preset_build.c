/* preset_build.c: instantiates every rank's layout of an instance from a parsed preset spec
 * (preset.h, docs/DESIGN.md §9). Pure; writes only the caller's ranks[] array.
 *
 * Geometry per rank (H heads of head_dim hd, H_local = H / tp_eff when state is sharded):
 *  group "kda" (state, one slot per request, n_items = slots), per KDA layer:
 *    conv bf16 [3*H*hd, W]: shard shape [3][H_local][hd*W*2]
 *    ssm  fp32 [H, hd, hd]: shard shape [1][H_local][hd*hd*4] (dtype= overrides fp32)
 *    state=joint: view "state" holding conv (offset 0) then ssm; state=split: views "conv" and
 *    "ssm". Under adp=1 state is one shard of full heads (SHARD_SHARDED, tp_eff 1); with
 *    state_shard=replicated (adp=0) it is full heads marked SHARD_REPLICATED.
 *  group "mla" (paged, n_items = blocks), per MLA layer, replicated (heads = global_heads = 1):
 *    kv=joint: view "kv", region tpb*1152 holding "kv_c" [tpb][1][1024] at offset 0 then
 *    "k_pe" [tpb][1][128] at offset tpb*1024 (tensor-major inside the block);
 *    kv=split: views "kv_c" [tpb][1][1024] and "k_pe" [tpb][1][128].
 *  Every view has its own pool, sized exactly: n_layers * n_items * region_bytes, host pools in
 *  CPU mode (device -1), else CUDA pools on `device`. arr=layer: layer_stride = n_items * region,
 *  item_stride = region; arr=block: item_stride = n_layers * region, layer_stride = region.
 *  A group with no layers on a PP stage keeps its views with 0-byte pools.
 *  pools=layer / layer_joint (per_layer_pools): the group's views become per-layer views; one
 *  pool of n_items * region per (view, layer), or one per layer of n_items * sum(regions) with
 *  the views side by side (view v at n_items * the regions of views before it); item_stride =
 *  region. A group with no layers on the stage then has no pools. */
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

static int build_kda(const struct preset_spec *s, const struct preset_model *m, struct layout *l,
                     struct layout_group *g, char *err, size_t errlen)
{
    uint32_t hd = s->head_dim ? s->head_dim : m->head_dim;
    dtype_t sdt = s->ssm_dtype >= 0 ? (dtype_t)s->ssm_dtype : DTYPE_FP32;
    uint32_t tp_eff = layout_tp_eff(l);
    bool replicated = !s->adp && s->state_replicated;
    uint32_t h_local = replicated ? m->heads : m->heads / tp_eff;
    if (!replicated && m->heads % tp_eff)
        return err_inval(err, errlen, "tp: %u does not divide the %u KDA heads of %s", tp_eff,
                         m->heads, m->name);
    shard_mode_t sh = replicated ? SHARD_REPLICATED : SHARD_SHARDED;
    struct layout_tensor conv = tensor("conv", 0, 3, h_local, hd * m->conv_w * 2, m->heads, sh,
                                       DTYPE_BF16);
    uint64_t conv_bytes = (uint64_t)3 * h_local * conv.inner;
    struct layout_tensor ssm = tensor("ssm", 0, 1, h_local, hd * hd * dtype_size(sdt), m->heads,
                                      sh, sdt);
    if (!s->state_split) {
        ssm.offset = conv_bytes;
        struct layout_tensor ts[2] = {conv, ssm};
        return add_view(l, g, "state", s->block_major, ts, 2, "slots", err, errlen);
    }
    int rc = add_view(l, g, "conv", s->block_major, &conv, 1, "slots", err, errlen);
    return rc ? rc : add_view(l, g, "ssm", s->block_major, &ssm, 1, "slots", err, errlen);
}

static int build_mla(const struct preset_spec *s, struct layout *l, struct layout_group *g,
                     char *err, size_t errlen)
{
    uint32_t tpb = s->tpb;
    struct layout_tensor kv_c = tensor("kv_c", 0, tpb, 1, PRESET_MLA_KV_C * 2, 1,
                                       SHARD_REPLICATED, DTYPE_BF16);
    struct layout_tensor k_pe = tensor("k_pe", 0, tpb, 1, PRESET_MLA_K_PE * 2, 1,
                                       SHARD_REPLICATED, DTYPE_BF16);
    if (!s->kv_split) {
        k_pe.offset = (uint64_t)tpb * PRESET_MLA_KV_C * 2;
        struct layout_tensor ts[2] = {kv_c, k_pe};
        return add_view(l, g, "kv", s->block_major, ts, 2, "blocks", err, errlen);
    }
    int rc = add_view(l, g, "kv_c", s->block_major, &kv_c, 1, "blocks", err, errlen);
    return rc ? rc : add_view(l, g, "k_pe", s->block_major, &k_pe, 1, "blocks", err, errlen);
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
    l->n_groups = 2;
    struct layout_group *kda = &l->groups[0], *mla = &l->groups[1];
    set_name(kda->name, sizeof(kda->name), "kda");
    kda->kind = GROUP_STATE;
    kda->n_items = s->n_slots;
    set_name(mla->name, sizeof(mla->name), "mla");
    mla->kind = GROUP_PAGED;
    mla->n_items = s->n_blocks;
    uint32_t lo, hi;
    stage_range(s, m, pp_rank, &lo, &hi);
    for (uint32_t id = lo; id < hi; id++) {
        struct layout_group *g = preset_layer_is_mla(m, id) ? mla : kda;
        g->layers[g->n_layers++] = (uint16_t)id;
    }
    bool joint = s->pools == PRESET_POOLS_LAYER_JOINT;
    int rc = build_kda(s, m, l, kda, err, errlen);
    if (!rc && s->pools != PRESET_POOLS_VIEW)
        rc = per_layer_pools(l, kda, 0, joint, err, errlen);
    uint32_t first = l->n_pools;
    if (!rc)
        rc = build_mla(s, l, mla, err, errlen);
    if (!rc && s->pools != PRESET_POOLS_VIEW)
        rc = per_layer_pools(l, mla, first, joint, err, errlen);
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
