/* layout_json.c: the canonical JSON encoding of a layout (layout.h) and its strict decoder.
 *
 * Encoding: one object, keys in a fixed order, counts implied by array lengths, enums as
 * strings, byte quantities as integers:
 *   {"instance","role","tp_size","tp_rank","pp_size","pp_rank","attention_dp","device",
 *    "fingerprint","tokens_per_block","n_layers_total",
 *    "layer_map":{"GROUP":[global layer ids ascending],...}   (optional; see below)
 *    "pools":[{"kind","device","bytes"}],
 *    "groups":[{"name","kind","layers":[..],"n_items",
 *               "views":[{"name","pool","base","layer_stride","item_stride","region_bytes",
 *                         "tensors":[{"name","offset","outer","heads","inner","global_heads",
 *                                     "shard","dtype","order"?}], "alias"?}]}]}
 * A per-layer view (v2) has "per_layer":[{"pool","base"}] (one per group layer) in place of
 * "pool","base","layer_stride". "alias" is present only when set. Layouts without either encode
 * as they did before (v1), byte for byte. docs/LAYOUT.md is the schema, field by field.
 * Also optional, emitted only when they differ from their default: "layer_map" (the model's
 * layer map, layout.h; absent: none declared), "stage_layers":{"first","count"} (the rank's PP
 * stage; absent: undeclared) and a tensor's "order" ("nhd" default, "hnd").
 * Decoding: every other key required, unknown and duplicate keys refused, integers only (no reals),
 * no negatives except device (>= -1), nothing over 2^53 or the field's own range, strings within
 * their array, arrays within the LAYOUT_MAX_* limits, then layout_validate. Errors name the path,
 * e.g. "groups[1].views[0].tensors[2].heads: ...". *ret is written only on success.
 * Encoder: names are emitted with bytes outside printable ASCII replaced by '?' (a valid layout
 * has none), so it fails only on OOM. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "layout_regions.h"

/* ---- encode ---- */

static json_t *jname(const char *s, size_t cap)
{
    char buf[LAYOUT_NAME_MAX];
    size_t n = strnlen(s, cap < sizeof(buf) ? cap : sizeof(buf));
    if (n == sizeof(buf))
        n--;
    for (size_t i = 0; i < n; i++)
        buf[i] = ((unsigned char)s[i] < 0x20 || (unsigned char)s[i] > 0x7e) ? '?' : s[i];
    return json_stringn(buf, n);
}

static json_t *jint(uint64_t v)
{
    return json_integer((json_int_t)v);
}

/* json_object_set_new that remembers a failure. */
static void put(json_t *o, const char *k, json_t *v, int *bad)
{
    if (!v || !o || json_object_set_new(o, k, v))
        *bad = 1;
}

static void push(json_t *a, json_t *v, int *bad)
{
    if (!v || !a || json_array_append_new(a, v))
        *bad = 1;
}

static json_t *enc_view(const struct layout *l, const struct layout_group *g,
                        const struct layout_view *v, int *bad)
{
    json_t *o = json_object(), *ts = json_array();
    put(o, "name", jname(v->name, sizeof(v->name)), bad);
    if (v->per_layer) {
        json_t *pl = json_array();
        for (uint32_t k = 0; k < g->n_layers && v->addr_at + k < LAYOUT_MAX_LAYER_ADDRS; k++) {
            json_t *a = json_object();
            put(a, "pool", jint(l->addrs[v->addr_at + k].pool), bad);
            put(a, "base", jint(l->addrs[v->addr_at + k].base), bad);
            push(pl, a, bad);
        }
        put(o, "per_layer", pl, bad);
    } else {
        put(o, "pool", jint(v->pool), bad);
        put(o, "base", jint(v->base), bad);
        put(o, "layer_stride", jint(v->layer_stride), bad);
    }
    put(o, "item_stride", jint(v->item_stride), bad);
    put(o, "region_bytes", jint(v->region_bytes), bad);
    uint32_t nt = v->n_tensors < LAYOUT_MAX_TENSORS ? v->n_tensors : LAYOUT_MAX_TENSORS;
    for (uint32_t i = 0; i < nt; i++) {
        const struct layout_tensor *t = &v->tensors[i];
        json_t *to = json_object();
        put(to, "name", jname(t->name, sizeof(t->name)), bad);
        put(to, "offset", jint(t->offset), bad);
        put(to, "outer", jint(t->outer), bad);
        put(to, "heads", jint(t->heads), bad);
        put(to, "inner", jint(t->inner), bad);
        put(to, "global_heads", jint(t->global_heads), bad);
        put(to, "shard", json_string(shard_mode_to_string(t->shard)), bad);
        put(to, "dtype", json_string(dtype_to_string(t->dtype)), bad);
        if (t->order != ORDER_NHD)
            put(to, "order", json_string(tensor_order_to_string(t->order)), bad);
        push(ts, to, bad);
    }
    put(o, "tensors", ts, bad);
    if (v->alias[0])
        put(o, "alias", jname(v->alias, sizeof(v->alias)), bad);
    return o;
}

static json_t *enc_group(const struct layout *l, const struct layout_group *g, int *bad)
{
    json_t *o = json_object(), *ls = json_array(), *vs = json_array();
    put(o, "name", jname(g->name, sizeof(g->name)), bad);
    put(o, "kind", json_string(group_kind_to_string(g->kind)), bad);
    uint32_t nl = g->n_layers < LAYOUT_MAX_LAYERS ? g->n_layers : LAYOUT_MAX_LAYERS;
    for (uint32_t i = 0; i < nl; i++)
        push(ls, jint(g->layers[i]), bad);
    put(o, "layers", ls, bad);
    put(o, "n_items", jint(g->n_items), bad);
    uint32_t nv = g->n_views < LAYOUT_MAX_VIEWS ? g->n_views : LAYOUT_MAX_VIEWS;
    for (uint32_t i = 0; i < nv; i++)
        push(vs, enc_view(l, g, &g->views[i], bad), bad);
    put(o, "views", vs, bad);
    return o;
}

struct json_t *layout_to_jobj(const struct layout *l)
{
    int bad = 0;
    json_t *o = json_object(), *ps = json_array(), *gs = json_array();
    put(o, "instance", jname(l->instance, sizeof(l->instance)), &bad);
    put(o, "role", json_string(layout_role_to_string(l->role)), &bad);
    put(o, "tp_size", jint(l->tp_size), &bad);
    put(o, "tp_rank", jint(l->tp_rank), &bad);
    put(o, "pp_size", jint(l->pp_size), &bad);
    put(o, "pp_rank", jint(l->pp_rank), &bad);
    put(o, "attention_dp", json_boolean(l->attention_dp), &bad);
    put(o, "device", json_integer(l->device), &bad);
    put(o, "fingerprint", jname(l->fingerprint, sizeof(l->fingerprint)), &bad);
    put(o, "tokens_per_block", jint(l->tokens_per_block), &bad);
    put(o, "n_layers_total", jint(l->n_layers_total), &bad);
    if (l->n_map_groups) {
        json_t *m = json_object();
        for (uint32_t g = 0; g < l->n_map_groups && g < LAYOUT_MAX_GROUPS; g++) {
            json_t *ids = json_array();
            for (uint32_t id = 0; id < LAYOUT_MAX_LAYERS; id++)
                if (l->layer_map[id] == g + 1)
                    push(ids, jint(id), &bad);
            char name[LAYOUT_SHORT_MAX];
            snprintf(name, sizeof(name), "%.*s", LAYOUT_SHORT_MAX - 1, l->map_groups[g]);
            put(m, name, ids, &bad);
        }
        put(o, "layer_map", m, &bad);
    }
    if (l->stage_count) {
        json_t *st = json_object();
        put(st, "first", jint(l->stage_first), &bad);
        put(st, "count", jint(l->stage_count), &bad);
        put(o, "stage_layers", st, &bad);
    }
    uint32_t np = l->n_pools < LAYOUT_MAX_POOLS ? l->n_pools : LAYOUT_MAX_POOLS;
    for (uint32_t i = 0; i < np; i++) {
        json_t *p = json_object();
        put(p, "kind", json_string(l->pools[i].kind == POOL_HOST   ? "host"
                                   : l->pools[i].kind == POOL_CUDA ? "cuda"
                                                                   : "unknown"),
            &bad);
        put(p, "device", json_integer(l->pools[i].device), &bad);
        put(p, "bytes", jint(l->pools[i].bytes), &bad);
        push(ps, p, &bad);
    }
    put(o, "pools", ps, &bad);
    uint32_t ng = l->n_groups < LAYOUT_MAX_GROUPS ? l->n_groups : LAYOUT_MAX_GROUPS;
    for (uint32_t i = 0; i < ng; i++)
        push(gs, enc_group(l, &l->groups[i], &bad), &bad);
    put(o, "groups", gs, &bad);
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

char *layout_to_json(const struct layout *l)
{
    json_t *o = layout_to_jobj(l);
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* ---- decode ---- */

struct dec {
    char *err;
    size_t errlen;
};

__attribute__((format(printf, 2, 3))) static int fail(struct dec *d, const char *fmt, ...)
{
    if (d->err && d->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(d->err, d->errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

/* "pfx.key", or "key" at the top. */
static const char *path(char *buf, size_t len, const char *pfx, const char *key)
{
    if (snprintf(buf, len, "%s%s%s", pfx, *pfx ? "." : "", key) >= (int)len)
        buf[len - 1] = '\0'; /* paths are short: prefixes are built below from fixed parts */
    return buf;
}

static int key_in(const char *const *keys, const char *k)
{
    for (int i = 0; keys && keys[i]; i++)
        if (!strcmp(keys[i], k))
            return 1;
    return 0;
}

/* An object holding every one of `keys`, and of `optional` those it likes (NULL-terminated
 * lists; optional may be NULL), nothing else. */
static int expect_object_opt(struct dec *d, const json_t *o, const char *pfx,
                             const char *const *keys, const char *const *optional)
{
    if (!json_is_object(o))
        return fail(d, "%s: not an object", *pfx ? pfx : "layout");
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)o, k, v) {
        if (!key_in(keys, k) && !key_in(optional, k))
            return fail(d, "%s%s%.64s: unknown key", pfx, *pfx ? "." : "", k);
    }
    for (int i = 0; keys[i]; i++)
        if (!json_object_get(o, keys[i]))
            return fail(d, "%s%s%s: missing", pfx, *pfx ? "." : "", keys[i]);
    return 0;
}

static int expect_object(struct dec *d, const json_t *o, const char *pfx, const char *const *keys)
{
    return expect_object_opt(d, o, pfx, keys, NULL);
}

/* Integer in [min, max] (max <= 2^53). */
static int get_int(struct dec *d, const json_t *o, const char *pfx, const char *key, int64_t min,
                   uint64_t max, int64_t *ret)
{
    char p[160];
    const json_t *v = json_object_get(o, key);
    path(p, sizeof(p), pfx, key);
    if (!json_is_integer(v))
        return fail(d, "%s: not an integer", p);
    json_int_t x = json_integer_value(v);
    if (x < min)
        return fail(d, min == 0 ? "%s: %lld is negative" : "%s: %lld is below -1", p, (long long)x);
    if (x > 0 && (uint64_t)x > LAYOUT_U64_MAX_JSON)
        return fail(d, "%s: %lld is over 2^53", p, (long long)x);
    if (x > 0 && (uint64_t)x > max)
        return fail(d, "%s: %lld is over %llu", p, (long long)x, (unsigned long long)max);
    *ret = x;
    return 0;
}

#define GET_U(o, pfx, key, max, dst)                                                               \
    do {                                                                                           \
        int64_t v_;                                                                                \
        int rc_ = get_int(d, (o), (pfx), (key), 0, (max), &v_);                                    \
        if (rc_)                                                                                   \
            return rc_;                                                                            \
        (dst) = (__typeof__(dst))v_;                                                               \
    } while (0)

static int get_str(struct dec *d, const json_t *o, const char *pfx, const char *key, char *dst,
                   size_t cap)
{
    char p[160];
    const json_t *v = json_object_get(o, key);
    path(p, sizeof(p), pfx, key);
    if (!json_is_string(v))
        return fail(d, "%s: not a string", p);
    size_t n = json_string_length(v);
    if (n >= cap)
        return fail(d, "%s: %zu bytes is over %zu", p, n, cap - 1);
    if (strlen(json_string_value(v)) != n)
        return fail(d, "%s: contains NUL", p);
    memcpy(dst, json_string_value(v), n + 1);
    return 0;
}

/* One of `names` (index = enum value). */
static int get_enum(struct dec *d, const json_t *o, const char *pfx, const char *key,
                    const char *const *names, int n, int *ret)
{
    char p[160], buf[16];
    int rc = get_str(d, o, pfx, key, buf, sizeof(buf));
    if (rc)
        return rc;
    for (int i = 0; i < n; i++)
        if (!strcmp(buf, names[i])) {
            *ret = i;
            return 0;
        }
    return fail(d, "%s: \"%s\" is not a known value", path(p, sizeof(p), pfx, key), buf);
}

static int get_array(struct dec *d, const json_t *o, const char *pfx, const char *key, size_t max,
                     size_t min, const json_t **ret)
{
    char p[160];
    const json_t *v = json_object_get(o, key);
    path(p, sizeof(p), pfx, key);
    if (!json_is_array(v))
        return fail(d, "%s: not an array", p);
    if (json_array_size(v) > max)
        return fail(d, "%s: %zu entries is over %zu", p, json_array_size(v), max);
    if (json_array_size(v) < min)
        return fail(d, "%s: empty", p);
    *ret = v;
    return 0;
}

static const char *const tensor_keys[] = {"name",         "offset", "outer", "heads", "inner",
                                          "global_heads", "shard",  "dtype", NULL};
static const char *const tensor_opt_keys[] = {"order", NULL};
static const char *const view_keys[] = {"name",        "pool",         "base",    "layer_stride",
                                        "item_stride", "region_bytes", "tensors", NULL};
static const char *const view_pl_keys[] = {"name", "per_layer", "item_stride", "region_bytes",
                                           "tensors", NULL};
static const char *const view_opt_keys[] = {"alias", NULL};
static const char *const addr_keys[] = {"pool", "base", NULL};
static const char *const group_keys[] = {"name", "kind", "layers", "n_items", "views", NULL};
static const char *const pool_keys[] = {"kind", "device", "bytes", NULL};
static const char *const top_keys[] = {"instance",     "role",        "tp_size",
                                       "tp_rank",      "pp_size",     "pp_rank",
                                       "attention_dp", "device",      "fingerprint",
                                       "tokens_per_block", "n_layers_total", "pools",
                                       "groups",       NULL};
static const char *const top_opt_keys[] = {"layer_map", "stage_layers", NULL};
static const char *const stage_keys[] = {"first", "count", NULL};
static const char *const shard_names[] = {"sharded", "replicated"};
static const char *const dtype_names[] = {"bf16", "fp16", "fp32", "fp8", "u8"};
static const char *const kind_names[] = {"paged", "state"};
static const char *const role_names[] = {"context", "generation"};
static const char *const pool_names[] = {"host", "cuda"};
static const char *const order_names[] = {"nhd", "hnd"};

static int dec_tensor(struct dec *d, const json_t *o, const char *pfx, struct layout_tensor *t)
{
    int rc = expect_object_opt(d, o, pfx, tensor_keys, tensor_opt_keys), e = 0;
    if (rc || (rc = get_str(d, o, pfx, "name", t->name, sizeof(t->name))))
        return rc;
    GET_U(o, pfx, "offset", LAYOUT_U64_MAX_JSON, t->offset);
    GET_U(o, pfx, "outer", UINT32_MAX, t->outer);
    GET_U(o, pfx, "heads", UINT32_MAX, t->heads);
    GET_U(o, pfx, "inner", UINT32_MAX, t->inner);
    GET_U(o, pfx, "global_heads", UINT32_MAX, t->global_heads);
    if ((rc = get_enum(d, o, pfx, "shard", shard_names, 2, &e)))
        return rc;
    t->shard = (shard_mode_t)e;
    if ((rc = get_enum(d, o, pfx, "dtype", dtype_names, 5, &e)))
        return rc;
    t->dtype = (dtype_t)e;
    t->order = ORDER_NHD;
    if (json_object_get(o, "order")) {
        if ((rc = get_enum(d, o, pfx, "order", order_names, 2, &e)))
            return rc;
        t->order = (tensor_order_t)e;
    }
    return 0;
}

/* "layer_map": {"GROUP": [ids...], ...}; validate checks ranges against n_layers_total. */
static int dec_layer_map(struct dec *d, const json_t *m, struct layout *l)
{
    if (!json_is_object(m))
        return fail(d, "layer_map: not an object");
    if (json_object_size(m) == 0 || json_object_size(m) > LAYOUT_MAX_GROUPS)
        return fail(d, "layer_map: %zu groups is outside 1..%d", json_object_size(m),
                    LAYOUT_MAX_GROUPS);
    const char *k;
    json_t *ids;
    json_object_foreach((json_t *)m, k, ids) {
        uint32_t g = l->n_map_groups;
        if (strlen(k) >= LAYOUT_SHORT_MAX)
            return fail(d, "layer_map.%.32s: name over %d bytes", k, LAYOUT_SHORT_MAX - 1);
        memcpy(l->map_groups[g], k, strlen(k) + 1);
        l->n_map_groups++;
        if (!json_is_array(ids) || json_array_size(ids) == 0 ||
            json_array_size(ids) > LAYOUT_MAX_LAYERS)
            return fail(d, "layer_map.%s: not an array of 1..%d layer ids", k, LAYOUT_MAX_LAYERS);
        for (size_t i = 0; i < json_array_size(ids); i++) {
            const json_t *x = json_array_get(ids, i);
            json_int_t v = json_is_integer(x) ? json_integer_value(x) : -1;
            if (v < 0 || v >= LAYOUT_MAX_LAYERS)
                return fail(d, "layer_map.%s[%zu]: not an integer in 0..%d", k, i,
                            LAYOUT_MAX_LAYERS - 1);
            if (l->layer_map[v])
                return fail(d, "layer_map.%s[%zu]: layer %lld is also in %s", k, i, (long long)v,
                            l->map_groups[l->layer_map[v] - 1]);
            l->layer_map[v] = (uint8_t)(g + 1);
        }
    }
    return 0;
}

/* "per_layer": one {"pool","base"} per layer of the group, appended to l->addrs. */
static int dec_per_layer(struct dec *d, const json_t *o, const char *pfx, uint32_t n_layers,
                         struct layout *l, struct layout_view *v)
{
    const json_t *pl;
    int rc = get_array(d, o, pfx, "per_layer", LAYOUT_MAX_LAYERS, 0, &pl);
    if (rc)
        return rc;
    if (json_array_size(pl) != n_layers)
        return fail(d, "%s.per_layer: %zu entries, the group has %u layers", pfx,
                    json_array_size(pl), n_layers);
    if (l->n_addrs + n_layers > LAYOUT_MAX_LAYER_ADDRS)
        return fail(d, "%s.per_layer: the layout's per-layer entries (n_addrs) would be %u, over %d",
                    pfx, l->n_addrs + n_layers, LAYOUT_MAX_LAYER_ADDRS);
    v->per_layer = true;
    v->addr_at = l->n_addrs;
    for (uint32_t k = 0; k < n_layers; k++) {
        char p[192];
        const json_t *a = json_array_get(pl, k);
        struct layout_addr *x = &l->addrs[l->n_addrs];
        snprintf(p, sizeof(p), "%s.per_layer[%u]", pfx, k);
        if ((rc = expect_object(d, a, p, addr_keys)))
            return rc;
        GET_U(a, p, "pool", LAYOUT_MAX_POOLS - 1, x->pool);
        GET_U(a, p, "base", LAYOUT_U64_MAX_JSON, x->base);
        l->n_addrs++;
    }
    return 0;
}

static int dec_view(struct dec *d, const json_t *o, const char *pfx, uint32_t n_layers,
                    struct layout *l, struct layout_view *v)
{
    const json_t *ts;
    bool per_layer = json_is_object(o) && json_object_get(o, "per_layer");
    int rc = expect_object_opt(d, o, pfx, per_layer ? view_pl_keys : view_keys, view_opt_keys);
    if (rc || (rc = get_str(d, o, pfx, "name", v->name, sizeof(v->name))))
        return rc;
    if (per_layer) {
        if ((rc = dec_per_layer(d, o, pfx, n_layers, l, v)))
            return rc;
    } else {
        GET_U(o, pfx, "pool", LAYOUT_MAX_POOLS - 1, v->pool);
        GET_U(o, pfx, "base", LAYOUT_U64_MAX_JSON, v->base);
        GET_U(o, pfx, "layer_stride", LAYOUT_U64_MAX_JSON, v->layer_stride);
    }
    GET_U(o, pfx, "item_stride", LAYOUT_U64_MAX_JSON, v->item_stride);
    GET_U(o, pfx, "region_bytes", LAYOUT_U64_MAX_JSON, v->region_bytes);
    if ((rc = get_array(d, o, pfx, "tensors", LAYOUT_MAX_TENSORS, 1, &ts)))
        return rc;
    v->n_tensors = (uint32_t)json_array_size(ts);
    for (uint32_t i = 0; i < v->n_tensors; i++) {
        char p[160];
        if (snprintf(p, sizeof(p), "%s.tensors[%u]", pfx, i) >= (int)sizeof(p))
            return fail(d, "%s: path too long", pfx);
        if ((rc = dec_tensor(d, json_array_get(ts, i), p, &v->tensors[i])))
            return rc;
    }
    if (json_object_get(o, "alias")) {
        if ((rc = get_str(d, o, pfx, "alias", v->alias, sizeof(v->alias))))
            return rc;
        if (!v->alias[0])
            return fail(d, "%s.alias: empty (leave the key out for no alias)", pfx);
    }
    return 0;
}

static int dec_group(struct dec *d, const json_t *o, const char *pfx, struct layout *l,
                     struct layout_group *g)
{
    const json_t *ls, *vs;
    int rc = expect_object(d, o, pfx, group_keys), e = 0;
    if (rc || (rc = get_str(d, o, pfx, "name", g->name, sizeof(g->name))))
        return rc;
    if ((rc = get_enum(d, o, pfx, "kind", kind_names, 2, &e)))
        return rc;
    g->kind = (group_kind_t)e;
    if ((rc = get_array(d, o, pfx, "layers", LAYOUT_MAX_LAYERS, 0, &ls)))
        return rc;
    g->n_layers = (uint32_t)json_array_size(ls);
    for (uint32_t i = 0; i < g->n_layers; i++) {
        const json_t *x = json_array_get(ls, i);
        if (!json_is_integer(x) || json_integer_value(x) < 0 ||
            json_integer_value(x) >= LAYOUT_MAX_LAYERS)
            return fail(d, "%s.layers[%u]: not an integer in 0..%d", pfx, i, LAYOUT_MAX_LAYERS - 1);
        g->layers[i] = (uint16_t)json_integer_value(x);
    }
    GET_U(o, pfx, "n_items", UINT32_MAX, g->n_items);
    if ((rc = get_array(d, o, pfx, "views", LAYOUT_MAX_VIEWS, 1, &vs)))
        return rc;
    g->n_views = (uint32_t)json_array_size(vs);
    for (uint32_t i = 0; i < g->n_views; i++) {
        char p[160];
        if (snprintf(p, sizeof(p), "%s.views[%u]", pfx, i) >= (int)sizeof(p))
            return fail(d, "%s: path too long", pfx);
        if ((rc = dec_view(d, json_array_get(vs, i), p, g->n_layers, l, &g->views[i])))
            return rc;
    }
    return 0;
}

static int dec_layout(struct dec *d, const json_t *o, struct layout *l)
{
    const json_t *ps, *gs, *adp;
    int rc = expect_object_opt(d, o, "", top_keys, top_opt_keys), e = 0;
    int64_t dev;
    if (rc || (rc = get_str(d, o, "", "instance", l->instance, sizeof(l->instance))))
        return rc;
    if ((rc = get_enum(d, o, "", "role", role_names, 2, &e)))
        return rc;
    l->role = (layout_role_t)e;
    GET_U(o, "", "tp_size", LAYOUT_MAX_TP, l->tp_size);
    GET_U(o, "", "tp_rank", LAYOUT_MAX_TP - 1, l->tp_rank);
    GET_U(o, "", "pp_size", LAYOUT_MAX_PP, l->pp_size);
    GET_U(o, "", "pp_rank", LAYOUT_MAX_PP - 1, l->pp_rank);
    adp = json_object_get(o, "attention_dp");
    if (!json_is_boolean(adp))
        return fail(d, "attention_dp: not a boolean");
    l->attention_dp = json_is_true(adp);
    if ((rc = get_int(d, o, "", "device", -1, INT32_MAX, &dev)))
        return rc;
    l->device = (int32_t)dev;
    if ((rc = get_str(d, o, "", "fingerprint", l->fingerprint, sizeof(l->fingerprint))))
        return rc;
    GET_U(o, "", "tokens_per_block", UINT32_MAX, l->tokens_per_block);
    GET_U(o, "", "n_layers_total", LAYOUT_MAX_LAYERS, l->n_layers_total);
    if (json_object_get(o, "layer_map") &&
        (rc = dec_layer_map(d, json_object_get(o, "layer_map"), l)))
        return rc;
    const json_t *st = json_object_get(o, "stage_layers");
    if (st) {
        if ((rc = expect_object(d, st, "stage_layers", stage_keys)))
            return rc;
        GET_U(st, "stage_layers", "first", LAYOUT_MAX_LAYERS - 1, l->stage_first);
        GET_U(st, "stage_layers", "count", LAYOUT_MAX_LAYERS, l->stage_count);
        if (l->stage_count == 0)
            return fail(d, "stage_layers.count: 0 is not allowed");
    }
    if ((rc = get_array(d, o, "", "pools", LAYOUT_MAX_POOLS, 1, &ps)))
        return rc;
    l->n_pools = (uint32_t)json_array_size(ps);
    for (uint32_t i = 0; i < l->n_pools; i++) {
        char p[32];
        const json_t *po = json_array_get(ps, i);
        snprintf(p, sizeof(p), "pools[%u]", i);
        if ((rc = expect_object(d, po, p, pool_keys)))
            return rc;
        if ((rc = get_enum(d, po, p, "kind", pool_names, 2, &e)))
            return rc;
        l->pools[i].kind = (pool_kind_t)e;
        if ((rc = get_int(d, po, p, "device", -1, INT32_MAX, &dev)))
            return rc;
        l->pools[i].device = (int32_t)dev;
        GET_U(po, p, "bytes", LAYOUT_U64_MAX_JSON, l->pools[i].bytes);
    }
    if ((rc = get_array(d, o, "", "groups", LAYOUT_MAX_GROUPS, 1, &gs)))
        return rc;
    l->n_groups = (uint32_t)json_array_size(gs);
    for (uint32_t i = 0; i < l->n_groups; i++) {
        char p[32];
        snprintf(p, sizeof(p), "groups[%u]", i);
        if ((rc = dec_group(d, json_array_get(gs, i), p, l, &l->groups[i])))
            return rc;
    }
    return 0;
}

int layout_from_jobj(const struct json_t *obj, struct layout *ret, char *err, size_t errlen)
{
    struct dec d = {err, errlen};
    struct layout *l = calloc(1, sizeof(*l));
    if (!l) {
        fail(&d, "layout: out of memory");
        return -ENOMEM;
    }
    int rc = dec_layout(&d, obj, l);
    if (!rc)
        rc = layout_validate(l, err, errlen);
    if (!rc)
        memcpy(ret, l, sizeof(*l));
    free(l);
    return rc;
}

int layout_from_json(const char *text, size_t len, struct layout *ret, char *err, size_t errlen)
{
    struct dec d = {err, errlen};
    if (!text)
        return fail(&d, "json: NULL input");
    if (len > LAYOUT_JSON_MAX)
        return fail(&d, "json: %zu bytes is over the limit of %d", len, LAYOUT_JSON_MAX);
    json_error_t je;
    json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!o)
        return fail(&d, "json: line %d column %d: %s", je.line, je.column, je.text);
    int rc = layout_from_jobj(o, ret, err, errlen);
    json_decref(o);
    return rc;
}
