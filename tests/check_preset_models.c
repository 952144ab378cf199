/* check_preset_models.c: the presets of the models people run (qwen3-next-80b, nemotron-h,
 * llama-3-70b, deepseek-v3): layer pattern and layer map, byte accounting per slot and per token
 * from their public configs (the figures are worked out in the comments, the sums come from the
 * layouts), replicated head groups at TP above the KV heads, the conv width option, NHD/HND and
 * the omit= misconfiguration. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "plan.h"
#include "preset.h"
#include "testutil.h"

static struct layout ranks[LAYOUT_MAX_TP];
static char err[256];

static void build_ok(const char *text)
{
    struct preset_spec s;
    ck_assert_msg(preset_parse(text, &s, err, sizeof(err)) == 0, "%s: %s", text, err);
    ck_assert_msg(preset_build(&s, "x", ROLE_CONTEXT, -1, ranks, err, sizeof(err)) == 0, "%s: %s",
                  text, err);
}

static const struct layout_group *group(const struct layout *l, const char *name)
{
    for (uint32_t i = 0; i < l->n_groups; i++)
        if (!strcmp(l->groups[i].name, name))
            return &l->groups[i];
    return NULL;
}

/* Bytes of one item (slot or block) across every view and layer of a group. */
static uint64_t item_bytes(const struct layout_group *g)
{
    uint64_t sum = 0;
    for (uint32_t v = 0; g && v < g->n_views; v++)
        sum += g->views[v].region_bytes * g->n_layers;
    return sum;
}

static uint64_t per_token(const struct layout *l, const char *name)
{
    return item_bytes(group(l, name)) / l->tokens_per_block;
}

/* The one accounting (plan_bytes) agrees with the per-group sums. */
static void accounting_agrees(const struct layout *l, uint64_t tokens)
{
    uint32_t n[LAYOUT_MAX_GROUPS];
    struct request_bytes rb;
    plan_items_for_tokens(l, tokens, n);
    plan_bytes(l, n, &rb);
    uint64_t want = 0;
    for (uint32_t g = 0; g < l->n_groups; g++)
        want += item_bytes(&l->groups[g]) * n[g];
    ck_assert_uint_eq(rb.total, want);
    ck_assert_uint_eq(rb.state + rb.kv, rb.total);
}

START_TEST(qwen3_next_80b_is_36_gated_deltanet_and_12_attention_layers)
{
    build_ok("qwen3-next-80b");
    const struct layout *l = &ranks[0];
    ck_assert_uint_eq(l->n_layers_total, 48);
    ck_assert_uint_eq(group(l, "gdn")->n_layers, 36);
    ck_assert_uint_eq(group(l, "attn")->n_layers, 12);
    ck_assert_uint_eq(group(l, "attn")->layers[0], 3); /* full attention every 4th layer */
    /* per layer: conv q|k 2 x 16 x 128 x W4 x 2 B + v 32 x 128 x 4 x 2 B = 65,536;
     * ssm 32 x 128 x 128 x 4 B = 2,097,152 */
    ck_assert_uint_eq(item_bytes(group(l, "gdn")), 36ULL * (65536 + 2097152));
    /* K and V: 2 KV heads x 256 x 2 B each, 12 layers */
    ck_assert_uint_eq(per_token(l, "attn"), 12ULL * 2 * 2 * 256 * 2);
    accounting_agrees(l, 1000);
    /* the layer map names both groups for all 48 layers */
    ck_assert_uint_eq(l->n_map_groups, 2);
    for (uint32_t id = 0; id < 48; id++)
        ck_assert_str_eq(l->map_groups[l->layer_map[id] - 1], (id + 1) % 4 ? "gdn" : "attn");
    /* vLLM keeps W-1 conv columns */
    build_ok("qwen3-next-80b:conv=w-1");
    ck_assert_uint_eq(item_bytes(group(&ranks[0], "gdn")), 36ULL * (49152 + 2097152));
}
END_TEST

START_TEST(qwen3_next_80b_tp4_replicates_its_2_kv_heads)
{
    build_ok("qwen3-next-80b:tp=4");
    for (uint32_t r = 0; r < 4; r++) {
        const struct layout_tensor *k = &group(&ranks[r], "attn")->views[0].tensors[0];
        ck_assert_uint_eq(k->heads, 1);
        ck_assert_uint_eq(k->global_heads, 2);
        ck_assert_uint_eq(layout_first_head(&ranks[r], k), r / 2);
        ck_assert_uint_eq(per_token(&ranks[r], "attn"), 12ULL * 2 * 256 * 2);
        ck_assert_uint_eq(item_bytes(group(&ranks[r], "gdn")), 36ULL * (65536 + 2097152) / 4);
        ck_assert_int_eq(layout_validate(&ranks[r], err, sizeof(err)), 0);
    }
    build_ok("qwen3-next-80b:tp=16,blocks=2,slots=1");
    ck_assert_uint_eq(item_bytes(group(&ranks[15], "gdn")), 36ULL * (65536 + 2097152) / 16);
}
END_TEST

START_TEST(nemotron_h_is_24_mamba2_4_attention_and_24_mlp_layers)
{
    build_ok("nemotron-h");
    const struct layout *l = &ranks[0];
    ck_assert_uint_eq(l->n_layers_total, 52);
    ck_assert_uint_eq(group(l, "mamba")->n_layers, 24);
    ck_assert_uint_eq(group(l, "attn")->n_layers, 4);
    ck_assert_uint_eq(group(l, "attn")->layers[0], 7); /* "M-M-M-M*": the 8th layer */
    uint32_t unmapped = 0;
    for (uint32_t id = 0; id < 52; id++)
        unmapped += l->layer_map[id] == 0; /* MLP layers keep no cache */
    ck_assert_uint_eq(unmapped, 24);
    /* per layer: conv x 128 x 64 x 4 x 2 B = 65,536, conv B|C 2 x 8 x 128 x 4 x 2 B = 16,384,
     * ssm 128 x 64 x 128 x 4 B = 4,194,304 */
    ck_assert_uint_eq(item_bytes(group(l, "mamba")), 24ULL * 4276224);
    ck_assert_uint_eq(per_token(l, "attn"), 4ULL * 2 * 8 * 128 * 2);
    accounting_agrees(l, 4096);
    /* TP16: the 8 B|C groups and 8 KV heads are held by two ranks each */
    build_ok("nemotron-h:tp=16,blocks=2,slots=1");
    const struct layout_tensor *bc = &group(&ranks[9], "mamba")->views[0].tensors[1];
    ck_assert_str_eq(bc->name, "conv_bc");
    ck_assert_uint_eq(bc->heads, 1);
    ck_assert_uint_eq(layout_first_head(&ranks[9], bc), 4);
    ck_assert_uint_eq(group(&ranks[9], "mamba")->views[0].tensors[0].heads, 8);
}
END_TEST

START_TEST(llama_3_70b_is_80_gqa_layers_of_320_kib_per_token)
{
    build_ok("llama-3-70b");
    const struct layout *l = &ranks[0];
    ck_assert_uint_eq(l->n_groups, 1);
    ck_assert_uint_eq(group(l, "attn")->n_layers, 80);
    ck_assert_uint_eq(per_token(l, "attn"), 327680); /* 80 x 2 x 8 x 128 x 2 B */
    accounting_agrees(l, 8192);
    build_ok("llama-3-70b:tp=16,blocks=2");
    for (uint32_t r = 0; r < 16; r++) {
        ck_assert_uint_eq(per_token(&ranks[r], "attn"), 327680 / 8);
        ck_assert_uint_eq(
            layout_first_head(&ranks[r], &group(&ranks[r], "attn")->views[0].tensors[1]), r / 2);
    }
    /* head-major blocks: the same bytes, rows [head][token] */
    build_ok("llama-3-70b:tp=2,order=hnd,kv=split,blocks=2");
    const struct layout_tensor *v = &group(&ranks[1], "attn")->views[1].tensors[0];
    ck_assert_str_eq(v->name, "v");
    ck_assert_int_eq(v->order, ORDER_HND);
    ck_assert_uint_eq(layout_row_off(v, 3, 2), (2ULL * 64 + 3) * 256);
    ck_assert_uint_eq(per_token(&ranks[1], "attn"), 327680 / 2);
}
END_TEST

START_TEST(deepseek_v3_is_61_mla_layers)
{
    build_ok("deepseek-v3");
    const struct layout *l = &ranks[0];
    ck_assert_uint_eq(l->n_groups, 1);
    ck_assert_uint_eq(group(l, "mla")->n_layers, 61);
    ck_assert_uint_eq(per_token(l, "mla"), 61ULL * 1152); /* (512 + 64) x 2 B per layer */
    accounting_agrees(l, 300);
    build_ok("deepseek-v3:tp=8,pp=2,blocks=2");
    ck_assert_uint_eq(group(&ranks[8], "mla")->layers[0], 31);
    ck_assert_uint_eq(group(&ranks[8], "mla")->n_layers, 30);
}
END_TEST

START_TEST(omit_leaves_a_group_out_but_keeps_the_layer_map)
{
    build_ok("qwen3-next-80b:omit=gdn,blocks=2");
    ck_assert_uint_eq(ranks[0].n_groups, 1);
    ck_assert_ptr_null(group(&ranks[0], "gdn"));
    ck_assert_uint_eq(ranks[0].n_map_groups, 2);
    struct preset_spec s;
    ck_assert_int_eq(preset_parse("llama-3-70b:omit=kda", &s, err, sizeof(err)), 0);
    ck_assert_int_eq(preset_build(&s, "x", ROLE_CONTEXT, -1, ranks, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "omit: llama-3-70b has no group \"kda\""), "%s", err);
    ck_assert_int_eq(preset_parse("llama-3-70b:omit=attn", &s, err, sizeof(err)), 0);
    ck_assert_int_eq(preset_build(&s, "x", ROLE_CONTEXT, -1, ranks, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "would leave no group"), "%s", err);
    ck_assert_int_eq(preset_parse("tiny:conv=w-2", &s, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "conv: \"w-2\" is not w or w-1"), "%s", err);
    ck_assert_int_eq(preset_parse("tiny:order=nchw", &s, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(preset_parse("nope", &s, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "qwen3-next-80b") && strstr(err, "deepseek-v3"), "%s", err);
}
END_TEST

START_TEST(every_new_model_validates_in_every_arrangement)
{
    const char *models[] = {"qwen3-next-80b", "nemotron-h", "llama-3-70b", "deepseek-v3"};
    const char *vars[] = {"",      ",arr=block",  ",state=split,kv=split", ",order=hnd",  ",adp=1",
                          ",tp=8", ",tp=16,pp=2", ",conv=w-1,tpb=16",      ",pools=layer"};
    for (int m = 0; m < 4; m++)
        for (int v = 0; v < 9; v++) {
            char spec[128];
            snprintf(spec, sizeof(spec), "%s:blocks=2,slots=1%s", models[m], vars[v]);
            build_ok(spec); /* preset_build runs layout_validate on every rank */
        }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("preset_models");
    TCase *tc = tcase_create("models");
    tcase_add_test(tc, qwen3_next_80b_is_36_gated_deltanet_and_12_attention_layers);
    tcase_add_test(tc, qwen3_next_80b_tp4_replicates_its_2_kv_heads);
    tcase_add_test(tc, nemotron_h_is_24_mamba2_4_attention_and_24_mlp_layers);
    tcase_add_test(tc, llama_3_70b_is_80_gqa_layers_of_320_kib_per_token);
    tcase_add_test(tc, deepseek_v3_is_61_mla_layers);
    tcase_add_test(tc, omit_leaves_a_group_out_but_keeps_the_layer_map);
    tcase_add_test(tc, every_new_model_validates_in_every_arrangement);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
