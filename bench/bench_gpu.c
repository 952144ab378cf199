/* bench_gpu.c: the CUDA copy kernels on a Kimi-K3 request (8k tokens, ~649 MiB) against ceilings
 * measured in the same run: gather/scatter in 32 MiB chunks vs one cudaMemcpy device-to-device
 * (bytes counted read + write), gather into / scatter from mapped pinned host memory vs cudaMemcpy
 * D2H / H2D, the direct program GPU0 -> GPU1 vs cudaMemcpyPeer, and the per-fragment alternative
 * (one cudaMemcpyAsync per run) for contrast. Until presets/plan land the program is synthesized
 * with the same run structure: 69 KDA layers x (conv 294,912 B as 3 section runs + ssm
 * 6,291,456 B) of one slot, plus 24 MLA layers x 128 scattered blocks x 73,728 B.
 * Prints a table; --out PATH writes JSON. Times: median of cudaEvent-timed repetitions. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KVF_HAVE_CUDA
int main(void)
{
    printf("bench_gpu: no CUDA in this build\n");
    return 0;
}
#else

#include <cuda_runtime.h>
#include <time.h>

#include "kvf_kernels.h"

#define KDA_LAYERS 69
#define MLA_LAYERS 24
#define BLOCKS 128
#define POOL_BLOCKS 512
#define SLOTS 8
#define CONV 294912ull
#define SSM 6291456ull
#define BLK 73728ull
#define CHUNK (32ull << 20)
#define REPS 15

#define TRY(call)                                                                              \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "bench_gpu: %s: %s\n", #call, cudaGetErrorString(e_));             \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)
#define KTRY(call)                                                                             \
    do {                                                                                       \
        int rc_ = (call);                                                                      \
        if (rc_ != 0) {                                                                        \
            fprintf(stderr, "bench_gpu: %s: %s\n", #call, kvk_last_error());                   \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

struct row {
    const char *name;
    double ms, gbs, ceiling_gbs, goal;
    double wall_ms;
};
static struct row rows[32];
static int n_rows;

static uint64_t rng = 12345;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A random selection of n distinct ids of [0, pool). */
static void pick_ids(uint32_t *ids, uint32_t n, uint32_t pool)
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

/* Pools of each side: 0 = KDA state (layer-major: layer, slot), 1 = MLA blocks (layer, block). */
static uint64_t pool_size[2] = {KDA_LAYERS * SLOTS * (CONV + SSM),
                                MLA_LAYERS * POOL_BLOCKS * BLK};

static uint32_t k3_program(struct copy_op *ops, uint64_t *bytes)
{
    uint32_t n = 0, src_slot = 3, dst_slot = 5;
    uint32_t sb[BLOCKS], db[BLOCKS];
    pick_ids(sb, BLOCKS, POOL_BLOCKS);
    pick_ids(db, BLOCKS, POOL_BLOCKS);
    uint64_t at = 0, slot = CONV + SSM;
    for (uint32_t l = 0; l < KDA_LAYERS; l++) {
        for (uint32_t r = 0; r < 4; r++) { /* conv q|k|v sections, then ssm */
            struct copy_op *o = &ops[n++];
            memset(o, 0, sizeof(*o));
            uint64_t in = r < 3 ? r * (CONV / 3) : CONV;
            o->src_off = (l * SLOTS + src_slot) * slot + in;
            o->dst_off = (l * SLOTS + dst_slot) * slot + in;
            o->len = r < 3 ? CONV / 3 : SSM;
            o->count = 1;
            o->ext_off = at;
            at += o->len;
        }
    }
    for (uint32_t l = 0; l < MLA_LAYERS; l++)
        for (uint32_t b = 0; b < BLOCKS; b++) {
            struct copy_op *o = &ops[n++];
            memset(o, 0, sizeof(*o));
            o->src_pool = o->dst_pool = 1;
            o->src_off = ((uint64_t)l * POOL_BLOCKS + sb[b]) * BLK;
            o->dst_off = ((uint64_t)l * POOL_BLOCKS + db[b]) * BLK;
            o->len = BLK;
            o->count = 1;
            o->ext_off = at;
            at += BLK;
        }
    *bytes = at;
    return n;
}

static void alloc_pools(int dev, struct kvk_mem *m, uint8_t fill)
{
    TRY(cudaSetDevice(dev));
    memset(m, 0, sizeof(*m));
    m->n = 2;
    for (int p = 0; p < 2; p++) {
        void *d;
        TRY(cudaMalloc(&d, pool_size[p]));
        TRY(cudaMemset(d, fill + p, pool_size[p]));
        m->base[p] = (uint64_t)(uintptr_t)d;
        m->size[p] = pool_size[p];
    }
    TRY(cudaSetDevice(0));
}

typedef void (*work_fn)(void *ctx, cudaStream_t st);

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Median device time (ms) of fn over REPS after 2 warm-ups; *wall: median host wall time from
 * enqueue to completion. */
static double time_it(work_fn fn, void *ctx, cudaStream_t st, double *wall)
{
    cudaEvent_t a, b;
    TRY(cudaEventCreate(&a));
    TRY(cudaEventCreate(&b));
    double t[REPS], w[REPS];
    for (int i = 0; i < 2; i++)
        fn(ctx, st);
    TRY(cudaStreamSynchronize(st));
    for (int i = 0; i < REPS; i++) {
        double w0 = now_ms();
        TRY(cudaEventRecord(a, st));
        fn(ctx, st);
        TRY(cudaEventRecord(b, st));
        TRY(cudaEventSynchronize(b));
        w[i] = now_ms() - w0;
        float ms;
        TRY(cudaEventElapsedTime(&ms, a, b));
        t[i] = ms;
    }
    qsort(t, REPS, sizeof(double), cmp_d);
    qsort(w, REPS, sizeof(double), cmp_d);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    if (wall)
        *wall = w[REPS / 2];
    return t[REPS / 2];
}

struct ctx {
    struct kvk_program *p;
    struct kvk_mem *src, *dst;
    uint8_t *ext;       /* device-accessible extent buffer */
    uint64_t bytes, chunk;
    const struct copy_op *ops;
    uint32_t n_ops;
    void *a, *b;        /* plain copies */
    int da, db;
    enum cudaMemcpyKind kind;
};

static void do_gather(void *v, cudaStream_t st)
{
    struct ctx *c = v;
    for (uint64_t lo = 0; lo < c->bytes; lo += c->chunk) {
        uint64_t hi = lo + c->chunk < c->bytes ? lo + c->chunk : c->bytes;
        KTRY(kvk_gather(c->p, c->src, lo, hi, c->ext + lo, st));
    }
}

static void do_scatter(void *v, cudaStream_t st)
{
    struct ctx *c = v;
    for (uint64_t lo = 0; lo < c->bytes; lo += c->chunk) {
        uint64_t hi = lo + c->chunk < c->bytes ? lo + c->chunk : c->bytes;
        KTRY(kvk_scatter(c->p, c->ext + lo, lo, hi, c->dst, st));
    }
}

static void do_direct(void *v, cudaStream_t st)
{
    struct ctx *c = v;
    KTRY(kvk_direct(c->p, c->src, c->dst, st));
}

static void do_memcpy(void *v, cudaStream_t st)
{
    struct ctx *c = v;
    TRY(cudaMemcpyAsync(c->a, c->b, c->bytes, c->kind, st));
}

static void do_peer(void *v, cudaStream_t st)
{
    struct ctx *c = v;
    TRY(cudaMemcpyPeerAsync(c->a, c->da, c->b, c->db, c->bytes, st));
}

static void do_fragments(void *v, cudaStream_t st) /* one cudaMemcpyAsync per run */
{
    struct ctx *c = v;
    for (uint32_t i = 0; i < c->n_ops; i++) {
        const struct copy_op *o = &c->ops[i];
        for (uint64_t k = 0; k < o->count; k++)
            TRY(cudaMemcpyAsync(c->ext + o->ext_off + k * o->len,
                                (uint8_t *)(uintptr_t)c->src->base[o->src_pool] + o->src_off +
                                    (int64_t)k * o->src_stride,
                                o->len, cudaMemcpyDeviceToDevice, st));
    }
}

static void add(const char *name, double ms, double bytes_counted, double ceiling, double goal,
                double wall)
{
    struct row *r = &rows[n_rows++];
    r->name = name;
    r->ms = ms;
    r->gbs = bytes_counted / (ms * 1e6);
    r->ceiling_gbs = ceiling;
    r->goal = goal;
    r->wall_ms = wall;
}

static void measure(const char *name, work_fn fn, void *ctx, cudaStream_t st, double counted,
                    double ceiling, double goal)
{
    double wall;
    double ms = time_it(fn, ctx, st, &wall);
    add(name, ms, counted, ceiling, goal, wall);
}

static struct kvk_program *program_with(const struct copy_op *ops, uint32_t n, const char *tb,
                                        const char *threads)
{
    struct kvk_program *p = NULL;
    setenv("KVK_TASK_BYTES", tb, 1);
    setenv("KVK_THREADS", threads, 1);
    KTRY(kvk_program_new(ops, n, 0, &p));
    unsetenv("KVK_TASK_BYTES");
    unsetenv("KVK_THREADS");
    return p;
}

/* DESIGN §10's scattered-blocks case: 4096 blocks of 36 KiB at random ids of an 8192-block
 * pool, gathered by one kernel launch vs one cudaMemcpyAsync per block. */
static void scattered_blocks(cudaStream_t st, double d2d)
{
    enum { NB = 4096, POOL = 8192 };
    const uint64_t bs = 36864;
    static struct copy_op ops[NB];
    uint32_t *ids = malloc(POOL * sizeof(*ids));
    pick_ids(ids, POOL, POOL);
    for (uint32_t b = 0; b < NB; b++) {
        memset(&ops[b], 0, sizeof(ops[b]));
        ops[b].src_off = ids[b] * bs;
        ops[b].len = bs;
        ops[b].count = 1;
        ops[b].ext_off = b * bs;
    }
    free(ids);
    struct kvk_program *p = NULL;
    KTRY(kvk_program_new(ops, NB, 0, &p));
    void *pool, *out;
    TRY(cudaMalloc(&pool, POOL * bs));
    TRY(cudaMemset(pool, 0x55, POOL * bs));
    TRY(cudaMalloc(&out, NB * bs));
    struct kvk_mem m = {.n = 1};
    m.base[0] = (uint64_t)(uintptr_t)pool;
    m.size[0] = POOL * bs;
    struct ctx c = {.p = p, .src = &m, .ext = out, .bytes = NB * bs, .chunk = NB * bs,
                    .ops = ops, .n_ops = NB};
    measure("4096 x 36KiB blocks: gather kernel", do_gather, &c, st, 2.0 * NB * bs, d2d, 0.85);
    measure("4096 x 36KiB: cudaMemcpyAsync each", do_fragments, &c, st, 2.0 * NB * bs, d2d, 0);
    cudaFree(pool);
    cudaFree(out);
    kvk_program_free(p);
}

static void print_and_save(const char *out, uint64_t bytes, uint32_t n_ops, uint32_t n_tasks,
                           int n_gpus, const char *gpu)
{
    printf("\nbench_gpu: %s x%d, request %.1f MiB, %u runs, %u tasks, chunk %llu MiB\n", gpu,
           n_gpus, bytes / 1048576.0, n_ops, n_tasks, CHUNK >> 20);
    printf("%-34s %9s %9s %9s %7s %6s %9s\n", "what", "ms", "GB/s", "ceiling", "ratio", "goal",
           "wall_ms");
    for (int i = 0; i < n_rows; i++) {
        struct row *r = &rows[i];
        double ratio = r->ceiling_gbs > 0 ? r->gbs / r->ceiling_gbs : 0;
        printf("%-34s %9.3f %9.1f %9.1f %7.3f %6.2f %9.3f\n", r->name, r->ms, r->gbs,
               r->ceiling_gbs, ratio, r->goal, r->wall_ms);
    }
    if (!out)
        return;
    FILE *f = fopen(out, "w");
    if (!f) {
        perror(out);
        return;
    }
    fprintf(f, "{\"gpu\":\"%s\",\"gpus\":%d,\"request_bytes\":%llu,\"runs\":%u,\"tasks\":%u,"
            "\"chunk_bytes\":%llu,\"reps\":%d,\"results\":[", gpu, n_gpus,
            (unsigned long long)bytes, n_ops, n_tasks, CHUNK, REPS);
    for (int i = 0; i < n_rows; i++) {
        struct row *r = &rows[i];
        fprintf(f, "%s{\"name\":\"%s\",\"ms\":%.4f,\"gbs\":%.2f,\"ceiling_gbs\":%.2f,"
                "\"ratio\":%.4f,\"goal\":%.2f,\"wall_ms\":%.4f}", i ? "," : "", r->name, r->ms,
                r->gbs, r->ceiling_gbs, r->ceiling_gbs > 0 ? r->gbs / r->ceiling_gbs : 0,
                r->goal, r->wall_ms);
    }
    fprintf(f, "]}\n");
    fclose(f);
    printf("wrote %s\n", out);
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
    int n_gpus = kvk_device_count();
    if (n_gpus < 1) {
        printf("bench_gpu: SKIP: no CUDA device: %s\n", kvk_last_error());
        return 0;
    }
    struct cudaDeviceProp prop;
    TRY(cudaGetDeviceProperties(&prop, 0));
    static struct copy_op ops[KDA_LAYERS * 4 + MLA_LAYERS * BLOCKS];
    uint64_t bytes;
    uint32_t n_ops = k3_program(ops, &bytes);
    struct kvk_program *p = NULL, *p_nopdl = NULL;
    KTRY(kvk_program_new(ops, n_ops, 0, &p));
    setenv("KVK_PDL", "0", 1);
    KTRY(kvk_program_new(ops, n_ops, 0, &p_nopdl));
    unsetenv("KVK_PDL");
    struct kvk_mem src, dst;
    alloc_pools(0, &src, 0x11);
    alloc_pools(0, &dst, 0x22);
    uint8_t *arena, *arena2, *host;
    TRY(cudaMalloc((void **)&arena, bytes));
    TRY(cudaMalloc((void **)&arena2, bytes));
    TRY(cudaHostAlloc((void **)&host, bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(host, 0x33, bytes);
    uint8_t *dhost;
    TRY(cudaHostGetDevicePointer((void **)&dhost, host, 0));
    cudaStream_t st;
    TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

    struct ctx c = {.p = p, .src = &src, .dst = &dst, .ext = arena, .bytes = bytes,
                    .chunk = CHUNK, .ops = ops, .n_ops = n_ops};
    double w;
    /* device-to-device: bytes counted read + write */
    c.a = arena2;
    c.b = arena;
    c.kind = cudaMemcpyDeviceToDevice;
    double d2d = 2.0 * bytes / (time_it(do_memcpy, &c, st, &w) * 1e6);
    add("ceiling: cudaMemcpy D2D (r+w)", 2.0 * bytes / (d2d * 1e6), 2.0 * bytes, d2d, 0, w);
    measure("gather 32MiB chunks -> device", do_gather, &c, st, 2.0 * bytes, d2d, 0.85);
    measure("scatter 32MiB chunks <- device", do_scatter, &c, st, 2.0 * bytes, d2d, 0.85);
    c.chunk = bytes;
    measure("gather one launch -> device", do_gather, &c, st, 2.0 * bytes, d2d, 0.85);
    c.chunk = CHUNK;
    c.p = p_nopdl;
    measure("gather 32MiB chunks, PDL off", do_gather, &c, st, 2.0 * bytes, d2d, 0.85);
    c.p = p;
    /* task size x block size sweep (tuning knobs KVK_TASK_BYTES / KVK_THREADS) */
    static const char *const sweep[][3] = {
        {"16384", "256", "  sweep: 16K tasks, 256 thr"}, {"32768", "256", "  sweep: 32K tasks, 256 thr"},
        {"32768", "512", "  sweep: 32K tasks, 512 thr"}, {"65536", "256", "  sweep: 64K tasks, 256 thr"},
        {"131072", "512", "  sweep: 128K tasks, 512 thr"},
    };
    for (size_t i = 0; i < sizeof(sweep) / sizeof(sweep[0]); i++) {
        c.p = program_with(ops, n_ops, sweep[i][0], sweep[i][1]);
        measure(sweep[i][2], do_gather, &c, st, 2.0 * bytes, d2d, 0.85);
        kvk_program_free(c.p);
    }
    c.p = p;
    measure("direct pool->pool same GPU", do_direct, &c, st, 2.0 * bytes, d2d, 0.85);
    measure("per-fragment cudaMemcpyAsync", do_fragments, &c, st, 2.0 * bytes, d2d, 0);

    scattered_blocks(st, d2d);

    /* pinned mapped host memory: bytes counted once (the PCIe direction) */
    c.a = host;
    c.b = arena;
    c.kind = cudaMemcpyDeviceToHost;
    double d2h = bytes / (time_it(do_memcpy, &c, st, &w) * 1e6);
    add("ceiling: cudaMemcpy D2H pinned", bytes / (d2h * 1e6), bytes, d2h, 0, w);
    c.ext = dhost;
    measure("gather 32MiB chunks -> host", do_gather, &c, st, bytes, d2h, 0.9);
    c.a = arena;
    c.b = host;
    c.kind = cudaMemcpyHostToDevice;
    double h2d = bytes / (time_it(do_memcpy, &c, st, &w) * 1e6);
    add("ceiling: cudaMemcpy H2D pinned", bytes / (h2d * 1e6), bytes, h2d, 0, w);
    measure("scatter 32MiB chunks <- host", do_scatter, &c, st, bytes, h2d, 0.9);
    c.ext = arena;

    int can = 0;
    if (n_gpus >= 2 && cudaDeviceCanAccessPeer(&can, 0, 1) == cudaSuccess && can) {
        TRY(cudaSetDevice(1));
        cudaError_t e = cudaDeviceEnablePeerAccess(0, 0);
        TRY(cudaSetDevice(0));
        if (e == cudaSuccess || e == cudaErrorPeerAccessAlreadyEnabled)
            e = cudaDeviceEnablePeerAccess(1, 0);
        if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) {
            fprintf(stderr, "bench_gpu: peer access: %s\n", cudaGetErrorString(e));
        } else {
            struct kvk_mem dst1;
            alloc_pools(1, &dst1, 0x44);
            uint8_t *arena1;
            TRY(cudaSetDevice(1));
            TRY(cudaMalloc((void **)&arena1, bytes));
            TRY(cudaSetDevice(0));
            c.a = arena1;
            c.da = 1;
            c.b = arena;
            c.db = 0;
            double peer = bytes / (time_it(do_peer, &c, st, &w) * 1e6);
            add("ceiling: cudaMemcpyPeer 0->1", bytes / (peer * 1e6), bytes, peer, 0, w);
            c.dst = &dst1;
            measure("direct program GPU0 -> GPU1", do_direct, &c, st, bytes, peer, 0.8);
            c.ext = arena1;
            measure("gather GPU0 pools -> GPU1 arena", do_gather, &c, st, bytes, peer, 0.8);
            c.ext = arena;
            c.dst = &dst;
        }
    } else {
        printf("bench_gpu: fewer than 2 GPUs with peer access: peer rows skipped\n");
    }
    print_and_save(out, bytes, n_ops, kvk_program_tasks(p), n_gpus, prop.name);
    kvk_program_free(p);
    kvk_program_free(p_nopdl);
    return 0;
}
#endif
