/* check_kernels_tmpl.c: programs kept per plan template (kvf_kernels.h kvk_tprogram_new,
 * kvk_program_of_ids) on the GPU, bitwise against the plan. Over random geometries of
 * check_plan_matrix (plangeo.h) and the bench's kimi-k3 8k: the context pools (random bytes)
 * on the GPU, each writer's template program uploaded once, then requests of the template's
 * shape with new ids (consecutive, reversed, random) run through kvk_program_of_ids +
 * kvk_direct into POISONED GPU generation pools, which must equal plan_build's plan for those
 * ids run by the CPU (copy_direct) into the same poison, byte for byte. Requests alternate the
 * stream of the ids' upload and of the launch (the events between them), and one pass runs the
 * op kernel family (KVK_FAT=0). Ids past a region are refused before anything is queued.
 * One GPU. Exits 77 (skipped) without a GPU. */
#include <check.h>
#include <errno.h>
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
#include "kvk_subst.h"
#include "parity.h"
#include "plan_template.h"
#include "plangeo.h"
#include "tmplids.h"

static void to_dev(const struct copy_mem *h, struct kvk_mem *d, int copy)
{
    memset(d, 0, sizeof(*d));
    d->n = h->n;
    for (uint32_t p = 0; p < h->n; p++) {
        void *m;
        CK_CUDA(cudaMalloc(&m, h->size[p] ? h->size[p] : 1));
        if (copy)
            CK_CUDA(cudaMemcpy(m, h->base[p], h->size[p], cudaMemcpyHostToDevice));
        d->base[p] = (uint64_t)(uintptr_t)m;
        d->size[p] = h->size[p];
    }
}

static void dev_free(struct kvk_mem *d)
{
    for (uint32_t p = 0; p < d->n; p++)
        cudaFree((void *)(uintptr_t)d->base[p]);
    d->n = 0;
}

/* Writer w's template program on device 0, uploaded on stream. */
static struct kvk_tprogram *tprog_of(const struct plan_template *t, uint32_t w,
                                     const struct plan_input *in, cudaStream_t stream)
{
    const struct plan_writer *pw = &t->plan.writers[w];
    uint32_t n_slots, *limit;
    struct plan_tslot *ts = calloc(pw->n_ops ? pw->n_ops : 1, sizeof *ts);
    struct kvk_subst *sub;
    ck_assert_ptr_nonnull(ts);
    ck_assert_int_eq(plan_template_slots(t, w, &in->gen_ids, &in->ctx_ids[pw->ctx_rank], ts,
                                         &n_slots), 0);
    ck_assert_int_eq(kvk_subst_tables(ts, pw->n_ops, n_slots, &sub, &limit), 0);
    struct kvk_tprogram *tp = NULL;
    ck_assert_msg(kvk_tprogram_new(pw->ops, sub, pw->n_ops, limit, n_slots, 0, stream, &tp) == 0,
                  "%s", kvk_last_error());
    free(ts);
    free(sub);
    free(limit);
    return tp;
}

static uint64_t n_requests;

/* Requests of in's shape through the template programs, each against the CPU's plan. */
static void run_geometry(const char *what, const struct par_side *c, const struct par_side *gs,
                         uint32_t gr, int32_t dp, uint64_t *rng, cudaStream_t s[2])
{
    struct plan_input in = par_input(c, gs, gr, c->ids, dp);
    struct plan_template t;
    struct plan first;
    struct plan_error pe;
    ck_assert_msg(plan_template_build(&in, &t, &first, &pe) == 0, "%s: %s", what, pe.message);
    plan_done(&first);
    struct kvk_tprogram **tp = calloc(t.plan.n_writers + 1, sizeof *tp);
    struct kvk_mem *src = calloc(c->n, sizeof *src), dst;
    ck_assert(tp && src);
    for (uint32_t w = 0; w < t.plan.n_writers; w++)
        tp[w] = tprog_of(&t, w, &in, s[w % 2]);
    for (uint32_t r = 0; r < c->n; r++)
        to_dev(&c->mem[r], &src[r], 1);
    to_dev(&gs->mem[gr], &dst, 0);
    uint32_t *gstore = calloc(LAYOUT_MAX_GROUPS * TI_MAX_IDS, sizeof *gstore);
    uint32_t *cstore = calloc((size_t)c->n * LAYOUT_MAX_GROUPS * TI_MAX_IDS, sizeof *cstore);
    struct plan_ids *cids = calloc(c->n, sizeof *cids);
    ck_assert(gstore && cstore && cids);
    for (int mode = 0; mode < 3; mode++) {
        struct plan_input b = in;
        ti_new_ids(in.gen, &in.gen_ids, mode, rng, gstore, &b.gen_ids);
        for (uint32_t r = 0; r < c->n; r++)
            ti_new_ids(&c->ranks[r], &in.ctx_ids[r], mode, rng,
                       cstore + r * LAYOUT_MAX_GROUPS * TI_MAX_IDS, &cids[r]);
        b.ctx_ids = cids;
        struct plan want;
        ck_assert_msg(plan_build(&b, &want, &pe) == 0, "%s: %s", what, pe.message);
        struct copy_mem host, got;
        ti_mem_copy(&gs->mem[gr], &host, 1);
        ti_mem_copy(&gs->mem[gr], &got, 1);
        for (uint32_t p = 0; p < dst.n; p++)
            CK_CUDA(cudaMemset((void *)(uintptr_t)dst.base[p], PAR_POISON, dst.size[p]));
        CK_CUDA(cudaDeviceSynchronize());
        struct kvk_program **inst = calloc(want.n_writers + 1, sizeof *inst);
        ck_assert_ptr_nonnull(inst);
        for (uint32_t w = 0; w < want.n_writers; w++) {
            const struct plan_writer *pw = &want.writers[w];
            copy_direct(pw->ops, pw->n_ops, &c->mem[pw->ctx_rank], &host);
            uint32_t n = plan_tslot_ids(&b.gen_ids, &cids[pw->ctx_rank], NULL, 0);
            uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
            ck_assert_ptr_nonnull(ids);
            plan_tslot_ids(&b.gen_ids, &cids[pw->ctx_rank], ids, n);
            ck_assert_msg(kvk_program_of_ids(tp[w], ids, n, s[(w + mode) % 2], &inst[w]) == 0,
                          "%s: %s", what, kvk_last_error());
            free(ids); /* uploaded through staging: the host copy is free at once */
            ck_assert_uint_eq(kvk_program_bytes(inst[w]), pw->bytes);
            ck_assert_msg(kvk_direct(inst[w], &src[pw->ctx_rank], &dst, s[(w + mode + 1) % 2]) ==
                          0, "%s: %s", what, kvk_last_error());
        }
        CK_CUDA(cudaDeviceSynchronize());
        for (uint32_t p = 0; p < dst.n; p++) {
            CK_CUDA(cudaMemcpy(got.base[p], (void *)(uintptr_t)dst.base[p], dst.size[p],
                               cudaMemcpyDeviceToHost));
            ck_assert_msg(memcmp(got.base[p], host.base[p], dst.size[p]) == 0,
                          "%s: ids mode %d: pool %u differs from the plan's copy", what, mode, p);
        }
        for (uint32_t w = 0; w < want.n_writers; w++)
            kvk_program_free(inst[w]);
        free(inst);
        par_mem_free(&host);
        par_mem_free(&got);
        plan_done(&want);
        n_requests++;
    }
    CK_CUDA(cudaDeviceSynchronize());
    for (uint32_t w = 0; w < t.plan.n_writers; w++)
        kvk_tprogram_free(tp[w]);
    for (uint32_t r = 0; r < c->n; r++)
        dev_free(&src[r]);
    dev_free(&dst);
    free(tp);
    free(src);
    free(gstore);
    free(cstore);
    free(cids);
    plan_template_done(&t);
}

static void streams(cudaStream_t s[2])
{
    CK_CUDA(cudaStreamCreateWithFlags(&s[0], cudaStreamNonBlocking));
    CK_CUDA(cudaStreamCreateWithFlags(&s[1], cudaStreamNonBlocking));
}

START_TEST(template_programs_move_the_plans_bytes)
{
    uint64_t rng = 0x6b6b0000ull + (uint64_t)_i;
    cudaStream_t s[2];
    streams(s);
    if (_i == 1)
        setenv("KVK_FAT", "0", 1); /* the op family: ops substituted per request */
    for (int n = 0; n < 16; n++) {
        struct geo g;
        random_geo(&g, &rng);
        struct par_side c, gs;
        geo_sides(&g, &c, &gs, &rng);
        for (uint32_t r = 0; r < c.n; r++)
            ti_fill_random(&c.mem[r], &rng);
        for (uint32_t gr = 0; gr < gs.n; gr++) {
            char what[400];
            snprintf(what, sizeof what, "%s -> %s gen %u", g.ctx, g.gen, gr);
            run_geometry(what, &c, &gs, gr, g.dp, &rng, s);
        }
        par_side_free(&c);
        par_side_free(&gs);
    }
    unsetenv("KVK_FAT");
    cudaStreamDestroy(s[0]);
    cudaStreamDestroy(s[1]);
    printf("template programs on the GPU: %llu requests equal to the plan's bytes\n",
           (unsigned long long)n_requests);
    ck_assert_uint_ge(n_requests, 48);
}
END_TEST

START_TEST(kimi_k3_8k_through_its_template_program)
{
    uint64_t rng = 17;
    char err[256];
    const char *spec = "kimi-k3:blocks=128,slots=1";
    struct par_side c, gs;
    ck_assert_int_eq(par_side_init(&c, spec, ROLE_CONTEXT, 1, &rng, err, sizeof err), 0);
    uint32_t blocks = 8192 / c.ranks[0].tokens_per_block;
    par_side_free(&c);
    ck_assert_int_eq(par_side_init(&c, spec, ROLE_CONTEXT, blocks, &rng, err, sizeof err), 0);
    ck_assert_int_eq(par_side_init(&gs, spec, ROLE_GENERATION, blocks, &rng, err, sizeof err), 0);
    for (uint32_t r = 0; r < c.n; r++)
        ti_fill_random(&c.mem[r], &rng);
    cudaStream_t s[2];
    streams(s);
    run_geometry("kimi-k3 8k", &c, &gs, 0, -1, &rng, s);
    cudaStreamDestroy(s[0]);
    cudaStreamDestroy(s[1]);
    par_side_free(&c);
    par_side_free(&gs);
}
END_TEST

START_TEST(ids_past_a_region_queue_nothing)
{
    uint64_t rng = 3;
    char err[256];
    struct par_side c, gs;
    ck_assert_int_eq(par_side_init(&c, "tiny:tp=1,blocks=8", ROLE_CONTEXT, 3, &rng, err,
                                   sizeof err), 0);
    ck_assert_int_eq(par_side_init(&gs, "tiny:tp=1,blocks=8", ROLE_GENERATION, 3, &rng, err,
                                   sizeof err), 0);
    struct plan_input in = par_input(&c, &gs, 0, c.ids, -1);
    struct plan_template t;
    struct plan first;
    struct plan_error pe;
    ck_assert_int_eq(plan_template_build(&in, &t, &first, &pe), 0);
    plan_done(&first);
    struct kvk_tprogram *tp = tprog_of(&t, 0, &in, NULL);
    uint32_t n = plan_tslot_ids(&in.gen_ids, &in.ctx_ids[0], NULL, 0), ids[64];
    ck_assert_uint_le(n, 64);
    ck_assert_uint_eq(kvk_tprogram_slots(tp), n);
    plan_tslot_ids(&in.gen_ids, &in.ctx_ids[0], ids, n);
    ids[n - 1] = 1u << 30;
    struct kvk_program *p = NULL;
    ck_assert_int_eq(kvk_program_of_ids(tp, ids, n, NULL, &p), -ERANGE);
    ck_assert_ptr_null(p);
    ck_assert_int_eq(kvk_program_of_ids(tp, ids, n - 1, NULL, &p), -ERANGE);
    CK_CUDA(cudaDeviceSynchronize());
    kvk_tprogram_free(tp);
    plan_template_done(&t);
    par_side_free(&c);
    par_side_free(&gs);
}
END_TEST

static Suite *tmpl_suite(void)
{
    Suite *s = suite_create("kernels_tmpl");
    TCase *tc = tcase_create("tmpl");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, template_programs_move_the_plans_bytes, 0, 2);
    tcase_add_test(tc, kimi_k3_8k_through_its_template_program);
    tcase_add_test(tc, ids_past_a_region_queue_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (kvk_device_count() < 1) {
        printf("SKIP: no CUDA device: %s\n", kvk_last_error());
        return 77;
    }
    return gt_run_nofork(tmpl_suite());
}
#endif
