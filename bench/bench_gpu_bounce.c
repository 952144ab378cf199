/* bench_gpu_bounce.c: the ceiling of the GPU bounce between two daemons on ONE GPU, measured
 * without the daemons (issue 12). Daemon A's gather kernel writes B's landing slot (host memory
 * shared between the two processes and page-locked in each with cudaHostRegister), B's scatter
 * kernel reads it into its pools; chunks of 32 MiB (arena.chunk), at most 8 in flight
 * (arena.window, so 8 landing slots: the slots one writer holds), a slot reused only after its
 * scatter ended.
 * The ring is shared memory with two counters (chunks gathered, chunks scattered) that each side
 * polls: a daemon's CHUNK and CREDIT messages with no loop, no UCX and no request around them.
 * Variants (the same kimi-k3 8k TP1 program, 649.4 MiB, as bench_gpu and check_gpu_remote):
 *  - "2proc kernel": two processes, each with its own CUDA context on the one GPU (the daemons'
 *    case; without MPS the GPU time-slices between contexts, so the two kernels may not overlap);
 *  - "1proc kernel": the same two stages from one process on two streams (one context: shows
 *    whether the contexts are the limit);
 *  - "2proc ce" / "1proc ce": each kernel works device memory only (gather into a device slot,
 *    scatter from one) and the copy engines cross PCIe (cudaMemcpyAsync D2H into the shared slot,
 *    H2D out of it): whether copy engines of two contexts overlap where kernels do not;
 *  - "gather alone" / "scatter alone": one stage through the same ring, the other side a no-op
 *    (each stage's own ceiling, same run);
 *  - "serial bound" = 1/(1/gather + 1/scatter): what two stages that never overlap can reach.
 * Every variant that scatters checks the generation pools bitwise against kvk_direct of the same
 * program from identical source pools (deterministic bytes), after its last repetition.
 * CUDA is never touched in the parent: each variant runs in fresh children (fork before CUDA).
 * Prints a table; --out PATH writes JSON (bench-gpu-remote reads it); --reps N (default 9).
 * Times: median wall time of a repetition, from A's first launch to B seeing its last scatter
 * done (CLOCK_MONOTONIC, shared by the two processes), after one warm-up repetition. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KVF_HAVE_CUDA
int main(void)
{
    printf("bench_gpu_bounce: no CUDA in this build\n");
    return 0;
}
#else

#include <cuda_runtime.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench_gpu_prog.h"

#define CHUNK (32ull << 20) /* arena.chunk */
#define WINDOW 8u           /* arena.window: landing slots one writer holds */
#define MAX_REPS 64

#define TRY(call) BENCH_TRY("bench_gpu_bounce", call, die())
#define KTRY(call) BENCH_KTRY("bench_gpu_bounce", call, die())

/* What the two processes share (MAP_SHARED, made before fork): the counters, the results. */
struct ring {
    _Atomic uint64_t gathered;  /* chunks whose gather ended (A -> B: CHUNK) */
    _Atomic uint64_t scattered; /* chunks whose scatter ended (B -> A: CREDIT) */
    _Atomic int ready[2];       /* each side set up (CUDA, pools, program) */
    _Atomic int failed;         /* a side failed: the other stops waiting */
    double t0[MAX_REPS], t1[MAX_REPS]; /* A's first launch, B's last completion */
    int checked;                /* 1: the generation pools matched the reference; -1: differ */
    char why[256];
};

static struct ring *ring_of_die; /* set in each child */

/* A child's failure: the other side of two processes stops instead of waiting forever. */
static void die(void)
{
    if (ring_of_die)
        atomic_store(&ring_of_die->failed, 1);
    _exit(2);
}

static void check_peer(const struct ring *r)
{
    if (atomic_load(&r->failed))
        _exit(3);
}

static struct bprog k3;
static uint64_t n_chunks;
static int reps = 9;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Pools of the given sizes; src_pattern: deterministic bytes (the same in every process: each
 * 16 MiB piece a differently shifted window of one random buffer, so a misplaced run shows),
 * else a constant fill per pool. */
static void pools_new(const struct kvk_mem *sizes, int src_pattern, struct kvk_mem *m)
{
    enum { PIECE = 16 << 20 };
    static uint8_t *rnd_buf;
    if (!rnd_buf) {
        if (!(rnd_buf = malloc(2 * PIECE)))
            die();
        uint64_t x = 0x9e3779b97f4a7c15ull;
        for (uint64_t i = 0; i < 2 * PIECE; i += 8) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            memcpy(rnd_buf + i, &x, 8);
        }
    }
    *m = *sizes;
    for (uint32_t p = 0; p < m->n; p++) {
        void *d;
        TRY(cudaMalloc(&d, m->size[p] ? m->size[p] : 1));
        m->base[p] = (uint64_t)(uintptr_t)d;
        if (!src_pattern) {
            TRY(cudaMemset(d, 0x22 + (int)p, m->size[p]));
            continue;
        }
        for (uint64_t off = 0, i = 0; off < m->size[p]; off += PIECE, i++) {
            uint64_t n = m->size[p] - off < PIECE ? m->size[p] - off : PIECE;
            uint64_t shift = (i * 7919 + p * 104729) % PIECE;
            TRY(cudaMemcpy((uint8_t *)d + off, rnd_buf + shift, n, cudaMemcpyHostToDevice));
        }
    }
    /* the memsets and pageable uploads run on the legacy stream, which the benches' non-blocking
     * streams do not wait for */
    TRY(cudaDeviceSynchronize());
}

static void pools_free(struct kvk_mem *m)
{
    for (uint32_t p = 0; p < m->n; p++)
        cudaFree((void *)(uintptr_t)m->base[p]);
    m->n = 0;
}

/* 1 when a and b hold the same bytes (pool by pool, through host memory). */
static int pools_equal(const struct kvk_mem *a, const struct kvk_mem *b, char *why, size_t len)
{
    enum { PIECE = 64 << 20 };
    uint8_t *x = malloc(PIECE), *y = malloc(PIECE);
    int same = x && y;
    for (uint32_t p = 0; same && p < a->n; p++)
        for (uint64_t off = 0; same && off < a->size[p]; off += PIECE) {
            uint64_t n = a->size[p] - off < PIECE ? a->size[p] - off : PIECE;
            TRY(cudaMemcpy(x, (uint8_t *)(uintptr_t)a->base[p] + off, n, cudaMemcpyDeviceToHost));
            TRY(cudaMemcpy(y, (uint8_t *)(uintptr_t)b->base[p] + off, n, cudaMemcpyDeviceToHost));
            if (memcmp(x, y, n) != 0) {
                snprintf(why, len, "pool %u differs from the reference in [%llu, +%llu)", p,
                         (unsigned long long)off, (unsigned long long)n);
                same = 0;
            }
        }
    free(x);
    free(y);
    return same;
}

/* One side of the pipeline in one process. role 0 gathers (A), 1 scatters (B); noop: the side
 * completes each chunk at once (the other stage alone). ce: the kernel works a device slot and
 * a copy engine crosses PCIe. */
struct side {
    int role, noop, ce;
    struct kvk_program *p;
    struct kvk_mem pools;
    cudaStream_t st;
    cudaEvent_t ev[WINDOW];
    uint8_t *slots;     /* host address of the shared ring (WINDOW x CHUNK) */
    uint8_t *slots_dev; /* its device alias (page-locked in this process) */
    uint8_t *dslots;    /* ce: WINDOW device slots */
    uint64_t launched, done, end;
};

static void side_launch(struct side *s, uint64_t k)
{
    uint64_t lo = (k % n_chunks) * CHUNK, hi = lo + CHUNK < k3.bytes ? lo + CHUNK : k3.bytes;
    uint32_t slot = (uint32_t)(k % WINDOW);
    uint8_t *host = s->slots + (uint64_t)slot * CHUNK, *dev = s->slots_dev + (uint64_t)slot * CHUNK;
    if (s->role == 0 && !s->ce) {
        KTRY(kvk_gather(s->p, &s->pools, lo, hi, dev, s->st));
    } else if (s->role == 0) {
        uint8_t *d = s->dslots + (uint64_t)slot * CHUNK;
        KTRY(kvk_gather(s->p, &s->pools, lo, hi, d, s->st));
        TRY(cudaMemcpyAsync(host, d, hi - lo, cudaMemcpyDeviceToHost, s->st));
    } else if (!s->ce) {
        KTRY(kvk_scatter(s->p, dev, lo, hi, &s->pools, s->st));
    } else {
        uint8_t *d = s->dslots + (uint64_t)slot * CHUNK;
        TRY(cudaMemcpyAsync(d, host, hi - lo, cudaMemcpyHostToDevice, s->st));
        KTRY(kvk_scatter(s->p, d, lo, hi, &s->pools, s->st));
    }
    TRY(cudaEventRecord(s->ev[slot], s->st));
}

/* One poll: launch what the ring allows, learn the oldest completion. Returns 1 on progress. */
static int side_step(struct side *s, struct ring *r)
{
    int moved = 0;
    uint64_t limit = s->role == 0 ? atomic_load(&r->scattered) + WINDOW
                                  : atomic_load(&r->gathered);
    if (limit > s->end)
        limit = s->end;
    if (s->noop) { /* the stage alone: the other side's chunks complete as they are allowed */
        if (s->done < limit) {
            if (s->role == 0 && s->done % n_chunks == 0)
                r->t0[s->done / n_chunks] = now_ms();
            s->launched = s->done = limit;
            if (s->role == 1 && s->done % n_chunks == 0)
                r->t1[s->done / n_chunks - 1] = now_ms();
            atomic_store(s->role == 0 ? &r->gathered : &r->scattered, s->done);
            return 1;
        }
        return 0;
    }
    for (; s->launched < limit; s->launched++, moved = 1) {
        if (s->role == 0 && s->launched % n_chunks == 0)
            r->t0[s->launched / n_chunks] = now_ms();
        side_launch(s, s->launched);
    }
    if (s->done < s->launched) {
        cudaError_t e = cudaEventQuery(s->ev[s->done % WINDOW]);
        if (e == cudaSuccess) {
            s->done++;
            if (s->role == 1 && s->done % n_chunks == 0)
                r->t1[s->done / n_chunks - 1] = now_ms();
            atomic_store(s->role == 0 ? &r->gathered : &r->scattered, s->done);
            moved = 1;
        } else if (e != cudaErrorNotReady) {
            TRY(e);
        }
    }
    return moved;
}

static void side_init(struct side *s, int role, int noop, int ce, uint8_t *slots)
{
    memset(s, 0, sizeof *s);
    s->role = role;
    s->noop = noop;
    s->ce = ce;
    s->slots = slots;
    s->end = (uint64_t)(reps + 1) * n_chunks;
    if (noop)
        return;
    KTRY(kvk_warm(0));
    KTRY(kvk_program_new(k3.ops, k3.n_ops, 0, &s->p));
    pools_new(role == 0 ? &k3.src_sizes : &k3.dst_sizes, role == 0, &s->pools);
    TRY(cudaStreamCreateWithFlags(&s->st, cudaStreamNonBlocking));
    for (uint32_t i = 0; i < WINDOW; i++)
        TRY(cudaEventCreateWithFlags(&s->ev[i], cudaEventDisableTiming));
    cudaError_t e = cudaHostRegister(slots, (size_t)WINDOW * CHUNK,
                                     cudaHostRegisterPortable | cudaHostRegisterMapped);
    if (e == cudaErrorHostMemoryAlreadyRegistered) /* one process: the other side pinned it */
        e = cudaGetLastError() == e ? cudaSuccess : e;
    TRY(e);
    TRY(cudaHostGetDevicePointer((void **)&s->slots_dev, slots, 0));
    if (ce)
        TRY(cudaMalloc((void **)&s->dslots, (size_t)WINDOW * CHUNK));
    TRY(cudaDeviceSynchronize());
}

/* B's check: its pools against kvk_direct of the program from identical source pools. */
static void side_check(struct side *s, struct ring *r)
{
    if (s->role != 1 || s->noop)
        return;
    struct kvk_mem src, ref;
    pools_new(&k3.src_sizes, 1, &src);
    pools_new(&k3.dst_sizes, 0, &ref);
    KTRY(kvk_direct(s->p, &src, &ref, s->st));
    TRY(cudaStreamSynchronize(s->st));
    r->checked = pools_equal(&s->pools, &ref, r->why, sizeof r->why) ? 1 : -1;
    pools_free(&src);
    pools_free(&ref);
}

/* The repetitions, from A's side: each starts when the previous one fully ended. */
static void run_sides(struct side *a, struct side *b, struct ring *r)
{
    for (int rep = 0; rep <= reps; rep++) {
        uint64_t stop = (uint64_t)(rep + 1) * n_chunks;
        if (a) {
            while (atomic_load(&r->scattered) < (uint64_t)rep * n_chunks) {
                check_peer(r);
                if (b)
                    side_step(b, r);
            }
            a->end = stop;
        }
        if (b)
            b->end = stop;
        while ((a && a->done < stop) || (b && b->done < stop)) {
            check_peer(r);
            if (a)
                side_step(a, r);
            if (b)
                side_step(b, r);
        }
    }
}

/* A child: both sides (one process, two streams), or side `role` of two processes. */
static void child(struct ring *r, uint8_t *slots, int role, int two, int noop_a, int noop_b,
                  int ce)
{
    struct side a, b;
    ring_of_die = r;
    if (!two) {
        side_init(&a, 0, noop_a, ce, slots);
        side_init(&b, 1, noop_b, ce, slots);
        run_sides(&a, &b, r);
        if (!noop_a) /* scatter alone moves whatever the ring holds */
            side_check(&b, r);
        _exit(0);
    }
    struct side *s = role == 0 ? &a : &b;
    side_init(s, role, 0, ce, slots);
    atomic_store(&r->ready[role], 1);
    while (!atomic_load(&r->ready[!role]))
        check_peer(r);
    if (role == 0) {
        run_sides(s, NULL, r);
    } else {
        s->end = (uint64_t)(reps + 1) * n_chunks;
        while (s->done < s->end) {
            check_peer(r);
            side_step(s, r);
        }
        side_check(s, r);
    }
    _exit(0);
}

struct variant {
    const char *name;
    int two, noop_a, noop_b, ce;
    double ms[2 * MAX_REPS], gbs;
    int n, checked;
};

static int cmp_d(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

/* Runs v once (reps + 1 repetitions), in fresh children. 0, or -1 when a child failed. */
static int run_variant(struct variant *v, struct ring *r, uint8_t *slots)
{
    memset(r, 0, sizeof *r);
    pid_t pid[2];
    int n = v->two ? 2 : 1;
    for (int i = 0; i < n; i++) {
        fflush(NULL);
        pid[i] = fork();
        if (pid[i] < 0)
            return -1;
        if (pid[i] == 0)
            child(r, slots, i, v->two, v->noop_a, v->noop_b, v->ce);
    }
    int bad = 0;
    for (int i = 0; i < n; i++) {
        int status;
        if (waitpid(pid[i], &status, 0) != pid[i] || !WIFEXITED(status) ||
            WEXITSTATUS(status) != 0)
            bad = 1;
    }
    if (bad)
        return -1;
    for (int rep = 1; rep <= reps; rep++) /* repetition 0 warms up */
        v->ms[v->n++] = r->t1[rep] - r->t0[rep];
    if (!v->noop_a && !v->noop_b)
        v->checked = v->checked < 0 ? -1 : r->checked;
    if (r->checked < 0)
        fprintf(stderr, "bench_gpu_bounce: %s: BYTES DIFFER: %s\n", v->name, r->why);
    return 0;
}

int main(int argc, char **argv)
{
    const char *out = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc)
            out = argv[++i];
        else if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
    }
    if (reps < 1 || reps > MAX_REPS - 1) {
        fprintf(stderr, "bench_gpu_bounce: --reps 1..%d\n", MAX_REPS - 1);
        return 1;
    }
    bprog_build("kimi-k3", "kimi-k3", 0, 0, &k3);
    n_chunks = (k3.bytes + CHUNK - 1) / CHUNK;
    uint64_t src_b = 0, dst_b = 0;
    for (uint32_t p = 0; p < k3.src_sizes.n; p++)
        src_b += k3.src_sizes.size[p];
    for (uint32_t p = 0; p < k3.dst_sizes.n; p++)
        dst_b += k3.dst_sizes.size[p];
    printf("bench_gpu_bounce: kimi-k3 8k TP1->TP1 writer 0: %u ops, %.1f MiB, %llu chunks of "
           "%llu MiB, %u in flight, %d repetitions; pools %.1f GiB -> %.1f GiB\n",
           k3.n_ops, k3.bytes / 1048576.0, (unsigned long long)n_chunks, CHUNK >> 20, WINDOW,
           reps, src_b / 1073741824.0, dst_b / 1073741824.0);
    struct ring *r = mmap(NULL, sizeof *r, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
                          -1, 0);
    uint8_t *slots = mmap(NULL, (size_t)WINDOW * CHUNK, PROT_READ | PROT_WRITE,
                          MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (r == MAP_FAILED || slots == MAP_FAILED) {
        perror("bench_gpu_bounce: mmap");
        return 1;
    }
    memset(slots, 0, (size_t)WINDOW * CHUNK); /* touched once, before the children pin it */
    static struct variant v[] = {
        {.name = "2proc kernel", .two = 1},        {.name = "1proc kernel"},
        {.name = "2proc ce", .two = 1, .ce = 1},   {.name = "1proc ce", .ce = 1},
        {.name = "gather alone", .noop_b = 1},     {.name = "scatter alone", .noop_a = 1},
    };
    enum { NV = sizeof v / sizeof v[0] };
    for (int round = 0; round < 2; round++) /* alternated: every variant meets the same GPU */
        for (int i = 0; i < NV; i++)
            if (run_variant(&v[i], r, slots) < 0) {
                printf("bench_gpu_bounce: SKIP: %s failed (no CUDA device?)\n", v[i].name);
                return round || i ? 1 : 0;
            }
    printf("%-16s %9s %9s %8s\n", "variant", "ms", "GB/s", "bytes");
    for (int i = 0; i < NV; i++) {
        qsort(v[i].ms, v[i].n, sizeof(double), cmp_d);
        double ms = v[i].ms[v[i].n / 2];
        v[i].gbs = k3.bytes / (ms * 1e6);
        printf("%-16s %9.3f %9.2f %8s\n", v[i].name, ms, v[i].gbs,
               v[i].noop_a || v[i].noop_b ? "-" : v[i].checked > 0 ? "checked" : "DIFFER");
    }
    double serial = 1.0 / (1.0 / v[4].gbs + 1.0 / v[5].gbs);
    double slowest = v[4].gbs < v[5].gbs ? v[4].gbs : v[5].gbs;
    printf("serial bound 1/(1/gather + 1/scatter): %.2f GB/s; 2proc kernel = %.2f of it, %.2f "
           "of the slowest stage alone (%.2f); 1proc kernel = %.2f of the slowest stage\n",
           serial, v[0].gbs / serial, v[0].gbs / slowest, slowest, v[1].gbs / slowest);
    int ok = 1;
    for (int i = 0; i < NV; i++)
        ok = ok && (v[i].noop_a || v[i].noop_b || v[i].checked > 0);
    if (out) {
        FILE *f = fopen(out, "w");
        if (!f) {
            perror(out);
            return 1;
        }
        fprintf(f, "{\"request_bytes\":%llu,\"chunk_bytes\":%llu,\"window\":%u,\"reps\":%d,"
                "\"serial_bound_gbs\":%.3f,\"variants\":{", (unsigned long long)k3.bytes, CHUNK,
                WINDOW, reps, serial);
        for (int i = 0; i < NV; i++)
            fprintf(f, "%s\"%s\":{\"ms\":%.4f,\"gbs\":%.3f,\"checked\":%s}", i ? "," : "",
                    v[i].name, v[i].ms[v[i].n / 2], v[i].gbs,
                    v[i].noop_a || v[i].noop_b ? "null" : v[i].checked > 0 ? "true" : "false");
        fprintf(f, "}}\n");
        fclose(f);
        printf("wrote %s\n", out);
    }
    return ok ? 0 : 1;
}
#endif
