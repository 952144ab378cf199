/* bench_plan.c: planning time of large requests (issue 9's gap: an 8192-token TP2 -> TP1 plan
 * took 0.5-1.3 s, 70% of it sorting in the coverage check). Llama-3-70B presets, 16 tokens a
 * block, TP2 NHD context -> TP1 HND generation (the conversion emits one run per head and token:
 * the most runs a real plan has), 8192 and 32768 tokens, block ids scattered as an allocator
 * leaves them. Times, best of REPS, plan_build (compat + plan + coverage) on the context daemon
 * (ids known) and on the generation daemon (context ids unknown), and plan_cover_check alone
 * on the finished plan: the coverage share is printed as a ratio of the whole plan in the same
 * run. Then, per request (issue 12 "plan once per request"), the presets the benches move
 * (tiny, kimi-k3 1k and 8k, kimi-linear-48b 8k, llama-3-70b TP2 -> TP1 8k): the median time of
 * plan_build as each path runs it and of its parts alone (compat_check, the alias and coverage
 * checks, copy_check of every writer's ops, plan_writers), with the parts' shares of the plan.
 * Then templates (plan_tcache.h): per path, plan_build against a template hit (instantiate:
 * the request checks and the ids substituted), alternating two id sets of the same shape
 * (scattered and consecutive), the ratio of the two, and the template's ops and bytes.
 * `--requests-only [NAME]` skips the large plans (and the rows not naming NAME). Exit 1 if
 * anything is refused. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy.h"
#include "plan_internal.h"
#include "plan_request.h"
#include "plan_tcache.h"
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

/* ---- per request, the presets the benches move (issue 12 "plan once per request") ---- */

/* Median of the timings of fn over about 0.2 s (at least 5, at most 2001 calls). */
#define MAX_SAMPLES 2001
static double median_of(int (*fn)(void *), void *arg)
{
    static double t[MAX_SAMPLES];
    int n = 0;
    double start = now();
    while (n < MAX_SAMPLES && (n < 5 || now() - start < 0.2)) {
        double t0 = now();
        if (fn(arg))
            return -1;
        t[n++] = now() - t0;
    }
    for (int i = 1; i < n; i++) /* insertion sort: n is small */
        for (int j = i; j > 0 && t[j] < t[j - 1]; j--) {
            double x = t[j];
            t[j] = t[j - 1];
            t[j - 1] = x;
        }
    return t[n / 2];
}

struct req_case {
    struct plan_input in;          /* ctx_ids: every rank's ids (the same-daemon path) */
    struct plan_ids *cids, *one;   /* one: the writer's own ids only (a context daemon) */
    struct layout *gen, *ctx;
    struct plan p;                 /* the full plan, for the checks timed alone */
    struct copy_mem gmem, cmem;    /* fake bases: copy_check reads only sizes */
    uint32_t writer;
    struct plan_ids gen_b, *cids_b, *one_b; /* a second id set of the same shape */
    struct plan_tcache tc;
    unsigned flip;
};

static int t_compat(void *a)
{
    struct req_case *c = a;
    compat_reason_t why;
    char msg[512];
    return compat_check(c->in.gen, c->in.ctx, c->in.n_ctx, &why, msg, sizeof msg);
}

static int t_plan(struct req_case *c, const struct plan_ids *ids)
{
    struct plan_input in = c->in;
    in.ctx_ids = ids;
    struct plan p;
    struct plan_error pe;
    if (plan_build(&in, &p, &pe))
        return fprintf(stderr, "plan_build: %s\n", pe.message), -1;
    plan_done(&p);
    return 0;
}
static int t_local(void *a) { return t_plan(a, ((struct req_case *)a)->cids); }
static int t_gen(void *a) { return t_plan(a, NULL); }
static int t_ctx(void *a) { return t_plan(a, ((struct req_case *)a)->one); }

/* A template hit: the request's plan from the cache, the two id sets taking turns. */
static int t_hit(struct req_case *c, int path)
{
    bool b = c->flip++ & 1, hit;
    struct plan_input in = c->in;
    if (b)
        in.gen_ids = c->gen_b;
    in.ctx_ids = path == 0 ? (b ? c->cids_b : c->cids) : path == 2 ? (b ? c->one_b : c->one) : NULL;
    uint64_t who = 1 + (uint64_t)path;
    struct plan p;
    struct plan_error pe;
    struct plan_tcache_entry *e;
    if (plan_tcache_plan(&c->tc, &who, 1, &in, &p, &e, &hit, &pe))
        return fprintf(stderr, "plan_tcache_plan: %s\n", pe.message), -1;
    plan_done(&p);
    return hit || c->flip == 1 ? 0 : -1;
}
static int t_hit_local(void *a) { return t_hit(a, 0); }
static int t_hit_gen(void *a) { return t_hit(a, 1); }
static int t_hit_ctx(void *a) { return t_hit(a, 2); }

static int t_writers(void *a)
{
    struct req_case *c = a;
    uint8_t set[LAYOUT_MAX_TP];
    struct plan_error pe;
    return plan_writers(&c->in, set, &pe);
}

static int t_cover(void *a)
{
    struct req_case *c = a;
    char msg[256];
    return plan_cover_check(&c->p, c->in.gen, &c->in.gen_ids, 0, msg, sizeof msg);
}

static int t_alias(void *a)
{
    struct req_case *c = a;
    char msg[256];
    return plan_alias_check(c->in.gen, &c->in.gen_ids, msg, sizeof msg);
}

static int t_copycheck(void *a)
{
    struct req_case *c = a;
    for (uint32_t w = 0; w < c->p.n_writers; w++) {
        const struct plan_writer *pw = &c->p.writers[w];
        if (copy_check(pw->ops, pw->n_ops, &c->cmem, 's') ||
            copy_check(pw->ops, pw->n_ops, &c->gmem, 'd'))
            return -1;
    }
    return 0;
}

static void fake_mem(const struct layout *l, struct copy_mem *m)
{
    m->n = l->n_pools;
    for (uint32_t i = 0; i < l->n_pools; i++) {
        m->base[i] = (uint8_t *)(uintptr_t)4096; /* never dereferenced */
        m->size[i] = l->pools[i].bytes;
    }
}

/* Ids of `need` items per paged group, scattered over the group's items as an allocator
 * leaves them (or consecutive from 0); slot 0 of state groups (or the last slot). */
static uint32_t *scatter_ids_as(const struct layout *l, uint64_t tokens, bool consecutive,
                                struct plan_ids *ret)
{
    uint32_t n[LAYOUT_MAX_GROUPS], total = 0;
    plan_items_for_tokens(l, tokens, n);
    for (uint32_t g = 0; g < l->n_groups; g++)
        total += n[g];
    uint32_t *ids = malloc((total ? total : 1) * sizeof *ids), *p = ids;
    memset(ret, 0, sizeof *ret);
    for (uint32_t g = 0; ids && g < l->n_groups; g++) {
        uint32_t cap = l->groups[g].n_items;
        for (uint32_t k = 0; k < n[g]; k++) /* 7919 is prime: distinct while n <= cap */
            p[k] = n[g] > cap ? 0 : (uint32_t)(((uint64_t)k * 7919u) % cap);
        for (uint32_t k = 0; consecutive && n[g] <= cap && k < n[g]; k++)
            p[k] = l->groups[g].kind == GROUP_STATE ? cap - 1 : k;
        ret->n[g] = n[g];
        ret->ids[g] = p;
        p += n[g];
    }
    return ids;
}

static uint32_t *scatter_ids(const struct layout *l, uint64_t tokens, struct plan_ids *ret)
{
    return scatter_ids_as(l, tokens, false, ret);
}

/* Template rows of case c: plan_build and a hit per path, their ratio, the template's size. */
static int measure_templates(const char *name, struct req_case *c, uint64_t tokens, double *t)
{
    uint32_t nc = c->in.n_ctx;
    c->cids_b = calloc(nc, sizeof *c->cids_b);
    c->one_b = plan_ctx_ids_new(c->ctx, nc);
    uint32_t **cid = calloc(nc, sizeof *cid);
    uint32_t *gid = scatter_ids_as(&c->gen[0], tokens, true, &c->gen_b);
    for (uint32_t r = 0; c->cids_b && cid && r < nc; r++)
        cid[r] = scatter_ids_as(&c->ctx[r], tokens, true, &c->cids_b[r]);
    if (!c->cids_b || !c->one_b || !cid || !gid || plan_tcache_init(&c->tc, 8, 1ull << 30))
        return fprintf(stderr, "%s: out of memory\n", name), 1;
    c->one_b[c->writer] = c->cids_b[c->writer];
    double h[3];
    int (*fn[3])(void *) = {t_hit_local, t_hit_gen, t_hit_ctx};
    for (int i = 0; i < 3; i++) {
        c->flip = 0;
        h[i] = median_of(fn[i], c);
    }
    int rc = h[0] < 0 || h[1] < 0 || h[2] < 0;
    uint64_t ops = 0;
    size_t bytes = 0;
    for (uint32_t i = 0; i < c->tc.n; i++) {
        bytes += c->tc.e[i].t.bytes;
        for (uint32_t w = 0; c->tc.e[i].who[0] == 1 && w < c->tc.e[i].t.plan.n_writers; w++)
            ops += c->tc.e[i].t.plan.writers[w].n_ops;
    }
    if (!rc)
        printf("%-28s %7" PRIu64 " ops %7.2f MiB | %9.1f %9.1f %5.3f | %9.1f %9.1f %5.3f | "
               "%9.1f %9.1f %5.3f\n",
               name, ops, (double)bytes / (1 << 20), t[0] * 1e6, h[0] * 1e6, h[0] / t[0],
               t[1] * 1e6, h[1] * 1e6, h[1] / t[1], t[2] * 1e6, h[2] * 1e6, h[2] / t[2]);
    plan_tcache_done(&c->tc);
    for (uint32_t r = 0; cid && r < nc; r++)
        free(cid[r]);
    free(cid);
    free(gid);
    free(c->cids_b);
    free(c->one_b);
    return rc;
}

static int measure_request(const char *name, const char *cspec, const char *gspec,
                           uint64_t tokens, bool templates)
{
    int rc = 0;
    struct req_case c = {0};
    uint32_t nc, ng;
    if (build(cspec, ROLE_CONTEXT, &c.ctx, &nc) || build(gspec, ROLE_GENERATION, &c.gen, &ng))
        return 1;
    c.cids = calloc(nc, sizeof *c.cids);
    c.one = plan_ctx_ids_new(c.ctx, nc);
    uint32_t **cid = calloc(nc, sizeof *cid);
    uint32_t *gid = scatter_ids(&c.gen[0], tokens, &c.in.gen_ids);
    for (uint32_t r = 0; c.cids && cid && r < nc; r++)
        cid[r] = scatter_ids(&c.ctx[r], tokens, &c.cids[r]);
    c.in.gen = &c.gen[0];
    c.in.ctx = c.ctx;
    c.in.n_ctx = nc;
    c.in.ctx_ids = c.cids;
    c.in.ctx_dp_rank = c.ctx[0].attention_dp ? 0 : -1;
    struct plan_error pe;
    if (!gid || !c.one || plan_build(&c.in, &c.p, &pe))
        return fprintf(stderr, "%s: %s\n", name, pe.message), 1;
    c.writer = c.p.writers[0].ctx_rank;
    c.one[c.writer] = c.cids[c.writer];
    fake_mem(&c.ctx[c.writer], &c.cmem);
    fake_mem(&c.gen[0], &c.gmem);
    uint64_t ops = 0;
    for (uint32_t w = 0; w < c.p.n_writers; w++)
        ops += c.p.writers[w].n_ops;
    if (templates) {
        double tb[] = {median_of(t_local, &c), median_of(t_gen, &c), median_of(t_ctx, &c)};
        rc = tb[0] < 0 || tb[1] < 0 || tb[2] < 0 || measure_templates(name, &c, tokens, tb);
        goto out;
    }
    double t[] = {median_of(t_local, &c), median_of(t_gen, &c), median_of(t_ctx, &c),
                  median_of(t_compat, &c), median_of(t_alias, &c), median_of(t_cover, &c),
                  median_of(t_copycheck, &c), median_of(t_writers, &c)};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i] < 0)
            return fprintf(stderr, "%s: refused while timing\n", name), 1;
    printf("%-28s %8.2f MiB %7" PRIu64 " ops %u wr | %9.1f %9.1f %9.1f | %8.1f %8.1f %8.1f "
           "%8.1f | %8.1f | %.2f %.2f %.2f\n",
           name, (double)c.p.total_bytes / (1 << 20), ops, c.p.n_writers, t[0] * 1e6, t[1] * 1e6,
           t[2] * 1e6, t[3] * 1e6, t[4] * 1e6, t[5] * 1e6, t[6] * 1e6, t[7] * 1e6, t[3] / t[0],
           t[5] / t[0],
           t[6] / t[0]);
out:
    plan_done(&c.p);
    for (uint32_t r = 0; cid && r < nc; r++)
        free(cid[r]);
    free(cid);
    free(gid);
    free(c.cids);
    free(c.one);
    free(c.ctx);
    free(c.gen);
    return rc;
}

int main(int argc, char **argv)
{
    int rc = 0;
    if (argc < 2 || strcmp(argv[1], "--requests-only")) {
        rc |= measure(8192);
        rc |= measure(32768);
    }
    printf("\nper request, median (us): plan_build on the same-daemon path (every context rank's "
           "ids), on the generation daemon (none), on a context daemon (its own); compat, alias, "
           "coverage and copy_check (both sides, every writer) alone; plan_writers (who writes, "
           "no copy program); the shares of compat, cover, copy_check in the same-daemon "
           "plan_build\n");
    printf("%-28s %12s %11s %4s | %9s %9s %9s | %8s %8s %8s %8s | %8s | %s\n", "request",
           "bytes", "ops", "wr", "local", "gen", "ctx", "compat", "alias", "cover", "copychk",
           "writers", "compat cover copychk");
    static const struct {
        const char *name, *ctx, *gen;
        uint64_t tokens;
    } cases[] = {
        {"tiny 1 block", "tiny:tp=1,blocks=1,slots=1", "tiny:tp=1,blocks=1,slots=1", 32},
        {"kimi-k3 1k", "kimi-k3", "kimi-k3", 1024},
        {"kimi-k3 8k", "kimi-k3", "kimi-k3", 8192},
        {"kimi-linear-48b 8k", "kimi-linear-48b", "kimi-linear-48b", 8192},
        {"llama-3-70b TP2->TP1 8k", "llama-3-70b:tpb=16,tp=2,blocks=1024",
         "llama-3-70b:tpb=16,tp=1,blocks=1024", 8192},
    };
    const char *only = argc > 2 ? argv[2] : ""; /* --requests-only NAME: the rows naming it */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strstr(cases[i].name, only))
            rc |= measure_request(cases[i].name, cases[i].ctx, cases[i].gen, cases[i].tokens,
                                  false);
    printf("\nper request, median (us), same run: plan_build against a template hit "
           "(plan_tcache_plan: the request's checks and its ids substituted; two id sets of one "
           "shape take turns), per path, and hit/build; the same-daemon template's ops and all "
           "three templates' bytes\n");
    printf("%-28s %11s %11s | %9s %9s %5s | %9s %9s %5s | %9s %9s %5s\n", "request", "tmpl ops",
           "bytes", "local", "hit", "ratio", "gen", "hit", "ratio", "ctx", "hit", "ratio");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        if (strstr(cases[i].name, only))
            rc |= measure_request(cases[i].name, cases[i].ctx, cases[i].gen, cases[i].tokens,
                                  true);
    return rc;
}
