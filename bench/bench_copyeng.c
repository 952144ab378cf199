/* bench_copyeng.c: the copy engine (daemon/move/copyeng.h) against its ceiling measured in the
 * same run: T threads each memcpy'ing 1/T of the same bytes between two contiguous buffers
 * (pthreads, no engine). Shapes:
 *   RUN bytes (a comma list sweeps): RUN-byte runs scattered over two source pools into two
 *     destination pools (sources shuffled, destinations in order), BYTES in all, one job;
 *   -p MODEL[:k=v,...] -t TOKENS: the same-daemon path's real program: the preset's context
 *     and generation layouts (TP as given, rank 0 to rank 0), as many requests as fill BYTES,
 *     each with its block ids scattered as kvferry-sim scatters them, one job per request, all
 *     submitted at once; prints the program's run lengths (share of the bytes each carries).
 * -k LIST (comma list of copy_stream.h kernels, or `all` that this CPU runs): the engine runs
 * once per kernel per round, alternating with the memcpy, best of ROUNDS each. One JSON line
 * per shape: memcpy_threads_gbps, copyeng_gbps and ratio of the first kernel, and each kernel's.
 *   build/bench/bench_copyeng [-k LIST] [-p SPEC -t TOKENS] [THREADS [BYTES [RUN[,RUN..]
 *   [ROUNDS]]]]   (0 threads: one per CPU; GB/s = 1e9 B/s) */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "copy_stream.h"
#include "copyeng.h"
#include "plan.h"
#include "preset.h"

#define MAX_KERNELS 8

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct slice {
    uint8_t *d;
    const uint8_t *s;
    uint64_t n;
};

static void *memcpy_thread(void *arg)
{
    struct slice *s = arg;
    memcpy(s->d, s->s, s->n);
    return NULL;
}

static double memcpy_round(uint8_t *dst, const uint8_t *src, uint64_t bytes, uint32_t t)
{
    pthread_t th[COPYENG_MAX_THREADS];
    struct slice sl[COPYENG_MAX_THREADS];
    double t0 = now_s();
    for (uint32_t i = 0; i < t; i++) {
        uint64_t lo = bytes * i / t, hi = bytes * (i + 1) / t;
        sl[i] = (struct slice){dst + lo, src + lo, hi - lo};
        pthread_create(&th[i], NULL, memcpy_thread, &sl[i]);
    }
    for (uint32_t i = 0; i < t; i++)
        pthread_join(th[i], NULL);
    return bytes / (now_s() - t0) / 1e9;
}

/* One shape: jobs (programs) over shared source and destination pools. */
struct shape {
    struct copy_mem src, dst;
    struct copy_op **ops;
    uint32_t *n_ops, n_jobs;
    uint64_t bytes;
};

static void shape_free(struct shape *sh)
{
    for (uint32_t i = 0; i < sh->src.n; i++)
        free(sh->src.base[i]);
    for (uint32_t i = 0; i < sh->dst.n; i++)
        free(sh->dst.base[i]);
    for (uint32_t j = 0; j < sh->n_jobs; j++)
        free(sh->ops[j]);
    free(sh->ops);
    free(sh->n_ops);
    memset(sh, 0, sizeof(*sh));
}

/* Pools of the given sizes, faulted in (source bytes set, destination zeroed). */
static int pools_alloc(struct copy_mem *m, uint32_t n, const uint64_t *size, int fill)
{
    m->n = n;
    for (uint32_t i = 0; i < n; i++) {
        m->size[i] = size[i];
        m->base[i] = malloc(size[i] ? size[i] : 1);
        if (!m->base[i])
            return -ENOMEM;
        memset(m->base[i], fill ? 1 + (int)i : 0, size[i]);
    }
    return 0;
}

static int shape_runs(struct shape *sh, uint64_t bytes, uint64_t run)
{
    uint64_t n_runs = bytes / run, per = n_runs / 2 + 1, pool = per * run;
    uint64_t sizes[2] = {pool, pool};
    sh->bytes = n_runs * run;
    sh->n_jobs = 1;
    sh->ops = calloc(1, sizeof(*sh->ops));
    sh->n_ops = calloc(1, sizeof(*sh->n_ops));
    if (!sh->ops || !sh->n_ops || !(sh->ops[0] = calloc(n_runs, sizeof(**sh->ops))) ||
        pools_alloc(&sh->src, 2, sizes, 1) || pools_alloc(&sh->dst, 2, sizes, 0))
        return -ENOMEM;
    sh->n_ops[0] = (uint32_t)n_runs;
    uint64_t s = 88172645463325252ull;
    for (uint64_t k = 0; k < n_runs; k++) { /* source runs shuffled, destination in order */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint64_t from = s % (2 * per);
        sh->ops[0][k] = (struct copy_op){.src_pool = (uint32_t)(from / per),
                                         .dst_pool = (uint32_t)(k / per % 2),
                                         .src_off = from % per * run, .dst_off = k % per * run,
                                         .ext_off = k * run, .len = run, .count = 1};
    }
    return 0;
}

/* kvferry-sim's scatter of block ids: an affine permutation of [0, n_items) per side. */
static uint32_t scattered(uint64_t pos, uint32_t n_items, uint64_t salt)
{
    uint64_t a = 1 + 2 * (salt % 1000);
    for (;; a += 2) {
        uint64_t x = a, y = n_items;
        while (y) {
            uint64_t t = x % y;
            x = y, y = t;
        }
        if (x == 1)
            break;
    }
    return (uint32_t)((a * pos + (salt >> 20)) % n_items);
}

static int side_build(const char *spec, layout_role_t role, struct layout **ret, char *err,
                      size_t errlen)
{
    struct preset_spec ps;
    if (preset_parse(spec, &ps, err, errlen))
        return -EINVAL;
    *ret = calloc(preset_n_ranks(&ps), sizeof(**ret));
    if (!*ret)
        return -ENOMEM;
    return preset_build(&ps, role == ROLE_CONTEXT ? "ctx" : "gen", role, -1, *ret, err, errlen);
}

/* Request j's ids on one side (ids has room for every group's). */
static void request_ids(const struct layout *l, uint32_t j, uint32_t n_blocks, uint64_t salt,
                        uint32_t *ids, struct plan_ids *ret)
{
    memset(ret, 0, sizeof(*ret));
    uint32_t k = 0;
    for (uint32_t g = 0; g < l->n_groups; g++) {
        const struct layout_group *gr = &l->groups[g];
        ret->ids[g] = ids + k;
        ret->n[g] = gr->kind == GROUP_STATE ? 1 : n_blocks;
        for (uint32_t b = 0; b < ret->n[g]; b++)
            ids[k++] = gr->kind == GROUP_STATE ? (uint32_t)((j + salt) % gr->n_items)
                                               : scattered((uint64_t)j * n_blocks + b,
                                                           gr->n_items, salt + g);
    }
}

static int shape_plan(struct shape *sh, const char *spec, uint32_t tokens, uint64_t bytes)
{
    char err[256];
    struct layout *ctx = NULL, *gen = NULL;
    int rc = -EINVAL;
    if (side_build(spec, ROLE_CONTEXT, &ctx, err, sizeof(err)) ||
        side_build(spec, ROLE_GENERATION, &gen, err, sizeof(err))) {
        fprintf(stderr, "bench_copyeng: %s: %s\n", spec, err);
        goto out;
    }
    uint64_t psz[LAYOUT_MAX_POOLS];
    for (uint32_t p = 0; p < ctx->n_pools; p++)
        psz[p] = ctx->pools[p].bytes;
    if (pools_alloc(&sh->src, ctx->n_pools, psz, 1))
        goto out;
    for (uint32_t p = 0; p < gen->n_pools; p++)
        psz[p] = gen->pools[p].bytes;
    if (pools_alloc(&sh->dst, gen->n_pools, psz, 0))
        goto out;
    uint32_t n_blocks = (tokens + ctx->tokens_per_block - 1) / ctx->tokens_per_block;
    uint32_t *cid = calloc((size_t)LAYOUT_MAX_GROUPS * n_blocks + LAYOUT_MAX_GROUPS, 4);
    uint32_t *gid = calloc((size_t)LAYOUT_MAX_GROUPS * n_blocks + LAYOUT_MAX_GROUPS, 4);
    uint32_t cap = 1024;
    sh->ops = calloc(cap, sizeof(*sh->ops));
    sh->n_ops = calloc(cap, sizeof(*sh->n_ops));
    if (!cid || !gid || !sh->ops || !sh->n_ops)
        goto out_ids;
    while (sh->bytes < bytes && sh->n_jobs < cap) {
        struct plan_ids cids;
        struct plan_input in = {.gen = gen, .ctx = ctx, .n_ctx = 1, .ctx_ids = &cids,
                                .ctx_dp_rank = -1};
        request_ids(ctx, sh->n_jobs, n_blocks, 1000003u, cid, &cids);
        request_ids(gen, sh->n_jobs, n_blocks, 7919u, gid, &in.gen_ids);
        struct plan p;
        struct plan_error pe;
        if (plan_build(&in, &p, &pe)) {
            fprintf(stderr, "bench_copyeng: plan: %s\n", pe.message);
            goto out_ids;
        }
        if (p.n_writers != 1 || copy_check(p.writers[0].ops, p.writers[0].n_ops, &sh->src, 's') ||
            copy_check(p.writers[0].ops, p.writers[0].n_ops, &sh->dst, 'd')) {
            fprintf(stderr, "bench_copyeng: %s: not one writer inside the pools\n", spec);
            plan_done(&p);
            goto out_ids;
        }
        sh->ops[sh->n_jobs] = p.writers[0].ops; /* taken from the plan */
        sh->n_ops[sh->n_jobs++] = p.writers[0].n_ops;
        sh->bytes += p.writers[0].bytes;
        p.writers[0].ops = NULL;
        plan_done(&p);
    }
    rc = 0;
out_ids:
    free(cid);
    free(gid);
out:
    free(ctx);
    free(gen);
    return rc;
}

/* The program's run lengths as JSON: {"LEN": share of the bytes, ...}, the 8 largest shares. */
static void print_run_lens(const struct shape *sh)
{
    uint64_t len[64] = {0}, by[64] = {0};
    uint32_t n = 0;
    for (uint32_t j = 0; j < sh->n_jobs; j++)
        for (uint32_t i = 0; i < sh->n_ops[j]; i++) {
            const struct copy_op *o = &sh->ops[j][i];
            uint32_t k = 0;
            while (k < n && len[k] != o->len)
                k++;
            if (k == n && n < 64)
                len[n++] = o->len;
            if (k < n)
                by[k] += o->len * o->count;
        }
    printf(", \"run_lens\": {");
    for (uint32_t shown = 0; shown < 8 && shown < n; shown++) {
        uint32_t best = 0;
        for (uint32_t k = 1; k < n; k++)
            best = by[k] > by[best] ? k : best;
        printf("%s\"%llu\": %.3f", shown ? ", " : "", (unsigned long long)len[best],
               (double)by[best] / (double)sh->bytes);
        by[best] = 0;
    }
    printf("}");
}

static uint32_t done;
static void on_done(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j, (void)d, (void)user;
    done++;
}

static double engine_round(struct copyeng *e, uv_loop_t *loop, const struct shape *sh)
{
    done = 0;
    double t0 = now_s();
    for (uint32_t j = 0; j < sh->n_jobs; j++) {
        struct copyeng_part part = {.kind = COPYENG_DIRECT, .ops = sh->ops[j],
                                    .n_ops = sh->n_ops[j], .src = &sh->src, .dst = &sh->dst};
        if (copyeng_submit(e, &part, 1, on_done, NULL, NULL))
            return 0;
    }
    while (done < sh->n_jobs)
        uv_run(loop, UV_RUN_ONCE);
    return sh->bytes / (now_s() - t0) / 1e9;
}

/* Rounds of memcpy, then each kernel through the engine; best of each; one JSON line. */
static int measure(struct copyeng *e, uv_loop_t *loop, const struct shape *sh, uint32_t t,
                   int rounds, const char **kern, uint32_t n_kern, const char *what)
{
    uint8_t *mfrom = malloc(sh->bytes), *mto = malloc(sh->bytes);
    if (!mfrom || !mto)
        return free(mfrom), free(mto), -ENOMEM;
    memset(mfrom, 3, sh->bytes);
    memset(mto, 0, sh->bytes);
    double best_m = 0, best_e[MAX_KERNELS] = {0};
    for (int r = 0; r < rounds + 1; r++) { /* round 0 warms everything up */
        double m = memcpy_round(mto, mfrom, sh->bytes, t);
        if (r > 0 && m > best_m)
            best_m = m;
        for (uint32_t k = 0; k < n_kern; k++) {
            copy_stream_kernel_set(kern[k]);
            double g = engine_round(e, loop, sh);
            if (r > 0 && g > best_e[k])
                best_e[k] = g;
        }
    }
    printf("{\"threads\": %u, \"bytes\": %llu, %s, \"jobs\": %u, \"memcpy_threads_gbps\": %.2f, "
           "\"copyeng_gbps\": %.2f, \"ratio\": %.2f, \"kernel\": \"%s\", \"kernels\": {",
           t, (unsigned long long)sh->bytes, what, sh->n_jobs, best_m, best_e[0],
           best_e[0] / best_m, kern[0]);
    for (uint32_t k = 0; k < n_kern; k++)
        printf("%s\"%s\": {\"gbps\": %.2f, \"ratio\": %.2f}", k ? ", " : "", kern[k], best_e[k],
               best_e[k] / best_m);
    printf("}");
    print_run_lens(sh);
    printf("}\n");
    fflush(stdout);
    free(mfrom);
    free(mto);
    return 0;
}

/* -k LIST into names (every supported one for `all`); 0 or -1 with the reason printed. */
static int parse_kernels(char *list, const char **names, uint32_t *n)
{
    bool ok;
    const char *k;
    *n = 0;
    if (!strcmp(list, "all")) {
        for (uint32_t i = 0; (k = copy_stream_kernel_at(i, &ok)) && *n < MAX_KERNELS; i++)
            if (ok)
                names[(*n)++] = k;
        return 0;
    }
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && *n < MAX_KERNELS;
         tok = strtok_r(NULL, ",", &save)) {
        if (copy_stream_kernel_set(tok)) {
            fprintf(stderr, "bench_copyeng: kernel %s: unknown or not on this CPU\n", tok);
            return -1;
        }
        names[(*n)++] = tok;
    }
    return *n ? 0 : -1;
}

int main(int argc, char **argv)
{
    const char *kern[MAX_KERNELS] = {copy_stream_kernel()}, *spec = NULL;
    uint32_t n_kern = 1, tokens = 1024;
    int c;
    while ((c = getopt(argc, argv, "k:p:t:")) != -1) {
        switch (c) {
        case 'k':
            if (parse_kernels(optarg, kern, &n_kern))
                goto usage;
            break;
        case 'p':
            spec = optarg;
            break;
        case 't':
            if ((tokens = (uint32_t)strtoul(optarg, NULL, 0)) == 0)
                goto usage;
            break;
        default:
            goto usage;
        }
    }
    argc -= optind, argv += optind;
    uint32_t t = argc > 0 ? (uint32_t)atoi(argv[0]) : 0;
    uint64_t bytes = argc > 1 ? strtoull(argv[1], NULL, 0) : 512ull << 20;
    char *runs = argc > 2 ? argv[2] : "65536";
    int rounds = argc > 3 ? atoi(argv[3]) : 5;
    if (!t)
        t = copyeng_default_threads();
    if (t > COPYENG_MAX_THREADS || rounds < 1 || bytes == 0)
        goto usage;
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct copyeng *e = NULL;
    struct copyeng_params p = {.loop = &loop, .threads = t};
    if (copyeng_new(&p, &e) < 0)
        return 1;
    int rc = 0;
    char what[160];
    struct shape sh = {0};
    if (spec) {
        snprintf(what, sizeof(what), "\"preset\": \"%s\", \"tokens\": %u", spec, tokens);
        rc = shape_plan(&sh, spec, tokens, bytes) || measure(e, &loop, &sh, t, rounds, kern,
                                                             n_kern, what);
        shape_free(&sh);
    } else {
        for (char *save = NULL, *tok = strtok_r(runs, ",", &save); tok && !rc;
             tok = strtok_r(NULL, ",", &save)) {
            uint64_t run = strtoull(tok, NULL, 0);
            if (run == 0 || bytes < 4 * run) {
                rc = 1;
                break;
            }
            snprintf(what, sizeof(what), "\"run_bytes\": %llu", (unsigned long long)run);
            rc = shape_runs(&sh, bytes, run) || measure(e, &loop, &sh, t, rounds, kern, n_kern,
                                                        what);
            shape_free(&sh);
        }
    }
    copyeng_free(e);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return rc ? 1 : 0;
usage:
    fprintf(stderr, "usage: bench_copyeng [-k KERNEL,..|all] [-p MODEL[:k=v,..] -t TOKENS] "
                    "[THREADS [BYTES [RUN[,RUN..] [ROUNDS]]]]\n");
    return 2;
}
