/* kvk_upload.cu: a copy program's device tables uploaded in stream order, with no host wait
 * (issue 12: "programs uploaded without a synchronous step"). The tables are written into
 * page-locked staging, copied by one cudaMemcpyAsync into one cudaMallocAsync allocation on the
 * caller's stream, and an event marks the end of the copy: launches on that stream follow it by
 * stream order, launches on any other stream wait for the event on the GPU (kvk_launch).
 * Staging: one page-locked buffer per process (KVK_STAGE_BYTES, allocated by kvk_warm or at the
 * first upload), cut first-fit; a piece goes back once its copy's event completed (checked,
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

struct extent {
    uint64_t off, len;
};
struct pending {
    struct extent x;
    cudaEvent_t done;
};

static struct {
    pthread_mutex_t mu;
    uint8_t *base; /* owned for the process's life (page-locked host memory, portable) */
    int failed;    /* cudaHostAlloc failed once: every upload uses the waiting path */
    uint32_t n_free, n_pend;
    struct extent free_[KVK_STAGE_PIECES]; /* ascending offset, coalesced */
    struct pending pend[KVK_STAGE_PIECES];
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

/* x goes back once `done` completed (NULL: nothing was queued); takes the event. */
static void stage_put_after(struct extent x, cudaEvent_t done)
{
    pthread_mutex_lock(&S.mu);
    if (!done) {
        free_put(x);
    } else if (S.n_pend < KVK_STAGE_PIECES) {
        S.pend[S.n_pend++] = (struct pending){x, done};
    } else { /* stage_get keeps a slot: unreachable, but never reuse a piece being read */
        cudaEventSynchronize(done);
        cudaEventDestroy(done);
        free_put(x);
    }
    pthread_mutex_unlock(&S.mu);
}

/* Once per device: the stream-ordered pool keeps freed tables instead of unmapping them at
 * every synchronization, so steady uploads allocate from cached memory. */
static void pool_keep(int device)
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

static uint64_t up(uint64_t v)
{
    return (v + KVK_STAGE_ALIGN - 1) & ~(KVK_STAGE_ALIGN - 1);
}

/* Writes the family's tables at buf; the device offsets of each are the same. */
static void fill(const struct kvk_program *p, uint8_t *buf, uint64_t ops_bytes)
{
    if (p->fat) {
        kvk_tasks_fat(&p->t, (struct kvk_ftask *)buf);
        return;
    }
    memcpy(buf, p->t.ops, (size_t)p->t.n_ops * sizeof(struct kvk_op));
    memcpy(buf + ops_bytes, p->t.tasks, (size_t)p->t.n_tasks * sizeof(struct kvk_task));
}

int kvk_upload(struct kvk_program *p, cudaStream_t stream)
{
    uint64_t ops_bytes = p->fat ? 0 : up((uint64_t)p->t.n_ops * sizeof(struct kvk_op));
    uint64_t bytes = p->fat ? (uint64_t)p->t.n_tasks * sizeof(struct kvk_ftask)
                            : ops_bytes + (uint64_t)p->t.n_tasks * sizeof(struct kvk_task);
    p->up_stream = stream;
    KVK_TRY(cudaEventCreateWithFlags(&p->ready, cudaEventDisableTiming));
    if (bytes == 0)
        bytes = KVK_STAGE_ALIGN; /* an empty program: tables of nothing, never read */
    pool_keep(p->device);
    KVK_TRY(cudaMallocAsync(&p->d_mem, bytes, stream));
    uint8_t *d = (uint8_t *)p->d_mem;
    if (p->fat) {
        p->d_ftasks = (struct kvk_ftask *)d;
    } else {
        p->d_ops = (struct kvk_op *)d;
        p->d_tasks = (struct kvk_task *)(d + ops_bytes);
    }
    struct extent x;
    uint8_t *buf = stage_get(bytes, &x);
    p->staged = buf != NULL;
    if (!buf) { /* no room: a temporary page-locked buffer, waited for */
        KVK_TRY(cudaMallocHost((void **)&buf, bytes));
        fill(p, buf, ops_bytes);
        cudaError_t e = cudaMemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, stream);
        if (e == cudaSuccess)
            e = cudaEventRecord(p->ready, stream);
        if (e == cudaSuccess)
            e = cudaEventSynchronize(p->ready);
        cudaFreeHost(buf);
        if (e != cudaSuccess)
            return kvk_cuda_fail("cudaMemcpyAsync(copy program, unstaged)", e);
        p->uploaded = 1;
        return 0;
    }
    fill(p, buf, ops_bytes);
    cudaEvent_t done;
    cudaError_t e = cudaEventCreateWithFlags(&done, cudaEventDisableTiming);
    if (e == cudaSuccess) {
        e = cudaMemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, stream);
        if (e == cudaSuccess)
            e = cudaEventRecord(p->ready, stream);
        if (e == cudaSuccess)
            e = cudaEventRecord(done, stream);
        if (e != cudaSuccess) /* whatever was queued must end before the piece is reused */
            cudaStreamSynchronize(stream);
        stage_put_after(x, done);
    } else {
        stage_put_after(x, NULL); /* nothing queued reads it */
    }
    if (e != cudaSuccess)
        return kvk_cuda_fail("cudaMemcpyAsync(copy program)", e);
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
