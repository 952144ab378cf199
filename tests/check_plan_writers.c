/* check_plan_writers.c: plan_writers (who writes, without the copy program: what the same-daemon
 * path waits for, and the readers a context daemon derives) against plan_build's writers over
 * a grid of TP x PP x attention-DP pairs of every head structure (split, fan-in, replicated
 * head groups, replicated state), block-size changes with and without the token count, groups
 * with no items; and its refusals against plan_build's (same code, same reason); and
 * plan_writers_of_shape, the same set for every plan here and for requests plan_build refuses
 * (ids, tokens), refusing only what the layouts decide. The random
 * geometry matrix (check_plan_matrix) runs the same comparison on every plan it checks. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "parity.h"
#include "testutil.h"
#include "writersutil.h"

/* Every generation rank of (cspec, gspec), with n_ctx / n_gen blocks: the writer sets agree.
 * Returns the pairs compared (0 when a spec is not a valid geometry: the caller counts). */
static uint32_t compare(const char *cspec, const char *gspec, uint32_t n_ctx, uint32_t n_gen,
                        uint64_t tokens, uint64_t *rng)
{
    char err[256];
    struct par_side c, g;
    if (par_side_init(&c, cspec, ROLE_CONTEXT, n_ctx, rng, err, sizeof err)) {
        par_side_free(&c);
        return 0;
    }
    if (par_side_init(&g, gspec, ROLE_GENERATION, n_gen, rng, err, sizeof err)) {
        par_side_free(&c);
        par_side_free(&g);
        return 0;
    }
    uint32_t n = 0;
    for (uint32_t gr = 0; gr < g.n; gr++) {
        struct plan_input in = par_input(&c, &g, gr, c.ids, c.ranks[0].attention_dp ? 0 : -1);
        in.tokens = tokens;
        struct plan p;
        struct plan_error pe;
        ck_assert_msg(plan_build(&in, &p, &pe) == 0, "%s -> %s gen %u: %s", cspec, gspec, gr,
                      pe.message);
        char what[400];
        snprintf(what, sizeof what, "%s -> %s gen %u", cspec, gspec, gr);
        wu_assert_writers(&in, &p, what);
        plan_done(&p);
        n++;
    }
    par_side_free(&c);
    par_side_free(&g);
    return n;
}

static const char *const models[] = {
    "llama-3-70b:blocks=3,tpb=4",               /* 8 KV heads: split, fan-in, replicated */
    "qwen3-next-80b:hd=16,blocks=4,slots=1,tpb=8", /* 2 KV heads, sharded state */
    "nemotron-h:hd=4,blocks=2,slots=1,tpb=4",   /* 8 B/C groups, MLP layers without cache */
    "tiny:blocks=4",                            /* KDA state + MLA latent (replicated) */
};

START_TEST(plan_writers_equal_the_plans_writers_over_tp_and_pp)
{
    static const uint32_t tps[] = {1, 2, 4, 8, 16};
    uint64_t rng = 0x3717e5ull + (uint64_t)_i;
    uint32_t pairs = 0;
    for (uint32_t a = 0; a < 5; a++)
        for (uint32_t b = 0; b < 5; b++)
            for (uint32_t pp = 1; pp <= 2; pp++) {
                char c[200], g[200];
                snprintf(c, sizeof c, "%s,tp=%u,pp=%u", models[_i], tps[a], pp);
                snprintf(g, sizeof g, "%s,tp=%u,pp=%u", models[_i], tps[b], 3 - pp);
                pairs += compare(c, g, 2, 2, 0, &rng);
                pairs += compare(c, g, 2, 1, 0, &rng); /* prefix-cached generation side */
            }
    ck_assert_uint_ge(pairs, 100); /* most of the grid is a valid geometry */
}
END_TEST

START_TEST(plan_writers_follow_attention_dp_and_replicated_state)
{
    uint64_t rng = 11;
    uint32_t pairs = 0;
    pairs += compare("tiny:blocks=4,tp=4,adp=1", "tiny:blocks=4,tp=2", 2, 2, 0, &rng);
    pairs += compare("tiny:blocks=4,tp=2", "tiny:blocks=4,tp=4,adp=1", 2, 2, 0, &rng);
    pairs += compare("tiny:blocks=4,tp=2,state_shard=replicated",
                     "tiny:blocks=4,tp=2,state_shard=replicated", 2, 2, 0, &rng);
    pairs += compare("kimi-linear-48b:blocks=2,slots=1,tp=4", "kimi-linear-48b:blocks=2,slots=1,"
                     "tp=2,pp=2", 2, 2, 0, &rng);
    ck_assert_uint_eq(pairs, 2 + 4 + 2 + 4);
}
END_TEST

START_TEST(plan_writers_follow_block_size_changes_and_empty_groups)
{
    uint64_t rng = 12;
    uint32_t pairs = 0;
    pairs += compare("tiny:tpb=16,blocks=8,tp=2", "tiny:tpb=32,blocks=8,tp=4", 6, 3, 0, &rng);
    pairs += compare("tiny:tpb=32,blocks=8,tp=4", "tiny:tpb=16,blocks=8,tp=2", 3, 5, 90, &rng);
    pairs += compare("tiny:tpb=16,blocks=8", "tiny:tpb=32,blocks=8", 6, 3, 83, &rng);
    /* no blocks at all: the state group's writers only */
    pairs += compare("tiny:blocks=4,tp=4", "tiny:blocks=4,tp=2", 2, 0, 0, &rng);
    pairs += compare("llama-3-70b:blocks=3,tpb=4,tp=16", "llama-3-70b:blocks=3,tpb=4,tp=8", 0, 0,
                     0, &rng);
    ck_assert_uint_eq(pairs, 4 + 2 + 1 + 2 + 8);
}
END_TEST

/* docs/PLANNING.md: TP16 -> TP8 of 8 heads reads context ranks 0, 3, 4, 7, 8, 11, 12, 15. */
START_TEST(plan_writers_spread_replicated_heads_as_documented)
{
    char err[256];
    uint64_t rng = 13;
    struct par_side c, g;
    ck_assert(par_side_init(&c, "llama-3-70b:blocks=3,tpb=4,tp=16", ROLE_CONTEXT, 2, &rng, err,
                            sizeof err) == 0);
    ck_assert(par_side_init(&g, "llama-3-70b:blocks=3,tpb=4,tp=8", ROLE_GENERATION, 2, &rng, err,
                            sizeof err) == 0);
    uint32_t used = 0;
    for (uint32_t gr = 0; gr < 8; gr++) {
        struct plan_input in = par_input(&c, &g, gr, NULL, -1);
        uint8_t set[16];
        struct plan_error pe;
        ck_assert_int_eq(plan_writers(&in, set, &pe), 0);
        for (uint32_t r = 0; r < 16; r++)
            used |= (uint32_t)set[r] << r;
    }
    ck_assert_uint_eq(used, 1u << 0 | 1u << 3 | 1u << 4 | 1u << 7 | 1u << 8 | 1u << 11 |
                                1u << 12 | 1u << 15);
    par_side_free(&c);
    par_side_free(&g);
}
END_TEST

/* An attention-DP TP2 context and a TP1 generation side, two blocks each. */
static void adp_sides(struct par_side *c, struct par_side *g, uint64_t *rng)
{
    char err[256];
    ck_assert_msg(par_side_init(c, "tiny:blocks=4,tp=2,adp=1", ROLE_CONTEXT, 2, rng, err,
                                sizeof err) == 0, "%s", err);
    ck_assert_msg(par_side_init(g, "tiny:blocks=4,tp=1", ROLE_GENERATION, 2, rng, err,
                                sizeof err) == 0, "%s", err);
}

/* plan_writers refuses what plan_build refuses before emitting, with the same code and reason. */
static void same_refusal(struct plan_input *in, kvf_error_t code, compat_reason_t reason)
{
    struct plan p;
    struct plan_error a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    uint8_t set[LAYOUT_MAX_TP];
    ck_assert_int_eq(plan_build(in, &p, &a), -EINVAL);
    ck_assert_int_eq(plan_writers(in, set, &b), -EINVAL);
    ck_assert_int_eq(a.code, code);
    ck_assert_int_eq(b.code, code);
    ck_assert_int_eq(a.reason, reason);
    ck_assert_int_eq(b.reason, reason);
    ck_assert_str_eq(a.message, b.message);
}

START_TEST(plan_writers_refuse_what_plan_build_refuses)
{
    char err[256];
    uint64_t rng = 14;
    struct par_side c, g;
    ck_assert(par_side_init(&c, "tiny:blocks=4,tp=2", ROLE_CONTEXT, 2, &rng, err, sizeof err) == 0);
    ck_assert(par_side_init(&g, "tiny:blocks=4,tp=1,omit=kda", ROLE_GENERATION, 2, &rng, err,
                            sizeof err) == 0);
    struct plan_input in = par_input(&c, &g, 0, c.ids, -1);
    same_refusal(&in, KVF_E_PEER_INCOMPATIBLE, COMPAT_OMITTED);
    par_side_free(&g);
    ck_assert(par_side_init(&g, "tiny:blocks=4,tp=1", ROLE_GENERATION, 2, &rng, err, sizeof err) ==
              0);
    in = par_input(&c, &g, 0, c.ids, -1);
    uint32_t bad[2] = {g.ids[0].ids[1][0], g.ids[0].ids[1][0]}; /* group 1: the paged one */
    in.gen_ids.ids[1] = bad;
    same_refusal(&in, KVF_E_BAD_REQUEST, COMPAT_OK); /* a block id twice */
    bad[1] = 4;
    same_refusal(&in, KVF_E_BAD_REQUEST, COMPAT_OK); /* out of range */
    in = par_input(&c, &g, 0, c.ids, -1);
    in.tokens = PLAN_MAX_TOKENS + 1;
    same_refusal(&in, KVF_E_BAD_REQUEST, COMPAT_OK);
    /* context ids are not looked at: what plan_build refuses for them, plan_writers answers */
    in = par_input(&c, &g, 0, c.ids, -1);
    uint32_t cbad[2] = {7, 7};
    struct plan_ids cids[2] = {c.ids[0], c.ids[1]};
    cids[1].ids[1] = cbad;
    in.ctx_ids = cids;
    struct plan p;
    struct plan_error pe;
    uint8_t set[2];
    ck_assert_int_eq(plan_build(&in, &p, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    ck_assert_int_eq(plan_writers(&in, set, &pe), 0);
    ck_assert(set[0] && set[1]);
    par_side_free(&c);
    par_side_free(&g);
    /* an attention-DP context without the request's DP rank */
    adp_sides(&c, &g, &rng);
    in = par_input(&c, &g, 0, c.ids, -1);
    same_refusal(&in, KVF_E_BAD_REQUEST, COMPAT_DP_RANK);
    par_side_free(&c);
    par_side_free(&g);
}
END_TEST

/* The writers of in, by plan_writers_of_shape, equal plan_writers' for `valid` (the same shape with
 * ids plan_build takes). */
static void shape_writers_equal(const struct plan_input *in, const struct plan_input *valid,
                                const char *what)
{
    uint8_t want[LAYOUT_MAX_TP], got[LAYOUT_MAX_TP];
    struct plan_error pe;
    ck_assert_msg(plan_writers(valid, want, &pe) == 0, "%s: %s", what, pe.message);
    memset(got, 0xff, sizeof got);
    ck_assert_msg(plan_writers_of_shape(in, got, &pe) == 0, "%s: %s", what, pe.message);
    ck_assert_msg(memcmp(got, want, in->n_ctx) == 0, "%s: another writer set", what);
    uint32_t n = 0;
    for (uint32_t c = 0; c < in->n_ctx; c++)
        n += got[c];
    ck_assert_msg(n > 0, "%s: no writer", what);
}

/* A refused request (its ids, tokens or aliasing) still has writers: those its shape reads. What
 * only the layouts decide is still refused, as plan_build refuses it. */
START_TEST(plan_writers_of_shape_name_the_writers_of_a_refused_request)
{
    char err[256];
    uint64_t rng = 15;
    struct par_side c, g;
    static const char *const gspecs[] = {"tiny:blocks=4,tp=1", "tiny:blocks=4,tp=2",
                                         "tiny:blocks=4,tp=4"};
    ck_assert(par_side_init(&c, "tiny:blocks=4,tp=2", ROLE_CONTEXT, 2, &rng, err, sizeof err) == 0);
    for (uint32_t k = 0; k < 3; k++) {
        ck_assert(par_side_init(&g, gspecs[k], ROLE_GENERATION, 2, &rng, err, sizeof err) == 0);
        for (uint32_t gr = 0; gr < g.n; gr++) {
            struct plan_input valid = par_input(&c, &g, gr, c.ids, -1), in = valid;
            struct plan p;
            struct plan_error pe;
            uint32_t dup[2] = {g.ids[gr].ids[1][0], g.ids[gr].ids[1][0]}; /* group 1: paged */
            in.gen_ids.ids[1] = dup;
            ck_assert_int_eq(plan_build(&in, &p, &pe), -EINVAL);
            ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
            shape_writers_equal(&in, &valid, "a block id twice");
            dup[1] = 4;
            shape_writers_equal(&in, &valid, "a block id out of range");
            in = valid;
            in.tokens = PLAN_MAX_TOKENS + 1;
            ck_assert_int_eq(plan_build(&in, &p, &pe), -EINVAL);
            shape_writers_equal(&in, &valid, "too many tokens");
        }
        par_side_free(&g);
    }
    par_side_free(&c);
    /* PP 2 context, TP 2 generation: a rank reads one stage's ranks only */
    ck_assert(par_side_init(&c, "kimi-linear-48b:blocks=2,slots=1,tp=2,pp=2", ROLE_CONTEXT, 2,
                            &rng, err, sizeof err) == 0);
    ck_assert(par_side_init(&g, "kimi-linear-48b:blocks=2,slots=1,tp=4", ROLE_GENERATION, 2,
                            &rng, err, sizeof err) == 0);
    for (uint32_t gr = 0; gr < g.n; gr++) {
        struct plan_input valid = par_input(&c, &g, gr, c.ids, -1), in = valid;
        uint32_t gi = 0;
        while (g.ranks[gr].groups[gi].kind != GROUP_PAGED)
            gi++;
        uint32_t dup[2] = {g.ids[gr].ids[gi][0], g.ids[gr].ids[gi][0]};
        in.gen_ids.ids[gi] = dup;
        shape_writers_equal(&in, &valid, "pp 2 -> tp 4, a block id twice");
    }
    par_side_free(&c);
    par_side_free(&g);
    /* what the layouts decide: no writer set */
    adp_sides(&c, &g, &rng);
    struct plan_input in = par_input(&c, &g, 0, c.ids, -1);
    uint8_t set[LAYOUT_MAX_TP];
    struct plan_error pe;
    ck_assert_int_eq(plan_writers_of_shape(&in, set, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    ck_assert_int_eq(pe.reason, COMPAT_DP_RANK);
    in.ctx_dp_rank = 1;
    ck_assert_int_eq(plan_writers_of_shape(&in, set, &pe), 0);
    ck_assert(!set[0] && set[1]); /* the DP rank that ran it */
    par_side_free(&g);
    ck_assert(par_side_init(&g, "tiny:blocks=4,tp=1,omit=kda", ROLE_GENERATION, 2, &rng, err,
                            sizeof err) == 0);
    in = par_input(&c, &g, 0, c.ids, 1);
    ck_assert_int_eq(plan_writers_of_shape(&in, set, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_PEER_INCOMPATIBLE);
    par_side_free(&c);
    par_side_free(&g);
}
END_TEST

static Suite *writers_suite(void)
{
    Suite *s = suite_create("plan_writers");
    TCase *tc = tcase_create("writers");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, plan_writers_equal_the_plans_writers_over_tp_and_pp, 0,
                        (int)(sizeof models / sizeof models[0]));
    tcase_add_test(tc, plan_writers_follow_attention_dp_and_replicated_state);
    tcase_add_test(tc, plan_writers_follow_block_size_changes_and_empty_groups);
    tcase_add_test(tc, plan_writers_spread_replicated_heads_as_documented);
    tcase_add_test(tc, plan_writers_refuse_what_plan_build_refuses);
    tcase_add_test(tc, plan_writers_of_shape_name_the_writers_of_a_refused_request);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(writers_suite()); }
