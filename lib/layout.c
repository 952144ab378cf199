/* layout.c: the string names of layout enums and layout_validate, the full consistency check of
 * a rank's layout (layout.h). Pure. The geometric part (regions inside pools, regions never
 * overlapping; it allocates its list of spans) lives in layout_regions.c.
 *
 * Rules beyond the header's summary, chosen here:
 *  - names (instance, fingerprint, groups, views, tensors) are printable ASCII (0x20..0x7e),
 *    non-empty and NUL-terminated inside their array; names are unique among siblings and tensor
 *    names are unique within a group (joint and split views plan against each other by tensor);
 *  - every 64-bit quantity (pool bytes, base, strides, region, offsets) is at most 2^53, so every
 *    valid layout has an exact JSON encoding, and region arithmetic cannot overflow 128 bits;
 *  - a tensor list starts at offset 0 and each tensor starts where the previous one ends; the last
 *    one ends at region_bytes;
 *  - a pool of 0 bytes is allowed only when every view placed in it holds no layers (a group with
 *    no layers on this PP stage); such a view's strides are not checked;
 *  - a per-layer view has pool, base and layer_stride 0 and n_layers entries of addrs; entries
 *    may be shared by views (the JSON decoder gives each view its own). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "layout.h"
#include "layout_regions.h"

static const struct {
    const char *name;
    uint32_t size;
} dtypes[] = {
    [DTYPE_BF16] = {"bf16", 2}, [DTYPE_FP16] = {"fp16", 2}, [DTYPE_FP32] = {"fp32", 4},
    [DTYPE_FP8] = {"fp8", 1},   [DTYPE_U8] = {"u8", 1},
};
#define N_DTYPES (sizeof(dtypes) / sizeof(dtypes[0]))

uint32_t dtype_size(dtype_t t)
{
    return (unsigned)t < N_DTYPES ? dtypes[t].size : 0;
}

const char *dtype_to_string(dtype_t t)
{
    return (unsigned)t < N_DTYPES ? dtypes[t].name : "unknown";
}

int dtype_from_string(const char *s, dtype_t *ret)
{
    if (!s)
        return -EINVAL;
    for (unsigned i = 0; i < N_DTYPES; i++)
        if (strcmp(s, dtypes[i].name) == 0) {
            *ret = (dtype_t)i;
            return 0;
        }
    return -EINVAL;
}

const char *group_kind_to_string(group_kind_t k)
{
    switch (k) {
    case GROUP_PAGED: return "paged";
    case GROUP_STATE: return "state";
    }
    return "unknown";
}

const char *shard_mode_to_string(shard_mode_t s)
{
    switch (s) {
    case SHARD_SHARDED: return "sharded";
    case SHARD_REPLICATED: return "replicated";
    }
    return "unknown";
}

const char *tensor_order_to_string(tensor_order_t o)
{
    switch (o) {
    case ORDER_NHD: return "nhd";
    case ORDER_HND: return "hnd";
    }
    return "unknown";
}

const char *layout_role_to_string(layout_role_t r)
{
    switch (r) {
    case ROLE_CONTEXT: return "context";
    case ROLE_GENERATION: return "generation";
    }
    return "unknown";
}

/* ---- validation ---- */

/* 0 if `s` is a valid name held in an array of `cap` bytes, else a reason. */
static const char *name_problem(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n == cap)
        return "is not NUL-terminated";
    if (n == 0)
        return "is empty";
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e)
            return "has a byte outside printable ASCII";
    return NULL;
}

#define CHECK_NAME(s, path, ...)                                                                   \
    do {                                                                                           \
        const char *why_ = name_problem((s), sizeof(s));                                           \
        if (why_) {                                                                                \
            char p_[96];                                                                           \
            snprintf(p_, sizeof(p_), path, ##__VA_ARGS__);                                         \
            return err_inval(err, errlen, "%s: %s", p_, why_);                                     \
        }                                                                                          \
    } while (0)

static int validate_tensors(const struct layout *l, const struct layout_group *g, uint32_t gi,
                            uint32_t vi, char *err, size_t errlen)
{
    const struct layout_view *v = &g->views[vi];
    uint32_t tp_eff = layout_tp_eff(l);
    uint64_t at = 0;
    if (v->n_tensors == 0 || v->n_tensors > LAYOUT_MAX_TENSORS)
        return err_inval(err, errlen, "groups[%u].views[%u].n_tensors: %u is outside 1..%d", gi, vi,
                    v->n_tensors, LAYOUT_MAX_TENSORS);
    for (uint32_t ti = 0; ti < v->n_tensors; ti++) {
        const struct layout_tensor *t = &v->tensors[ti];
        CHECK_NAME(t->name, "groups[%u].views[%u].tensors[%u].name", gi, vi, ti);
#define TPATH "groups[%u].views[%u].tensors[%u]."
        if ((unsigned)t->dtype >= N_DTYPES)
            return err_inval(err, errlen, TPATH "dtype: %d is not a dtype", gi, vi, ti,
                             (int)t->dtype);
        if (t->shard != SHARD_SHARDED && t->shard != SHARD_REPLICATED)
            return err_inval(err, errlen, TPATH "shard: %d is not a shard mode", gi, vi, ti,
                             (int)t->shard);
        if (t->outer == 0)
            return err_inval(err, errlen, TPATH "outer: 0 is not allowed", gi, vi, ti);
        if (t->heads == 0)
            return err_inval(err, errlen, TPATH "heads: 0 is not allowed", gi, vi, ti);
        if (t->inner == 0)
            return err_inval(err, errlen, TPATH "inner: 0 is not allowed", gi, vi, ti);
        if (t->global_heads == 0)
            return err_inval(err, errlen, TPATH "global_heads: 0 is not allowed", gi, vi, ti);
        if (t->inner % dtype_size(t->dtype))
            return err_inval(err, errlen, TPATH "inner: %u is not a multiple of the %s size %u", gi,
                             vi, ti, t->inner, dtype_to_string(t->dtype), dtype_size(t->dtype));
        if (t->order != ORDER_NHD && t->order != ORDER_HND)
            return err_inval(err, errlen, TPATH "order: %d is not a row order", gi, vi, ti,
                             (int)t->order);
        if (t->shard == SHARD_SHARDED && tp_eff > t->global_heads) {
            /* replicated head groups: each head held by tp_eff / global_heads ranks */
            if (tp_eff % t->global_heads || t->heads != 1)
                return err_inval(err, errlen,
                            TPATH "heads: %u local heads of global_heads %u over tp_eff %u (more "
                            "shards than heads needs 1 local head and global_heads dividing "
                            "tp_eff)", gi, vi, ti, t->heads, t->global_heads, tp_eff);
        } else if (t->shard == SHARD_SHARDED && tp_eff > 1) {
            if ((uint64_t)t->heads * tp_eff != t->global_heads)
                return err_inval(err, errlen,
                            TPATH "heads: %u local heads x tp_eff %u != global_heads %u", gi, vi,
                            ti, t->heads, tp_eff, t->global_heads);
        } else if (t->heads != t->global_heads) {
            return err_inval(err, errlen, TPATH "heads: %u != global_heads %u for a %s tensor", gi,
                             vi, ti, t->heads, t->global_heads,
                             t->shard == SHARD_SHARDED ? "single-shard" : "replicated");
        }
        if (t->offset != at)
            return err_inval(err, errlen,
                        TPATH "offset: %llu, expected %llu (tensors must tile the region in order)",
                        gi, vi, ti, (unsigned long long)t->offset, (unsigned long long)at);
        unsigned __int128 end = (unsigned __int128)t->outer * t->heads * t->inner + at;
        if (end > LAYOUT_U64_MAX_JSON)
            return err_inval(err, errlen, TPATH "inner: the tensor ends past 2^53 bytes", gi, vi,
                             ti);
        at = (uint64_t)end;
#undef TPATH
    }
    if (at != v->region_bytes)
        return err_inval(err, errlen,
                    "groups[%u].views[%u].region_bytes: %llu but its tensors tile %llu bytes", gi,
                    vi, (unsigned long long)v->region_bytes, (unsigned long long)at);
    return 0;
}

/* Names unique among the group's views, tensor names unique across the group's views. */
static int validate_group_names(const struct layout_group *g, uint32_t gi, char *err, size_t errlen)
{
    for (uint32_t a = 0; a < g->n_views; a++) {
        for (uint32_t b = 0; b < a; b++)
            if (strcmp(g->views[a].name, g->views[b].name) == 0)
                return err_inval(err, errlen, "groups[%u].views[%u].name: \"%s\" repeats views[%u]",
                                 gi, a, g->views[a].name, b);
        for (uint32_t ta = 0; ta < g->views[a].n_tensors; ta++)
            for (uint32_t b = 0; b <= a; b++)
                for (uint32_t tb = 0; tb < (b == a ? ta : g->views[b].n_tensors); tb++)
                    if (strcmp(g->views[a].tensors[ta].name, g->views[b].tensors[tb].name) == 0)
                        return err_inval(err, errlen,
                                    "groups[%u].views[%u].tensors[%u].name: \"%s\" repeats "
                                    "views[%u].tensors[%u]",
                                    gi, a, ta, g->views[a].tensors[ta].name, b, tb);
    }
    return 0;
}

/* The alias name, and a per-layer view's table entries: its n_layers entries lie inside
 * addrs[0, n_addrs), each names a pool and a base <= 2^53; pool, base and layer_stride are 0. */
static int validate_view_addrs(const struct layout *l, const struct layout_group *g, uint32_t gi,
                               uint32_t vi, char *err, size_t errlen)
{
    const struct layout_view *v = &g->views[vi];
    if (v->alias[0])
        CHECK_NAME(v->alias, "groups[%u].views[%u].alias", gi, vi);
    else if (strnlen(v->alias, sizeof(v->alias)) == sizeof(v->alias))
        return err_inval(err, errlen, "groups[%u].views[%u].alias: is not NUL-terminated", gi, vi);
    if (!v->per_layer)
        return 0;
    if (v->pool || v->base || v->layer_stride)
        return err_inval(err, errlen,
                         "groups[%u].views[%u].per_layer: a per-layer view has pool, base and "
                         "layer_stride 0 (got %u, %llu, %llu)",
                         gi, vi, v->pool, (unsigned long long)v->base,
                         (unsigned long long)v->layer_stride);
    if ((uint64_t)v->addr_at + g->n_layers > l->n_addrs)
        return err_inval(err, errlen,
                         "groups[%u].views[%u].per_layer: entries %u..%llu are past n_addrs %u", gi,
                         vi, v->addr_at, (unsigned long long)v->addr_at + g->n_layers, l->n_addrs);
    for (uint32_t k = 0; k < g->n_layers; k++) {
        const struct layout_addr *a = &l->addrs[v->addr_at + k];
        if (a->pool >= l->n_pools)
            return err_inval(err, errlen,
                             "groups[%u].views[%u].per_layer[%u].pool: %u is not below n_pools %u",
                             gi, vi, k, a->pool, l->n_pools);
        if (a->base > LAYOUT_U64_MAX_JSON)
            return err_inval(err, errlen,
                             "groups[%u].views[%u].per_layer[%u].base: %llu is over 2^53", gi, vi,
                             k, (unsigned long long)a->base);
    }
    return 0;
}

static int validate_group(const struct layout *l, uint32_t gi, uint8_t *layer_owner, char *err,
                          size_t errlen)
{
    const struct layout_group *g = &l->groups[gi];
    CHECK_NAME(g->name, "groups[%u].name", gi);
    for (uint32_t o = 0; o < gi; o++)
        if (strcmp(l->groups[o].name, g->name) == 0)
            return err_inval(err, errlen, "groups[%u].name: \"%s\" repeats groups[%u]", gi, g->name,
                             o);
    if (g->kind != GROUP_PAGED && g->kind != GROUP_STATE)
        return err_inval(err, errlen, "groups[%u].kind: %d is not a group kind", gi, (int)g->kind);
    if (g->n_layers > LAYOUT_MAX_LAYERS)
        return err_inval(err, errlen, "groups[%u].n_layers: %u is over %d", gi, g->n_layers,
                    LAYOUT_MAX_LAYERS);
    if (g->n_items == 0)
        return err_inval(err, errlen, "groups[%u].n_items: 0 is not allowed", gi);
    for (uint32_t i = 0; i < g->n_layers; i++) {
        uint16_t id = g->layers[i];
        if (id >= l->n_layers_total)
            return err_inval(err, errlen,
                             "groups[%u].layers[%u]: %u is not below n_layers_total %u", gi, i, id,
                             l->n_layers_total);
        if (i > 0 && id <= g->layers[i - 1])
            return err_inval(err, errlen,
                             "groups[%u].layers[%u]: %u after %u (layers must ascend, unique)", gi,
                             i, id, g->layers[i - 1]);
        if (layer_owner[id])
            return err_inval(err, errlen, "groups[%u].layers[%u]: layer %u is also in groups[%u]",
                             gi, i, id, layer_owner[id] - 1);
        layer_owner[id] = (uint8_t)(gi + 1);
    }
    if (g->n_views == 0 || g->n_views > LAYOUT_MAX_VIEWS)
        return err_inval(err, errlen, "groups[%u].n_views: %u is outside 1..%d", gi, g->n_views,
                    LAYOUT_MAX_VIEWS);
    for (uint32_t vi = 0; vi < g->n_views; vi++) {
        const struct layout_view *v = &g->views[vi];
        CHECK_NAME(v->name, "groups[%u].views[%u].name", gi, vi);
        int rc = validate_view_addrs(l, g, gi, vi, err, errlen);
        if (rc)
            return rc;
        if (v->pool >= l->n_pools)
            return err_inval(err, errlen, "groups[%u].views[%u].pool: %u is not below n_pools %u",
                             gi, vi, v->pool, l->n_pools);
        const uint64_t *f[] = {&v->base, &v->layer_stride, &v->item_stride, &v->region_bytes};
        const char *fn[] = {"base", "layer_stride", "item_stride", "region_bytes"};
        for (int k = 0; k < 4; k++)
            if (*f[k] > LAYOUT_U64_MAX_JSON)
                return err_inval(err, errlen, "groups[%u].views[%u].%s: %llu is over 2^53", gi, vi,
                            fn[k], (unsigned long long)*f[k]);
        if ((rc = validate_tensors(l, g, gi, vi, err, errlen)))
            return rc;
    }
    return validate_group_names(g, gi, err, errlen);
}

static int validate_pools(const struct layout *l, char *err, size_t errlen)
{
    if (l->n_pools == 0 || l->n_pools > LAYOUT_MAX_POOLS)
        return err_inval(err, errlen, "n_pools: %u is outside 1..%d", l->n_pools, LAYOUT_MAX_POOLS);
    for (uint32_t p = 0; p < l->n_pools; p++) {
        const struct layout_pool *pl = &l->pools[p];
        if (pl->bytes > LAYOUT_U64_MAX_JSON)
            return err_inval(err, errlen, "pools[%u].bytes: %llu is over 2^53", p,
                        (unsigned long long)pl->bytes);
        if (pl->kind == POOL_HOST) {
            if (pl->device != -1)
                return err_inval(err, errlen, "pools[%u].device: %d for a host pool (must be -1)",
                                 p, pl->device);
        } else if (pl->kind == POOL_CUDA) {
            if (l->device < 0)
                return err_inval(err, errlen,
                                 "pools[%u].kind: cuda pool on a CPU-mode rank (device -1)", p);
            if (pl->device != l->device)
                return err_inval(err, errlen, "pools[%u].device: %d but the rank's device is %d", p,
                            pl->device, l->device);
        } else {
            return err_inval(err, errlen, "pools[%u].kind: %d is not a pool kind", p,
                             (int)pl->kind);
        }
    }
    return 0;
}

/* The layer map: names valid and unique, entries in range, every map group holding a layer,
 * and the rank's own groups agreeing with it (each group in the map, each of its layers mapped
 * to it). Which layers a rank must hold is compat's question (it knows the other side). */
static int validate_stage(const struct layout *l, char *err, size_t errlen)
{
    if (l->stage_count == 0)
        return l->stage_first ? err_inval(err, errlen, "stage_layers.first: %u with count 0",
                                          l->stage_first)
                              : 0;
    if ((uint64_t)l->stage_first + l->stage_count > l->n_layers_total)
        return err_inval(err, errlen, "stage_layers: %u + %u layers is past n_layers_total %u",
                         l->stage_first, l->stage_count, l->n_layers_total);
    for (uint32_t gi = 0; gi < l->n_groups; gi++)
        for (uint32_t i = 0; i < l->groups[gi].n_layers; i++) {
            uint32_t id = l->groups[gi].layers[i];
            if (id < l->stage_first || id >= l->stage_first + l->stage_count)
                return err_inval(err, errlen,
                                 "groups[%u].layers[%u]: layer %u is outside stage_layers %u..%u",
                                 gi, i, id, l->stage_first, l->stage_first + l->stage_count - 1);
        }
    return 0;
}

static int validate_layer_map(const struct layout *l, char *err, size_t errlen)
{
    if (l->n_map_groups == 0) {
        for (uint32_t id = 0; id < LAYOUT_MAX_LAYERS; id++)
            if (l->layer_map[id])
                return err_inval(err, errlen, "layer_map: layer %u mapped but no map groups", id);
        return 0;
    }
    if (l->n_map_groups > LAYOUT_MAX_GROUPS)
        return err_inval(err, errlen, "layer_map: %u groups is over %d", l->n_map_groups,
                         LAYOUT_MAX_GROUPS);
    uint32_t used[LAYOUT_MAX_GROUPS] = {0};
    for (uint32_t m = 0; m < l->n_map_groups; m++) {
        CHECK_NAME(l->map_groups[m], "layer_map.groups[%u]", m);
        for (uint32_t o = 0; o < m; o++)
            if (strcmp(l->map_groups[o], l->map_groups[m]) == 0)
                return err_inval(err, errlen, "layer_map: group \"%s\" given twice",
                                 l->map_groups[m]);
    }
    for (uint32_t id = 0; id < LAYOUT_MAX_LAYERS; id++) {
        uint32_t e = l->layer_map[id];
        if (e && id >= l->n_layers_total)
            return err_inval(err, errlen, "layer_map: layer %u is not below n_layers_total %u",
                             id, l->n_layers_total);
        if (e > l->n_map_groups)
            return err_inval(err, errlen, "layer_map: layer %u names group %u of %u", id, e,
                             l->n_map_groups);
        if (e)
            used[e - 1]++;
    }
    for (uint32_t m = 0; m < l->n_map_groups; m++)
        if (!used[m])
            return err_inval(err, errlen, "layer_map.%s: no layers", l->map_groups[m]);
    for (uint32_t gi = 0; gi < l->n_groups; gi++) {
        const struct layout_group *g = &l->groups[gi];
        uint32_t m = 0;
        while (m < l->n_map_groups && strcmp(l->map_groups[m], g->name))
            m++;
        if (m == l->n_map_groups)
            return err_inval(err, errlen, "groups[%u].name: \"%s\" is not in the layer_map", gi,
                             g->name);
        for (uint32_t i = 0; i < g->n_layers; i++)
            if (l->layer_map[g->layers[i]] != m + 1)
                return err_inval(err, errlen,
                                 "groups[%u].layers[%u]: layer %u is in group %s, the layer_map "
                                 "says %s",
                                 gi, i, g->layers[i], g->name,
                                 l->layer_map[g->layers[i]]
                                     ? l->map_groups[l->layer_map[g->layers[i]] - 1]
                                     : "no group");
    }
    return 0;
}

int layout_validate(const struct layout *l, char *err, size_t errlen)
{
    if (!l)
        return err_inval(err, errlen, "layout: NULL");
    CHECK_NAME(l->instance, "instance");
    CHECK_NAME(l->fingerprint, "fingerprint");
    if (l->role != ROLE_CONTEXT && l->role != ROLE_GENERATION)
        return err_inval(err, errlen, "role: %d is not a role", (int)l->role);
    if (l->tp_size == 0 || l->tp_size > LAYOUT_MAX_TP)
        return err_inval(err, errlen, "tp_size: %u is outside 1..%d", l->tp_size, LAYOUT_MAX_TP);
    if (l->tp_rank >= l->tp_size)
        return err_inval(err, errlen, "tp_rank: %u is not below tp_size %u", l->tp_rank,
                         l->tp_size);
    if (l->pp_size == 0 || l->pp_size > LAYOUT_MAX_PP)
        return err_inval(err, errlen, "pp_size: %u is outside 1..%d", l->pp_size, LAYOUT_MAX_PP);
    if (l->pp_rank >= l->pp_size)
        return err_inval(err, errlen, "pp_rank: %u is not below pp_size %u", l->pp_rank,
                         l->pp_size);
    if (l->device < -1)
        return err_inval(err, errlen, "device: %d is below -1", l->device);
    if (l->tokens_per_block == 0)
        return err_inval(err, errlen, "tokens_per_block: 0 is not allowed");
    if (l->n_layers_total == 0 || l->n_layers_total > LAYOUT_MAX_LAYERS)
        return err_inval(err, errlen, "n_layers_total: %u is outside 1..%d", l->n_layers_total,
                    LAYOUT_MAX_LAYERS);
    int rc = validate_pools(l, err, errlen);
    if (rc)
        return rc;
    if (l->n_addrs > LAYOUT_MAX_LAYER_ADDRS)
        return err_inval(err, errlen, "n_addrs: %u per-layer entries is over %d", l->n_addrs,
                         LAYOUT_MAX_LAYER_ADDRS);
    if (l->n_groups == 0 || l->n_groups > LAYOUT_MAX_GROUPS)
        return err_inval(err, errlen, "n_groups: %u is outside 1..%d", l->n_groups,
                         LAYOUT_MAX_GROUPS);
    uint8_t layer_owner[LAYOUT_MAX_LAYERS] = {0}; /* group index + 1 */
    for (uint32_t gi = 0; gi < l->n_groups; gi++)
        if ((rc = validate_group(l, gi, layer_owner, err, errlen)))
            return rc;
    if ((rc = validate_layer_map(l, err, errlen)) || (rc = validate_stage(l, err, errlen)))
        return rc;
    return layout_regions_check(l, err, errlen);
}
