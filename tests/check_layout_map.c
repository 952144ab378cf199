/* check_layout_map.c: the planning fields of a layout (layout.h): the model's layer map, the
 * rank's PP stage (stage_layers) and a tensor's row order. JSON round trip, and every decode or
 * validation refusal naming the field. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "preset.h"
#include "testutil.h"

static char *json_of(const char *spec, uint32_t rank)
{
    struct preset_spec s;
    char err[256];
    ck_assert_msg(preset_parse(spec, &s, err, sizeof err) == 0, "%s", err);
    struct layout *r = calloc(preset_n_ranks(&s), sizeof *r);
    ck_assert_ptr_nonnull(r);
    ck_assert_msg(preset_build(&s, "x", ROLE_GENERATION, -1, r, err, sizeof err) == 0, "%s", err);
    char *j = layout_to_json(&r[rank]);
    ck_assert_ptr_nonnull(j);
    free(r);
    return j;
}

/* text with the first `from` replaced by `to` (malloc'd). */
static char *edit(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    ck_assert_msg(at, "no \"%s\" in the encoding", from);
    size_t n = strlen(text) - strlen(from) + strlen(to) + 1;
    char *o = malloc(n);
    ck_assert_ptr_nonnull(o);
    snprintf(o, n, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from));
    return o;
}

static void refused(const char *text, const char *needle)
{
    static struct layout l;
    char err[256] = "";
    ck_assert_int_ne(layout_from_json(text, strlen(text), &l, err, sizeof err), 0);
    ck_assert_msg(strstr(err, needle), "message \"%s\" lacks \"%s\"", err, needle);
}

START_TEST(layer_map_stage_and_order_round_trip)
{
    char *j = json_of("qwen3-next-80b:hd=16,tp=4,pp=2,blocks=4,slots=1,tpb=16,order=hnd", 5);
    ck_assert_ptr_nonnull(strstr(j, "\"layer_map\":{\"gdn\":[0,1,2,4,"));
    ck_assert_ptr_nonnull(strstr(j, "\"stage_layers\":{\"first\":24,\"count\":24}"));
    ck_assert_ptr_nonnull(strstr(j, "\"order\":\"hnd\""));
    static struct layout l;
    char err[256];
    ck_assert_msg(layout_from_json(j, strlen(j), &l, err, sizeof err) == 0, "%s", err);
    ck_assert_uint_eq(l.n_map_groups, 2);
    ck_assert_uint_eq(l.stage_first, 24);
    ck_assert_uint_eq(l.stage_count, 24);
    char *again = layout_to_json(&l);
    ck_assert_str_eq(again, j);
    free(again);
    free(j);
    /* PP1 and NHD: neither stage_layers nor order is emitted */
    j = json_of("tiny", 0);
    ck_assert_ptr_null(strstr(j, "stage_layers"));
    ck_assert_ptr_null(strstr(j, "order"));
    ck_assert_ptr_nonnull(strstr(j, "\"layer_map\":{\"kda\":[0,1,2,4,5,6],\"mla\":[3,7]}"));
    free(j);
}
END_TEST

START_TEST(bad_layer_maps_stages_and_orders_are_refused_naming_the_field)
{
    char *j = json_of("tiny", 0), *b;
    b = edit(j, "\"mla\":[3,7]", "\"mla\":[3,7,8]");
    refused(b, "layer_map: layer 8 is not below n_layers_total 8");
    free(b);
    b = edit(j, "\"mla\":[3,7]", "\"mla\":[3,6,7]");
    refused(b, "layer_map.mla[1]: layer 6 is also in kda");
    free(b);
    b = edit(j, "\"mla\":[3,7]", "\"attn\":[3,7]");
    refused(b, "groups[1].name: \"mla\" is not in the layer_map");
    free(b);
    b = edit(j, "\"kda\":[0,1,2,4,5,6],\"mla\":[3,7]", "\"kda\":[0,1,2,4,5],\"mla\":[3,6,7]");
    refused(b, "groups[0].layers[5]: layer 6 is in group kda, the layer_map says mla");
    free(b);
    b = edit(j, "\"mla\":[3,7]", "\"mla\":[]");
    refused(b, "layer_map.mla: not an array of 1..256 layer ids");
    free(b);
    b = edit(j, "\"layer_map\":{\"kda\":[0,1,2,4,5,6],\"mla\":[3,7]}", "\"layer_map\":{}");
    refused(b, "layer_map: 0 groups is outside 1..");
    free(b);
    b = edit(j, "\"mla\":[3,7]", "\"mla\":[3,\"7\"]");
    refused(b, "layer_map.mla[1]: not an integer");
    free(b);
    b = edit(j, "\"n_layers_total\":8,",
             "\"n_layers_total\":8,\"stage_layers\":{\"first\":0,\"count\":0},");
    refused(b, "stage_layers.count: 0 is not allowed");
    free(b);
    b = edit(j, "\"n_layers_total\":8,",
             "\"n_layers_total\":8,\"stage_layers\":{\"first\":2,\"count\":6},");
    refused(b, "groups[0].layers[0]: layer 0 is outside stage_layers 2..7");
    free(b);
    b = edit(j, "\"n_layers_total\":8,",
             "\"n_layers_total\":8,\"stage_layers\":{\"first\":4,\"count\":6},");
    refused(b, "stage_layers: 4 + 6 layers is past n_layers_total 8");
    free(b);
    b = edit(j, "\"n_layers_total\":8,", "\"n_layers_total\":8,\"stage_layers\":{\"first\":0},");
    refused(b, "stage_layers.count: missing");
    free(b);
    b = edit(j, "\"dtype\":\"bf16\"", "\"dtype\":\"bf16\",\"order\":\"nchw\"");
    refused(b, "tensors[0].order: \"nchw\" is not a known value");
    free(b);
    free(j);
    /* replicated heads: more shards than heads needs one local head and heads dividing tp */
    j = json_of("llama-3-70b:tp=16,blocks=1", 3);
    b = edit(j, "\"heads\":1,", "\"heads\":2,");
    refused(b, "heads: 2 local heads of global_heads 8 over tp_eff 16");
    free(b);
    free(j);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout_map");
    TCase *tc = tcase_create("codec");
    tcase_add_test(tc, layer_map_stage_and_order_round_trip);
    tcase_add_test(tc, bad_layer_maps_stages_and_orders_are_refused_naming_the_field);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
