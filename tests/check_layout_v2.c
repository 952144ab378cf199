/* check_layout_v2.c: the layout v2 fields: per-layer views (JSON round trip, refusals naming the
 * field, the region rules across layers), declared aliases (accepted only across groups with the
 * same alias), every raised limit crossed (at the limit accepted, one past refused naming the
 * field), and the worked examples of docs/LAYOUT.md decoding. */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"
#include "preset.h"
#include "testutil.h"

static char err[512];
static struct layout ranks[LAYOUT_MAX_TP];

static struct layout *rank0(const char *spec)
{
    struct preset_spec s;
    ck_assert_msg(preset_parse(spec, &s, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(preset_build(&s, "inst", ROLE_CONTEXT, -1, ranks, err, sizeof(err)) == 0, "%s",
                  err);
    return &ranks[0];
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

/* Encode, decode, encode: equal texts, and the decoded layout validates. */
static void round_trip(const struct layout *l)
{
    char *a = layout_to_json(l);
    ck_assert_ptr_nonnull(a);
    struct layout *back = malloc(sizeof(*back));
    ck_assert_msg(layout_from_json(a, strlen(a), back, err, sizeof(err)) == 0, "%s", err);
    char *b = layout_to_json(back);
    ck_assert_str_eq(a, b);
    free(a);
    free(b);
    free(back);
}

START_TEST(per_layer_presets_round_trip_and_keep_v1_text)
{
    const char *specs[] = {"tiny:pools=layer", "tiny:pools=layer_joint,tp=2",
                           "kimi-linear-48b:pools=layer,kv=split,state=split",
                           "kimi-k3:pools=layer_joint,pp=2", "tiny:pp_layers=3+5,pools=layer"};
    for (unsigned i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
        struct layout *l = rank0(specs[i]);
        ck_assert(l->groups[0].views[0].per_layer);
        round_trip(l);
        char *t = layout_to_json(l);
        ck_assert_ptr_nonnull(strstr(t, "\"per_layer\":[{\"pool\":"));
        ck_assert_ptr_null(strstr(t, "layer_stride"));
        free(t);
    }
    /* a v1 layout encodes with neither new key */
    char *t = layout_to_json(rank0("tiny"));
    ck_assert_ptr_null(strstr(t, "per_layer"));
    ck_assert_ptr_null(strstr(t, "alias"));
    free(t);
}
END_TEST

START_TEST(per_layer_view_refusals_name_the_field)
{
    struct layout l = *rank0("tiny:pools=layer");
    struct layout_view *v = &l.groups[1].views[0];
    valid(&l);
    l.addrs[v->addr_at + 1].pool = l.n_pools;
    invalid(&l, "groups[1].views[0].per_layer[1].pool: ");
    l = *rank0("tiny:pools=layer");
    l.addrs[v->addr_at].base = 1; /* past its pool */
    invalid(&l, "groups[1].views[0].per_layer[0]: the last region ends");
    l = *rank0("tiny:pools=layer");
    l.addrs[v->addr_at].base = (1ULL << 53) + 1;
    invalid(&l, "groups[1].views[0].per_layer[0].base: 9007199254740993 is over 2^53");
    l = *rank0("tiny:pools=layer");
    v->layer_stride = 64;
    invalid(&l, "groups[1].views[0].per_layer: a per-layer view has pool, base and layer_stride 0");
    l = *rank0("tiny:pools=layer");
    l.n_addrs = v->addr_at + 1;
    invalid(&l, "groups[1].views[0].per_layer: entries");
    /* two layers of one view in one pool, overlapping */
    l = *rank0("tiny:pools=layer");
    l.addrs[v->addr_at + 1] = l.addrs[v->addr_at];
    invalid(&l, "groups[1].views[0].per_layer[1].base: regions overlap those of "
                "groups[1].views[0].per_layer[0]");
    /* ... and side by side in one pool: fine */
    l = *rank0("tiny:pools=layer");
    uint32_t p0 = l.addrs[v->addr_at].pool;
    uint64_t size = l.pools[p0].bytes;
    l.pools[p0].bytes = size * l.groups[1].n_layers;
    for (uint32_t k = 0; k < l.groups[1].n_layers; k++)
        l.addrs[v->addr_at + k] = (struct layout_addr){p0, k * size};
    valid(&l);
}
END_TEST

/* Encodes tiny:pools=layer, edits the tree, expects a refusal naming `needle`. */
static void refused_json(void (*edit)(json_t *), const char *needle)
{
    json_t *o = layout_to_jobj(rank0("tiny:blocks=2,slots=1,pools=layer"));
    ck_assert_ptr_nonnull(o);
    edit(o);
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    struct layout *out = malloc(sizeof(*out));
    err[0] = '\0';
    ck_assert_int_eq(layout_from_json(text, strlen(text), out, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, needle), "message \"%s\" lacks \"%s\"", err, needle);
    free(out);
    free(text);
}

static json_t *v0(json_t *o)
{
    json_t *g = json_array_get(json_object_get(o, "groups"), 0);
    return json_array_get(json_object_get(g, "views"), 0);
}
static json_t *pl0(json_t *o) { return json_array_get(json_object_get(v0(o), "per_layer"), 0); }
static void e_both(json_t *o) { json_object_set_new(v0(o), "pool", json_integer(0)); }
static void e_short(json_t *o) { json_array_remove(json_object_get(v0(o), "per_layer"), 0); }
static void e_not_array(json_t *o) { json_object_set_new(v0(o), "per_layer", json_integer(0)); }
static void e_entry_key(json_t *o) { json_object_set_new(pl0(o), "stride", json_integer(0)); }
static void e_entry_missing(json_t *o) { json_object_del(pl0(o), "base"); }
static void e_entry_pool(json_t *o) { json_object_set_new(pl0(o), "pool", json_integer(1024)); }
static void e_entry_type(json_t *o) { json_object_set_new(pl0(o), "base", json_string("0")); }
static void e_alias_empty(json_t *o) { json_object_set_new(v0(o), "alias", json_string("")); }
static void e_alias_type(json_t *o) { json_object_set_new(v0(o), "alias", json_integer(1)); }
static void e_alias_long(json_t *o)
{
    json_object_set_new(v0(o), "alias", json_string("an-alias-of-twenty-four!"));
}

START_TEST(json_v2_fields_are_strict)
{
    refused_json(e_both, "groups[0].views[0].pool: unknown key");
    refused_json(e_short, "groups[0].views[0].per_layer: 5 entries, the group has 6 layers");
    refused_json(e_not_array, "groups[0].views[0].per_layer: not an array");
    refused_json(e_entry_key, "groups[0].views[0].per_layer[0].stride: unknown key");
    refused_json(e_entry_missing, "groups[0].views[0].per_layer[0].base: missing");
    refused_json(e_entry_pool, "groups[0].views[0].per_layer[0].pool: 1024 is over 1023");
    refused_json(e_entry_type, "groups[0].views[0].per_layer[0].base: not an integer");
    refused_json(e_alias_empty, "groups[0].views[0].alias: empty");
    refused_json(e_alias_type, "groups[0].views[0].alias: not a string");
    refused_json(e_alias_long, "groups[0].views[0].alias: 24 bytes is over 23");
}
END_TEST

/* tiny with the mla view moved onto the kda view's pool, overlapping it. */
static struct layout overlapping(void)
{
    struct layout l = *rank0("tiny:blocks=4,slots=4");
    struct layout_view *kda = &l.groups[0].views[0], *mla = &l.groups[1].views[0];
    mla->pool = kda->pool;
    mla->base = 0;
    uint64_t need = mla->base + (l.groups[1].n_layers - 1) * mla->layer_stride +
                    (l.groups[1].n_items - 1) * mla->item_stride + mla->region_bytes;
    if (l.pools[kda->pool].bytes < need)
        l.pools[kda->pool].bytes = need;
    return l;
}

START_TEST(alias_allows_declared_overlap_across_groups_only)
{
    struct layout l = overlapping();
    invalid(&l, "groups[1].views[0].base: regions overlap those of groups[0].views[0] in pool 0 "
                "(views of different groups that share memory by design declare one alias)");
    snprintf(l.groups[0].views[0].alias, LAYOUT_SHORT_MAX, "raw");
    invalid(&l, "regions overlap"); /* one side only */
    snprintf(l.groups[1].views[0].alias, LAYOUT_SHORT_MAX, "other");
    invalid(&l, "regions overlap"); /* different aliases */
    snprintf(l.groups[1].views[0].alias, LAYOUT_SHORT_MAX, "raw");
    valid(&l);
    round_trip(&l);
    char *t = layout_to_json(&l);
    ck_assert_ptr_nonnull(strstr(t, "\"alias\":\"raw\""));
    free(t);
    /* the same alias inside one group does not excuse an overlap */
    l = *rank0("tiny:blocks=4,slots=4,state=split");
    struct layout_view *a = &l.groups[0].views[0], *b = &l.groups[0].views[1];
    uint64_t bb = l.pools[b->pool].bytes;
    b->pool = a->pool;
    if (l.pools[a->pool].bytes < bb)
        l.pools[a->pool].bytes = bb;
    snprintf(a->alias, LAYOUT_SHORT_MAX, "raw");
    snprintf(b->alias, LAYOUT_SHORT_MAX, "raw");
    invalid(&l, "groups[0].views[1].base: regions overlap those of groups[0].views[0]");
    l.groups[0].views[0].alias[0] = 1;
    l.groups[0].views[0].alias[1] = 0;
    invalid(&l, "groups[0].views[0].alias: has a byte outside printable ASCII");
}
END_TEST

/* A synthetic rank: n_groups paged groups of `layers` layers each (ids dealt out in turn),
 * `views` per-layer views per group, every (group, view, layer) region in a pool of its own
 * while pools last, then stacked after the regions already in pool (entry % n_pools). */
static void synth(struct layout *l, uint32_t n_groups, uint32_t layers, uint32_t views,
                  uint32_t n_pools)
{
    memset(l, 0, sizeof(*l));
    snprintf(l->instance, sizeof(l->instance), "synth");
    snprintf(l->fingerprint, sizeof(l->fingerprint), "synth/v1");
    l->tp_size = l->pp_size = 1;
    l->device = -1;
    l->tokens_per_block = 16;
    l->n_layers_total = n_groups * layers;
    l->n_pools = n_pools;
    l->n_groups = n_groups;
    for (uint32_t p = 0; p < n_pools; p++)
        l->pools[p].device = -1;
    const uint64_t region = 64, items = 4;
    for (uint32_t g = 0; g < n_groups; g++) {
        struct layout_group *gr = &l->groups[g];
        snprintf(gr->name, sizeof(gr->name), "g%u", g);
        gr->kind = GROUP_PAGED;
        gr->n_items = (uint32_t)items;
        gr->n_layers = layers;
        for (uint32_t k = 0; k < layers; k++)
            gr->layers[k] = (uint16_t)(k * n_groups + g);
        gr->n_views = views;
        for (uint32_t v = 0; v < views; v++) {
            struct layout_view *vw = &gr->views[v];
            snprintf(vw->name, sizeof(vw->name), "v%u", v);
            vw->per_layer = true;
            vw->addr_at = l->n_addrs;
            vw->item_stride = vw->region_bytes = region;
            vw->n_tensors = 1;
            snprintf(vw->tensors[0].name, sizeof(vw->tensors[0].name), "t%u", v);
            vw->tensors[0] = (struct layout_tensor){.outer = 4, .heads = 1, .inner = 16,
                                                    .global_heads = 1, .dtype = DTYPE_U8};
            snprintf(vw->tensors[0].name, sizeof(vw->tensors[0].name), "t%u", v);
            for (uint32_t k = 0; k < layers; k++) {
                uint32_t e = l->n_addrs++;
                struct layout_addr *a = &l->addrs[e];
                a->pool = e % n_pools;
                a->base = (uint64_t)(e / n_pools) * items * region;
                l->pools[a->pool].bytes = a->base + items * region;
            }
        }
    }
}

static void json_limit(const struct layout *l, int ok, const char *needle)
{
    char *t = layout_to_json(l);
    ck_assert_ptr_nonnull(t);
    struct layout *back = malloc(sizeof(*back));
    int rc = layout_from_json(t, strlen(t), back, err, sizeof(err));
    if (ok)
        ck_assert_msg(rc == 0, "%s", err);
    else
        ck_assert_msg(rc == -EINVAL && strstr(err, needle), "rc %d, \"%s\" lacks \"%s\"", rc, err,
                      needle);
    free(back);
    free(t);
}

START_TEST(limits_at_the_limit_accepted_one_past_refused)
{
    struct layout *l = malloc(sizeof(*l));
    fprintf(stderr, "sizeof(struct layout) = %zu bytes\n", sizeof(struct layout));
    /* pools: 1024 (8 groups x 128 layers x 1 view), one more pool is refused */
    synth(l, 8, 32, 4, LAYOUT_MAX_POOLS);
    ck_assert_uint_eq(l->n_addrs, 1024);
    valid(l);
    json_limit(l, 1, NULL);
    l->n_pools = LAYOUT_MAX_POOLS + 1;
    invalid(l, "n_pools: 1025 is outside 1..1024");
    /* per-layer entries: 2048 accepted (16 groups x 16 layers x 8 views), 2049 refused. JSON
     * cannot ask for more: layers are unique across groups, so entries <= 256 x 8 = 2048. */
    synth(l, LAYOUT_MAX_GROUPS, 16, LAYOUT_MAX_VIEWS, LAYOUT_MAX_POOLS);
    ck_assert_uint_eq(l->n_addrs, LAYOUT_MAX_LAYER_ADDRS);
    valid(l);
    json_limit(l, 1, NULL);
    l->n_addrs = LAYOUT_MAX_LAYER_ADDRS + 1;
    invalid(l, "n_addrs: 2049 per-layer entries is over 2048");
    /* groups: 16 accepted, 17 refused (by the decoder and by validate) */
    synth(l, LAYOUT_MAX_GROUPS, 2, 1, 32);
    valid(l);
    l->n_groups = LAYOUT_MAX_GROUPS + 1;
    invalid(l, "n_groups: 17 is outside 1..16");
    /* views: 8 accepted, 9 refused */
    synth(l, 1, 2, LAYOUT_MAX_VIEWS, 16);
    valid(l);
    l->groups[0].n_views = LAYOUT_MAX_VIEWS + 1;
    invalid(l, "groups[0].n_views: 9 is outside 1..8");
    free(l);
}
END_TEST

START_TEST(examples_of_docs_layout_decode_and_round_trip)
{
    DIR *d = opendir("examples/layouts");
    ck_assert_msg(d, "run from the repository root");
    struct dirent *e;
    int n = 0;
    struct layout *l = malloc(sizeof(*l));
    while ((e = readdir(d))) {
        size_t len = strlen(e->d_name);
        if (len < 6 || strcmp(e->d_name + len - 5, ".json"))
            continue;
        char path[512];
        tu_fmt(path, sizeof(path), "examples/layouts/%s", e->d_name);
        json_error_t je;
        json_t *o = json_load_file(path, 0, &je);
        ck_assert_msg(o, "%s: %s", path, je.text);
        ck_assert_msg(layout_from_jobj(o, l, err, sizeof(err)) == 0, "%s: %s", path, err);
        json_decref(o);
        round_trip(l);
        n++;
    }
    closedir(d);
    free(l);
    ck_assert_int_ge(n, 3);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout_v2");
    TCase *tc = tcase_create("layout_v2");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, per_layer_presets_round_trip_and_keep_v1_text);
    tcase_add_test(tc, per_layer_view_refusals_name_the_field);
    tcase_add_test(tc, json_v2_fields_are_strict);
    tcase_add_test(tc, alias_allows_declared_overlap_across_groups_only);
    tcase_add_test(tc, limits_at_the_limit_accepted_one_past_refused);
    tcase_add_test(tc, examples_of_docs_layout_decode_and_round_trip);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
