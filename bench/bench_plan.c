/* bench_plan.c: planning time of large requests (issue 9's gap: an 8192-token TP2 -> TP1 plan
 * took 0.5-1.3 s, 70% of it sorting in the coverage check). Llama-3-70B presets, 16 tokens a
 * block, TP2 NHD context -> TP1 HND generation (the conversion emits one run per head and token:
 * the most runs a real plan has), 8192 and 32768 tokens, block ids scattered as an allocator
 * leaves them. Times, best of REPS, plan_build (compat + plan + coverage) on the context daemon
 * (ids known) and on the generation daemon (context ids unknown), and plan_cover_check alone
 * on the finished plan: the coverage share is printed as a ratio of the whole plan in the same
 * run. Exit 1 if anything is refused. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan_internal.h"
#include "plan_request.h"
#include "preset.h"

#define REPS 3

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int build(const char *spec, layout_role_t role, struct layout **ret, uint32_t *n)
{
    char err[256];
    struct preset_spec s;
    if (preset_parse(spec, &s, err, sizeof(err)))
        return fprintf(stderr, "%s: %s\n", spec, err), -1;
    *n = preset_n_ranks(&s);
    *ret = calloc(*n, sizeof(**ret));
    if (!*ret || preset_build(&s, role == ROLE_CONTEXT ? "ctx" : "gen", role, -1, *ret, err,
                              sizeof(err)))
        return fprintf(stderr, "%s: %s\n", spec, err), -1;
    return 0;
}

static int measure(uint32_t tokens)
{
    char cspec[128], gspec[128];
    uint32_t blocks = tokens / 16, cap = blocks * 2, nc, ng;
    snprintf(cspec, sizeof(cspec), "llama-3-70b:tpb=16,blocks=%u,tp=2", cap);
    snprintf(gspec, sizeof(gspec), "llama-3-70b:tpb=16,blocks=%u,tp=1,order=hnd", cap);
    struct layout *ctx, *gen;
    if (build(cspec, ROLE_CONTEXT, &ctx, &nc) || build(gspec, ROLE_GENERATION, &gen, &ng))
        return 1;
    uint32_t *ids = malloc(blocks * sizeof(uint32_t));
    for (uint32_t k = 0; k < blocks; k++)
        ids[k] = (uint32_t)(((uint64_t)k * 7919u) % cap); /* scattered */
    struct plan_ids cids[2] = {{.n = {blocks}, .ids = {ids}}, {.n = {blocks}, .ids = {ids}}};
    struct plan_input in = {.gen = &gen[0], .gen_ids = {.n = {blocks}, .ids = {ids}}, .ctx = ctx,
                            .n_ctx = nc, .ctx_ids = cids, .ctx_dp_rank = -1};
    double t_ctx = 1e9, t_gen = 1e9, t_cover = 1e9;
    uint64_t bytes = 0, ops = 0, runs = 0;
    for (int r = 0; r < REPS; r++) {
        struct plan p;
        struct plan_error pe;
        in.ctx_ids = cids;
        double t0 = now();
        int rc = plan_build(&in, &p, &pe);
        double t1 = now();
        if (rc)
            return fprintf(stderr, "%u tokens: %s\n", tokens, pe.message), 1;
        t_ctx = t1 - t0 < t_ctx ? t1 - t0 : t_ctx;
        char msg[256];
        t0 = now();
        rc = plan_cover_check(&p, &gen[0], &in.gen_ids, 0, msg, sizeof(msg));
        t1 = now();
        if (rc)
            return fprintf(stderr, "%u tokens: coverage: %s\n", tokens, msg), 1;
        t_cover = t1 - t0 < t_cover ? t1 - t0 : t_cover;
        bytes = p.total_bytes;
        ops = runs = 0;
        for (uint32_t w = 0; w < p.n_writers; w++)
            for (uint32_t i = 0; i < p.writers[w].n_ops; i++, ops++)
                runs += p.writers[w].ops[i].count;
        plan_done(&p);
        in.ctx_ids = NULL; /* the generation daemon */
        t0 = now();
        rc = plan_build(&in, &p, &pe);
        t1 = now();
        if (rc)
            return fprintf(stderr, "%u tokens (gen): %s\n", tokens, pe.message), 1;
        t_gen = t1 - t0 < t_gen ? t1 - t0 : t_gen;
        plan_done(&p);
    }
    printf("plan %5u tokens TP2 NHD -> TP1 HND: %4" PRIu64 " MiB, %7" PRIu64 " ops, %8" PRIu64
           " runs: context daemon %7.1f ms, generation daemon %7.1f ms, coverage check %7.1f ms "
           "(%.2f of the plan)\n",
           tokens, bytes >> 20, ops, runs, t_ctx * 1e3, t_gen * 1e3, t_cover * 1e3,
           t_cover / t_ctx);
    free(ids);
    free(ctx);
    free(gen);
    return 0;
}

int main(void)
{
    int rc = measure(8192);
    rc |= measure(32768);
    return rc;
}
