/* check_layout.c: layout_validate refusals (each naming its field), the exactness of the region
 * overlap rule against brute force, the canonical JSON round trip of every preset variant, and
 * the strict decoder's refusals. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "preset.h"
#include "testutil.h"

static char err[512];
static struct layout ranks[LAYOUT_MAX_TP];

/* Rank 0 of a preset (tiny unless told), built into zeroed memory. */
static struct layout base(const char *spec)
{
    struct preset_spec s;
    ck_assert_msg(preset_parse(spec, &s, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(preset_build(&s, "inst", ROLE_CONTEXT, -1, ranks, err, sizeof(err)) == 0, "%s",
                  err);
    return ranks[0];
}

static void invalid(const struct layout *l, const char *needle)
{
    err[0] = '\0';
    ck_assert_int_eq(layout_validate(l, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, needle), "message \"%s\" lacks \"%s\"", err, needle);
}

static void valid(const struct layout *l)
{
    ck_assert_msg(layout_validate(l, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(dtype_and_enum_names_round_trip)
{
    for (int t = DTYPE_BF16; t <= DTYPE_U8; t++) {
        dtype_t back;
        ck_assert_int_eq(dtype_from_string(dtype_to_string((dtype_t)t), &back), 0);
        ck_assert_int_eq(back, t);
    }
    dtype_t x;
    ck_assert_int_eq(dtype_from_string("int4", &x), -EINVAL);
    ck_assert_uint_eq(dtype_size(DTYPE_BF16), 2);
    ck_assert_uint_eq(dtype_size(DTYPE_FP32), 4);
    ck_assert_uint_eq(dtype_size(DTYPE_FP8), 1);
    ck_assert_uint_eq(dtype_size((dtype_t)99), 0);
    ck_assert_str_eq(dtype_to_string((dtype_t)99), "unknown");
    ck_assert_str_eq(group_kind_to_string(GROUP_STATE), "state");
    ck_assert_str_eq(shard_mode_to_string(SHARD_REPLICATED), "replicated");
    ck_assert_str_eq(layout_role_to_string(ROLE_GENERATION), "generation");
}
END_TEST

START_TEST(validate_refuses_overlapping_strides)
{
    struct layout l = base("tiny:blocks=4,slots=2");
    l.groups[1].views[0].item_stride = l.groups[1].views[0].region_bytes - 1;
    invalid(&l, "groups[1].views[0].item_stride: regions of different (layer, item) overlap");
    l = base("tiny:blocks=4,slots=2");
    l.groups[1].views[0].layer_stride = 3 * l.groups[1].views[0].region_bytes; /* < 4 blocks */
    invalid(&l, "groups[1].views[0].layer_stride");
    l = base("tiny:blocks=4,slots=2");
    l.groups[0].views[0].layer_stride = 0;
    invalid(&l, "groups[0].views[0].layer_stride");
}
END_TEST

START_TEST(validate_refuses_region_past_the_pool)
{
    struct layout l = base("tiny:blocks=4,slots=2");
    l.pools[l.groups[0].views[0].pool].bytes--;
    invalid(&l, "groups[0].views[0]: the last region ends at byte");
    l = base("tiny:blocks=4,slots=2");
    l.groups[1].views[0].base = 1;
    invalid(&l, "past pool 1");
    l = base("tiny:pp_layers=3+5");
    l.groups[0].views[0].base = 0;
    l.pools[l.groups[0].views[0].pool].bytes = 0; /* a pool of 0 bytes under a group with layers */
    invalid(&l, "groups[0].views[0]");
}
END_TEST

START_TEST(validate_refuses_overflowing_strides)
{
    struct layout l = base("tiny:blocks=4,slots=2");
    l.groups[0].views[0].layer_stride = 1ULL << 60;
    invalid(&l, "groups[0].views[0].layer_stride: 1152921504606846976 is over 2^53");
    l = base("tiny:blocks=4,slots=2");
    l.groups[1].views[0].item_stride = 1ULL << 53; /* 3 x 2^53 wraps nothing, still past the pool */
    l.pools[1].bytes = 1ULL << 53;
    invalid(&l, "groups[1].views[0]: the last region ends");
    l = base("tiny:blocks=4,slots=2");
    l.pools[0].bytes = UINT64_MAX;
    invalid(&l, "pools[0].bytes");
    l = base("tiny:blocks=4,slots=2");
    l.groups[0].views[0].tensors[1].outer = UINT32_MAX;
    l.groups[0].views[0].tensors[1].inner = UINT32_MAX - 3;
    invalid(&l, "groups[0].views[0].tensors[1].inner: the tensor ends past 2^53");
}
END_TEST

START_TEST(validate_refuses_heads_that_do_not_divide)
{
    struct layout l = base("tiny:tp=2");
    l.groups[0].views[0].tensors[0].heads = 3;
    invalid(&l, "groups[0].views[0].tensors[0].heads: 3 local heads x tp_eff 2 != global_heads 4");
    l = base("tiny:tp=2,adp=1");
    l.groups[0].views[0].tensors[1].heads = 2; /* tp_eff 1: must hold all heads */
    invalid(&l, "groups[0].views[0].tensors[1].heads: 2 != global_heads 4");
    l = base("tiny:tp=2");
    l.groups[1].views[0].tensors[0].global_heads = 2; /* replicated: heads == global_heads */
    invalid(&l, "groups[1].views[0].tensors[0].heads");
    l = base("tiny");
    l.groups[0].views[0].tensors[0].heads = 0;
    invalid(&l, "groups[0].views[0].tensors[0].heads: 0 is not allowed");
}
END_TEST

START_TEST(validate_refuses_tensors_not_tiling_the_region)
{
    struct layout l = base("tiny");
    l.groups[0].views[0].region_bytes += 2;
    invalid(&l, "groups[0].views[0].region_bytes");
    l = base("tiny");
    l.groups[0].views[0].tensors[1].offset += 2;
    invalid(&l, "groups[0].views[0].tensors[1].offset");
    l = base("tiny");
    l.groups[0].views[0].tensors[1].offset = 0; /* overlaps conv */
    invalid(&l, "groups[0].views[0].tensors[1].offset");
    l = base("tiny");
    l.groups[0].views[0].tensors[1].inner = 6; /* fp32 */
    invalid(&l, "groups[0].views[0].tensors[1].inner: 6 is not a multiple of the fp32 size 4");
}
END_TEST

START_TEST(validate_refuses_duplicate_and_shared_layers)
{
    struct layout l = base("tiny");
    l.groups[0].layers[1] = l.groups[0].layers[0];
    invalid(&l, "groups[0].layers[1]");
    l = base("tiny");
    l.groups[1].layers[0] = l.groups[0].layers[0]; /* 0 < 3: also breaks nothing else */
    invalid(&l, "groups[1].layers[0]: layer 0 is also in groups[0]");
    l = base("tiny");
    l.groups[1].layers[1] = 8;
    invalid(&l, "groups[1].layers[1]: 8 is not below n_layers_total 8");
    l = base("tiny");
    l.groups[0].layers[2] = l.groups[0].layers[1] - 1;
    invalid(&l, "groups[0].layers[2]");
}
END_TEST

START_TEST(validate_refuses_bad_identity_fields)
{
    struct layout l = base("tiny:tp=2");
    l.tp_rank = 2;
    invalid(&l, "tp_rank: 2 is not below tp_size 2");
    l = base("tiny:pp=2");
    l.pp_rank = 5;
    invalid(&l, "pp_rank");
    l = base("tiny");
    l.tokens_per_block = 0;
    invalid(&l, "tokens_per_block: 0");
    l = base("tiny");
    l.groups[1].n_items = 0;
    invalid(&l, "groups[1].n_items: 0");
    l = base("tiny");
    l.instance[0] = '\0';
    invalid(&l, "instance: is empty");
    l = base("tiny");
    memset(l.groups[0].views[0].name, 'x', sizeof(l.groups[0].views[0].name));
    invalid(&l, "groups[0].views[0].name: is not NUL-terminated");
    l = base("tiny");
    l.fingerprint[0] = '\n';
    invalid(&l, "fingerprint: has a byte outside printable ASCII");
    l = base("tiny");
    strcpy(l.groups[1].name, "kda");
    invalid(&l, "groups[1].name: \"kda\" repeats groups[0]");
    l = base("tiny:state=split");
    strcpy(l.groups[0].views[1].tensors[0].name, "conv");
    invalid(&l, "groups[0].views[1].tensors[0].name: \"conv\" repeats");
    l = base("tiny");
    l.pools[0].kind = POOL_CUDA;
    l.pools[0].device = 0;
    invalid(&l, "pools[0].kind: cuda pool on a CPU-mode rank");
    l = base("tiny");
    l.pools[0].device = 0;
    invalid(&l, "pools[0].device: 0 for a host pool");
    l = base("tiny");
    l.groups[0].views[0].pool = l.n_pools;
    invalid(&l, "groups[0].views[0].pool");
    l = base("tiny");
    l.n_groups = LAYOUT_MAX_GROUPS + 1;
    invalid(&l, "n_groups");
    l = base("tiny");
    l.groups[0].n_views = 0;
    invalid(&l, "groups[0].n_views");
    l = base("tiny");
    l.groups[0].views[0].n_tensors = LAYOUT_MAX_TENSORS + 1;
    invalid(&l, "groups[0].views[0].n_tensors");
    l = base("tiny");
    l.n_layers_total = LAYOUT_MAX_LAYERS + 1;
    invalid(&l, "n_layers_total");
    l = base("tiny");
    l.groups[0].views[0].tensors[0].dtype = (dtype_t)17;
    invalid(&l, "groups[0].views[0].tensors[0].dtype");
}
END_TEST

/* Two views of one group in one pool, K and V interleaved by block (vLLM-like). */
static struct layout interleaved(uint64_t r, uint64_t v_base, uint64_t v_item_stride)
{
    struct layout l = base("tiny:blocks=4,slots=2,kv=split");
    struct layout_group *g = &l.groups[1];
    for (int i = 0; i < 2; i++) {
        struct layout_view *v = &g->views[i];
        v->pool = g->views[0].pool;
        v->tensors[0].outer = 1;
        v->tensors[0].inner = (uint32_t)r;
        v->region_bytes = r;
        v->item_stride = 2 * r;
        v->layer_stride = 8 * r;
        v->base = 0;
    }
    g->views[1].base = v_base;
    g->views[1].item_stride = v_item_stride;
    l.pools[g->views[0].pool].bytes = 64 * r;
    return l;
}

START_TEST(validate_accepts_interleaved_views_and_refuses_overlapping_ones)
{
    struct layout l = interleaved(64, 64, 128);
    valid(&l);
    l = interleaved(64, 32, 128);
    invalid(&l, "groups[1].views[1].base: regions overlap those of groups[1].views[0] in pool");
    /* different item strides: V in the second half of each layer's 8r span, packed */
    l = interleaved(64, 64, 128);
    l.groups[1].views[0].item_stride = 64;
    l.groups[1].views[1].base = 4 * 64;
    l.groups[1].views[1].item_stride = 64;
    valid(&l);
    l.groups[1].views[1].item_stride = 48; /* different stride: V items at 264, 312, 360, 408 */
    l.groups[1].views[1].base = 4 * 64 + 8;
    l.groups[1].views[1].tensors[0].inner = 8;
    l.groups[1].views[1].region_bytes = 8;
    valid(&l);
    l.groups[1].views[1].base = 4 * 64 - 4; /* item 0 of V overlaps item 3 of K */
    invalid(&l, "groups[1].views[1].base: regions overlap");
}
END_TEST

START_TEST(validate_refuses_what_it_cannot_prove_disjoint_within_budget)
{
    /* K on even multiples of r, V on r(4m+1): disjoint, but the item strides differ and both
     * views have 2^23 items, past the walk budget: refused, never accepted unchecked. */
    struct layout l = interleaved(64, 64, 256);
    struct layout_group *g = &l.groups[1];
    g->n_layers = 1;
    g->n_items = 1u << 23;
    g->views[0].item_stride = 128;
    l.pools[g->views[0].pool].bytes = 256ULL << 23;
    invalid(&l, "groups[1].views[1].item_stride: cannot prove its regions disjoint");
    /* With few items the same geometry is proven disjoint exactly. */
    g->n_items = 1000;
    valid(&l);
    g->views[1].base = 128; /* now V item 0 sits on K item 1 */
    invalid(&l, "groups[1].views[1].base: regions overlap");
}
END_TEST

/* Brute force over the same geometry: does any byte belong to two regions? */
static int brute_overlap(const struct layout *l)
{
    static unsigned char owner[1 << 12];
    memset(owner, 0, sizeof(owner));
    for (uint32_t g = 0; g < l->n_groups; g++)
        for (uint32_t v = 0; v < l->groups[g].n_views; v++) {
            const struct layout_view *w = &l->groups[g].views[v];
            for (uint32_t i = 0; i < l->groups[g].n_layers; i++)
                for (uint32_t j = 0; j < l->groups[g].n_items; j++) {
                    uint64_t at = w->base + i * w->layer_stride + j * w->item_stride;
                    for (uint64_t b = at; b < at + w->region_bytes; b++) {
                        ck_assert_uint_lt(b, sizeof(owner));
                        if (owner[b])
                            return 1;
                        owner[b] = 1;
                    }
                }
        }
    return 0;
}

START_TEST(validate_overlap_rule_is_exact_against_brute_force)
{
    unsigned seed = 12345;
    int overlaps = 0, disjoint = 0;
    for (int iter = 0; iter < 20000; iter++) {
        struct layout l = base("tiny:kv=split,state=split");
        /* every view into pool 0, u8 tensors of the region size; layers moved: no map */
        l.n_map_groups = 0;
        memset(l.layer_map, 0, sizeof(l.layer_map));
        l.n_pools = 1;
        l.pools[0].bytes = 1 << 12;
        for (uint32_t g = 0; g < 2; g++) {
            struct layout_group *gr = &l.groups[g];
            gr->n_layers = 1 + rand_r(&seed) % (g ? 2 : 4);
            for (uint32_t i = 0; i < gr->n_layers; i++)
                gr->layers[i] = (uint16_t)(g * 4 + i);
            gr->n_items = 1 + rand_r(&seed) % 5;
            for (uint32_t v = 0; v < 2; v++) {
                struct layout_view *w = &gr->views[v];
                w->pool = 0;
                w->region_bytes = 1 + rand_r(&seed) % 8;
                w->base = rand_r(&seed) % 200;
                w->layer_stride = rand_r(&seed) % 48;
                w->item_stride = rand_r(&seed) % 24;
                w->n_tensors = 1;
                struct layout_tensor *t = &w->tensors[0];
                t->offset = 0;
                t->outer = t->heads = t->global_heads = 1;
                t->inner = (uint32_t)w->region_bytes;
                t->dtype = DTYPE_U8;
                t->shard = SHARD_REPLICATED;
            }
        }
        int want = brute_overlap(&l);
        int rc = layout_validate(&l, err, sizeof(err));
        ck_assert_msg((rc != 0) == want, "iter %d: brute %d, validate %d (%s)", iter, want, rc, err);
        if (want) {
            ck_assert_msg(strstr(err, "overlap"), "%s", err);
            overlaps++;
        } else {
            disjoint++;
        }
    }
    ck_assert_int_gt(overlaps, 1000);
    ck_assert_int_gt(disjoint, 1000);
}
END_TEST

/* ---- JSON ---- */

static const char *variants[] = {
    "tiny",
    "tiny:tp=2,kv=split,state=split",
    "tiny:tp=4,adp=1,arr=block",
    "tiny:pp_layers=3+5",
    "tiny:tp=2,state_shard=replicated,hd=16,dtype=bf16,fp=other",
    "kimi-linear-48b:tp=2,pp=2,blocks=16,slots=4",
    "kimi-linear-48b:arr=block,kv=split,tpb=32",
    "kimi-k3:tp=4,pp_layers=40+53,blocks=8,slots=2",
    "kimi-k3:tp=8,pp=8,state=split,arr=block",
};

START_TEST(json_round_trips_every_preset_variant)
{
    for (size_t vi = 0; vi < sizeof(variants) / sizeof(variants[0]); vi++) {
        struct preset_spec s;
        ck_assert_int_eq(preset_parse(variants[vi], &s, err, sizeof(err)), 0);
        for (int32_t dev = -1; dev <= 1; dev += 2) {
            ck_assert_msg(preset_build(&s, "ctx-a", ROLE_GENERATION, dev, ranks, err,
                                       sizeof(err)) == 0, "%s", err);
            for (uint32_t r = 0; r < preset_n_ranks(&s); r++) {
                char *a = layout_to_json(&ranks[r]);
                ck_assert_ptr_nonnull(a);
                struct layout back;
                memset(&back, 0, sizeof(back));
                ck_assert_msg(layout_from_json(a, strlen(a), &back, err, sizeof(err)) == 0,
                              "%s rank %u: %s", variants[vi], r, err);
                ck_assert_msg(memcmp(&back, &ranks[r], sizeof(back)) == 0, "%s rank %u differs",
                              variants[vi], r);
                char *b = layout_to_json(&back);
                ck_assert_str_eq(a, b);
                free(a);
                free(b);
            }
        }
    }
}
END_TEST

START_TEST(json_encoding_is_canonical_with_fixed_keys)
{
    struct layout l = base("tiny:blocks=2,slots=1,tpb=4");
    char *a = layout_to_json(&l);
    ck_assert_ptr_nonnull(a);
    ck_assert_msg(strncmp(a, "{\"instance\":\"inst\",\"role\":\"context\",\"tp_size\":1,", 48) == 0,
                  "%s", a);
    ck_assert_ptr_nonnull(strstr(a, "\"layers\":[3,7],\"n_items\":2,"));
    ck_assert_ptr_nonnull(strstr(a, "{\"name\":\"k_pe\",\"offset\":4096,\"outer\":4,\"heads\":1,"
                                    "\"inner\":128,\"global_heads\":1,\"shard\":\"replicated\","
                                    "\"dtype\":\"bf16\"}"));
    free(a);
}
END_TEST

/* Encodes tiny, lets `edit` change the jansson tree, and expects a refusal naming `needle`. */
static void refused_json(void (*edit)(json_t *), const char *needle)
{
    struct layout l = base("tiny:blocks=2,slots=1");
    json_t *o = layout_to_jobj(&l);
    ck_assert_ptr_nonnull(o);
    edit(o);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    struct layout out;
    memset(&out, 0x6b, sizeof(out));
    unsigned char before[sizeof(out)];
    memcpy(before, &out, sizeof(out));
    err[0] = '\0';
    ck_assert_int_eq(layout_from_json(text, strlen(text), &out, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, needle), "message \"%s\" lacks \"%s\"", err, needle);
    ck_assert_msg(memcmp(&out, before, sizeof(out)) == 0, "ret written on error");
    free(text);
}

static json_t *g0(json_t *o) { return json_array_get(json_object_get(o, "groups"), 0); }
static json_t *v0(json_t *o) { return json_array_get(json_object_get(g0(o), "views"), 0); }
static json_t *t0(json_t *o) { return json_array_get(json_object_get(v0(o), "tensors"), 0); }

static void e_unknown_top(json_t *o) { json_object_set_new(o, "colour", json_string("red")); }
static void e_unknown_nested(json_t *o) { json_object_set_new(t0(o), "scale", json_integer(1)); }
static void e_missing(json_t *o) { json_object_del(v0(o), "item_stride"); }
static void e_wrong_type(json_t *o) { json_object_set_new(o, "tp_size", json_string("1")); }
static void e_real(json_t *o) { json_object_set_new(v0(o), "base", json_real(0.0)); }
static void e_bool_type(json_t *o) { json_object_set_new(o, "attention_dp", json_integer(0)); }
static void e_negative(json_t *o)
{
    json_object_set_new(json_array_get(json_object_get(o, "pools"), 0), "bytes", json_integer(-1));
}
static void e_device_low(json_t *o) { json_object_set_new(o, "device", json_integer(-2)); }
static void e_huge(json_t *o)
{
    json_object_set_new(v0(o), "layer_stride", json_integer((json_int_t)(1ULL << 53) + 1));
}
static void e_u32_range(json_t *o) { json_object_set_new(t0(o), "inner", json_integer(1LL << 32)); }
static void e_enum(json_t *o) { json_object_set_new(t0(o), "dtype", json_string("int4")); }
static void e_long_string(json_t *o)
{
    char s[LAYOUT_NAME_MAX + 1];
    memset(s, 'i', LAYOUT_NAME_MAX);
    s[LAYOUT_NAME_MAX] = '\0';
    json_object_set_new(o, "instance", json_string(s));
}
static void e_long_short(json_t *o)
{
    json_object_set_new(t0(o), "name", json_string("a-tensor-name-of-24-bytes"));
}
static void many(json_t *arr, size_t n)
{
    while (json_array_size(arr) < n)
        json_array_append(arr, json_array_get(arr, 0));
}
static void e_many_groups(json_t *o) { many(json_object_get(o, "groups"), LAYOUT_MAX_GROUPS + 1); }
static void e_many_views(json_t *o) { many(json_object_get(g0(o), "views"), LAYOUT_MAX_VIEWS + 1); }
static void e_many_tensors(json_t *o)
{
    many(json_object_get(v0(o), "tensors"), LAYOUT_MAX_TENSORS + 1);
}
static void e_many_pools(json_t *o) { many(json_object_get(o, "pools"), LAYOUT_MAX_POOLS + 1); }
static void e_many_layers(json_t *o)
{
    json_t *a = json_array();
    for (int i = 0; i <= LAYOUT_MAX_LAYERS; i++)
        json_array_append_new(a, json_integer(i % 256));
    json_object_set_new(g0(o), "layers", a);
}
static void e_layer_value(json_t *o)
{
    json_array_set_new(json_object_get(g0(o), "layers"), 0, json_integer(300));
}
static void e_not_object(json_t *o) { json_array_set_new(json_object_get(o, "groups"), 0, json_integer(1)); }
static void e_invalid(json_t *o) { json_object_set_new(t0(o), "heads", json_integer(3)); }
static void e_no_groups(json_t *o) { json_array_clear(json_object_get(o, "groups")); }

START_TEST(json_decode_refuses_bad_fields_naming_them)
{
    refused_json(e_unknown_top, "colour: unknown key");
    refused_json(e_unknown_nested, "groups[0].views[0].tensors[0].scale: unknown key");
    refused_json(e_missing, "groups[0].views[0].item_stride: missing");
    refused_json(e_wrong_type, "tp_size: not an integer");
    refused_json(e_real, "groups[0].views[0].base: not an integer");
    refused_json(e_bool_type, "attention_dp: not a boolean");
    refused_json(e_negative, "pools[0].bytes: -1 is negative");
    refused_json(e_device_low, "device: -2 is below -1");
    refused_json(e_huge, "groups[0].views[0].layer_stride: 9007199254740993 is over 2^53");
    refused_json(e_u32_range, "groups[0].views[0].tensors[0].inner: 4294967296 is over");
    refused_json(e_enum, "groups[0].views[0].tensors[0].dtype: \"int4\" is not a known value");
    refused_json(e_long_string, "instance: 64 bytes is over 63");
    refused_json(e_long_short, "groups[0].views[0].tensors[0].name: 25 bytes is over 23");
    refused_json(e_many_groups, "groups: 17 entries is over 16");
    refused_json(e_many_views, "groups[0].views: 9 entries is over 8");
    refused_json(e_many_tensors, "groups[0].views[0].tensors: 5 entries is over 4");
    refused_json(e_many_pools, "pools: 1025 entries is over 1024");
    refused_json(e_many_layers, "groups[0].layers: 257 entries is over 256");
    refused_json(e_layer_value, "groups[0].layers[0]: not an integer in 0..255");
    refused_json(e_not_object, "groups[0]: not an object");
    refused_json(e_invalid, "groups[0].views[0].tensors[0].heads");
    refused_json(e_no_groups, "groups: empty");
}
END_TEST

static void refused_text(const char *text, size_t len, const char *needle)
{
    struct layout out;
    err[0] = '\0';
    ck_assert_int_eq(layout_from_json(text, len, &out, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, needle), "message \"%s\" lacks \"%s\"", err, needle);
}

START_TEST(json_decode_refuses_malformed_input)
{
    struct layout l = base("tiny");
    char *a = layout_to_json(&l);
    size_t n = strlen(a);
    refused_text(a, n / 2, "json: line 1");   /* truncated */
    refused_text(a, n - 1, "json:");          /* last brace missing */
    refused_text("{\"instance\":\"a\",\"instance\":\"b\"}", 32, "json:"); /* duplicate key */
    refused_text("[]", 2, "layout: not an object");
    refused_text("{\"tp_size\":99999999999999999999999}", 35, "json:"); /* too big integer */
    refused_text("", 0, "json:");
    /* Over LAYOUT_JSON_MAX: refused before parsing, even though it would be valid with padding. */
    char *big = malloc(LAYOUT_JSON_MAX + 2);
    memset(big, ' ', LAYOUT_JSON_MAX + 1);
    memcpy(big, a, n);
    big[LAYOUT_JSON_MAX + 1] = '\0';
    refused_text(big, LAYOUT_JSON_MAX + 1, "json: 262145 bytes is over the limit");
    struct layout back;
    ck_assert_int_eq(layout_from_json(big, LAYOUT_JSON_MAX, &back, err, sizeof(err)), 0);
    /* A duplicate key nested inside an object is refused too. */
    char *dup = malloc(n + 32);
    const char *at = strstr(a, "\"n_items\":");
    ck_assert_ptr_nonnull(at);
    size_t pre = (size_t)(at - a);
    memcpy(dup, a, pre);
    strcpy(dup + pre, "\"n_items\":1,");
    strcpy(dup + pre + 12, at);
    refused_text(dup, strlen(dup), "duplicate");
    free(dup);
    free(big);
    free(a);
}
END_TEST

START_TEST(json_object_variants_share_the_decoder)
{
    struct layout l = base("tiny:tp=2,blocks=2,slots=1"), back;
    json_t *o = layout_to_jobj(&l);
    ck_assert_ptr_nonnull(o);
    memset(&back, 0, sizeof(back));
    ck_assert_msg(layout_from_jobj(o, &back, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(memcmp(&back, &l, sizeof(l)), 0);
    json_object_set_new(o, "tp_rank", json_integer(2));
    ck_assert_int_eq(layout_from_jobj(o, &back, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "tp_rank: 2 is not below tp_size 2"), "%s", err);
    json_decref(o);
    json_t *arr = json_array();
    ck_assert_int_eq(layout_from_jobj(arr, &back, err, sizeof(err)), -EINVAL);
    json_decref(arr);
    ck_assert_int_eq(layout_from_jobj(NULL, &back, err, sizeof(err)), -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout");
    TCase *tc = tcase_create("validate");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, dtype_and_enum_names_round_trip);
    tcase_add_test(tc, validate_refuses_overlapping_strides);
    tcase_add_test(tc, validate_refuses_region_past_the_pool);
    tcase_add_test(tc, validate_refuses_overflowing_strides);
    tcase_add_test(tc, validate_refuses_heads_that_do_not_divide);
    tcase_add_test(tc, validate_refuses_tensors_not_tiling_the_region);
    tcase_add_test(tc, validate_refuses_duplicate_and_shared_layers);
    tcase_add_test(tc, validate_refuses_bad_identity_fields);
    tcase_add_test(tc, validate_accepts_interleaved_views_and_refuses_overlapping_ones);
    tcase_add_test(tc, validate_overlap_rule_is_exact_against_brute_force);
    tcase_add_test(tc, validate_refuses_what_it_cannot_prove_disjoint_within_budget);
    suite_add_tcase(s, tc);
    tc = tcase_create("json");
    tcase_add_test(tc, json_round_trips_every_preset_variant);
    tcase_add_test(tc, json_encoding_is_canonical_with_fixed_keys);
    tcase_add_test(tc, json_decode_refuses_bad_fields_naming_them);
    tcase_add_test(tc, json_decode_refuses_malformed_input);
    tcase_add_test(tc, json_object_variants_share_the_decoder);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
