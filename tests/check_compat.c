/* check_compat.c: the compatibility accept/refuse matrix (docs/DESIGN.md §4 rule 7, §9),
 * checking the exact reason code of every refusal and that messages name the field, both values
 * and both ranks. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "compat.h"
#include "preset.h"
#include "testutil.h"

#define MAXR 16
struct inst {
    uint32_t n;
    struct layout r[MAXR];
};

static struct inst ctx_i, gen_i;

static void build(struct inst *in, const char *spec, layout_role_t role)
{
    struct preset_spec s;
    char err[256];
    ck_assert_msg(preset_parse(spec, &s, err, sizeof(err)) == 0, "%s: %s", spec, err);
    ck_assert_uint_le(preset_n_ranks(&s), MAXR);
    ck_assert_msg(preset_build(&s, role == ROLE_CONTEXT ? "c" : "g", role, -1, in->r, err,
                               sizeof(err)) == 0, "%s: %s", spec, err);
    in->n = preset_n_ranks(&s);
}

/* Checks every generation rank; returns the first refusal's reason (COMPAT_OK if none). */
static compat_reason_t check_all(char *msg, size_t len)
{
    for (uint32_t g = 0; g < gen_i.n; g++) {
        compat_reason_t r = COMPAT__COUNT;
        int rc = compat_check(&gen_i.r[g], ctx_i.r, ctx_i.n, &r, msg, len);
        if (rc) {
            ck_assert_int_eq(rc, -EINVAL);
            ck_assert_int_ne(r, COMPAT_OK);
            return r;
        }
        ck_assert_int_eq(r, COMPAT_OK);
    }
    return COMPAT_OK;
}

static compat_reason_t pair(const char *c, const char *g, char *msg, size_t len)
{
    build(&ctx_i, c, ROLE_CONTEXT);
    build(&gen_i, g, ROLE_GENERATION);
    return check_all(msg, len);
}

#define EXPECT(c, g, reason)                                                                       \
    do {                                                                                           \
        char m_[512] = "";                                                                         \
        compat_reason_t r_ = pair(c, g, m_, sizeof(m_));                                           \
        ck_assert_msg(r_ == (reason), "%s -> %s: got %s (%s), want %s", c, g,                      \
                      compat_reason_to_string(r_), m_, compat_reason_to_string(reason));           \
    } while (0)

START_TEST(compat_accepts_the_parity_geometries)
{
    const char *models[] = {"tiny", "kimi-linear-48b", "kimi-k3"};
    for (int i = 0; i < 3; i++) {
        char a[128], b[128];
#define ACC(x, y)                                                                                  \
    snprintf(a, sizeof(a), "%s%s", models[i], x);                                                  \
    snprintf(b, sizeof(b), "%s%s", models[i], y);                                                  \
    EXPECT(a, b, COMPAT_OK)
        ACC("", "");
        ACC(":tp=2", ":tp=2");
        ACC(":tp=2,adp=1", ":tp=2,adp=1");
        ACC(":tp=2", ":tp=4");
        ACC(":tp=4", ":tp=2");
        ACC(":tp=2,adp=1", ":tp=4,adp=1");
        ACC(":pp=2", "");
        ACC("", ":pp=2");
        ACC(":tp=2,adp=1", ":tp=4");         /* ADP writer supplies the head sub-range */
        ACC(":tp=2", ":tp=2,adp=1");         /* fan-in into full heads */
        ACC(":state=split,arr=block", ":kv=split");
        ACC(":tp=2,state_shard=replicated", ":tp=2,state_shard=replicated");
#undef ACC
    }
    EXPECT("tiny:pp=2,pp_layers=3+5", "tiny", COMPAT_OK);
    EXPECT("tiny:pp=2,pp_layers=3+5", "tiny:pp=2", COMPAT_OK);
    EXPECT("kimi-linear-48b:pp=2,pp_layers=10+17", "kimi-linear-48b:pp=2", COMPAT_OK);
}
END_TEST

START_TEST(compat_refuses_full_slots_with_different_tp)
{
    EXPECT("tiny:tp=2,state_shard=replicated", "tiny:tp=4,state_shard=replicated",
           COMPAT_SIZE_INVARIANT);
    EXPECT("kimi-k3:tp=4,state_shard=replicated", "kimi-k3:tp=2,state_shard=replicated",
           COMPAT_SIZE_INVARIANT);
}
END_TEST

START_TEST(compat_refuses_attention_dp_on_one_side_with_full_slots)
{
    EXPECT("tiny:tp=2,adp=1", "tiny:tp=2,state_shard=replicated", COMPAT_SIZE_INVARIANT);
    EXPECT("tiny:tp=2,state_shard=replicated", "tiny:tp=2,adp=1", COMPAT_SIZE_INVARIANT);
}
END_TEST

START_TEST(compat_refuses_replicated_vs_sharded_mixup)
{
    char m[512];
    EXPECT("tiny:tp=2", "tiny:tp=2,state_shard=replicated", COMPAT_SIZE_INVARIANT);
    EXPECT("tiny:tp=2,state_shard=replicated", "tiny:tp=2", COMPAT_SIZE_INVARIANT);
    ck_assert_int_eq(pair("tiny:tp=2", "tiny:tp=2,state_shard=replicated", m, sizeof(m)),
                     COMPAT_SIZE_INVARIANT);
    ck_assert_msg(strstr(m, "groups.kda tensor conv") && strstr(m, "context rank") &&
                      strstr(m, "generation rank 0 (tp 0/2 pp 0/1)") && strstr(m, "replicated") &&
                      strstr(m, "sharded"),
                  "%s", m);
}
END_TEST

START_TEST(compat_refuses_head_geometry_and_dtype_mismatch)
{
    char m[512];
    EXPECT("tiny:hd=16", "tiny", COMPAT_HEAD_GEOMETRY);
    EXPECT("tiny:tp=2", "tiny:tp=4,dtype=bf16", COMPAT_DTYPE);
    ck_assert_int_eq(pair("kimi-k3:tp=4", "kimi-k3:tp=2,hd=64", m, sizeof(m)), COMPAT_HEAD_GEOMETRY);
    ck_assert_msg(strstr(m, "groups.kda tensor conv: head inner bytes differ: context rank 0 (tp "
                            "0/4 pp 0/1) has 1024, generation rank 0 (tp 0/2 pp 0/1) has 512"),
                  "%s", m);
    ck_assert_int_eq(pair("tiny", "tiny:dtype=bf16", m, sizeof(m)), COMPAT_DTYPE);
    ck_assert_msg(strstr(m, "groups.kda tensor ssm: dtype differs") && strstr(m, "fp32") &&
                      strstr(m, "bf16"),
                  "%s", m);
}
END_TEST

START_TEST(compat_refuses_other_model_and_block_size)
{
    char m[512];
    EXPECT("tiny", "tiny:fp=other-model", COMPAT_FINGERPRINT);
    EXPECT("tiny", "kimi-linear-48b", COMPAT_FINGERPRINT);
    ck_assert_int_eq(pair("tiny:tpb=24", "tiny", m, sizeof(m)), COMPAT_TOKENS_PER_BLOCK);
    ck_assert_msg(strstr(m, "has 24") && strstr(m, "has 64") && strstr(m, "neither divides"), "%s",
                  m);
    /* one dividing the other converts (rule 10), both ways */
    EXPECT("tiny:tpb=32", "tiny", COMPAT_OK);
    EXPECT("tiny:tpb=16", "tiny:tpb=32", COMPAT_OK);
    /* compat runs before validation too: a 0 block size is refused, not divided by (fuzz_plan) */
    build(&ctx_i, "tiny", ROLE_CONTEXT);
    build(&gen_i, "tiny", ROLE_GENERATION);
    gen_i.r[0].tokens_per_block = 0;
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_TOKENS_PER_BLOCK);
}
END_TEST

START_TEST(compat_refuses_tp_that_is_not_a_multiple)
{
    char m[512];
    ck_assert_int_eq(pair("kimi-k3:tp=3", "kimi-k3:tp=2", m, sizeof(m)), COMPAT_TP_RATIO);
    ck_assert_msg(strstr(m, "has 3") && strstr(m, "has 2"), "%s", m);
    EXPECT("kimi-k3:tp=2", "kimi-k3:tp=3", COMPAT_TP_RATIO);
    EXPECT("kimi-k3:tp=3,adp=1", "kimi-k3:tp=2", COMPAT_OK); /* ADP: one shard of full heads */
}
END_TEST

static struct layout_group *group(struct layout *l, const char *name)
{
    for (uint32_t g = 0; g < l->n_groups; g++)
        if (strcmp(l->groups[g].name, name) == 0)
            return &l->groups[g];
    ck_abort_msg("no group %s", name);
    return NULL;
}

START_TEST(compat_refuses_a_layer_no_stage_covers)
{
    char m[512];
    build(&ctx_i, "tiny:pp=2", ROLE_CONTEXT);
    build(&gen_i, "tiny", ROLE_GENERATION);
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_OK);
    /* stage 1 drops its last KDA layer, on both of its ranks' views of it */
    struct layout_group *k = group(&ctx_i.r[1], "kda");
    uint32_t lost = k->layers[--k->n_layers];
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_UNCOVERED_LAYER);
    char want[64];
    snprintf(want, sizeof(want), "layer %u: no context stage holds it", lost);
    ck_assert_msg(strstr(m, want), "%s", m);
    /* two stages holding one layer is refused too */
    k->n_layers++;
    struct layout_group *k0 = group(&ctx_i.r[0], "kda");
    k0->layers[k0->n_layers++] = (uint16_t)lost;
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_UNCOVERED_LAYER);
    ck_assert_msg(strstr(m, "two context stages"), "%s", m);
}
END_TEST

START_TEST(compat_refuses_layer_kind_group_and_tensor_mismatch)
{
    char m[512];
    build(&ctx_i, "tiny", ROLE_CONTEXT);
    build(&gen_i, "tiny", ROLE_GENERATION);
    /* a generation MLA layer the context holds as KDA */
    struct layout_group *gm = group(&gen_i.r[0], "mla"), *ck = group(&ctx_i.r[0], "kda"),
                        *cm = group(&ctx_i.r[0], "mla");
    uint16_t moved = cm->layers[0];
    memmove(cm->layers, cm->layers + 1, (cm->n_layers - 1) * sizeof(cm->layers[0]));
    cm->n_layers--;
    ck->layers[ck->n_layers++] = moved; /* order no matter for compat */
    ck_assert_int_eq(compat_check(&gen_i.r[0], ctx_i.r, 1, NULL, m, sizeof(m)), -EINVAL);
    compat_reason_t r;
    compat_check(&gen_i.r[0], ctx_i.r, 1, &r, m, sizeof(m));
    ck_assert_int_eq(r, COMPAT_LAYER_KIND);
    (void)gm;
    /* a group of the same name but another kind */
    build(&ctx_i, "tiny", ROLE_CONTEXT);
    group(&ctx_i.r[0], "mla")->kind = GROUP_STATE;
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_LAYER_KIND);
    /* a group the context does not have */
    build(&ctx_i, "tiny", ROLE_CONTEXT);
    strcpy(group(&ctx_i.r[0], "kda")->name, "mamba");
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_GROUP_MISSING);
    ck_assert_msg(strstr(m, "groups.kda"), "%s", m);
    /* a tensor missing, or an extra one */
    build(&ctx_i, "tiny", ROLE_CONTEXT);
    strcpy(group(&ctx_i.r[0], "kda")->views[0].tensors[1].name, "ssm2");
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_VIEW_MISMATCH);
    ck_assert_msg(strstr(m, "tensor ssm: missing on context rank 0"), "%s", m);
    build(&ctx_i, "tiny", ROLE_CONTEXT);
    build(&gen_i, "tiny:state=split", ROLE_GENERATION);
    group(&gen_i.r[0], "kda")->n_views = 1; /* generation lost its ssm view */
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_OMITTED);
    ck_assert_msg(strstr(m, "groups.kda tensor ssm: omitted by generation rank 0") &&
                      strstr(m, "in view state"),
                  "%s", m);
}
END_TEST

START_TEST(compat_refuses_an_inconsistent_table)
{
    char m[512];
    compat_reason_t r;
    build(&ctx_i, "tiny:tp=2", ROLE_CONTEXT);
    build(&gen_i, "tiny:tp=2", ROLE_GENERATION);
    ck_assert_int_eq(compat_check(&gen_i.r[0], ctx_i.r, 1, &r, m, sizeof(m)), -EINVAL);
    ck_assert_int_eq(r, COMPAT_TABLE);
    ck_assert_int_eq(compat_check(&gen_i.r[0], ctx_i.r, 0, &r, m, sizeof(m)), -EINVAL);
    ck_assert_int_eq(r, COMPAT_TABLE);
    struct layout swap = ctx_i.r[0];
    ctx_i.r[0] = ctx_i.r[1];
    ctx_i.r[1] = swap;
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_TABLE);
    build(&ctx_i, "tiny:tp=2", ROLE_CONTEXT);
    ctx_i.r[1].groups[0].views[0].pool = 99;
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_TABLE);
    build(&ctx_i, "tiny:tp=2", ROLE_CONTEXT);
    ctx_i.r[1].tokens_per_block = 16;
    ck_assert_int_eq(check_all(m, sizeof(m)), COMPAT_TABLE);
}
END_TEST

START_TEST(compat_reason_names_are_distinct)
{
    for (int i = 0; i < COMPAT__COUNT; i++)
        for (int j = i + 1; j < COMPAT__COUNT; j++)
            ck_assert_str_ne(compat_reason_to_string(i), compat_reason_to_string(j));
    ck_assert_str_eq(compat_reason_to_string(COMPAT_SIZE_INVARIANT), "size_invariant");
    ck_assert_str_eq(compat_reason_to_string(COMPAT__COUNT), "unknown");
}
END_TEST

static Suite *compat_suite(void)
{
    Suite *s = suite_create("compat");
    TCase *tc = tcase_create("accept");
    tcase_add_test(tc, compat_accepts_the_parity_geometries);
    suite_add_tcase(s, tc);
    tc = tcase_create("refuse");
    tcase_add_test(tc, compat_refuses_full_slots_with_different_tp);
    tcase_add_test(tc, compat_refuses_attention_dp_on_one_side_with_full_slots);
    tcase_add_test(tc, compat_refuses_replicated_vs_sharded_mixup);
    tcase_add_test(tc, compat_refuses_head_geometry_and_dtype_mismatch);
    tcase_add_test(tc, compat_refuses_other_model_and_block_size);
    tcase_add_test(tc, compat_refuses_tp_that_is_not_a_multiple);
    tcase_add_test(tc, compat_refuses_a_layer_no_stage_covers);
    tcase_add_test(tc, compat_refuses_layer_kind_group_and_tensor_mismatch);
    tcase_add_test(tc, compat_refuses_an_inconsistent_table);
    tcase_add_test(tc, compat_reason_names_are_distinct);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(compat_suite()); }
