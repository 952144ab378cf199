/* check_layouts_daemons.c: layout v2 through real daemons (issue 9): engine-shaped layouts
 * register as the engine allocated them (memfd pools, no rearranging) and move with bitwise
 * parity on the same-daemon and the two-daemon path:
 *  - a vLLM/SGLang-style per-layer Llama (80 layers, 8 KV heads): context TP2 SGLang-style
 *    (a k and a v buffer per layer: 160 pools a rank, fds sent ahead in FDS frames) to
 *    generation TP1 vLLM-style (one [2, blocks, ...] tensor per layer: 80 pools);
 *  - the aliased vLLM hybrid of examples/layouts (attention and Mamba state on shared pages);
 *  - the pool limit: 1024 pools a rank register and move, 1025 are refused by the library;
 * and the refusals: an undeclared overlap at REGISTER, a request writing one page twice. */
#include <check.h>
#include <sys/resource.h>

#include "remoteutil.h"

#define LLAMA_LAYERS 80
#define LLAMA_HEADS 8
#define LLAMA_HD 32 /* small head dim: the geometry, not the bytes, is under test */
#define LLAMA_TPB 4
#define LLAMA_BLOCKS 8
#define HYBRID "examples/layouts/vllm-hybrid-mamba-state.json"

/* One rank of a per-layer GQA model of `layers` layers and `views` tensors a layer (k, v; or
 * t0..t7): sglang: a pool per view and layer, view-major (k_buffer / v_buffer lists); else
 * vLLM: pool l holds layer l's first view of every block, then the next view's, ... */
static void model(struct layout *l, const char *inst, layout_role_t role, uint32_t tp,
                  uint32_t rank, uint32_t layers, uint32_t views, bool sglang)
{
    memset(l, 0, sizeof(*l));
    snprintf(l->instance, sizeof(l->instance), "%s", inst);
    l->role = role;
    l->tp_size = tp;
    l->tp_rank = rank;
    l->pp_size = 1;
    l->device = -1;
    l->tokens_per_block = LLAMA_TPB;
    l->n_layers_total = layers;
    uint32_t h = LLAMA_HEADS / tp;
    uint64_t region = (uint64_t)LLAMA_TPB * h * LLAMA_HD * 2;
    l->n_pools = sglang ? views * layers : layers;
    for (uint32_t p = 0; p < l->n_pools; p++)
        l->pools[p] = (struct layout_pool){POOL_HOST, -1,
                                           (sglang ? 1 : views) * LLAMA_BLOCKS * region};
    l->n_groups = 1;
    struct layout_group *g = &l->groups[0];
    snprintf(g->name, sizeof(g->name), "attn");
    g->kind = GROUP_PAGED;
    g->n_items = LLAMA_BLOCKS;
    g->n_layers = layers;
    for (uint32_t k = 0; k < layers; k++)
        g->layers[k] = (uint16_t)k;
    g->n_views = views;
    for (uint32_t v = 0; v < views; v++) {
        struct layout_view *vw = &g->views[v];
        char name[8];
        snprintf(name, sizeof(name), views == 2 ? (v ? "v" : "k") : "t%u", v);
        snprintf(vw->name, sizeof(vw->name), "%s", name);
        vw->per_layer = true;
        vw->addr_at = l->n_addrs;
        vw->item_stride = vw->region_bytes = region;
        vw->n_tensors = 1;
        vw->tensors[0] = (struct layout_tensor){.outer = LLAMA_TPB, .heads = h,
                                                .inner = LLAMA_HD * 2,
                                                .global_heads = LLAMA_HEADS,
                                                .shard = SHARD_SHARDED, .dtype = DTYPE_BF16};
        snprintf(vw->tensors[0].name, sizeof(vw->tensors[0].name), "%s", name);
        for (uint32_t k = 0; k < layers; k++)
            l->addrs[l->n_addrs++] = sglang ? (struct layout_addr){v * layers + k, 0}
                                            : (struct layout_addr){k, v * LLAMA_BLOCKS * region};
    }
    snprintf(l->fingerprint, sizeof(l->fingerprint), "gqa-%ul-%uv/v1", layers, views);
    char err[256];
    ck_assert_msg(layout_validate(l, err, sizeof err) == 0, "%s", err);
}

static void model_inst(struct ru_inst *in, const char *inst, layout_role_t role, uint32_t tp,
                       uint32_t layers, uint32_t views, bool sglang, uint64_t *rng, int fill)
{
    struct layout *ls = calloc(tp, sizeof(*ls));
    ck_assert_ptr_nonnull(ls);
    for (uint32_t r = 0; r < tp; r++)
        model(&ls[r], inst, role, tp, r, layers, views, sglang);
    memset(in, 0, sizeof(*in));
    ru_inst_init_layouts(in, ls, tp, LLAMA_BLOCKS / 2, rng, fill);
    free(ls);
}

/* The hybrid example as one rank of `inst`. */
static void hybrid(struct layout *l, const char *inst, layout_role_t role, bool alias)
{
    json_error_t je;
    json_t *o = json_load_file(HYBRID, 0, &je);
    ck_assert_msg(o, "%s: %s (run from the repository root)", HYBRID, je.text);
    json_object_set_new(o, "role", json_string(layout_role_to_string(role)));
    json_object_set_new(o, "instance", json_string(inst));
    if (!alias)
        json_object_del(json_array_get(json_object_get(json_array_get(json_object_get(o, "groups"),
                                                                      2),
                                                       "views"),
                                       0),
                        "alias");
    char err[512];
    int rc = layout_from_jobj(o, l, err, sizeof err);
    json_decref(o);
    ck_assert_msg(alias ? rc == 0 : rc == -EINVAL, "%s", err);
}

static void raise_nofile(void)
{
    struct rlimit r;
    ck_assert_int_eq(getrlimit(RLIMIT_NOFILE, &r), 0);
    if (r.rlim_cur < 8192 && r.rlim_max > r.rlim_cur) {
        r.rlim_cur = r.rlim_max < 8192 ? r.rlim_max : 8192;
        ck_assert_int_eq(setrlimit(RLIMIT_NOFILE, &r), 0);
    }
}

/* SENDs from every context rank that writes, RECVs on every generation rank; returns 1 when all
 * completed; checks parity. ctx_home NULL: the same daemon. */
static int move(struct ru_inst *ctx, struct ru_inst *gen, uint64_t req, const char *ctx_home,
                uint64_t seed)
{
    uint32_t readers[64] = {0};
    ru_readers(ctx, gen, -1, readers);
    for (uint32_t i = 0; i < ctx->n; i++) {
        pattern_fill(&ctx->r[i].l, &ctx->r[i].mem, &ctx->r[i].pids, 0, seed);
        if (readers[i])
            ck_assert_int_eq(kvf_send(ctx->r[i].c, req, ctx->r[i].l.n_groups, ctx->r[i].counts,
                                      ctx->r[i].ids, readers[i]),
                             0);
    }
    for (uint32_t g = 0; g < gen->n; g++) {
        struct ru_rank *r = &gen->r[g];
        struct kvf_recv_args a = {.req_id = req,
                                  .ctx_instance = ctx->r[0].l.instance,
                                  .ctx_dp_rank = -1,
                                  .ctx_home = ctx_home,
                                  .n_groups = r->l.n_groups,
                                  .counts = r->counts,
                                  .ids = r->ids};
        ck_assert_int_eq(kvf_recv(r->c, &a), 0);
    }
    int ok = 1;
    for (uint32_t g = 0; g < gen->n; g++) {
        struct kvf_event ev;
        int k = ru_wait_event(&gen->r[g], req, &ev, 40000);
        if (k != KVF_EV_DONE) {
            fprintf(stderr, "generation rank %u: event %d: %s: %s\n", g, k,
                    kvf_error_to_string((kvf_error_t)ev.error), ev.message);
            ok = 0;
        }
    }
    for (uint32_t g = 0; g < gen->n && ok; g++)
        ru_assert_parity(&gen->r[g], 0, seed, ctx_home ? "two daemons" : "same daemon");
    return ok;
}

static void llama_case(bool two_daemons)
{
    raise_nofile();
    struct two t;
    two_start(&t, NULL, NULL, NULL);
    uint64_t rng = 0x51;
    struct ru_inst ctx, gen;
    model_inst(&ctx, "ctx", ROLE_CONTEXT, 2, LLAMA_LAYERS, 2, true, &rng, 0x5a);
    model_inst(&gen, "gen", ROLE_GENERATION, 1, LLAMA_LAYERS, 2, false, &rng, RU_POISON);
    ck_assert_uint_eq(ctx.r[0].l.n_pools, 160);
    /* the generation rank names the same blocks as the context: suffix of equal length */
    for (uint32_t k = 0; k < gen.r[0].n_ids; k++)
        gen.r[0].ids[k] = ctx.r[0].ids[k] = ctx.r[1].ids[k];
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, two_daemons ? &t.b : &t.a);
    int ok = move(&ctx, &gen, 7, two_daemons ? t.a.addr : NULL, 0x77);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, ok);
    ck_assert_msg(ok, "llama per-layer did not complete");
}

START_TEST(per_layer_llama_160_pools_same_daemon_is_bitwise_equal)
{
    llama_case(false);
}
END_TEST

START_TEST(per_layer_llama_160_pools_two_daemons_is_bitwise_equal)
{
    llama_case(true);
}
END_TEST

/* The hybrid on each side; slots[g] for the three Mamba groups, blocks for attention. */
static void hybrid_inst(struct ru_inst *in, const char *inst, layout_role_t role, uint64_t *rng,
                        int fill, const uint32_t blocks[3], const uint32_t slots[3])
{
    struct layout *l = malloc(sizeof(*l));
    hybrid(l, inst, role, true);
    memset(in, 0, sizeof(*in));
    ru_inst_init_layouts(in, l, 1, 3, rng, fill);
    free(l);
    struct ru_rank *r = &in->r[0];
    memcpy(r->ids, blocks, 3 * sizeof(uint32_t));
    memcpy(r->ids + 3, slots, 3 * sizeof(uint32_t));
}

static void hybrid_case(bool two_daemons)
{
    struct two t;
    two_start(&t, NULL, NULL, NULL);
    uint64_t rng = 0x61;
    static const uint32_t cb[3] = {7, 1, 30}, cs[3] = {2, 40, 63};
    static const uint32_t gb[3] = {5, 6, 9}, gs[3] = {0, 11, 12};
    struct ru_inst ctx, gen;
    hybrid_inst(&ctx, "hctx", ROLE_CONTEXT, &rng, 0x5a, cb, cs);
    hybrid_inst(&gen, "hgen", ROLE_GENERATION, &rng, RU_POISON, gb, gs);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, two_daemons ? &t.b : &t.a);
    int ok = move(&ctx, &gen, 9, two_daemons ? t.a.addr : NULL, 0x99);
    /* a request whose attention block and Mamba slot are one page: refused, naming both */
    uint32_t *ids = gen.r[0].ids;
    ids[4] = ids[1]; /* mamba1's slot = attention block 6 */
    struct kvf_recv_args a = {.req_id = 10,
                              .ctx_instance = "hctx",
                              .ctx_dp_rank = -1,
                              .ctx_home = two_daemons ? t.a.addr : NULL,
                              .n_groups = gen.r[0].l.n_groups,
                              .counts = gen.r[0].counts,
                              .ids = ids};
    ck_assert_int_eq(kvf_send(ctx.r[0].c, 10, ctx.r[0].l.n_groups, ctx.r[0].counts, ctx.r[0].ids,
                              1),
                     0);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    struct kvf_event ev;
    int k = ru_wait_event(&gen.r[0], 10, &ev, 20000);
    ck_assert_int_eq(k, KVF_EV_FAILED);
    ck_assert_int_eq(ev.error, KVF_E_BAD_REQUEST);
    ck_assert_msg(strstr(ev.message, "groups.attn view kv layer 3 block 6 and groups.mamba1 view "
                                     "state layer 1 slot 6 overlap"),
                  "%s", ev.message);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, ok);
    ck_assert_msg(ok, "aliased hybrid did not complete");
}

START_TEST(aliased_hybrid_same_daemon_is_bitwise_equal_and_refuses_a_shared_page)
{
    hybrid_case(false);
}
END_TEST

START_TEST(aliased_hybrid_two_daemons_is_bitwise_equal_and_refuses_a_shared_page)
{
    hybrid_case(true);
}
END_TEST

START_TEST(undeclared_overlap_is_refused_at_register)
{
    struct two t;
    two_start(&t, NULL, NULL, NULL);
    struct layout *l = malloc(sizeof(*l));
    hybrid(l, "bad", ROLE_CONTEXT, true);
    l->groups[2].views[0].alias[0] = '\0'; /* mamba1 no longer declares the shared memory */
    uint64_t rng = 1;
    struct ru_inst in;
    memset(&in, 0, sizeof(in));
    ru_inst_init_layouts(&in, l, 1, 1, &rng, 0);
    free(l);
    struct ru_rank *r = &in.r[0];
    struct kvf_options o = {.no_reconnect = 1, .connect_timeout_ms = 10000};
    ck_assert_int_eq(kvf_connect(t.a.worker, &o, &r->c), 0);
    json_t *j = layout_to_jobj(&r->l);
    char *txt = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    struct kvf_pool pools[2];
    for (uint32_t p = 0; p < 2; p++)
        pools[p] = (struct kvf_pool){.kind = KVF_POOL_HOST, .device = -1,
                                     .bytes = r->l.pools[p].bytes, .fd = r->fds[p]};
    char err[512] = "";
    ck_assert_int_eq(kvf_register(r->c, txt, pools, 2, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "BAD_REQUEST: layout: groups[2].views[0].per_layer[0].base: regions "
                              "overlap those of groups[0].views[0].per_layer[0] in pool 0"),
                  "%s", err);
    free(txt);
    ru_inst_free(&in);
    two_stop(&t, 1);
}
END_TEST

/* The pool limit through the client library and the daemon: 1024 pools a rank (64 FDS frames
 * ahead of the REGISTER) register and move; 1025 are refused by the library naming the count. */
START_TEST(pools_at_the_limit_register_and_move_one_past_is_refused)
{
    raise_nofile();
    struct two t;
    two_start(&t, NULL, NULL, NULL);
    uint64_t rng = 0x71;
    struct ru_inst ctx, gen;
    model_inst(&ctx, "ctx", ROLE_CONTEXT, 1, 128, LAYOUT_MAX_VIEWS, true, &rng, 0x5a);
    model_inst(&gen, "gen", ROLE_GENERATION, 1, 128, LAYOUT_MAX_VIEWS, false, &rng, RU_POISON);
    ck_assert_uint_eq(ctx.r[0].l.n_pools, LAYOUT_MAX_POOLS);
    memcpy(gen.r[0].ids, ctx.r[0].ids, gen.r[0].n_ids * sizeof(uint32_t));
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.a);
    int ok = move(&ctx, &gen, 11, NULL, 0x1024);
    /* one past: the library refuses before anything is sent */
    struct kvf_client *c;
    struct kvf_options o = {.no_reconnect = 1, .connect_timeout_ms = 10000};
    ck_assert_int_eq(kvf_connect(t.a.worker, &o, &c), 0);
    struct kvf_pool *pools = calloc(LAYOUT_MAX_POOLS + 1, sizeof(*pools));
    for (uint32_t p = 0; p <= LAYOUT_MAX_POOLS; p++)
        pools[p] = (struct kvf_pool){.kind = KVF_POOL_HOST, .device = -1, .bytes = 4096,
                                     .fd = ctx.r[0].fds[p % LAYOUT_MAX_POOLS]};
    char err[256] = "";
    ck_assert_int_eq(kvf_register(c, "{}", pools, LAYOUT_MAX_POOLS + 1, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "1025 pools, expected 1..1024"), "%s", err);
    free(pools);
    kvf_close(c);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, ok);
    ck_assert_msg(ok, "1024-pool layout did not complete");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layouts_daemons");
    TCase *tc = tcase_create("layouts");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, per_layer_llama_160_pools_same_daemon_is_bitwise_equal);
    tcase_add_test(tc, per_layer_llama_160_pools_two_daemons_is_bitwise_equal);
    tcase_add_test(tc, aliased_hybrid_same_daemon_is_bitwise_equal_and_refuses_a_shared_page);
    tcase_add_test(tc, aliased_hybrid_two_daemons_is_bitwise_equal_and_refuses_a_shared_page);
    tcase_add_test(tc, undeclared_overlap_is_refused_at_register);
    tcase_add_test(tc, pools_at_the_limit_register_and_move_one_past_is_refused);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
