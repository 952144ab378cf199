/* kvk_upload.cu: a copy program's device tables uploaded in stream order, with no host wait
 * (issue 12: "programs uploaded without a synchronous step"). The host sends only the ops and
 * their first task indices (O(ops), written into page-locked staging, one cudaMemcpyAsync into
 * one cudaMallocAsync allocation on the caller's stream); a small kernel on the same stream
 * expands them into the task table the copy kernel reads, by the host's own split formulas
 * (kvk_op_task, kvk_ftask_of); an event marks the end: launches on that stream follow by
 * stream order, launches on any other stream wait for the event on the GPU (kvk_launch).
 * Staging (kvk_stage_copy, also what a template program's request uploads, kvk_tmpl.cu): one
 * page-locked buffer per process (KVK_STAGE_BYTES, allocated by kvk_warm or at the first
 * upload), cut first-fit; a piece goes back once its copy's event completed (checked,
 * never waited for, at the next upload). When staging is exhausted the upload copies from a
 * temporary page-locked buffer and waits for it: correct, counted by the caller
 * (kvk_program_staged). Device tables leave with cudaFreeAsync, so freeing waits for nothing.
 * The stream-ordered pool keeps up to KVK_POOL_KEEP bytes cached, so steady uploads reuse
 * memory instead of mapping it. Threads: any (one mutex over the staging). */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "kvk_cuda.h"

#define KVK_STAGE_BYTES (32ull << 20) /* a kimi-k3 8k program's fat table is about 0.8 MiB */
#define KVK_STAGE_PIECES 128          /* free extents and pieces awaiting their copy */
#define KVK_STAGE_ALIGN 256ull
#define KVK_POOL_KEEP (256ull << 20)  /* stream-ordered pool's release threshold */
#define KVK_SHAPE_MAX 64              /* cached (device, family, unroll, threads) launch shapes */
#define KVK_MAX_DEVICES 64
#define KVK_WARM_BYTES (8ull << 20)  /* pool memory primed at kvk_warm (a kimi-k3 program: 1 MiB) */

struct extent {
    uint64_t off, len;
};
struct pending {
    struct extent x;
    cudaEvent_t done;
    int device; /* the event's */
};
#define KVK_SPARE_EVENTS 32 /* staging events kept per device for the next uploads */

static struct {
    pthread_mutex_t mu;
    uint8_t *base; /* owned for the process's life (page-locked host memory, portable) */
    int failed;    /* cudaHostAlloc failed once: every upload uses the waiting path */
    uint32_t n_free, n_pend;
    struct extent free_[KVK_STAGE_PIECES]; /* ascending offset, coalesced */
    struct pending pend[KVK_STAGE_PIECES];
    struct {
        uint32_t n;
        cudaEvent_t ev[KVK_SPARE_EVENTS];
    } spare[KVK_MAX_DEVICES]; /* events of copies that ended: recorded again, not re-created */
    uint32_t pool_set[(KVK_MAX_DEVICES + 31) / 32];
} S = {PTHREAD_MUTEX_INITIALIZER};

/* Caller holds S.mu. Returns x to the free list, merged with its neighbours. */
static void free_put(struct extent x)
{
    uint32_t i = 0;
    while (i < S.n_free && S.free_[i].off < x.off)
        i++;
    if (i > 0 && S.free_[i - 1].off + S.free_[i - 1].len == x.off) {
        S.free_[i - 1].len += x.len;
        if (i < S.n_free && x.off + x.len == S.free_[i].off) {
            S.free_[i - 1].len += S.free_[i].len;
            memmove(&S.free_[i], &S.free_[i + 1], (S.n_free - i - 1) * sizeof(S.free_[0]));
            S.n_free--;
        }
        return;
    }
    if (i < S.n_free && x.off + x.len == S.free_[i].off) {
        S.free_[i].off = x.off;
        S.free_[i].len += x.len;
        return;
    }
    if (S.n_free == KVK_STAGE_PIECES)
        return; /* cannot happen (extents <= pieces out + 1); losing room is safe */
    memmove(&S.free_[i + 1], &S.free_[i], (S.n_free - i) * sizeof(S.free_[0]));
    S.free_[i] = x;
    S.n_free++;
}

/* Caller holds S.mu. Pieces whose copy ended go back (cudaEventQuery: never waits). */
static void reap(void)
{
    for (uint32_t i = 0; i < S.n_pend;) {
        if (cudaEventQuery(S.pend[i].done) != cudaSuccess) { /* not yet (or a failed device) */
            i++;
            continue;
        }
        int dv = S.pend[i].device;
        if (dv >= 0 && dv < KVK_MAX_DEVICES && S.spare[dv].n < KVK_SPARE_EVENTS)
            S.spare[dv].ev[S.spare[dv].n++] = S.pend[i].done;
        else
            cudaEventDestroy(S.pend[i].done);
        free_put(S.pend[i].x);
        S.pend[i] = S.pend[--S.n_pend];
    }
    (void)cudaGetLastError(); /* cudaErrorNotReady is not an error of the caller's */
}

static int stage_init_locked(void)
{
    if (S.base || S.failed)
        return S.base ? 0 : -ENOMEM;
    cudaError_t e = cudaHostAlloc((void **)&S.base, KVK_STAGE_BYTES, cudaHostAllocPortable);
    if (e != cudaSuccess) {
        S.base = NULL;
        S.failed = 1;
        return kvk_cuda_fail("cudaHostAlloc(program staging)", e);
    }
    S.free_[0] = (struct extent){0, KVK_STAGE_BYTES};
    S.n_free = 1;
    return 0;
}

int kvk_stage_init(void)
{
    pthread_mutex_lock(&S.mu);
    int rc = stage_init_locked();
    pthread_mutex_unlock(&S.mu);
    return rc;
}

/* A piece of len bytes of staging, or NULL when there is no room (or no staging). */
static uint8_t *stage_get(uint64_t len, struct extent *ret)
{
    len = (len + KVK_STAGE_ALIGN - 1) & ~(KVK_STAGE_ALIGN - 1);
    uint8_t *out = NULL;
    pthread_mutex_lock(&S.mu);
    if (stage_init_locked() == 0)
        reap();
    if (S.base && S.n_pend < KVK_STAGE_PIECES) {
        for (uint32_t i = 0; i < S.n_free; i++)
            if (S.free_[i].len >= len) {
                *ret = (struct extent){S.free_[i].off, len};
                out = S.base + S.free_[i].off;
                S.free_[i].off += len;
                S.free_[i].len -= len;
                if (S.free_[i].len == 0) {
                    memmove(&S.free_[i], &S.free_[i + 1], (S.n_free - i - 1) * sizeof(S.free_[0]));
                    S.n_free--;
                }
                break;
            }
    }
    pthread_mutex_unlock(&S.mu);
    return out;
}

/* A staging event of device (current): a spare one, or created. */
static cudaError_t stage_event(int device, cudaEvent_t *ret)
{
    *ret = NULL;
    pthread_mutex_lock(&S.mu);
    if (device >= 0 && device < KVK_MAX_DEVICES && S.spare[device].n > 0)
        *ret = S.spare[device].ev[--S.spare[device].n];
    pthread_mutex_unlock(&S.mu);
    return *ret ? cudaSuccess : cudaEventCreateWithFlags(ret, cudaEventDisableTiming);
}

/* x goes back once `done` completed (NULL: nothing was queued); takes the event. */
static void stage_put_after(struct extent x, cudaEvent_t done, int device)
{
    pthread_mutex_lock(&S.mu);
    if (!done) {
        free_put(x);
    } else if (S.n_pend < KVK_STAGE_PIECES) {
        S.pend[S.n_pend++] = (struct pending){x, done, device};
    } else { /* stage_get keeps a slot: unreachable, but never reuse a piece being read */
        cudaEventSynchronize(done);
        cudaEventDestroy(done);
        free_put(x);
    }
    pthread_mutex_unlock(&S.mu);
}

/* Once per device: the stream-ordered pool keeps freed tables instead of unmapping them at
 * every synchronization, so steady uploads allocate from cached memory. */
void kvk_pool_keep(int device)
{
    if (device < 0 || device >= KVK_MAX_DEVICES)
        return;
    uint32_t bit = 1u << (device % 32);
    pthread_mutex_lock(&S.mu);
    int set = (S.pool_set[device / 32] & bit) != 0;
    S.pool_set[device / 32] |= bit;
    pthread_mutex_unlock(&S.mu);
    if (set)
        return;
    cudaMemPool_t pool;
    uint64_t keep = KVK_POOL_KEEP;
    if (cudaDeviceGetDefaultMemPool(&pool, device) == cudaSuccess)
        cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep);
    (void)cudaGetLastError(); /* an older driver without the attribute: the default stays */
}

uint64_t kvk_stage_off(uint64_t v)
{
    return (v + KVK_STAGE_ALIGN - 1) & ~(KVK_STAGE_ALIGN - 1);
}

int kvk_stage_copy(void *d, const void *const *parts, const uint64_t *lens, int n,
                   int device, cudaStream_t stream, int *staged)
{
    uint64_t total = 0;
    for (int i = 0; i < n; i++)
        total += kvk_stage_off(lens[i]);
    struct extent x;
    uint64_t t = kvk_step_now();
    uint8_t *buf = stage_get(total ? total : 1, &x), *tmp = NULL;
    t = kvk_step(KVK_STEP_STAGE_GET, t);
    cudaEvent_t done = NULL;
    cudaError_t e = buf ? stage_event(device, &done)
                        : cudaMallocHost((void **)&tmp, total ? total : 1);
    t = kvk_step(buf ? KVK_STEP_EVENT_CREATE : KVK_STEP_ALLOC, t);
    const char *what = buf ? "cudaEventCreate(staging)" : "cudaMallocHost(upload, unstaged)";
    if (e == cudaSuccess) {
        uint8_t *src = buf ? buf : tmp;
        uint64_t at = 0;
        for (int i = 0; i < n; i++) {
            memcpy(src + at, parts[i], lens[i]);
            at += kvk_stage_off(lens[i]);
        }
        t = kvk_step(KVK_STEP_FILL, t);
        what = "cudaMemcpyAsync(upload)";
        e = cudaMemcpyAsync(d, src, total, cudaMemcpyHostToDevice, stream);
        t = kvk_step(KVK_STEP_COPY_ASYNC, t);
        if (e == cudaSuccess) {
            what = buf ? "cudaEventRecord(staging)" : "cudaStreamSynchronize(upload, unstaged)";
            e = buf ? cudaEventRecord(done, stream) : cudaStreamSynchronize(stream);
            t = kvk_step(KVK_STEP_EVENT_RECORD, t);
        }
        if (e != cudaSuccess) /* whatever was queued ends before the staging is reused */
            cudaStreamSynchronize(stream);
    }
    if (buf)
        stage_put_after(x, e == cudaSuccess ? done : NULL, device);
    if (done && e != cudaSuccess)
        cudaEventDestroy(done);
    if (tmp)
        cudaFreeHost(tmp);
    *staged = buf != NULL;
    return e == cudaSuccess ? 0 : kvk_cuda_fail(what, e);
}

/* One thread per task (and, with ops_out, one per op): finds its op in op_first (binary search)
 * and writes the task in the form the program's kernel family reads, by the host's own formulas
 * (kvk_op_task); with subst, the op first gets the request's ids (kvk_subst_op: a template's
 * program, kvk_tmpl.cu), and ops_out takes the substituted ops (the op family reads them). */
__global__ void kvk_expand_kernel(const struct kvk_op *ops, const uint32_t *op_first,
                                  const struct kvk_subst *subst, const uint32_t *ids,
                                  uint32_t n_ops, uint32_t n_tasks, struct kvk_ftask *ftasks,
                                  struct kvk_task *tasks, struct kvk_op *ops_out)
{
    uint32_t k = blockIdx.x * blockDim.x + threadIdx.x;
    if (ops_out && k < n_ops)
        kvk_subst_op(&ops[k], &subst[k], ids, &ops_out[k]);
    if (k >= n_tasks)
        return;
    uint32_t a = kvk_op_of_task(op_first, n_ops, k);
    struct kvk_op o = ops[a];
    if (subst)
        kvk_subst_op(&ops[a], &subst[a], ids, &o);
    uint64_t pos;
    uint32_t bytes;
    kvk_op_task(&o, k - op_first[a], &pos, &bytes);
    if (ftasks)
        kvk_ftask_of(&o, pos, bytes, &ftasks[k]);
    else
        tasks[k] = kvk_task{pos, a, bytes};
}

int kvk_expand(const struct kvk_op *ops, const uint32_t *op_first, const struct kvk_subst *subst,
               const uint32_t *ids, uint32_t n_ops, uint32_t n_tasks, struct kvk_ftask *ftasks,
               struct kvk_task *tasks, struct kvk_op *ops_out, cudaStream_t stream)
{
    uint32_t threads = ops_out && n_ops > n_tasks ? n_ops : n_tasks;
    if (threads == 0)
        return 0;
    uint64_t t = kvk_step_now();
    kvk_expand_kernel<<<(threads + 255) / 256, 256, 0, stream>>>(ops, op_first, subst, ids, n_ops,
                                                                 n_tasks, ftasks, tasks, ops_out);
    cudaError_t e = cudaGetLastError();
    kvk_step(KVK_STEP_EXPAND, t);
    return e == cudaSuccess ? 0 : kvk_cuda_fail("the task expansion kernel", e);
}

/* Device layout (one allocation): ops | op_first | tasks (fat: kvk_ftask, op: kvk_task). Only
 * ops and op_first cross PCIe (kvk_stage_copy); the GPU writes the tasks. */
int kvk_upload(struct kvk_program *p, cudaStream_t stream)
{
    uint64_t lens[2] = {(uint64_t)(p->t.n_ops ? p->t.n_ops : 1) * sizeof(struct kvk_op),
                        ((uint64_t)p->t.n_ops + 1) * sizeof(uint32_t)};
    const void *parts[2] = {p->t.ops, p->t.op_first}; /* t.ops holds >= 1 op */
    uint64_t ops_bytes = kvk_stage_off(lens[0]), staged = ops_bytes + kvk_stage_off(lens[1]);
    uint64_t task_bytes = (uint64_t)(p->t.n_tasks ? p->t.n_tasks : 1) *
                          (p->fat ? sizeof(struct kvk_ftask) : sizeof(struct kvk_task));
    p->up_stream = stream;
    uint64_t t = kvk_step_now();
    KVK_TRY(cudaEventCreateWithFlags(&p->ready, cudaEventDisableTiming));
    t = kvk_step(KVK_STEP_EVENT_CREATE, t);
    kvk_pool_keep(p->device);
    t = kvk_step(KVK_STEP_HOST, t);
    KVK_TRY(cudaMallocAsync(&p->d_mem, staged + task_bytes, stream));
    kvk_step(KVK_STEP_ALLOC, t);
    uint8_t *d = (uint8_t *)p->d_mem;
    p->d_ops = (struct kvk_op *)d;
    const uint32_t *d_first = (const uint32_t *)(d + ops_bytes);
    if (p->fat)
        p->d_ftasks = (struct kvk_ftask *)(d + staged);
    else
        p->d_tasks = (struct kvk_task *)(d + staged);
    int rc = kvk_stage_copy(d, parts, lens, 2, p->device, stream, &p->staged);
    if (rc < 0)
        return rc;
    if ((rc = kvk_expand(p->d_ops, d_first, NULL, NULL, p->t.n_ops, p->t.n_tasks, p->d_ftasks,
                         p->d_tasks, NULL, stream)) < 0)
        return rc;
    t = kvk_step_now();
    KVK_TRY(cudaEventRecord(p->ready, stream));
    kvk_step(KVK_STEP_EVENT_RECORD, t);
    return 0;
}

int kvk_upload_warm(int device)
{
    kvk_pool_keep(device);
    cudaFuncAttributes fa; /* loads the expand kernel now (lazy module loading) */
    KVK_TRY(cudaFuncGetAttributes(&fa, (const void *)kvk_expand_kernel));
    void *d = NULL; /* the stream-ordered pool holds memory before the first program needs it */
    KVK_TRY(cudaMallocAsync(&d, KVK_WARM_BYTES, cudaStreamLegacy));
    KVK_TRY(cudaFreeAsync(d, cudaStreamLegacy));
    KVK_TRY(cudaStreamSynchronize(cudaStreamLegacy));
    return 0;
}

void kvk_upload_free(struct kvk_program *p)
{
    if (p->d_mem) /* stream-ordered: after the program's last launch, which has ended */
        cudaFreeAsync(p->d_mem, p->up_stream);
    if (p->ready)
        cudaEventDestroy(p->ready);
    (void)cudaGetLastError();
    p->d_mem = NULL;
    p->ready = NULL;
}

/* ---- launch shapes ---- */

struct shape {
    int device, fat, unroll, threads, no_pdl;
    int sm_count, blocks_per_sm, pdl;
};
static struct {
    pthread_mutex_t mu;
    uint32_t n;
    struct shape s[KVK_SHAPE_MAX];
} L = {PTHREAD_MUTEX_INITIALIZER};

static int no_pdl_env(void)
{
    const char *env = getenv("KVK_PDL");
    return env && strcmp(env, "0") == 0;
}

static int shape_of(struct kvk_program *p)
{
    KVK_TRY(cudaDeviceGetAttribute(&p->sm_count, cudaDevAttrMultiProcessorCount, p->device));
    int rc = kvk_blocks_per_sm(p, &p->blocks_per_sm);
    if (rc < 0)
        return rc;
    int major = 0;
    KVK_TRY(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, p->device));
    p->pdl = major >= 9 && !no_pdl_env();
    return 0;
}

int kvk_launch_shape(struct kvk_program *p)
{
    int no_pdl = no_pdl_env();
    pthread_mutex_lock(&L.mu);
    for (uint32_t i = 0; i < L.n; i++) {
        const struct shape *s = &L.s[i];
        if (s->device == p->device && s->fat == p->fat && s->unroll == p->unroll &&
            s->threads == p->threads && s->no_pdl == no_pdl) {
            p->sm_count = s->sm_count;
            p->blocks_per_sm = s->blocks_per_sm;
            p->pdl = s->pdl;
            pthread_mutex_unlock(&L.mu);
            return 0;
        }
    }
    pthread_mutex_unlock(&L.mu);
    int rc = shape_of(p);
    if (rc < 0)
        return rc;
    pthread_mutex_lock(&L.mu);
    if (L.n < KVK_SHAPE_MAX) /* past it (tuning runs only): asked again each time */
        L.s[L.n++] = (struct shape){p->device, p->fat, p->unroll, p->threads, no_pdl, p->sm_count,
                                    p->blocks_per_sm, p->pdl};
    pthread_mutex_unlock(&L.mu);
    return 0;
}
