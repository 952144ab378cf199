/* check_preset.c: preset_parse errors by key, and the per-rank geometry preset_build produces
 * for the docs/DESIGN.md §9 models (byte sums computed from the layouts, not restated). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "preset.h"
#include "testutil.h"

static struct layout ranks[LAYOUT_MAX_TP];
static char err[256];

static struct preset_spec spec_ok(const char *text)
{
    struct preset_spec s;
    int rc = preset_parse(text, &s, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", text, err);
    return s;
}

static void build_ok(const char *text, int32_t device)
{
    struct preset_spec s = spec_ok(text);
    int rc = preset_build(&s, "inst-a", ROLE_CONTEXT, device, ranks, err, sizeof(err));
    ck_assert_msg(rc == 0, "%s: %s", text, err);
}

static const struct layout_group *group(const struct layout *l, const char *name)
{
    for (uint32_t i = 0; i < l->n_groups; i++)
        if (!strcmp(l->groups[i].name, name))
            return &l->groups[i];
    ck_abort_msg("no group %s", name);
    return NULL;
}

/* Bytes of one item (slot or block) across every view and layer of a group. */
static uint64_t item_bytes(const struct layout_group *g)
{
    uint64_t sum = 0;
    for (uint32_t v = 0; v < g->n_views; v++)
        sum += g->views[v].region_bytes * g->n_layers;
    return sum;
}

static void refused(const char *text, const char *needle)
{
    struct preset_spec s;
    memset(&s, 0x5a, sizeof(s));
    struct preset_spec before = s;
    err[0] = '\0';
    ck_assert_int_eq(preset_parse(text, &s, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, needle), "%s: message \"%s\" lacks \"%s\"", text, err, needle);
    ck_assert_msg(memcmp(&s, &before, sizeof(s)) == 0, "%s: ret written on error", text);
}

START_TEST(parse_defaults_are_tp1_pp1_tpb64_512_blocks_8_slots)
{
    struct preset_spec s = spec_ok("kimi-k3");
    ck_assert_str_eq(s.model, "kimi-k3");
    ck_assert_uint_eq(s.tp, 1);
    ck_assert_uint_eq(s.pp, 1);
    ck_assert_uint_eq(s.tpb, 64);
    ck_assert_uint_eq(s.n_blocks, 512);
    ck_assert_uint_eq(s.n_slots, 8);
    ck_assert(!s.adp && !s.block_major && !s.state_split && !s.kv_split && !s.state_replicated);
    ck_assert_int_eq(s.ssm_dtype, -1);
    ck_assert_uint_eq(s.head_dim, 0);
    ck_assert_str_eq(s.fingerprint, "");
}
END_TEST

START_TEST(parse_reads_every_key)
{
    struct preset_spec s = spec_ok("tiny:tp=2,pp=2,adp=1,tpb=16,arr=block,state=split,kv=split,"
                                   "blocks=4,slots=2,state_shard=replicated,hd=16,dtype=bf16,fp=x/y");
    ck_assert_uint_eq(s.tp, 2);
    ck_assert_uint_eq(s.pp, 2);
    ck_assert(s.adp && s.block_major && s.state_split && s.kv_split && s.state_replicated);
    ck_assert_uint_eq(s.tpb, 16);
    ck_assert_uint_eq(s.n_blocks, 4);
    ck_assert_uint_eq(s.n_slots, 2);
    ck_assert_uint_eq(s.head_dim, 16);
    ck_assert_int_eq(s.ssm_dtype, DTYPE_BF16);
    ck_assert_str_eq(s.fingerprint, "x/y");
    s = spec_ok("kimi-k3:pp_layers=40+53");
    ck_assert_uint_eq(s.pp, 2);
    ck_assert_uint_eq(s.n_pp_layers, 2);
    ck_assert_uint_eq(s.pp_layers[0], 40);
    ck_assert_uint_eq(s.pp_layers[1], 53);
}
END_TEST

START_TEST(parse_errors_name_the_key)
{
    refused("gpt-9", "model");
    refused("tiny:color=red", "color: unknown key");
    refused("tiny:tp=two", "tp:");
    refused("tiny:tp=0", "tp: 0 is not allowed");
    refused("tiny:tp=-1", "tp:");
    refused("tiny:tp=99999999999999999999", "tp:");
    refused("tiny:tpb=0", "tpb: 0");
    refused("tiny:blocks=0", "blocks: 0");
    refused("tiny:slots=0", "slots: 0");
    refused("tiny:hd=0", "hd: 0");
    refused("tiny:pp=0", "pp: 0");
    refused("tiny:tp=16,pp=8", "tp: tp*pp");
    refused("tiny:pp=9", "pp: 9 stages");
    refused("kimi-k3:pp_layers=40+50", "pp_layers: stages sum to 90");
    refused("kimi-k3:pp_layers=40+0+53", "pp_layers: 0");
    refused("kimi-k3:pp_layers=40++53", "pp_layers");
    refused("kimi-k3:pp=3,pp_layers=40+53", "pp_layers: 2 stages but pp=3");
    refused("tiny:arr=diagonal", "arr:");
    refused("tiny:state=both", "state:");
    refused("tiny:kv=mixed", "kv:");
    refused("tiny:adp=2", "adp:");
    refused("tiny:state_shard=halved", "state_shard:");
    refused("tiny:dtype=int4", "dtype:");
    refused("tiny:tp=2,tp=2", "tp: given twice");
    refused("tiny:tp=2,,pp=1", "key=value");
    refused("tiny:tp", "key=value");
    refused("tiny:fp=", "fp:");
    refused("tiny:fp=0123456789012345678901234567890123456789012345678901234567890123456789",
            "fp: length");
    refused("tiny:tpb=65537", "tpb:");
    char longspec[PRESET_SPEC_MAX + 8];
    memset(longspec, 'a', sizeof(longspec) - 1);
    longspec[sizeof(longspec) - 1] = '\0';
    refused(longspec, "spec: longer");
}
END_TEST

START_TEST(build_layers_split_mla_every_fourth_plus_last)
{
    static const struct {
        const char *model;
        uint32_t total, mla;
    } cases[] = {{"tiny", 8, 2}, {"kimi-linear-48b", 27, 7}, {"kimi-k3", 93, 24}};
    for (size_t c = 0; c < 3; c++) {
        build_ok(cases[c].model, -1);
        const struct layout_group *kda = group(&ranks[0], "kda"), *mla = group(&ranks[0], "mla");
        ck_assert_uint_eq(ranks[0].n_layers_total, cases[c].total);
        ck_assert_uint_eq(mla->n_layers, cases[c].mla);
        ck_assert_uint_eq(kda->n_layers, cases[c].total - cases[c].mla);
        ck_assert_int_eq(kda->kind, GROUP_STATE);
        ck_assert_int_eq(mla->kind, GROUP_PAGED);
        for (uint32_t i = 0; i < mla->n_layers; i++) {
            uint32_t one = mla->layers[i] + 1u;
            ck_assert(one % 4 == 0 || one == cases[c].total);
        }
        ck_assert_uint_eq(mla->layers[mla->n_layers - 1], cases[c].total - 1);
    }
    build_ok("tiny", -1);
    ck_assert_uint_eq(group(&ranks[0], "mla")->layers[0], 3);
    ck_assert_uint_eq(group(&ranks[0], "mla")->layers[1], 7);
}
END_TEST

START_TEST(build_kimi_k3_tp1_state_is_69_layers_of_conv_plus_ssm)
{
    build_ok("kimi-k3", -1);
    const struct layout_group *kda = group(&ranks[0], "kda");
    ck_assert_uint_eq(item_bytes(kda), 454459392ULL);
    ck_assert_uint_eq(item_bytes(kda), 69ULL * (294912 + 6291456));
    ck_assert_uint_eq(item_bytes(group(&ranks[0], "mla")) / 64, 27648);
    ck_assert_str_eq(ranks[0].fingerprint, "kimi-k3/v1");
}
END_TEST

START_TEST(build_kimi_k3_tp4_holds_a_quarter_of_state_per_rank)
{
    build_ok("kimi-k3:tp=4", -1);
    for (uint32_t r = 0; r < 4; r++) {
        const struct layout_group *kda = group(&ranks[r], "kda");
        ck_assert_uint_eq(ranks[r].tp_rank, r);
        ck_assert_uint_eq(item_bytes(kda), 454459392ULL / 4);
        ck_assert_uint_eq(kda->views[0].tensors[0].heads, 24);
        ck_assert_uint_eq(kda->views[0].tensors[0].global_heads, 96);
        ck_assert_int_eq(kda->views[0].tensors[0].shard, SHARD_SHARDED);
        /* MLA latent is replicated: full per rank */
        ck_assert_uint_eq(item_bytes(group(&ranks[r], "mla")), 27648ULL * 64);
    }
    build_ok("kimi-k3:tp=4,adp=1", -1);
    ck_assert_uint_eq(item_bytes(group(&ranks[3], "kda")), 454459392ULL);
    ck_assert_uint_eq(group(&ranks[3], "kda")->views[0].tensors[1].heads, 96);
    build_ok("kimi-k3:tp=4,state_shard=replicated", -1);
    ck_assert_uint_eq(item_bytes(group(&ranks[1], "kda")), 454459392ULL);
    ck_assert_int_eq(group(&ranks[1], "kda")->views[0].tensors[0].shard, SHARD_REPLICATED);
}
END_TEST

START_TEST(build_kimi_linear_48b_tp1_state_and_kv_per_token)
{
    build_ok("kimi-linear-48b", -1);
    ck_assert_uint_eq(item_bytes(group(&ranks[0], "kda")), 43909120ULL);
    ck_assert_uint_eq(item_bytes(group(&ranks[0], "mla")) / ranks[0].tokens_per_block, 8064);
    const struct layout_view *st = &group(&ranks[0], "kda")->views[0];
    ck_assert_str_eq(st->name, "state");
    ck_assert_str_eq(st->tensors[0].name, "conv");
    ck_assert_uint_eq((uint64_t)st->tensors[0].outer * st->tensors[0].heads * st->tensors[0].inner,
                      98304);
    ck_assert_str_eq(st->tensors[1].name, "ssm");
    ck_assert_uint_eq(st->tensors[1].offset, 98304);
    ck_assert_uint_eq(st->region_bytes, 98304 + 2097152);
}
END_TEST

START_TEST(build_kv_joint_holds_kv_c_then_k_pe_and_split_has_two_views)
{
    build_ok("tiny:tpb=16", -1);
    const struct layout_group *mla = group(&ranks[0], "mla");
    ck_assert_uint_eq(mla->n_views, 1);
    ck_assert_str_eq(mla->views[0].name, "kv");
    ck_assert_str_eq(mla->views[0].tensors[0].name, "kv_c");
    ck_assert_uint_eq(mla->views[0].tensors[0].offset, 0);
    ck_assert_str_eq(mla->views[0].tensors[1].name, "k_pe");
    ck_assert_uint_eq(mla->views[0].tensors[1].offset, 16 * 1024);
    ck_assert_uint_eq(mla->views[0].region_bytes, 16 * 1152);
    build_ok("tiny:tpb=16,kv=split,state=split", -1);
    mla = group(&ranks[0], "mla");
    ck_assert_uint_eq(mla->n_views, 2);
    ck_assert_str_eq(mla->views[0].name, "kv_c");
    ck_assert_uint_eq(mla->views[0].region_bytes, 16 * 1024);
    ck_assert_str_eq(mla->views[1].name, "k_pe");
    ck_assert_uint_eq(mla->views[1].region_bytes, 16 * 128);
    ck_assert_uint_ne(mla->views[0].pool, mla->views[1].pool);
    const struct layout_group *kda = group(&ranks[0], "kda");
    ck_assert_uint_eq(kda->n_views, 2);
    ck_assert_str_eq(kda->views[0].name, "conv");
    ck_assert_str_eq(kda->views[1].name, "ssm");
    ck_assert_uint_eq(ranks[0].n_pools, 4);
}
END_TEST

START_TEST(build_uneven_pp_40_53_for_kimi_k3_covers_every_layer_once)
{
    build_ok("kimi-k3:pp_layers=40+53,tp=2", -1);
    uint32_t seen[93] = {0};
    uint32_t mla_per_stage[2] = {0};
    for (uint32_t r = 0; r < 4; r++) {
        const struct layout *l = &ranks[r];
        ck_assert_uint_eq(l->pp_rank, r / 2);
        for (uint32_t g = 0; g < l->n_groups; g++)
            for (uint32_t i = 0; i < l->groups[g].n_layers; i++) {
                uint16_t id = l->groups[g].layers[i];
                ck_assert(l->pp_rank == 0 ? id < 40 : id >= 40);
                if (l->tp_rank == 0)
                    seen[id]++;
                if (l->tp_rank == 0 && !strcmp(l->groups[g].name, "mla"))
                    mla_per_stage[l->pp_rank]++;
            }
    }
    for (int i = 0; i < 93; i++)
        ck_assert_uint_eq(seen[i], 1);
    ck_assert_uint_eq(mla_per_stage[0], 10);
    ck_assert_uint_eq(mla_per_stage[1], 14);
}
END_TEST

START_TEST(build_even_pp_gives_earlier_stages_the_remainder)
{
    build_ok("tiny:pp=3", -1);
    uint32_t n[3];
    for (int p = 0; p < 3; p++)
        n[p] = group(&ranks[p], "kda")->n_layers + group(&ranks[p], "mla")->n_layers;
    ck_assert_uint_eq(n[0], 3);
    ck_assert_uint_eq(n[1], 3);
    ck_assert_uint_eq(n[2], 2);
    ck_assert_uint_eq(group(&ranks[0], "kda")->layers[0], 0);
    ck_assert_uint_eq(group(&ranks[2], "mla")->layers[0], 7);
}
END_TEST

START_TEST(build_stage_without_mla_layers_keeps_an_empty_group)
{
    build_ok("tiny:pp_layers=3+5", -1);
    const struct layout_group *mla = group(&ranks[0], "mla");
    ck_assert_uint_eq(mla->n_layers, 0);
    ck_assert_uint_eq(mla->n_views, 1);
    ck_assert_uint_eq(ranks[0].pools[mla->views[0].pool].bytes, 0);
    ck_assert_int_eq(layout_validate(&ranks[0], err, sizeof(err)), 0);
}
END_TEST

START_TEST(build_block_major_and_layer_major_strides)
{
    build_ok("tiny:blocks=5,slots=3,tpb=8", -1);
    const struct layout_view *kv = &group(&ranks[0], "mla")->views[0];
    const struct layout_view *st = &group(&ranks[0], "kda")->views[0];
    ck_assert_uint_eq(kv->item_stride, kv->region_bytes);
    ck_assert_uint_eq(kv->layer_stride, 5 * kv->region_bytes);
    ck_assert_uint_eq(st->item_stride, st->region_bytes);
    ck_assert_uint_eq(st->layer_stride, 3 * st->region_bytes);
    ck_assert_uint_eq(ranks[0].pools[kv->pool].bytes, 2ULL * 5 * kv->region_bytes);
    build_ok("tiny:blocks=5,slots=3,tpb=8,arr=block", -1);
    ck_assert_uint_eq(kv->layer_stride, kv->region_bytes);
    ck_assert_uint_eq(kv->item_stride, 2 * kv->region_bytes);
    ck_assert_uint_eq(st->layer_stride, st->region_bytes);
    ck_assert_uint_eq(st->item_stride, 6 * st->region_bytes);
    ck_assert_uint_eq(ranks[0].pools[st->pool].bytes, 6ULL * 3 * st->region_bytes);
}
END_TEST

START_TEST(build_every_variant_validates)
{
    static const char *models[] = {"tiny", "kimi-linear-48b", "kimi-k3"};
    static const char *arrs[] = {"layer", "block"}, *joints[] = {"joint", "split"};
    static const char *par[] = {"tp=1", "tp=2", "tp=4", "tp=2,adp=1", "tp=4,state_shard=replicated",
                                "pp=2", "tp=2,pp=2"};
    int n = 0;
    for (int m = 0; m < 3; m++)
        for (int a = 0; a < 2; a++)
            for (int st = 0; st < 2; st++)
                for (int kv = 0; kv < 2; kv++)
                    for (size_t p = 0; p < sizeof(par) / sizeof(par[0]); p++) {
                        char text[160];
                        snprintf(text, sizeof(text), "%s:%s,arr=%s,state=%s,kv=%s,blocks=4,slots=2",
                                 models[m], par[p], arrs[a], joints[st], joints[kv]);
                        struct preset_spec s = spec_ok(text);
                        for (int dev = -1; dev <= 0; dev++) {
                            ck_assert_msg(preset_build(&s, "v", ROLE_GENERATION, dev, ranks, err,
                                                       sizeof(err)) == 0,
                                          "%s: %s", text, err);
                            for (uint32_t r = 0; r < preset_n_ranks(&s); r++) {
                                ck_assert_msg(layout_validate(&ranks[r], err, sizeof(err)) == 0,
                                              "%s rank %u: %s", text, r, err);
                                ck_assert_int_eq(ranks[r].pools[0].kind,
                                                 dev < 0 ? POOL_HOST : POOL_CUDA);
                                ck_assert_int_eq(ranks[r].role, ROLE_GENERATION);
                                n++;
                            }
                        }
                    }
    ck_assert_int_gt(n, 500);
}
END_TEST

START_TEST(build_overrides_change_geometry_not_fingerprint)
{
    build_ok("tiny:hd=16,dtype=bf16", -1);
    const struct layout_view *st = &group(&ranks[0], "kda")->views[0];
    ck_assert_uint_eq(st->tensors[0].inner, 16 * 3 * 2);
    ck_assert_uint_eq(st->tensors[1].inner, 16 * 16 * 2);
    ck_assert_int_eq(st->tensors[1].dtype, DTYPE_BF16);
    ck_assert_str_eq(ranks[0].fingerprint, "tiny/v1");
    build_ok("tiny:fp=other-model", -1);
    ck_assert_str_eq(ranks[0].fingerprint, "other-model");
}
END_TEST

START_TEST(build_refuses_tp_that_does_not_divide_heads)
{
    struct preset_spec s = spec_ok("tiny:tp=3");
    ck_assert_int_eq(preset_build(&s, "x", ROLE_CONTEXT, -1, ranks, err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "tp: 3 shards fit neither way the 4 heads of tiny tensor conv"), "%s",
                  err);
    /* more ranks than heads: replicated head groups, one head per rank */
    build_ok("tiny:tp=8", -1);
    ck_assert_uint_eq(group(&ranks[5], "kda")->views[0].tensors[0].heads, 1);
    ck_assert_uint_eq(layout_first_head(&ranks[5], &group(&ranks[5], "kda")->views[0].tensors[0]),
                      2);
    s = spec_ok("tiny:tp=8,adp=1");
    ck_assert_int_eq(preset_build(&s, "x", ROLE_CONTEXT, -1, ranks, err, sizeof(err)), 0);
    /* tp need not be a power of 2: 96 heads split 3 ways */
    build_ok("kimi-k3:tp=3,blocks=2,slots=1", -1);
    ck_assert_uint_eq(group(&ranks[2], "kda")->views[0].tensors[0].heads, 32);
    ck_assert_uint_eq(item_bytes(group(&ranks[2], "kda")), 454459392ULL / 3);
}
END_TEST

START_TEST(build_largest_accepted_capacity_stays_encodable)
{
    /* The parse limits keep every pool under 2^53 bytes: the largest spec builds and validates. */
    build_ok("kimi-k3:tpb=65536,blocks=1048576,slots=65536,hd=1024,dtype=fp32", -1);
    for (uint32_t p = 0; p < ranks[0].n_pools; p++)
        ck_assert_uint_le(ranks[0].pools[p].bytes, 1ULL << 53);
    ck_assert_uint_gt(ranks[0].pools[0].bytes, 1ULL << 50);
    struct preset_spec s;
    ck_assert_int_eq(preset_parse("kimi-k3:blocks=1048577", &s, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(preset_parse("kimi-k3:slots=65537", &s, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(preset_parse("kimi-k3:hd=1025", &s, err, sizeof(err)), -EINVAL);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("preset");
    TCase *tc = tcase_create("parse");
    tcase_add_test(tc, parse_defaults_are_tp1_pp1_tpb64_512_blocks_8_slots);
    tcase_add_test(tc, parse_reads_every_key);
    tcase_add_test(tc, parse_errors_name_the_key);
    suite_add_tcase(s, tc);
    tc = tcase_create("geometry");
    tcase_add_test(tc, build_layers_split_mla_every_fourth_plus_last);
    tcase_add_test(tc, build_kimi_k3_tp1_state_is_69_layers_of_conv_plus_ssm);
    tcase_add_test(tc, build_kimi_k3_tp4_holds_a_quarter_of_state_per_rank);
    tcase_add_test(tc, build_kimi_linear_48b_tp1_state_and_kv_per_token);
    tcase_add_test(tc, build_kv_joint_holds_kv_c_then_k_pe_and_split_has_two_views);
    tcase_add_test(tc, build_overrides_change_geometry_not_fingerprint);
    tcase_add_test(tc, build_refuses_tp_that_does_not_divide_heads);
    tcase_add_test(tc, build_largest_accepted_capacity_stays_encodable);
    suite_add_tcase(s, tc);
    tc = tcase_create("arrangement");
    tcase_add_test(tc, build_uneven_pp_40_53_for_kimi_k3_covers_every_layer_once);
    tcase_add_test(tc, build_even_pp_gives_earlier_stages_the_remainder);
    tcase_add_test(tc, build_stage_without_mla_layers_keeps_an_empty_group);
    tcase_add_test(tc, build_block_major_and_layer_major_strides);
    tcase_add_test(tc, build_every_variant_validates);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
