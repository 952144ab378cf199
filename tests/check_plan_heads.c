/* check_plan_heads.c: planning semantics of layout v2 with bitwise parity (parity.h, CPU
 * executor, the global pattern): replicated head groups (tp_eff > KV heads, DESIGN §4 rule 4)
 * for a 2- and an 8-KV-head model, the writer each generation rank reads a head from, block
 * size and NHD/HND conversions in the copy program (rule 10), and every way a generation layout
 * can omit what the context holds (group, view, tensor, layer: rule 8) refused as
 * PEER_INCOMPATIBLE naming it. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "parity.h"
#include "testutil.h"

static void parity(const char *c, const char *g, uint32_t n_ctx, uint32_t n_gen)
{
    struct par_opts o = {.ctx_dp_rank = -1, .seed = 0x4ead5, .chunked = 1};
    par_run(c, g, n_ctx, n_gen, &o, NULL);
}

/* Qwen3-Next (2 KV heads, GDN state with 16 key / 32 value heads) and Llama-3-70B (8 KV heads):
 * small capacity and head dim so the CPU run stays quick; the head structure is the model's. */
#define QWEN "qwen3-next-80b:hd=16,blocks=4,slots=1,tpb=8"
#define LLAMA "llama-3-70b:blocks=3,tpb=4"

static const struct {
    const char *base;
    uint32_t ctx_tp, gen_tp;
} tp_pairs[] = {
    {QWEN, 8, 16},  {QWEN, 16, 8},  {QWEN, 4, 2},  {QWEN, 2, 4},
    {LLAMA, 8, 16}, {LLAMA, 16, 8}, {LLAMA, 4, 2}, {LLAMA, 2, 4},
};

START_TEST(replicated_head_groups_move_with_parity)
{
    char c[160], g[160];
    snprintf(c, sizeof(c), "%s,tp=%u", tp_pairs[_i].base, tp_pairs[_i].ctx_tp);
    snprintf(g, sizeof(g), "%s,tp=%u", tp_pairs[_i].base, tp_pairs[_i].gen_tp);
    parity(c, g, 3, 3);
    parity(c, g, 3, 1); /* prefix-cached generation side */
}
END_TEST

START_TEST(nemotron_h_tp8_to_tp16_moves_its_replicated_bc_groups)
{
    parity("nemotron-h:hd=4,blocks=2,slots=1,tpb=4,tp=8",
           "nemotron-h:hd=4,blocks=2,slots=1,tpb=4,tp=16", 2, 2);
    parity("nemotron-h:hd=4,blocks=2,slots=1,tpb=4,tp=16",
           "nemotron-h:hd=4,blocks=2,slots=1,tpb=4,tp=2", 2, 2);
}
END_TEST

/* The context ranks writing to generation rank gr. */
static uint32_t writers_of(struct par_side *c, struct par_side *g, uint32_t gr, uint32_t *ret)
{
    struct plan p;
    struct plan_error pe;
    struct plan_input in = par_input(c, g, gr, c->ids, -1);
    ck_assert_msg(plan_build(&in, &p, &pe) == 0, "%s", pe.message);
    uint32_t n = p.n_writers;
    for (uint32_t w = 0; w < n; w++)
        ret[w] = p.writers[w].ctx_rank;
    plan_done(&p);
    return n;
}

START_TEST(each_head_is_read_from_a_rank_that_holds_it_spread_over_the_holders)
{
    char err[256];
    uint64_t rng = 7;
    struct par_side c, g;
    uint32_t w[LAYOUT_MAX_TP];
    /* TP8 -> TP16: head h of 8 is on context rank h only; generation rank r needs head r/2 */
    ck_assert(par_side_init(&c, LLAMA ",tp=8", ROLE_CONTEXT, 2, &rng, err, sizeof(err)) == 0);
    ck_assert(par_side_init(&g, LLAMA ",tp=16", ROLE_GENERATION, 2, &rng, err, sizeof(err)) == 0);
    for (uint32_t r = 0; r < 16; r++) {
        ck_assert_uint_eq(writers_of(&c, &g, r, w), 1);
        ck_assert_uint_eq(w[0], r / 2);
    }
    par_side_free(&c);
    par_side_free(&g);
    /* TP16 -> TP8: head r is on context ranks 2r and 2r+1; the holder alternates by head
     * (never gen_tp_rank % ctx_tp, which would read rank r: a rank holding head r/2) */
    ck_assert(par_side_init(&c, LLAMA ",tp=16", ROLE_CONTEXT, 2, &rng, err, sizeof(err)) == 0);
    ck_assert(par_side_init(&g, LLAMA ",tp=8", ROLE_GENERATION, 2, &rng, err, sizeof(err)) == 0);
    uint32_t used = 0;
    for (uint32_t r = 0; r < 8; r++) {
        ck_assert_uint_eq(writers_of(&c, &g, r, w), 1);
        ck_assert_uint_eq(w[0], 2 * r + r % 2);
        used |= 1u << w[0];
    }
    ck_assert_uint_eq(__builtin_popcount(used), 8);
    par_side_free(&g);
    /* TP16 -> TP4: two heads per generation rank, each from its own holder */
    ck_assert(par_side_init(&g, LLAMA ",tp=4", ROLE_GENERATION, 2, &rng, err, sizeof(err)) == 0);
    for (uint32_t r = 0; r < 4; r++) {
        ck_assert_uint_eq(writers_of(&c, &g, r, w), 2);
        ck_assert_uint_eq(w[0], 4 * r);     /* head 2r: holder (2r) % 2 = 0 */
        ck_assert_uint_eq(w[1], 4 * r + 3); /* head 2r+1: holder 1 */
    }
    par_side_free(&g);
    /* TP16 -> TP32 (both sides replicate): the two readers of a head use both holders */
    ck_assert(par_side_init(&g, "llama-3-70b:blocks=1,tpb=4,tp=32", ROLE_GENERATION, 1, &rng, err,
                            sizeof(err)) == 0);
    for (uint32_t r = 0; r < 32; r += 2) {
        uint32_t a, b;
        writers_of(&c, &g, r, &a);
        writers_of(&c, &g, r + 1, &b);
        ck_assert_uint_ne(a, b);
        ck_assert_uint_eq(a / 2, r / 4);
        ck_assert_uint_eq(b / 2, r / 4);
    }
    par_side_free(&g);
    par_side_free(&c);
}
END_TEST

START_TEST(tokens_per_block_converts_both_ways)
{
    parity("tiny:tpb=16,blocks=8", "tiny:tpb=32,blocks=8", 6, 3);
    parity("tiny:tpb=16,blocks=8", "tiny:tpb=32,blocks=8", 6, 1); /* prefix cached */
    parity("tiny:tpb=32,blocks=8", "tiny:tpb=16,blocks=8", 3, 6);
    parity("tiny:tpb=32,blocks=8", "tiny:tpb=16,blocks=8", 3, 5);
    parity("tiny:tpb=16,blocks=8,tp=2,kv=split,arr=block", "tiny:tpb=64,blocks=8,tp=4", 8, 2);
    parity("llama-3-70b:blocks=6,tpb=4,tp=2", "llama-3-70b:blocks=3,tpb=8,tp=4", 6, 3);
}
END_TEST

START_TEST(nhd_and_hnd_convert_in_the_copy_program)
{
    parity(LLAMA ",tp=2", LLAMA ",tp=2,order=hnd", 3, 3);
    parity(LLAMA ",tp=2,order=hnd", LLAMA ",tp=4", 3, 2);
    parity(LLAMA ",tp=8,order=hnd,kv=split", LLAMA ",tp=16,order=hnd", 3, 3);
    parity(LLAMA ",tp=4,order=hnd", LLAMA ",tp=1,order=hnd", 3, 3); /* HND fan-in */
    /* both conversions at once, with replicated heads and PP on one side */
    parity(QWEN ",tp=2,pp=2", "qwen3-next-80b:hd=16,blocks=4,slots=1,tp=4,tpb=16,order=hnd", 4, 2);
}
END_TEST

/* plan_build's refusal for the first generation rank of the pair. */
static struct plan_error refusal(struct par_side *c, struct par_side *g, uint32_t gr)
{
    struct plan p;
    struct plan_error pe;
    memset(&pe, 0, sizeof(pe));
    struct plan_input in = par_input(c, g, gr, c->ids, -1);
    ck_assert_int_eq(plan_build(&in, &p, &pe), -EINVAL);
    return pe;
}

START_TEST(block_lists_that_do_not_map_are_bad_requests)
{
    char err[256];
    uint64_t rng = 9;
    struct par_side c, g;
    /* 5 blocks of 16 tokens do not end on a 32-token block */
    ck_assert(par_side_init(&c, "tiny:tpb=16,blocks=8", ROLE_CONTEXT, 5, &rng, err, sizeof(err)) ==
              0);
    ck_assert(
        par_side_init(&g, "tiny:tpb=32,blocks=8", ROLE_GENERATION, 3, &rng, err, sizeof(err)) == 0);
    struct plan_error pe = refusal(&c, &g, 0);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    ck_assert_msg(strstr(pe.message, "asks for 3 blocks of 32 tokens"), "%s", pe.message);
    par_side_free(&g);
    ck_assert(
        par_side_init(&g, "tiny:tpb=32,blocks=8", ROLE_GENERATION, 2, &rng, err, sizeof(err)) == 0);
    pe = refusal(&c, &g, 0);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    ck_assert_msg(strstr(pe.message, "do not end on a generation block of 32 tokens"), "%s",
                  pe.message);
    par_side_free(&g);
    par_side_free(&c);
    /* a paged tensor whose outer is not the token axis cannot change block size */
    ck_assert(par_side_init(&c, "tiny:tpb=16,blocks=8", ROLE_CONTEXT, 4, &rng, err, sizeof(err)) ==
              0);
    ck_assert(
        par_side_init(&g, "tiny:tpb=32,blocks=8", ROLE_GENERATION, 2, &rng, err, sizeof(err)) == 0);
    for (uint32_t r = 0; r < c.n; r++)
        c.ranks[r].groups[1].views[0].tensors[1].outer = 8; /* k_pe: 8 rows of a 16-token block */
    pe = refusal(&c, &g, 0);
    ck_assert_int_eq(pe.code, KVF_E_PEER_INCOMPATIBLE);
    ck_assert_int_eq(pe.reason, COMPAT_TOKENS_PER_BLOCK);
    ck_assert_msg(strstr(pe.message, "tensor k_pe") && strstr(pe.message, "not the token axis"),
                  "%s", pe.message);
    par_side_free(&g);
    par_side_free(&c);
}
END_TEST

static void expect_omitted(struct par_side *c, struct par_side *g, const char *needle)
{
    for (uint32_t gr = 0; gr < g->n; gr++) {
        struct plan_error pe = refusal(c, g, gr);
        ck_assert_int_eq(pe.code, KVF_E_PEER_INCOMPATIBLE);
        ck_assert_msg(pe.reason == COMPAT_OMITTED, "%s: %s", compat_reason_to_string(pe.reason),
                      pe.message);
        ck_assert_msg(strstr(pe.message, needle), "want \"%s\" in: %s", needle, pe.message);
    }
}

START_TEST(a_generation_layout_that_omits_anything_is_refused_naming_it)
{
    char err[256];
    uint64_t rng = 11;
    struct par_side c, g;
    /* group: the missing-kda-group case, on every generation rank, with and without PP */
    ck_assert(par_side_init(&c, "tiny:tp=2", ROLE_CONTEXT, 2, &rng, err, sizeof(err)) == 0);
    ck_assert(par_side_init(&g, "tiny:tp=2,omit=kda", ROLE_GENERATION, 2, &rng, err, sizeof(err)) ==
              0);
    expect_omitted(&c, &g, "groups.kda: omitted by generation rank");
    par_side_free(&g);
    ck_assert(par_side_init(&g, "tiny:pp=2,omit=kda", ROLE_GENERATION, 2, &rng, err, sizeof(err)) ==
              0);
    expect_omitted(&c, &g, "groups.kda: omitted");
    /* without any layer map the context table still says what the model holds */
    for (uint32_t r = 0; r < g.n; r++)
        g.ranks[r].n_map_groups = 0, memset(g.ranks[r].layer_map, 0, LAYOUT_MAX_LAYERS);
    for (uint32_t r = 0; r < c.n; r++)
        c.ranks[r].n_map_groups = 0, memset(c.ranks[r].layer_map, 0, LAYOUT_MAX_LAYERS);
    expect_omitted(&c, &g, "groups.kda: omitted");
    par_side_free(&g);
    /* layer: one KDA layer left out of the state group (the rest would move, that layer not) */
    ck_assert(par_side_init(&g, "tiny:tp=2", ROLE_GENERATION, 2, &rng, err, sizeof(err)) == 0);
    for (uint32_t r = 0; r < g.n; r++) {
        struct layout_group *kda = &g.ranks[r].groups[0];
        ck_assert_uint_eq(kda->layers[2], 2);
        memmove(&kda->layers[2], &kda->layers[3], (kda->n_layers - 3) * sizeof(kda->layers[0]));
        kda->n_layers--;
    }
    expect_omitted(&c, &g, "groups.kda layer 2: omitted by generation rank");
    par_side_free(&g);
    /* view: split state without its ssm view */
    ck_assert(par_side_init(&g, "tiny:tp=2,state=split", ROLE_GENERATION, 2, &rng, err,
                            sizeof(err)) == 0);
    for (uint32_t r = 0; r < g.n; r++)
        g.ranks[r].groups[0].n_views = 1;
    expect_omitted(&c, &g, "groups.kda tensor ssm: omitted by generation rank");
    par_side_free(&g);
    /* tensor: the joint MLA view declares kv_c only */
    ck_assert(par_side_init(&g, "tiny:tp=2", ROLE_GENERATION, 2, &rng, err, sizeof(err)) == 0);
    for (uint32_t r = 0; r < g.n; r++) {
        struct layout_view *kv = &g.ranks[r].groups[1].views[0];
        kv->n_tensors = 1;
        kv->region_bytes = kv->tensors[1].offset;
        ck_assert_int_eq(layout_validate(&g.ranks[r], err, sizeof(err)), 0);
    }
    expect_omitted(&c, &g, "groups.mla tensor k_pe: omitted by generation rank");
    par_side_free(&g);
    par_side_free(&c);
    /* a hybrid with PP on the generation side: each stage omits its own layers' group */
    ck_assert(par_side_init(&c, QWEN, ROLE_CONTEXT, 2, &rng, err, sizeof(err)) == 0);
    ck_assert(par_side_init(&g, QWEN ",pp=2,tp=2,omit=gdn", ROLE_GENERATION, 2, &rng, err,
                            sizeof(err)) == 0);
    expect_omitted(&c, &g, "groups.gdn: omitted");
    par_side_free(&g);
    par_side_free(&c);
}
END_TEST

START_TEST(layer_maps_must_agree_and_the_context_must_hold_its_map)
{
    char err[256];
    uint64_t rng = 13;
    struct par_side c, g;
    ck_assert(par_side_init(&c, "tiny", ROLE_CONTEXT, 2, &rng, err, sizeof(err)) == 0);
    ck_assert(par_side_init(&g, "tiny", ROLE_GENERATION, 2, &rng, err, sizeof(err)) == 0);
    /* the generation side believes layer 5 is attention: maps differ */
    g.ranks[0].layer_map[5] = 2;
    struct plan_error pe = refusal(&c, &g, 0);
    ck_assert_int_eq(pe.reason, COMPAT_LAYER_MAP);
    ck_assert_msg(strstr(pe.message, "layer_map: layer 5 is kda on context rank 0") &&
                      strstr(pe.message, "mla on generation rank 0"),
                  "%s", pe.message);
    g.ranks[0].layer_map[5] = 1;
    /* the context's map says layer 6 is KDA but no context stage holds it: both sides drop it */
    for (struct par_side *s = &c; s; s = s == &c ? &g : NULL) {
        struct layout_group *kda = &s->ranks[0].groups[0];
        ck_assert_uint_eq(kda->layers[kda->n_layers - 1], 6);
        kda->n_layers--;
    }
    pe = refusal(&c, &g, 0);
    ck_assert_int_eq(pe.reason, COMPAT_LAYER_MAP);
    ck_assert_msg(strstr(pe.message, "layer 6 is in group kda, but no context stage holds it"),
                  "%s", pe.message);
    par_side_free(&g);
    par_side_free(&c);
    /* model sizes differ */
    ck_assert(par_side_init(&c, "deepseek-v3:blocks=2", ROLE_CONTEXT, 1, &rng, err, sizeof(err)) ==
              0);
    ck_assert(par_side_init(&g, "deepseek-v3:blocks=2,fp=deepseek-v3/v1", ROLE_GENERATION, 1, &rng,
                            err, sizeof(err)) == 0);
    g.ranks[0].n_layers_total = 62;
    pe = refusal(&c, &g, 0);
    ck_assert_int_eq(pe.reason, COMPAT_LAYER_MAP);
    ck_assert_msg(strstr(pe.message, "n_layers_total differs"), "%s", pe.message);
    par_side_free(&g);
    par_side_free(&c);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan_heads");
    TCase *tc = tcase_create("heads");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, replicated_head_groups_move_with_parity, 0,
                        (int)(sizeof(tp_pairs) / sizeof(tp_pairs[0])));
    tcase_add_test(tc, nemotron_h_tp8_to_tp16_moves_its_replicated_bc_groups);
    tcase_add_test(tc, each_head_is_read_from_a_rank_that_holds_it_spread_over_the_holders);
    suite_add_tcase(s, tc);
    tc = tcase_create("conversions");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, tokens_per_block_converts_both_ways);
    tcase_add_test(tc, nhd_and_hnd_convert_in_the_copy_program);
    tcase_add_test(tc, block_lists_that_do_not_map_are_bad_requests);
    suite_add_tcase(s, tc);
    tc = tcase_create("coverage");
    tcase_add_test(tc, a_generation_layout_that_omits_anything_is_refused_naming_it);
    tcase_add_test(tc, layer_maps_must_agree_and_the_context_must_hold_its_map);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
