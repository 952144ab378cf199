/* bench_gpu_prog.h: what the GPU benches share (bench_gpu, bench_gpu_bounce): one writer's copy
 * program of a planned request (plan_build on a preset, 128 random blocks of 512 and a random
 * slot on each side), with the pool sizes of both sides (plain C: a bench may build it before it
 * forks), and the checks of CUDA and kernel calls naming the call (expanded in CUDA code only;
 * `fail` is what the bench does then). Header only: each bench is one program. */
#ifndef KVF_BENCH_GPU_PROG_H
#define KVF_BENCH_GPU_PROG_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvf_kernels.h"
#include "layout.h"
#include "plan.h"
#include "preset.h"

#define BENCH_TRY(name, call, fail)                                                             \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s: %s: %s\n", name, #call, cudaGetErrorString(e_));              \
            fail;                                                                              \
        }                                                                                      \
    } while (0)
#define BENCH_KTRY(name, call, fail)                                                            \
    do {                                                                                       \
        int rc_ = (call);                                                                      \
        if (rc_ != 0) {                                                                        \
            fprintf(stderr, "%s: %s: %s\n", name, #call, kvk_last_error());                    \
            fail;                                                                              \
        }                                                                                      \
    } while (0)

static uint64_t rng = 12345;
static inline uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A random selection of n distinct ids of [0, pool). */
static inline void pick_ids(uint32_t *ids, uint32_t n, uint32_t pool)
{
    uint32_t *perm = malloc(pool * sizeof(*perm));
    for (uint32_t i = 0; i < pool; i++)
        perm[i] = i;
    for (uint32_t i = pool - 1; i > 0; i--) {
        uint32_t j = (uint32_t)(rnd() % (i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    memcpy(ids, perm, n * sizeof(*ids));
    free(perm);
}

/* One writer's program of a planned request: ctx_spec -> gen_spec, generation rank gr, writer w,
 * with 128 random blocks and a random slot per rank (context ids known). Copies the ops and the
 * pool sizes of both sides. */
struct bprog {
    struct copy_op *ops; /* owned */
    uint32_t n_ops, n_writers;
    uint64_t bytes;
    struct kvk_mem src_sizes, dst_sizes; /* sizes only */
};

static inline void bprog_build(const char *cs, const char *gs, uint32_t gr, uint32_t w,
                               struct bprog *ret)
{
    static struct layout c[LAYOUT_MAX_TP], g[LAYOUT_MAX_TP];
    static uint32_t ids[LAYOUT_MAX_TP][LAYOUT_MAX_GROUPS][128], gids[LAYOUT_MAX_GROUPS][128];
    struct preset_spec sc, sg;
    char err[256];
    if (preset_parse(cs, &sc, err, sizeof(err)) || preset_parse(gs, &sg, err, sizeof(err)) ||
        preset_build(&sc, "ctx", ROLE_CONTEXT, 0, c, err, sizeof(err)) ||
        preset_build(&sg, "gen", ROLE_GENERATION, 0, g, err, sizeof(err))) {
        fprintf(stderr, "bench: preset %s -> %s: %s\n", cs, gs, err);
        exit(1);
    }
    struct plan_ids cids[LAYOUT_MAX_TP];
    memset(cids, 0, sizeof(cids));
    uint32_t nc = preset_n_ranks(&sc);
    for (uint32_t r = 0; r < nc; r++)
        for (uint32_t gi = 0; gi < c[r].n_groups; gi++) {
            int st = c[r].groups[gi].kind == GROUP_STATE;
            cids[r].n[gi] = st ? 1 : 128;
            pick_ids(ids[r][gi], cids[r].n[gi], c[r].groups[gi].n_items);
            cids[r].ids[gi] = ids[r][gi];
        }
    struct plan_input in = {.gen = &g[gr], .ctx = c, .n_ctx = nc, .ctx_ids = cids,
                            .ctx_dp_rank = -1};
    for (uint32_t gi = 0; gi < g[gr].n_groups; gi++) {
        int st = g[gr].groups[gi].kind == GROUP_STATE;
        in.gen_ids.n[gi] = st ? 1 : 128;
        pick_ids(gids[gi], in.gen_ids.n[gi], g[gr].groups[gi].n_items);
        in.gen_ids.ids[gi] = gids[gi];
    }
    struct plan p;
    struct plan_error pe;
    if (plan_build(&in, &p, &pe)) {
        fprintf(stderr, "bench: plan_build: %s\n", pe.message);
        exit(1);
    }
    const struct plan_writer *wr = &p.writers[w];
    memset(ret, 0, sizeof(*ret));
    ret->n_ops = wr->n_ops;
    ret->n_writers = p.n_writers;
    ret->bytes = wr->bytes;
    ret->ops = malloc(wr->n_ops * sizeof(*wr->ops));
    memcpy(ret->ops, wr->ops, wr->n_ops * sizeof(*wr->ops));
    const struct layout *cl = &c[wr->ctx_rank];
    ret->src_sizes.n = cl->n_pools;
    for (uint32_t i = 0; i < cl->n_pools; i++)
        ret->src_sizes.size[i] = cl->pools[i].bytes;
    ret->dst_sizes.n = g[gr].n_pools;
    for (uint32_t i = 0; i < g[gr].n_pools; i++)
        ret->dst_sizes.size[i] = g[gr].pools[i].bytes;
    plan_done(&p);
}

#endif
