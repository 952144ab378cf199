/* check_kernels_parity.c: the planner's parity geometries (docs/DESIGN.md §9) moved by the CUDA
 * kernels, bitwise. The context side holds its shard of the global pattern (tests/parity.h) in
 * GPU pools; every generation rank is planned twice like the two daemons do (context ids known /
 * unknown); each writer's extent is gathered on the GPU (whole, in 4097-byte chunks, at random
 * cuts) into a device arena, compared with the CPU twin's copy_gather of the same bytes, and
 * scattered into POISONED GPU generation pools, which must then equal poison + the rank's shard
 * exactly; the local path (kvk_direct) likewise. Exits 77 (skipped) without a GPU. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KVF_HAVE_CUDA
int main(void)
{
    printf("SKIP: built without CUDA (CUDA=0)\n");
    return 77;
}
#else

#include <cuda_runtime.h>

#include "gputest.h"
#include "kvf_kernels.h"
#include "parity.h"


/* Device copies of one rank's pools. */
static void dev_upload(const struct copy_mem *h, struct kvk_mem *d)
{
    memset(d, 0, sizeof(*d));
    d->n = h->n;
    for (uint32_t p = 0; p < h->n; p++) {
        void *m;
        CK_CUDA(cudaMalloc(&m, h->size[p] ? h->size[p] : 1));
        CK_CUDA(cudaMemcpy(m, h->base[p], h->size[p], cudaMemcpyHostToDevice));
        d->base[p] = (uint64_t)(uintptr_t)m;
        d->size[p] = h->size[p];
    }
}

static void dev_poison(const struct kvk_mem *d)
{
    for (uint32_t p = 0; p < d->n; p++)
        CK_CUDA(cudaMemset((void *)(uintptr_t)d->base[p], PAR_POISON, d->size[p]));
}

static void dev_download(const struct kvk_mem *d, struct copy_mem *h)
{
    CK_CUDA(cudaDeviceSynchronize());
    for (uint32_t p = 0; p < d->n; p++)
        CK_CUDA(cudaMemcpy(h->base[p], (void *)(uintptr_t)d->base[p], d->size[p],
                           cudaMemcpyDeviceToHost));
}

static void dev_free(struct kvk_mem *d)
{
    for (uint32_t p = 0; p < d->n; p++)
        cudaFree((void *)(uintptr_t)d->base[p]);
    d->n = 0;
}

static struct kvk_program *prog(const struct plan_writer *w)
{
    struct kvk_program *p = NULL;
    int rc = kvk_program_new(w->ops, w->n_ops, 0, &p);
    ck_assert_msg(rc == 0, "kvk_program_new: %s", kvk_last_error());
    ck_assert_uint_eq(kvk_program_bytes(p), w->bytes);
    return p;
}

/* Every writer: GPU gather in pieces (checked against copy_gather), GPU scatter. */
static void gpu_move(const struct plan *pc, const struct plan *pg, const struct par_side *ctx,
                     const struct kvk_mem *dctx, const struct kvk_mem *dgen, uint64_t chunk,
                     uint64_t *rng, cudaStream_t st)
{
    for (uint32_t w = 0; w < pc->n_writers; w++) {
        const struct plan_writer *sw = &pc->writers[w], *dw = &pg->writers[w];
        ck_assert_uint_eq(sw->bytes, dw->bytes);
        if (sw->bytes == 0)
            continue;
        struct kvk_program *ps = prog(sw), *pd = prog(dw);
        uint8_t *arena, *got = malloc(sw->bytes), *want = malloc(sw->bytes);
        ck_assert_ptr_nonnull(got);
        ck_assert_ptr_nonnull(want);
        CK_CUDA(cudaMalloc((void **)&arena, sw->bytes));
        for (uint64_t lo = 0; lo < sw->bytes;) {
            uint64_t hi = chunk ? lo + chunk
                          : rng ? lo + 1 + par_rand(rng) % (sw->bytes / 3 + 1) : sw->bytes;
            if (hi > sw->bytes)
                hi = sw->bytes;
            ck_assert_int_eq(kvk_gather(ps, &dctx[sw->ctx_rank], lo, hi, arena + lo, st), 0);
            ck_assert_int_eq(kvk_scatter(pd, arena + lo, lo, hi, dgen, st), 0);
            lo = hi;
        }
        CK_CUDA(cudaStreamSynchronize(st));
        CK_CUDA(cudaMemcpy(got, arena, sw->bytes, cudaMemcpyDeviceToHost));
        copy_gather(sw->ops, sw->n_ops, &ctx->mem[sw->ctx_rank], 0, sw->bytes, want);
        int64_t d = gt_first_diff(got, want, sw->bytes);
        ck_assert_msg(d < 0, "writer %u extent byte %lld: GPU gather differs from copy_gather", w,
                      (long long)d);
        cudaFree(arena);
        free(got);
        free(want);
        kvk_program_free(ps);
        kvk_program_free(pd);
    }
}

static void gpu_parity(const char *ctx_spec, const char *gen_spec, uint32_t n_ctx_blocks,
                       uint32_t n_gen_blocks, int32_t dp, uint64_t seed)
{
    char err[512];
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
    struct par_side ctx, gen;
    ck_assert_msg(par_side_init(&ctx, ctx_spec, ROLE_CONTEXT, n_ctx_blocks, &rng, err,
                                sizeof(err)) == 0, "%s: %s", ctx_spec, err);
    ck_assert_msg(par_side_init(&gen, gen_spec, ROLE_GENERATION, n_gen_blocks, &rng, err,
                                sizeof(err)) == 0, "%s: %s", gen_spec, err);
    struct kvk_mem *dctx = calloc(ctx.n, sizeof(*dctx));
    struct plan_ids *counts = calloc(ctx.n, sizeof(*counts));
    ck_assert_ptr_nonnull(dctx);
    ck_assert_ptr_nonnull(counts);
    for (uint32_t r = 0; r < ctx.n; r++) {
        pattern_fill(&ctx.ranks[r], &ctx.mem[r], &ctx.ids[r], 0, seed);
        dev_upload(&ctx.mem[r], &dctx[r]);
        for (uint32_t g = 0; g < LAYOUT_MAX_GROUPS; g++)
            counts[r].n[g] = ctx.ids[r].n[g];
    }
    cudaStream_t st;
    CK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    uint64_t ctb = ctx.ranks[0].tokens_per_block, gtb = gen.ranks[0].tokens_per_block;
    uint32_t first = (uint32_t)((uint64_t)n_ctx_blocks * ctb / gtb) - n_gen_blocks; /* rule 10 */
    for (uint32_t gr = 0; gr < gen.n; gr++) {
        struct plan pc, pg;
        struct plan_error pe;
        struct plan_input in = par_input(&ctx, &gen, gr, ctx.ids, dp);
        ck_assert_msg(plan_build(&in, &pc, &pe) == 0, "%s -> %s gen %u: %s", ctx_spec, gen_spec,
                      gr, pe.message);
        in.ctx_ids = counts;
        ck_assert_msg(plan_build(&in, &pg, &pe) == 0, "%s", pe.message);
        struct copy_mem want, *gm = &gen.mem[gr];
        par_expected(&gen.ranks[gr], gm, &gen.ids[gr], first, seed, &want);
        struct kvk_mem dgen;
        dev_upload(gm, &dgen);
        static const char *const what[] = {"GPU gather+scatter", "GPU 4097-byte chunks",
                                           "GPU random cuts", "GPU direct"};
        for (int pass = 0; pass < 4; pass++) {
            dev_poison(&dgen);
            if (pass < 3) {
                gpu_move(&pc, &pg, &ctx, dctx, &dgen, pass == 1 ? 4097 : 0,
                         pass == 2 ? &rng : NULL, st);
            } else {
                for (uint32_t w = 0; w < pc.n_writers; w++) {
                    if (pc.writers[w].bytes == 0)
                        continue;
                    struct kvk_program *p = prog(&pc.writers[w]);
                    ck_assert_int_eq(kvk_direct(p, &dctx[pc.writers[w].ctx_rank], &dgen, st), 0);
                    CK_CUDA(cudaStreamSynchronize(st));
                    kvk_program_free(p);
                }
            }
            dev_download(&dgen, gm);
            par_assert_equal(gm, &want, &gen.ranks[gr], &gen.ids[gr], first, seed, what[pass]);
        }
        dev_free(&dgen);
        par_mem_free(&want);
        plan_done(&pc);
        plan_done(&pg);
    }
    CK_CUDA(cudaStreamDestroy(st));
    for (uint32_t r = 0; r < ctx.n; r++)
        dev_free(&dctx[r]);
    free(dctx);
    free(counts);
    par_side_free(&ctx);
    par_side_free(&gen);
}

#define T "tiny:blocks=12,slots=3"
#define K "kimi-linear-48b:blocks=6,slots=2"

START_TEST(gpu_parity_tp1_and_tp2_geometries_bitwise)
{
    gpu_parity(T, T, 5, 5, -1, 1);
    gpu_parity(K, K, 3, 3, -1, 2);
    gpu_parity(T ",tp=2", T ",tp=2", 4, 4, -1, 3);
    gpu_parity(K ",tp=2,adp=1", K ",tp=2,adp=1", 3, 3, 0, 4);
}
END_TEST

START_TEST(gpu_parity_head_split_and_fan_in_bitwise)
{
    gpu_parity(T ",tp=2", T ",tp=4", 4, 4, -1, 5);
    gpu_parity(K ",tp=4", K ",tp=2", 2, 2, -1, 6);
    gpu_parity(T ",tp=2,adp=1", T ",tp=4,adp=1", 3, 3, 1, 7); /* DEP2 -> DEP4 */
}
END_TEST

START_TEST(gpu_parity_pipeline_splits_bitwise)
{
    gpu_parity(T ",pp=2", T, 4, 4, -1, 8);
    gpu_parity(T, T ",pp=2", 4, 4, -1, 9);
    gpu_parity(K ",pp=2,pp_layers=10+17", K ",pp=2", 2, 2, -1, 10);
}
END_TEST

START_TEST(gpu_parity_prefix_cache_views_and_arrangements_bitwise)
{
    gpu_parity(T ",tp=2", T ",tp=2", 7, 3, -1, 11);
    gpu_parity(T, T, 5, 0, -1, 12); /* everything cached: state only */
    gpu_parity(T ",kv=split,tp=2", T ",state=split,tp=4", 4, 4, -1, 13);
    gpu_parity(K ",arr=block,tp=2", K ",kv=split", 2, 2, -1, 14);
}
END_TEST

START_TEST(gpu_parity_per_layer_pools_bitwise)
{
    /* SGLang-style (a pool per view and layer) and vLLM-style (a pool per layer): programs
     * naming up to 54 pools, past the 16 of layout v1 */
    gpu_parity(T ",pools=layer", T ",pools=layer_joint,tp=2", 4, 4, -1, 16);
    gpu_parity(K ",hd=16,pools=layer,kv=split,state=split", K ",hd=16,tp=2", 2, 2, -1, 17);
}
END_TEST

START_TEST(gpu_parity_kimi_k3_tp4_to_tp2_bitwise)
{
    gpu_parity("kimi-k3:tp=4,blocks=3,slots=1", "kimi-k3:tp=2,blocks=3,slots=1", 2, 2, -1, 15);
}
END_TEST

/* Layout v2 planning: replicated head groups (2 and 8 KV heads, TP above them), block sizes
 * 16 <-> 32 and NHD <-> HND converted by the copy program (finer runs the kernels run as is). */
#define Q "qwen3-next-80b:hd=16,blocks=4,slots=1,tpb=8"
#define L "llama-3-70b:blocks=4,tpb=4"

START_TEST(gpu_parity_replicated_heads_and_conversions_bitwise)
{
    gpu_parity(Q ",tp=2", Q ",tp=4", 3, 3, -1, 16);
    gpu_parity(Q ",tp=8", Q ",tp=4", 3, 2, -1, 17);
    gpu_parity(L ",tp=8", L ",tp=16", 3, 3, -1, 18);
    gpu_parity(L ",tp=16", L ",tp=8", 3, 3, -1, 19);
    gpu_parity("tiny:tpb=16,blocks=8", "tiny:tpb=32,blocks=8", 6, 3, -1, 20);
    gpu_parity("tiny:tpb=32,blocks=8", "tiny:tpb=16,blocks=8,tp=2", 3, 5, -1, 21);
    gpu_parity(L ",tp=2", L ",tp=4,order=hnd", 4, 4, -1, 22);
    gpu_parity(L ",tp=4,order=hnd,kv=split", L ",tp=2", 4, 3, -1, 23);
    gpu_parity(Q ",tp=2,pp=2", "qwen3-next-80b:hd=16,blocks=4,slots=1,tp=4,tpb=16,order=hnd", 4, 2,
               -1, 24);
}
END_TEST

static Suite *parity_suite(void)
{
    Suite *s = suite_create("kernels_parity");
    TCase *tc = tcase_create("geometries");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, gpu_parity_tp1_and_tp2_geometries_bitwise);
    tcase_add_test(tc, gpu_parity_head_split_and_fan_in_bitwise);
    tcase_add_test(tc, gpu_parity_pipeline_splits_bitwise);
    tcase_add_test(tc, gpu_parity_prefix_cache_views_and_arrangements_bitwise);
    tcase_add_test(tc, gpu_parity_per_layer_pools_bitwise);
    tcase_add_test(tc, gpu_parity_kimi_k3_tp4_to_tp2_bitwise);
    tcase_add_test(tc, gpu_parity_replicated_heads_and_conversions_bitwise);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (kvk_device_count() < 1) {
        printf("SKIP: no CUDA device: %s\n", kvk_last_error());
        return 77;
    }
    return gt_run_nofork(parity_suite());
}
#endif
