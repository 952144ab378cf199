/* bench_gpu.c: the CUDA copy kernels on a Kimi-K3 request (8k tokens, ~649 MiB) against ceilings
 * measured in the same run: gather/scatter in 32 MiB chunks vs one cudaMemcpy device-to-device
 * (bytes counted read + write), gather into / scatter from mapped pinned host memory vs cudaMemcpy
 * D2H / H2D, the direct program GPU0 -> GPU1 vs cudaMemcpyPeer, and the per-fragment alternative
 * (one cudaMemcpyAsync per run) for contrast. The copy programs are the planner's (plan_build on
 * the kimi-k3 preset, 128 random blocks of 512 and a random slot on each side): TP1 -> TP1 (one
 * writer: 69 KDA slots of 6,586,368 B + 24 MLA layers x 128 blocks x 73,728 B = 649.4 MiB), and
 * writer 0 of a TP4 -> TP2 fan-in (head-range runs). Also the direct kernel after 20 ms of GPU
 * idle (what a daemon's lone request meets), and a new program per request: host time with and
 * without an upload wait, and new-async + direct wall time against the kernel alone; and how
 * fast a host thread learns the kernel ended (host function vs a blocking-sync event).
 * Prints a table; --out PATH writes JSON.
 * Times: median of cudaEvent-timed repetitions. */
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
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include "bench_gpu_prog.h"
#include "kvf_kernels.h"

#define CHUNK (32ull << 20)
#define REPS 15

#define TRY(call) BENCH_TRY("bench_gpu", call, exit(1))
#define KTRY(call) BENCH_KTRY("bench_gpu", call, exit(1))

struct row {
    const char *name;
    double ms, gbs, ceiling_gbs, goal;
    double wall_ms;
};
static struct row rows[64];
static int n_rows;

static void alloc_pools(int dev, const struct kvk_mem *sizes, struct kvk_mem *m, uint8_t fill)
{
    TRY(cudaSetDevice(dev));
    *m = *sizes;
    for (uint32_t p = 0; p < m->n; p++) {
        void *d;
        TRY(cudaMalloc(&d, m->size[p] ? m->size[p] : 1));
        TRY(cudaMemset(d, fill + (int)p, m->size[p]));
        m->base[p] = (uint64_t)(uintptr_t)d;
    }
    TRY(cudaSetDevice(0));
}

static void free_pools(struct kvk_mem *m)
{
    for (uint32_t p = 0; p < m->n; p++)
        cudaFree((void *)(uintptr_t)m->base[p]);
    m->n = 0;
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

/* Median device time (ms) of fn over REPS runs, each after idle_ms with the GPU idle: what one
 * request meets in a daemon between requests (clocks may have dropped), vs time_it's hot runs. */
static double time_idle(work_fn fn, void *ctx, cudaStream_t st, int idle_ms)
{
    cudaEvent_t a, b;
    TRY(cudaEventCreate(&a));
    TRY(cudaEventCreate(&b));
    double t[REPS];
    for (int i = 0; i < REPS; i++) {
        struct timespec nap = {0, idle_ms * 1000000L};
        nanosleep(&nap, NULL);
        TRY(cudaEventRecord(a, st));
        fn(ctx, st);
        TRY(cudaEventRecord(b, st));
        TRY(cudaEventSynchronize(b));
        float ms;
        TRY(cudaEventElapsedTime(&ms, a, b));
        t[i] = ms;
    }
    qsort(t, REPS, sizeof(double), cmp_d);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
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

/* How a host thread learns that the direct kernel ended, wall time from the launch: the
 * stream's host function (kvk_notify_on_complete, the daemon's path) writing a pipe the main
 * thread reads, and a thread blocked in cudaEventSynchronize (blocking-sync event) writing it.
 * Against "direct pool->pool same GPU"'s wall time (cudaEventSynchronize, spinning). */
struct waiter {
    int fd;
    cudaEvent_t ev;
};

static void notify_pipe(void *arg)
{
    char b = 1;
    if (write(*(int *)arg, &b, 1) != 1)
        abort();
}

static void *event_waiter(void *arg)
{
    struct waiter *w = arg;
    TRY(cudaEventSynchronize(w->ev));
    notify_pipe(&w->fd);
    return NULL;
}

static void completion_paths(struct ctx *c, cudaStream_t st)
{
    int fds[2];
    if (pipe(fds) != 0)
        abort();
    struct waiter w = {.fd = fds[1]};
    TRY(cudaEventCreateWithFlags(&w.ev, cudaEventBlockingSync | cudaEventDisableTiming));
    double host_fn[REPS], blocking[REPS];
    for (int i = 0; i < REPS + 2; i++) {
        char b;
        TRY(cudaStreamSynchronize(st));
        double t0 = now_ms();
        KTRY(kvk_direct(c->p, c->src, c->dst, st));
        KTRY(kvk_notify_on_complete(st, notify_pipe, &fds[1]));
        if (read(fds[0], &b, 1) != 1)
            abort();
        double t1 = now_ms();
        TRY(cudaStreamSynchronize(st));
        pthread_t th;
        double t2 = now_ms();
        KTRY(kvk_direct(c->p, c->src, c->dst, st));
        TRY(cudaEventRecord(w.ev, st));
        if (pthread_create(&th, NULL, event_waiter, &w) != 0 || read(fds[0], &b, 1) != 1)
            abort();
        double t3 = now_ms();
        pthread_join(th, NULL);
        if (i >= 2) {
            host_fn[i - 2] = t1 - t0;
            blocking[i - 2] = t3 - t2;
        }
    }
    qsort(host_fn, REPS, sizeof(double), cmp_d);
    qsort(blocking, REPS, sizeof(double), cmp_d);
    add("direct + host function (wall ms)", host_fn[REPS / 2], 0, 0, 0, host_fn[REPS / 2]);
    add("direct + blocking event (wall ms)", blocking[REPS / 2], 0, 0, 0, blocking[REPS / 2]);
    cudaEventDestroy(w.ev);
    close(fds[0]);
    close(fds[1]);
}

/* A new program per request, as a daemon whose requests all have new block ids makes them:
 * host time of kvk_program_new (the upload waited for) and of kvk_program_new_async (nothing
 * waited for), and the wall time of new_async + direct until the copy ended, vs the direct
 * kernel alone (the same-node path's floor on one GPU). Rows: ms = host or wall time. */
static void program_per_request(struct ctx *c, cudaStream_t st, double direct_ms)
{
    double h_sync[REPS], h_async[REPS], wall[REPS];
    for (int i = 0; i < REPS + 2; i++) {
        struct kvk_program *p = NULL;
        double t0 = now_ms();
        KTRY(kvk_program_new(c->ops, c->n_ops, 0, &p));
        double t1 = now_ms();
        kvk_program_free(p);
        TRY(cudaStreamSynchronize(st));
        double t2 = now_ms();
        KTRY(kvk_program_new_async(c->ops, c->n_ops, 0, st, &p));
        double t3 = now_ms();
        KTRY(kvk_direct(p, c->src, c->dst, st));
        TRY(cudaStreamSynchronize(st));
        double t4 = now_ms();
        if (!kvk_program_staged(p))
            printf("bench_gpu: an async upload found no staging room and waited\n");
        kvk_program_free(p);
        if (i >= 2) { /* two warm-ups */
            h_sync[i - 2] = t1 - t0;
            h_async[i - 2] = t3 - t2;
            wall[i - 2] = t4 - t2;
        }
    }
    qsort(h_sync, REPS, sizeof(double), cmp_d);
    qsort(h_async, REPS, sizeof(double), cmp_d);
    qsort(wall, REPS, sizeof(double), cmp_d);
    add("program new, host waits (host ms)", h_sync[REPS / 2], 0, 0, 0, h_sync[REPS / 2]);
    add("program new async (host ms)", h_async[REPS / 2], 0, 0, 0, h_async[REPS / 2]);
    add("new async + direct (wall ms)", wall[REPS / 2], 2.0 * c->bytes,
        2.0 * c->bytes / (direct_ms * 1e6), 0.67, wall[REPS / 2]);
}

static void measure(const char *name, work_fn fn, void *ctx, cudaStream_t st, double counted,
                    double ceiling, double goal)
{
    double wall;
    double ms = time_it(fn, ctx, st, &wall);
    add(name, ms, counted, ceiling, goal, wall);
}

/* knobs: task bytes, threads, fat, unroll, piece alignment (see kvf_kernels.h) */
static const char *const knob_names[5] = {"KVK_TASK_BYTES", "KVK_THREADS", "KVK_FAT",
                                          "KVK_UNROLL", "KVK_PIECE_ALIGN"};

static struct kvk_program *program_with(const struct copy_op *ops, uint32_t n,
                                        const char *const knobs[5])
{
    struct kvk_program *p = NULL;
    for (int k = 0; k < 5; k++)
        setenv(knob_names[k], knobs[k], 1);
    KTRY(kvk_program_new(ops, n, 0, &p));
    for (int k = 0; k < 5; k++)
        unsetenv(knob_names[k]);
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

/* Writer 0 of generation rank 0 of a TP4 -> TP2 fan-in: head-range runs (conv rows of 48 KiB
 * per section, ssm halves), chunked gather and scatter through a device arena. */
static void fan_in(cudaStream_t st, double d2d, uint8_t *arena)
{
    struct bprog f;
    bprog_build("kimi-k3:tp=4", "kimi-k3:tp=2", 0, 0, &f);
    struct kvk_program *p = NULL;
    KTRY(kvk_program_new(f.ops, f.n_ops, 0, &p));
    struct kvk_mem src, dst;
    alloc_pools(0, &f.src_sizes, &src, 0x66);
    alloc_pools(0, &f.dst_sizes, &dst, 0x77);
    struct ctx c = {.p = p, .src = &src, .dst = &dst, .ext = arena, .bytes = f.bytes,
                    .chunk = CHUNK, .ops = f.ops, .n_ops = f.n_ops};
    printf("fan-in TP4->TP2 writer 0: %u ops, %.1f MiB, %u tasks\n", f.n_ops,
           f.bytes / 1048576.0, kvk_program_tasks(p));
    measure("fan-in TP4->TP2 w0 gather 32MiB", do_gather, &c, st, 2.0 * f.bytes, d2d, 0.85);
    measure("fan-in TP4->TP2 w0 scatter 32MiB", do_scatter, &c, st, 2.0 * f.bytes, d2d, 0.85);
    free_pools(&src);
    free_pools(&dst);
    kvk_program_free(p);
    free(f.ops);
}

static void print_and_save(const char *out, uint64_t bytes, uint32_t n_ops, uint32_t n_tasks,
                           int n_gpus, const char *gpu)
{
    char knobs[256] = "";
    for (int k = 0; k < 5; k++) {
        const char *v = getenv(knob_names[k]);
        if (v)
            snprintf(knobs + strlen(knobs), sizeof(knobs) - strlen(knobs), " %s=%s",
                     knob_names[k], v);
    }
    printf("\nbench_gpu: %s x%d, request %.1f MiB, %u ops, %u tasks, chunk %llu MiB, knobs:%s\n",
           gpu, n_gpus, bytes / 1048576.0, n_ops, n_tasks, CHUNK >> 20,
           knobs[0] ? knobs : " defaults");
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
    fprintf(f, "{\"gpu\":\"%s\",\"gpus\":%d,\"request_bytes\":%llu,\"ops\":%u,\"tasks\":%u,"
            "\"chunk_bytes\":%llu,\"reps\":%d,\"knobs\":\"%s\",\"results\":[", gpu, n_gpus,
            (unsigned long long)bytes, n_ops, n_tasks, CHUNK, REPS, knobs);
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
    int sweep_on = 1;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--no-sweep") == 0)
            sweep_on = 0;
    }
    struct bprog k3;
    bprog_build("kimi-k3", "kimi-k3", 0, 0, &k3);
    const struct copy_op *ops = k3.ops;
    uint32_t n_ops = k3.n_ops;
    uint64_t bytes = k3.bytes;
    uint64_t runs = 0;
    for (uint32_t i = 0; i < n_ops; i++)
        runs += ops[i].count;
    printf("kimi-k3 8k TP1->TP1: %u writer(s), writer 0: %u ops, %llu runs, %llu bytes\n",
           k3.n_writers, n_ops, (unsigned long long)runs, (unsigned long long)bytes);
    int n_gpus = kvk_device_count();
    if (n_gpus < 1) {
        printf("bench_gpu: SKIP: no CUDA device: %s\n", kvk_last_error());
        return 0;
    }
    struct cudaDeviceProp prop;
    TRY(cudaGetDeviceProperties(&prop, 0));
    struct kvk_program *p = NULL, *p_nopdl = NULL;
    KTRY(kvk_program_new(ops, n_ops, 0, &p));
    setenv("KVK_PDL", "0", 1);
    KTRY(kvk_program_new(ops, n_ops, 0, &p_nopdl));
    unsetenv("KVK_PDL");
    struct kvk_mem src, dst;
    alloc_pools(0, &k3.src_sizes, &src, 0x11);
    alloc_pools(0, &k3.dst_sizes, &dst, 0x22);
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
    /* kernel variants: task bytes, threads, fat, unroll, piece alignment */
    static const char *const sweep[][6] = {
        {"65536", "512", "0", "4", "4096", "  op  U4 64K/512 align4K"},
        {"65536", "512", "0", "8", "4096", "  op  U8 64K/512 align4K"},
        {"32768", "256", "0", "8", "4096", "  op  U8 32K/256 align4K"},
        {"8192", "128", "0", "4", "4096", "  op  U4 8K/128 align4K"},
        {"65536", "512", "1", "4", "16", "  fat U4 64K/512 align16"},
        {"65536", "512", "1", "4", "4096", "  fat U4 64K/512 align4K"},
        {"32768", "256", "1", "4", "4096", "  fat U4 32K/256 align4K"},
        {"8192", "128", "1", "4", "4096", "  fat U4 8K/128 align4K"},
        {"65536", "512", "1", "8", "4096", "  fat U8 64K/512 align4K"},
        {"65536", "256", "1", "8", "4096", "  fat U8 64K/256 align4K"},
        {"32768", "256", "1", "8", "4096", "  fat U8 32K/256 align4K"},
        {"16384", "256", "1", "8", "4096", "  fat U8 16K/256 align4K"},
        {"16384", "128", "1", "8", "4096", "  fat U8 16K/128 align4K"},
    };
    for (size_t i = 0; sweep_on && i < sizeof(sweep) / sizeof(sweep[0]); i++) {
        c.p = program_with(ops, n_ops, sweep[i]);
        measure(sweep[i][5], do_gather, &c, st, 2.0 * bytes, d2d, 0.85);
        kvk_program_free(c.p);
    }
    c.p = p;
    measure("direct pool->pool same GPU", do_direct, &c, st, 2.0 * bytes, d2d, 0.85);
    double direct_ms = rows[n_rows - 1].ms;
    add("direct same GPU, after 20 ms idle", time_idle(do_direct, &c, st, 20), 2.0 * bytes, d2d,
        0.85, 0);
    program_per_request(&c, st, direct_ms);
    completion_paths(&c, st);
    measure("per-fragment cudaMemcpyAsync", do_fragments, &c, st, 2.0 * bytes, d2d, 0);

    scattered_blocks(st, d2d);
    fan_in(st, d2d, arena);

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
            alloc_pools(1, &k3.dst_sizes, &dst1, 0x44);
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
    free(k3.ops);
    return 0;
}
#endif
