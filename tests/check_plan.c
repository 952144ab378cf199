/* check_plan.c: planner parity geometries (docs/DESIGN.md §9), bitwise: the context side holds
 * its shard of the global pattern, every generation rank is planned, gathered and scattered into
 * poisoned pools and must equal its own shard exactly (tests/parity.h). Also: writer sets,
 * canonical order, request limits, accounting. Randomised geometries: check_plan_matrix.c. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "plan_internal.h"
#include "testutil.h"

static const struct par_opts base_opts = {.ctx_dp_rank = -1, .seed = 7, .chunked = 1};

static void parity(const char *c, const char *g, uint32_t n_ctx, uint32_t n_gen, int32_t dp)
{
    struct par_opts o = base_opts;
    o.ctx_dp_rank = dp;
    par_run(c, g, n_ctx, n_gen, &o, NULL);
}

#define T "tiny:blocks=12,slots=3"
#define K "kimi-linear-48b:blocks=6,slots=2"

START_TEST(plan_parity_tp1_to_tp1_bitwise) { parity(T, T, 5, 5, -1); parity(K, K, 3, 3, -1); }
END_TEST
START_TEST(plan_parity_tp2_to_tp2_sharded_bitwise)
{
    parity(T ",tp=2", T ",tp=2", 4, 4, -1);
    parity(K ",tp=2", K ",tp=2", 3, 3, -1);
}
END_TEST
START_TEST(plan_parity_tp2_to_tp2_attention_dp_bitwise)
{
    parity(T ",tp=2,adp=1", T ",tp=2,adp=1", 4, 4, 1);
    parity(K ",tp=2,adp=1", K ",tp=2,adp=1", 3, 3, 0);
}
END_TEST
START_TEST(plan_parity_head_split_tp2_to_tp4_bitwise)
{
    parity(T ",tp=2", T ",tp=4", 4, 4, -1);
    parity(K ",tp=2", K ",tp=4", 2, 2, -1);
}
END_TEST
START_TEST(plan_parity_fanin_tp4_to_tp2_bitwise)
{
    parity(T ",tp=4", T ",tp=2", 4, 4, -1);
    parity(K ",tp=4", K ",tp=2", 2, 2, -1);
}
END_TEST
START_TEST(plan_parity_dep2_to_dep4_bitwise) { parity(T ",tp=2,adp=1", T ",tp=4,adp=1", 3, 3, 1); }
END_TEST
START_TEST(plan_parity_adp_context_to_sharded_generation_bitwise)
{
    parity(T ",tp=2,adp=1", T ",tp=2", 3, 3, 0);
    parity(T ",tp=2,adp=1", T ",tp=4", 3, 3, 1);
}
END_TEST
START_TEST(plan_parity_sharded_context_to_dep_generation_fans_in)
{
    parity(T ",tp=2", T ",tp=2,adp=1", 3, 3, -1);
}
END_TEST
START_TEST(plan_parity_pp2_to_pp1_and_pp1_to_pp2_bitwise)
{
    parity(T ",pp=2", T, 4, 4, -1);
    parity(T, T ",pp=2", 4, 4, -1);
    parity(T ",pp=2,tp=2", T ",pp=4", 3, 3, -1);
}
END_TEST
START_TEST(plan_parity_uneven_pp_bitwise)
{
    parity(T ",pp=2,pp_layers=3+5", T, 4, 4, -1);
    parity(K ",pp=2,pp_layers=10+17", K ",pp=2", 2, 2, -1);
}
END_TEST
START_TEST(plan_parity_prefix_cached_generation_gets_the_suffix)
{
    parity(T ",tp=2", T ",tp=2", 7, 3, -1);
    parity(T, T ",tp=2", 6, 1, -1);
    parity(T, T, 5, 0, -1); /* everything cached: state only */
}
END_TEST
START_TEST(plan_parity_split_views_and_pools_bitwise)
{
    parity(T ",state=split", T, 4, 4, -1);
    parity(T, T ",state=split,kv=split", 4, 4, -1);
    parity(T ",kv=split,tp=2", T ",state=split,tp=4", 4, 4, -1);
}
END_TEST
START_TEST(plan_parity_block_major_to_layer_major_bitwise)
{
    parity(T ",arr=block", T ",tp=2", 4, 4, -1);
    parity(T ",tp=2", T ",arr=block,state=split", 4, 4, -1);
    parity(K ",arr=block,tp=2", K ",kv=split", 2, 2, -1);
}
END_TEST
START_TEST(plan_parity_per_layer_pools_bitwise)
{
    /* SGLang-style (pool per view and layer) and vLLM-style (pool per layer, views side by side)
     * against each other and against one pool per view */
    parity(T ",pools=layer", T ",pools=layer_joint", 4, 4, -1);
    parity(T ",pools=layer_joint,tp=2", T ",tp=4,state=split", 4, 4, -1);
    parity(T ",arr=block", T ",pools=layer,kv=split,tp=2", 4, 4, -1);
    parity(K ",pools=layer,tp=2", K ",pools=layer_joint,kv=split", 2, 2, -1);
    parity(K ",hd=16,pools=layer,kv=split,state=split", K ",hd=16,tp=2", 2, 2, -1); /* 54 pools */
}
END_TEST
START_TEST(plan_parity_kimi_k3_tp4_to_tp2_bitwise)
{
    struct par_opts o = base_opts;
    o.chunked = 0;
    par_run("kimi-k3:tp=4,blocks=3,slots=1", "kimi-k3:tp=2,blocks=3,slots=1", 2, 2, &o, NULL);
}
END_TEST

/* Nemotron-H's Mamba2 conv state is x | B | C, each segment sharded on its own (x by the 128
 * heads, B and C by the 8 groups): TP2 <-> TP4 moves every rank's x_r | B_r | C_r bitwise, in
 * both conv widths (W as TensorRT-LLM keeps it, W-1 as vLLM) and as one view or two. */
START_TEST(plan_parity_nemotron_h_tp2_tp4_mamba2_segments_bitwise)
{
    struct par_opts o = base_opts;
    o.chunked = 0;
    par_run("nemotron-h:tp=2,blocks=2,slots=1", "nemotron-h:tp=4,blocks=2,slots=1", 2, 2, &o, NULL);
    par_run("nemotron-h:tp=4,blocks=2,slots=1,conv=w-1,state=split",
            "nemotron-h:tp=2,blocks=2,slots=1,conv=w-1", 2, 2, &o, NULL);
}
END_TEST

/* ---- writers ---- */

static void writers_of(const char *cs, const char *gs, uint32_t gr, int32_t dp, uint32_t *ret,
                       uint32_t *n)
{
    char err[256];
    uint64_t rng = 1;
    struct par_side c, g;
    ck_assert_msg(par_side_init(&c, cs, ROLE_CONTEXT, 2, &rng, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(par_side_init(&g, gs, ROLE_GENERATION, 2, &rng, err, sizeof(err)) == 0, "%s", err);
    struct plan_input in = par_input(&c, &g, gr, c.ids, dp);
    struct plan p;
    struct plan_error pe;
    ck_assert_msg(plan_build(&in, &p, &pe) == 0, "%s", pe.message);
    *n = p.n_writers;
    for (uint32_t w = 0; w < p.n_writers; w++)
        ret[w] = p.writers[w].ctx_rank;
    plan_done(&p);
    par_side_free(&c);
    par_side_free(&g);
}

#define ASSERT_WRITERS(cs, gs, gr, dp, ...)                                                        \
    do {                                                                                           \
        uint32_t want_[] = {__VA_ARGS__}, got_[64], n_;                                            \
        writers_of(cs, gs, gr, dp, got_, &n_);                                                     \
        ck_assert_msg(n_ == sizeof(want_) / sizeof(want_[0]), "%s -> %s gen %u: %u writers", cs,   \
                      gs, gr, n_);                                                                 \
        for (uint32_t i_ = 0; i_ < n_; i_++)                                                       \
            ck_assert_uint_eq(got_[i_], want_[i_]);                                                \
    } while (0)

START_TEST(plan_writers_follow_head_ranges_and_replication_rules)
{
    ASSERT_WRITERS(T, T, 0, -1, 0);
    ASSERT_WRITERS(T ",tp=2", T ",tp=2", 1, -1, 1);
    ASSERT_WRITERS(T ",tp=4", T ",tp=2", 0, -1, 0, 1);    /* fan-in; MLA from 0 % 4 */
    ASSERT_WRITERS(T ",tp=4", T ",tp=2", 1, -1, 1, 2, 3); /* state 2,3; MLA from 1 % 4 */
    ASSERT_WRITERS(T ",tp=2", T ",tp=4", 3, -1, 1);       /* head split */
    ASSERT_WRITERS(T ",tp=2,adp=1", T ",tp=2,adp=1", 0, 1, 1); /* the DP rank that ran it */
    ASSERT_WRITERS(T ",tp=2,adp=1", T ",tp=4", 2, 0, 0);
    ASSERT_WRITERS(T ",pp=2", T, 0, -1, 0, 1);            /* both stages */
    ASSERT_WRITERS(T ",pp=2,tp=2", T ",tp=2", 1, -1, 1, 3);
}
END_TEST

START_TEST(plan_empty_intersection_is_zero_bytes_of_that_kind)
{
    char err[256];
    uint64_t rng = 9;
    struct par_side c, g;
    /* tiny's MLA layers are 3 and 7 (0-based): stage 0 of pp_layers=3+5 holds none */
    ck_assert_int_eq(par_side_init(&c, T ",pp=2,pp_layers=3+5", ROLE_CONTEXT, 3, &rng, err,
                                   sizeof(err)), 0);
    ck_assert_int_eq(par_side_init(&g, T, ROLE_GENERATION, 3, &rng, err, sizeof(err)), 0);
    struct plan_input in = par_input(&c, &g, 0, c.ids, -1);
    struct plan p;
    struct plan_error pe;
    ck_assert_int_eq(plan_build(&in, &p, &pe), 0);
    ck_assert_uint_eq(p.n_writers, 2);
    ck_assert_uint_eq(p.writers[0].ctx_rank, 0);
    ck_assert_uint_eq(p.writers[0].kv_bytes, 0);
    ck_assert_uint_gt(p.writers[0].state_bytes, 0);
    ck_assert_uint_gt(p.writers[1].kv_bytes, 0);
    /* per rank sizing: stage 0 holds 3 KDA layers, stage 1 holds 3 of 5 */
    ck_assert_uint_eq(p.writers[0].state_bytes, p.writers[1].state_bytes);
    ck_assert_uint_eq(p.writers[0].bytes + p.writers[1].bytes, p.total_bytes);
    plan_done(&p);
    par_side_free(&c);
    par_side_free(&g);
}
END_TEST

/* The coverage check (rule 8) on tampered plans: a gap, a double write, a stray write. */
typedef int (*cover_fn)(const struct plan *, const struct layout *, const struct plan_ids *,
                        uint32_t, char *, size_t);
static const cover_fn cover_fns[] = {plan_cover_check, plan_cover_check_sorted};

START_TEST(plan_cover_check_refuses_gaps_overlaps_and_strays)
{
    cover_fn plan_cover = cover_fns[_i];
    char err[256], msg[256];
    uint64_t rng = 13;
    struct par_side c, g;
    ck_assert_int_eq(par_side_init(&c, T ",tp=2", ROLE_CONTEXT, 3, &rng, err, sizeof(err)), 0);
    ck_assert_int_eq(par_side_init(&g, T ",tp=2", ROLE_GENERATION, 3, &rng, err, sizeof(err)), 0);
    struct plan_input in = par_input(&c, &g, 0, c.ids, -1);
    struct plan p;
    struct plan_error pe;
    ck_assert_int_eq(plan_build(&in, &p, &pe), 0);
    const struct layout *l = &g.ranks[0];
    ck_assert_int_eq(plan_cover(&p, l, &g.ids[0], 0, msg, sizeof(msg)), 0);
    struct plan_writer *w = &p.writers[0];
    ck_assert_uint_ge(w->n_ops, 2);
    struct copy_op keep = w->ops[1];
    /* the state/kv of the request differs from what ops carry */
    w->n_ops--;
    uint64_t last = w->ops[w->n_ops].len * w->ops[w->n_ops].count;
    w->bytes -= last;
    w->kv_bytes -= last; /* the last op is the MLA group's */
    p.total_bytes -= last;
    ck_assert_int_eq(plan_cover(&p, l, &g.ids[0], 0, msg, sizeof(msg)), -EINVAL);
    ck_assert_msg(strstr(msg, "plan_bytes"), "%s", msg);
    w->n_ops++;
    w->kv_bytes += last;
    w->bytes += last;
    p.total_bytes += last;
    /* op 1 writes over op 0's destination */
    w->ops[1].dst_pool = w->ops[0].dst_pool;
    w->ops[1].dst_off = w->ops[0].dst_off;
    ck_assert_int_eq(plan_cover(&p, l, &g.ids[0], 0, msg, sizeof(msg)), -EINVAL);
    ck_assert_msg(strstr(msg, "more than once"), "%s", msg);
    /* op 1 writes outside the request (and leaves its own bytes uncovered) */
    w->ops[1] = keep;
    w->ops[1].dst_off = g.mem[0].size[w->ops[1].dst_pool] + 4096;
    ck_assert_int_eq(plan_cover(&p, l, &g.ids[0], 0, msg, sizeof(msg)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "coverage differs"));
    /* extents that do not tile */
    w->ops[1] = keep;
    w->ops[1].ext_off++;
    ck_assert_int_eq(plan_cover(&p, l, &g.ids[0], 0, msg, sizeof(msg)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "not tiled"));
    w->ops[1] = keep;
    ck_assert_int_eq(plan_cover(&p, l, &g.ids[0], 0, msg, sizeof(msg)), 0);
    plan_done(&p);
    par_side_free(&c);
    par_side_free(&g);
}
END_TEST

/* Both daemons compute the same plan from the same inputs: planning twice gives identical
 * programs, and the generation daemon (context ids unknown) gets the same writers and extents. */
START_TEST(plan_is_deterministic_and_extents_match_without_context_ids)
{
    const char *pairs[][2] = {{T ",tp=4", T ",tp=2"}, {T ",tp=2,adp=1", T ",tp=4"},
                              {K ",pp=2", K ",tp=2,arr=block"}};
    for (int pi = 0; pi < 3; pi++) {
        char err[256];
        uint64_t rng = 21;
        struct par_side c, g;
        ck_assert_int_eq(par_side_init(&c, pairs[pi][0], ROLE_CONTEXT, 4, &rng, err, sizeof(err)), 0);
        ck_assert_int_eq(par_side_init(&g, pairs[pi][1], ROLE_GENERATION, 3, &rng, err, sizeof(err)), 0);
        struct plan_ids counts[8];
        memset(counts, 0, sizeof(counts));
        for (uint32_t r = 0; r < c.n; r++)
            memcpy(counts[r].n, c.ids[r].n, sizeof(counts[r].n));
        for (uint32_t gr = 0; gr < g.n; gr++) {
            struct plan a, b, u;
            struct plan_error pe;
            struct plan_input in = par_input(&c, &g, gr, c.ids, 1);
            ck_assert_int_eq(plan_build(&in, &a, &pe), 0);
            ck_assert_int_eq(plan_build(&in, &b, &pe), 0);
            in.ctx_ids = counts;
            ck_assert_int_eq(plan_build(&in, &u, &pe), 0);
            ck_assert_uint_eq(a.n_writers, b.n_writers);
            ck_assert_uint_eq(a.n_writers, u.n_writers);
            ck_assert_uint_eq(a.total_bytes, u.total_bytes);
            for (uint32_t w = 0; w < a.n_writers; w++) {
                ck_assert_uint_eq(a.writers[w].n_ops, b.writers[w].n_ops);
                ck_assert(memcmp(a.writers[w].ops, b.writers[w].ops,
                                 a.writers[w].n_ops * sizeof(struct copy_op)) == 0);
                ck_assert_uint_eq(a.writers[w].ctx_rank, u.writers[w].ctx_rank);
                ck_assert_uint_eq(a.writers[w].bytes, u.writers[w].bytes);
                ck_assert_uint_eq(a.writers[w].state_bytes, u.writers[w].state_bytes);
                for (uint32_t i = 0; i < u.writers[w].n_ops; i++)
                    ck_assert_uint_eq(u.writers[w].ops[i].src_pool, PLAN_POOL_UNKNOWN);
            }
            plan_done(&a);
            plan_done(&b);
            plan_done(&u);
        }
        par_side_free(&c);
        par_side_free(&g);
    }
}
END_TEST

/* ---- canonical order (rule 9): an independent walk of the generation rank's rows ---- */

START_TEST(plan_extent_follows_canonical_order)
{
    char err[256];
    uint64_t rng = 3;
    struct par_side c, g;
    ck_assert_int_eq(par_side_init(&c, T ",arr=block", ROLE_CONTEXT, 4, &rng, err, sizeof(err)), 0);
    ck_assert_int_eq(par_side_init(&g, T ",state=split,kv=split", ROLE_GENERATION, 4, &rng, err,
                                   sizeof(err)), 0);
    pattern_fill(&c.ranks[0], &c.mem[0], &c.ids[0], 0, 11);
    struct plan_input in = par_input(&c, &g, 0, c.ids, -1);
    struct plan p;
    struct plan_error pe;
    ck_assert_int_eq(plan_build(&in, &p, &pe), 0);
    ck_assert_uint_eq(p.n_writers, 1);
    uint8_t *ext = malloc(p.total_bytes), *walk = malloc(p.total_bytes);
    copy_gather(p.writers[0].ops, p.writers[0].n_ops, &c.mem[0], 0, p.total_bytes, ext);
    struct copy_mem want;
    par_expected(&g.ranks[0], &g.mem[0], &g.ids[0], 0, 11, &want);
    const struct layout *l = &g.ranks[0];
    uint64_t at = 0;
    struct plan_marks mk; /* where each layer ends in the extent: the walk's count at its end */
    ck_assert_int_eq(plan_marks_build(&in, NULL, &mk, &pe), 0);
    for (uint32_t id = 0; id < LAYOUT_MAX_LAYERS; id++) { /* layers first (issue 28) */
        for (uint32_t gi = 0; gi < l->n_groups; gi++)
            for (uint32_t li = 0; li < l->groups[gi].n_layers; li++)
                for (uint32_t v = 0; id == l->groups[gi].layers[li] && v < l->groups[gi].n_views;
                     v++) {
                    const struct layout_view *vw = &l->groups[gi].views[v];
                    for (uint32_t k = 0; k < g.ids[0].n[gi]; k++)
                        for (uint32_t t = 0; t < vw->n_tensors; t++) {
                            const struct layout_tensor *ts = &vw->tensors[t];
                            struct layout_loc r = layout_region_at(l, vw, li, g.ids[0].ids[gi][k]);
                            uint64_t n = (uint64_t)ts->outer * ts->heads * ts->inner;
                            memcpy(walk + at, want.base[r.pool] + r.off + ts->offset, n);
                            at += n;
                        }
                }
        ck_assert_uint_eq(plan_marks_below(&mk, 0, id + 1), at); /* all of layer id is below */
    }
    ck_assert_uint_eq(plan_marks_below(&mk, 0, 0), 0);
    ck_assert_uint_eq(plan_marks_below(&mk, 0, LAYOUT_MAX_LAYERS), p.total_bytes);
    plan_marks_done(&mk);
    ck_assert_uint_eq(at, p.total_bytes);
    ck_assert(memcmp(ext, walk, at) == 0);
    free(ext);
    free(walk);
    par_mem_free(&want);
    plan_done(&p);
    par_side_free(&c);
    par_side_free(&g);
}
END_TEST

/* ---- request limits ---- */

static void build_one(const char *spec, struct layout *ranks);

static int try_plan(struct par_side *c, struct par_side *g, struct plan_error *pe)
{
    struct plan_input in = par_input(c, g, 0, c->ids, -1);
    struct plan p;
    int rc = plan_build(&in, &p, pe);
    if (rc == 0)
        plan_done(&p);
    return rc;
}

START_TEST(plan_refuses_bad_block_lists_with_bad_request)
{
    char err[256];
    uint64_t rng = 5;
    struct par_side c, g;
    ck_assert_int_eq(par_side_init(&c, T, ROLE_CONTEXT, 3, &rng, err, sizeof(err)), 0);
    ck_assert_int_eq(par_side_init(&g, T, ROLE_GENERATION, 4, &rng, err, sizeof(err)), 0);
    struct plan_error pe;
    uint32_t gi = 0;
    while (g.ranks[0].groups[gi].kind != GROUP_PAGED)
        gi++;
    uint32_t si = gi == 0 ? 1 : 0;
    /* n_gen 4 > n_ctx 3 */
    ck_assert_int_eq(try_plan(&c, &g, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    g.ids[0].n[gi] = 3;
    ck_assert_int_eq(try_plan(&c, &g, &pe), 0);
    /* id out of range */
    uint32_t *ids = (uint32_t *)g.ids[0].ids[gi], keep = ids[1];
    ids[1] = g.ranks[0].groups[gi].n_items;
    ck_assert_int_eq(try_plan(&c, &g, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    ck_assert_ptr_nonnull(strstr(pe.message, "out of range"));
    /* duplicate id */
    ids[1] = ids[0];
    ck_assert_int_eq(try_plan(&c, &g, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    ck_assert_ptr_nonnull(strstr(pe.message, "twice"));
    ids[1] = keep;
    /* a context id out of range is refused too */
    uint32_t *cids = (uint32_t *)c.ids[0].ids[gi], ckeep = cids[0];
    cids[0] = 1u << 30;
    ck_assert_int_eq(try_plan(&c, &g, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    cids[0] = ckeep;
    /* state groups take exactly one slot */
    g.ids[0].n[si] = 2;
    ck_assert_int_eq(try_plan(&c, &g, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    g.ids[0].n[si] = 0;
    ck_assert_int_eq(try_plan(&c, &g, &pe), -EINVAL);
    g.ids[0].n[si] = 1;
    /* more than PLAN_MAX_IDS ids */
    g.ids[0].n[gi] = PLAN_MAX_IDS + 1;
    ck_assert_int_eq(try_plan(&c, &g, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    ck_assert_ptr_nonnull(strstr(pe.message, "limit"));
    g.ids[0].n[gi] = 3;
    ck_assert_int_eq(try_plan(&c, &g, &pe), 0);
    par_side_free(&c);
    par_side_free(&g);
}
END_TEST

START_TEST(plan_refuses_requests_needing_too_many_copy_runs)
{
    static struct layout c[1], g[1];
    static uint32_t ids[140000];
    uint32_t slot = 0;
    build_one("tiny:blocks=140000", c);
    build_one("tiny:blocks=140000", g);
    for (uint32_t i = 0; i < 140000; i++)
        ids[i] = i;
    struct plan_ids cids = {0};
    struct plan_input in = {.gen = g, .ctx = c, .n_ctx = 1, .ctx_ids = &cids, .ctx_dp_rank = -1};
    uint32_t n_ok = 60000, n_bad = 140000; /* 2 MLA layers x 2 tensors x 64 rows per block */
    for (int pass = 0; pass < 2; pass++) {
        uint32_t n = pass ? n_bad : n_ok;
        for (uint32_t gi = 0; gi < g->n_groups; gi++) {
            bool st = g->groups[gi].kind == GROUP_STATE;
            cids.n[gi] = in.gen_ids.n[gi] = st ? 1 : n;
            cids.ids[gi] = in.gen_ids.ids[gi] = st ? &slot : ids;
        }
        struct plan p;
        struct plan_error pe;
        int rc = plan_build(&in, &p, &pe);
        if (pass == 0) {
            ck_assert_msg(rc == 0, "%s", pe.message);
            plan_done(&p);
        } else {
            ck_assert_int_eq(rc, -EINVAL);
            ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
            ck_assert_msg(strstr(pe.message, "copy runs"), "%s", pe.message);
        }
    }
}
END_TEST

START_TEST(plan_refuses_attention_dp_context_without_dp_rank_as_bad_request)
{
    char err[256];
    uint64_t rng = 5;
    struct par_side c, g;
    ck_assert_int_eq(par_side_init(&c, T ",tp=2,adp=1", ROLE_CONTEXT, 2, &rng, err, sizeof(err)), 0);
    ck_assert_int_eq(par_side_init(&g, T ",tp=2,adp=1", ROLE_GENERATION, 2, &rng, err, sizeof(err)), 0);
    int32_t bad[] = {-1, 2, 1000};
    for (int i = 0; i < 3; i++) {
        struct plan_input in = par_input(&c, &g, 0, c.ids, bad[i]);
        struct plan p;
        struct plan_error pe;
        ck_assert_int_eq(plan_build(&in, &p, &pe), -EINVAL);
        /* the request's fault, never a peer verdict a daemon would cache (DESIGN §7) */
        ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
        ck_assert_int_eq(pe.reason, COMPAT_DP_RANK);
        ck_assert_ptr_nonnull(strstr(pe.message, "DP rank"));
    }
    struct plan_input in = par_input(&c, &g, 0, c.ids, 1);
    struct plan p;
    struct plan_error pe;
    ck_assert_msg(plan_build(&in, &p, &pe) == 0, "%s", pe.message);
    plan_done(&p);
    par_side_free(&c);
    par_side_free(&g);
}
END_TEST

/* ---- accounting (rule 3) ---- */

static void build_one(const char *spec, struct layout *ranks)
{
    struct preset_spec s;
    char err[256];
    ck_assert_msg(preset_parse(spec, &s, err, sizeof(err)) == 0, "%s", err);
    ck_assert_msg(preset_build(&s, "x", ROLE_CONTEXT, -1, ranks, err, sizeof(err)) == 0, "%s", err);
}

START_TEST(plan_bytes_kimi_k3_state_per_request)
{
    static struct layout r[4];
    uint32_t items[LAYOUT_MAX_GROUPS];
    struct request_bytes b;
    build_one("kimi-k3", r);
    plan_items_for_tokens(&r[0], 0, items);
    plan_bytes(&r[0], items, &b);
    ck_assert_uint_eq(b.state, 454459392ull);
    ck_assert_uint_eq(b.kv, 0);
    plan_items_for_tokens(&r[0], 8192, items);
    plan_bytes(&r[0], items, &b);
    ck_assert_uint_eq(b.kv, 27648ull * 8192);
    ck_assert_uint_eq(b.total, 454459392ull + 27648ull * 8192);
    build_one("kimi-k3:tp=4", r);
    for (int i = 0; i < 4; i++) {
        plan_items_for_tokens(&r[i], 8192, items);
        plan_bytes(&r[i], items, &b);
        ck_assert_uint_eq(b.state, 454459392ull / 4);
        ck_assert_uint_eq(b.kv, 27648ull * 8192); /* the latent is replicated */
    }
}
END_TEST

START_TEST(plan_bytes_kimi_linear_48b_per_token)
{
    static struct layout r[1];
    uint32_t items[LAYOUT_MAX_GROUPS];
    struct request_bytes b;
    build_one("kimi-linear-48b", r);
    for (uint64_t tok = 0; tok <= 640; tok += 64) {
        plan_items_for_tokens(&r[0], tok, items);
        plan_bytes(&r[0], items, &b);
        ck_assert_uint_eq(b.state, 43909120ull);
        ck_assert_uint_eq(b.kv, 8064ull * tok);
    }
    plan_items_for_tokens(&r[0], 65, items); /* a partial block is a whole block */
    plan_bytes(&r[0], items, &b);
    ck_assert_uint_eq(b.kv, 8064ull * 128);
}
END_TEST

/* ---- compression: op counts for a kimi-k3 8k-token request (they size the GPU kernels) ---- */

static void k3_ops(const char *cs, const char *gs, uint32_t gr, bool ids_known, uint32_t *ops,
                   uint32_t *n)
{
    static struct layout c[8], g[8];
    static uint32_t blocks[128], slot = 0;
    build_one(cs, c);
    build_one(gs, g);
    struct preset_spec sc;
    char err[128];
    ck_assert_int_eq(preset_parse(cs, &sc, err, sizeof(err)), 0);
    for (uint32_t i = 0; i < 128; i++)
        blocks[i] = i;
    struct plan_ids cids[8];
    memset(cids, 0, sizeof(cids));
    for (uint32_t r = 0; r < preset_n_ranks(&sc); r++)
        for (uint32_t gi = 0; gi < c[r].n_groups; gi++) {
            bool st = c[r].groups[gi].kind == GROUP_STATE;
            cids[r].n[gi] = st ? 1 : 128;
            cids[r].ids[gi] = ids_known ? (st ? &slot : blocks) : NULL;
        }
    struct plan_input in = {.gen = &g[gr], .ctx = c, .n_ctx = preset_n_ranks(&sc),
                            .ctx_ids = cids, .ctx_dp_rank = -1};
    for (uint32_t gi = 0; gi < g[gr].n_groups; gi++) {
        bool st = g[gr].groups[gi].kind == GROUP_STATE;
        in.gen_ids.n[gi] = st ? 1 : 128;
        in.gen_ids.ids[gi] = st ? &slot : blocks;
    }
    struct plan p;
    struct plan_error pe;
    ck_assert_msg(plan_build(&in, &p, &pe) == 0, "%s", pe.message);
    *n = p.n_writers;
    for (uint32_t w = 0; w < p.n_writers; w++)
        ops[w] = p.writers[w].n_ops;
    plan_done(&p);
}

START_TEST(plan_compresses_kimi_k3_8k_request_to_few_ops)
{
    uint32_t ops[8], n;
    for (int known = 0; known < 2; known++) {
        /* TP1: layers first (issue 28), so one op per run of layers of one group (strided):
         * the 24 MLA layers split the 69 KDA layers into at most 25 runs */
        k3_ops("kimi-k3", "kimi-k3", 0, known, ops, &n);
        ck_assert_uint_eq(n, 1);
        ck_assert_uint_le(ops[0], 2 * 24 + 1);
        /* block-major: the MLA blocks of a layer are strided, not contiguous */
        k3_ops("kimi-k3:arr=block", "kimi-k3", 0, known, ops, &n);
        ck_assert_uint_eq(n, 1);
        ck_assert_uint_le(ops[0], 2 * 24 + 1);
        /* TP4 -> TP2 fan-in: per KDA layer a 3-row conv op and an ssm op, plus the MLA */
        k3_ops("kimi-k3:tp=4", "kimi-k3:tp=2", 0, known, ops, &n);
        ck_assert_uint_eq(n, 2);
        ck_assert_uint_le(ops[0], 2 * 69 + 24); /* the MLA layers apart: layers first */
        ck_assert_uint_eq(ops[1], 2 * 69);
        k3_ops("kimi-k3:tp=4", "kimi-k3:tp=2", 1, known, ops, &n);
        ck_assert_uint_eq(n, 3);
        ck_assert_uint_eq(ops[0], 1);
    }
}
END_TEST

static Suite *plan_suite(void)
{
    Suite *s = suite_create("plan");
    TCase *tc = tcase_create("parity");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, plan_parity_tp1_to_tp1_bitwise);
    tcase_add_test(tc, plan_parity_tp2_to_tp2_sharded_bitwise);
    tcase_add_test(tc, plan_parity_tp2_to_tp2_attention_dp_bitwise);
    tcase_add_test(tc, plan_parity_head_split_tp2_to_tp4_bitwise);
    tcase_add_test(tc, plan_parity_fanin_tp4_to_tp2_bitwise);
    tcase_add_test(tc, plan_parity_dep2_to_dep4_bitwise);
    tcase_add_test(tc, plan_parity_adp_context_to_sharded_generation_bitwise);
    tcase_add_test(tc, plan_parity_sharded_context_to_dep_generation_fans_in);
    tcase_add_test(tc, plan_parity_pp2_to_pp1_and_pp1_to_pp2_bitwise);
    tcase_add_test(tc, plan_parity_uneven_pp_bitwise);
    tcase_add_test(tc, plan_parity_prefix_cached_generation_gets_the_suffix);
    tcase_add_test(tc, plan_parity_split_views_and_pools_bitwise);
    tcase_add_test(tc, plan_parity_block_major_to_layer_major_bitwise);
    tcase_add_test(tc, plan_parity_per_layer_pools_bitwise);
    tcase_add_test(tc, plan_parity_kimi_k3_tp4_to_tp2_bitwise);
    tcase_add_test(tc, plan_parity_nemotron_h_tp2_tp4_mamba2_segments_bitwise);
    suite_add_tcase(s, tc);
    tc = tcase_create("writers");
    tcase_add_test(tc, plan_writers_follow_head_ranges_and_replication_rules);
    tcase_add_test(tc, plan_extent_follows_canonical_order);
    tcase_add_test(tc, plan_is_deterministic_and_extents_match_without_context_ids);
    tcase_add_test(tc, plan_empty_intersection_is_zero_bytes_of_that_kind);
    tcase_add_loop_test(tc, plan_cover_check_refuses_gaps_overlaps_and_strays, 0, 2);
    suite_add_tcase(s, tc);
    tc = tcase_create("request");
    tcase_add_test(tc, plan_refuses_bad_block_lists_with_bad_request);
    tcase_add_test(tc, plan_refuses_attention_dp_context_without_dp_rank_as_bad_request);
    tcase_add_test(tc, plan_refuses_requests_needing_too_many_copy_runs);
    suite_add_tcase(s, tc);
    tc = tcase_create("accounting");
    tcase_add_test(tc, plan_bytes_kimi_k3_state_per_request);
    tcase_add_test(tc, plan_bytes_kimi_linear_48b_per_token);
    tcase_add_test(tc, plan_compresses_kimi_k3_8k_request_to_few_ops);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(plan_suite()); }
