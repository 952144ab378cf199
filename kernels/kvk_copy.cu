/* kvk_copy.cu: the copy kernels behind kvk_gather/kvk_scatter/kvk_direct. One launch covers a
 * whole chunk: a persistent grid (at most the resident blocks) walks the chunk's tasks; a block
 * copies one task at a time with all its threads.
 *   - a task inside one run: one contiguous segment: head bytes, then 16-byte accesses when
 *     source and destination are 16-aligned relative to each other (else the widest width they
 *     share: 8, 4, 2, 1), U loads in flight per thread, then tail bytes;
 *   - a task of several short runs: flat over its bytes at the widest width every address,
 *     stride and length allows, run index by 32-bit division.
 * Two kernel families find a task's addresses: "op" reads a 16-byte task and then its op (two
 * dependent loads); "fat" reads a self-contained 64-byte task, prefetched into shared memory
 * with cp.async one task ahead, so a block never waits on a descriptor between tasks.
 * On sm_90 the kernels are launched with programmatic dependent launch: a grid may start while
 * the previous kernel of the stream ends, and waits for it (griddepcontrol.wait) before reading
 * anything, descriptors included: the previous kernel may be the one that wrote the program's
 * task table (kvk_upload.cu), so back-to-back chunk launches overlap only their start-up. */
#include <string.h>

#include "kvk_cuda.h"

template <typename T, int U>
__device__ __forceinline__ void body_copy(const T *__restrict__ s, T *__restrict__ d, uint64_t n)
{
    const uint32_t st = blockDim.x;
    uint64_t i = threadIdx.x;
    for (; i + (U - 1) * (uint64_t)st < n; i += U * (uint64_t)st) {
        T v[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            v[u] = s[i + u * st];
#pragma unroll
        for (int u = 0; u < U; u++)
            d[i + u * st] = v[u];
    }
    for (; i < n; i += st)
        d[i] = s[i];
}

/* n bytes, s and d congruent modulo sizeof(T): head to align, body of T, tail. */
template <typename T, int U>
__device__ __forceinline__ void seg_copy(const uint8_t *s, uint8_t *d, uint64_t n)
{
    const uint64_t w = sizeof(T);
    uint64_t head = (w - ((uintptr_t)s & (w - 1))) & (w - 1);
    if (head > n)
        head = n;
    if (threadIdx.x < head)
        d[threadIdx.x] = s[threadIdx.x];
    s += head;
    d += head;
    n -= head;
    uint64_t units = n / w;
    body_copy<T, U>((const T *)s, (T *)d, units);
    uint64_t tail = n - units * w;
    if (threadIdx.x < tail)
        d[units * w + threadIdx.x] = s[units * w + threadIdx.x];
}

template <int U>
__device__ __forceinline__ void copy_segment(const uint8_t *s, uint8_t *d, uint64_t n)
{
    uint32_t x = (uint32_t)(((uintptr_t)s ^ (uintptr_t)d) & 15);
    if (x == 0)
        seg_copy<uint4, U>(s, d, n);
    else if ((x & 7) == 0)
        seg_copy<uint2, U>(s, d, n);
    else if ((x & 3) == 0)
        seg_copy<uint32_t, 4>(s, d, n);
    else if ((x & 1) == 0)
        seg_copy<uint16_t, 4>(s, d, n);
    else
        seg_copy<uint8_t, 4>(s, d, n);
}

/* Bytes [r0, r0 + n) of the run sequence whose run 0 starts at s / d (run kk at s + kk * ss),
 * every address a multiple of sizeof(T). r0 + n < 2 * KVK_TASK_MAX: positions fit 32 bits. */
template <typename T>
__device__ __forceinline__ void runs_copy(const uint8_t *s, int64_t ss, uint8_t *d, int64_t ds,
                                          uint32_t len, uint32_t r0, uint32_t n)
{
    const uint32_t w = sizeof(T), st = blockDim.x, units = n / w;
    uint32_t i = threadIdx.x;
    for (; i + st < units; i += 2 * st) {
        uint32_t p0 = r0 + i * w, p1 = r0 + (i + st) * w;
        uint32_t k0 = p0 / len, k1 = p1 / len;
        const T v0 = *(const T *)(s + (int64_t)k0 * ss + (p0 - k0 * len));
        const T v1 = *(const T *)(s + (int64_t)k1 * ss + (p1 - k1 * len));
        *(T *)(d + (int64_t)k0 * ds + (p0 - k0 * len)) = v0;
        *(T *)(d + (int64_t)k1 * ds + (p1 - k1 * len)) = v1;
    }
    for (; i < units; i += st) {
        uint32_t p = r0 + i * w, k = p / len;
        *(T *)(d + (int64_t)k * ds + (p - k * len)) = *(const T *)(s + (int64_t)k * ss + (p - k * len));
    }
}

/* Several runs: sa / da address byte 0 of the first run; align: the op's offset alignment. */
__device__ __forceinline__ void copy_runs(uint64_t sa, int64_t ss, uint64_t da, int64_t ds,
                                          uint32_t len, uint32_t r0, uint32_t n, uint32_t align)
{
    const uint8_t *s = (const uint8_t *)sa;
    uint8_t *d = (uint8_t *)da;
    uint32_t bits = align | (uint32_t)sa | (uint32_t)da | r0 | n | 16u;
    switch (bits & (0u - bits)) {
    case 16: runs_copy<uint4>(s, ss, d, ds, len, r0, n); break;
    case 8: runs_copy<uint2>(s, ss, d, ds, len, r0, n); break;
    case 4: runs_copy<uint32_t>(s, ss, d, ds, len, r0, n); break;
    case 2: runs_copy<uint16_t>(s, ss, d, ds, len, r0, n); break;
    default: runs_copy<uint8_t>(s, ss, d, ds, len, r0, n); break;
    }
}

/* ---- "op" family: task (16 B) -> op (64 B) ---- */

template <int MODE, int U>
__device__ __forceinline__ void run_task(const kvk_args &a, const kvk_task &t, const kvk_op &op)
{
    uint64_t ts = op.ext_off + t.pos, te = ts + t.bytes;
    uint64_t cs = ts > a.lo ? ts : a.lo, ce = te < a.hi ? te : a.hi;
    if (cs >= ce)
        return;
    uint64_t pos = t.pos + (cs - ts), n = ce - cs;
    uint64_t k0 = pos / op.len, j0 = pos - k0 * op.len;
    /* address of byte 0 of run k0 on each side (extent side: wraps below a.ext, fine mod 2^64) */
    uint64_t ext_run = a.ext + (op.ext_off + k0 * op.len - a.lo);
    uint64_t sa, da;
    int64_t ss, ds;
    if (MODE == KVK_SCATTER) {
        sa = ext_run;
        ss = (int64_t)op.len;
    } else {
        sa = a.src[op.src_pool] + op.src_off + (uint64_t)((int64_t)k0 * op.src_stride);
        ss = op.src_stride;
    }
    if (MODE == KVK_GATHER) {
        da = ext_run;
        ds = (int64_t)op.len;
    } else {
        da = a.dst[op.dst_pool] + op.dst_off + (uint64_t)((int64_t)k0 * op.dst_stride);
        ds = op.dst_stride;
    }
    if (j0 + n <= op.len)
        copy_segment<U>((const uint8_t *)sa + j0, (uint8_t *)da + j0, n);
    else
        copy_runs(sa, ss, da, ds, (uint32_t)op.len, (uint32_t)j0, (uint32_t)n, op.align);
}

__device__ __forceinline__ void grid_dependency_sync(void)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

template <int MODE, int U>
__global__ void __launch_bounds__(KVK_THREADS, U == 8 ? 1 : 2) kvk_op_kernel(const __grid_constant__ kvk_args a)
{
    uint32_t t = blockIdx.x;
    grid_dependency_sync(); /* before any descriptor: the tables may be written just before */
    kvk_task task = a.tasks[a.first + t];
    kvk_op op = a.ops[task.op];
    for (;;) {
        uint32_t nt = t + gridDim.x; /* issue the next task's load before copying this one */
        kvk_task next = task;
        if (nt < a.n)
            next = a.tasks[a.first + nt];
        run_task<MODE, U>(a, task, op);
        if (nt >= a.n)
            break;
        t = nt;
        task = next;
        op = a.ops[task.op];
    }
}

/* ---- "fat" family: one self-contained 64-byte task, prefetched into shared memory ---- */

__device__ __forceinline__ void ftask_prefetch(kvk_ftask *smem, const kvk_ftask *g)
{
    if (threadIdx.x < sizeof(kvk_ftask) / 16) {
        unsigned dst = (unsigned)__cvta_generic_to_shared((char *)smem + 16 * threadIdx.x);
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst),
                     "l"((const char *)g + 16 * threadIdx.x)
                     : "memory");
        asm volatile("cp.async.commit_group;" ::: "memory");
    }
}

template <int MODE, int U>
__device__ __forceinline__ void run_ftask(const kvk_args &a, const kvk_ftask &f)
{
    uint64_t ts = f.ext_pos, te = ts + f.bytes;
    uint64_t cs = ts > a.lo ? ts : a.lo, ce = te < a.hi ? te : a.hi;
    if (cs >= ce)
        return;
    uint64_t delta = cs - ts, n = ce - cs;
    uint64_t ext0 = a.ext + (ts - a.lo); /* extent address of the task's first byte */
    uint64_t sa = MODE == KVK_SCATTER ? ext0 : a.src[f.src_pool] + f.src_pos;
    uint64_t da = MODE == KVK_GATHER ? ext0 : a.dst[f.dst_pool] + f.dst_pos;
    if (f.len == 0) {
        copy_segment<U>((const uint8_t *)sa + delta, (uint8_t *)da + delta, n);
        return;
    }
    int64_t ss = MODE == KVK_SCATTER ? (int64_t)f.len : f.src_stride;
    int64_t ds = MODE == KVK_GATHER ? (int64_t)f.len : f.dst_stride;
    copy_runs(sa - f.j0, ss, da - f.j0, ds, f.len, f.j0 + (uint32_t)delta, (uint32_t)n, f.align);
}

template <int MODE, int U>
__global__ void __launch_bounds__(KVK_THREADS, U == 8 ? 1 : 2) kvk_fat_kernel(const __grid_constant__ kvk_args a)
{
    __shared__ __align__(16) kvk_ftask buf[2];
    const kvk_ftask *tasks = a.ftasks + a.first;
    uint32_t t = blockIdx.x;
    int cur = 0;
    grid_dependency_sync(); /* before any descriptor: the tables may be written just before */
    ftask_prefetch(&buf[0], &tasks[t]);
    for (;;) {
        asm volatile("cp.async.wait_all;" ::: "memory");
        __syncthreads(); /* buf[cur] is in; every thread is done with buf[cur ^ 1] */
        uint32_t nt = t + gridDim.x;
        if (nt < a.n)
            ftask_prefetch(&buf[cur ^ 1], &tasks[nt]);
        run_ftask<MODE, U>(a, buf[cur]);
        if (nt >= a.n)
            break;
        t = nt;
        cur ^= 1;
    }
}

typedef void (*kernel_fn)(kvk_args);

/* [fat][unroll 8][mode] */
static const kernel_fn kernels[2][2][3] = {
    {{kvk_op_kernel<KVK_GATHER, 4>, kvk_op_kernel<KVK_SCATTER, 4>, kvk_op_kernel<KVK_DIRECT, 4>},
     {kvk_op_kernel<KVK_GATHER, 8>, kvk_op_kernel<KVK_SCATTER, 8>, kvk_op_kernel<KVK_DIRECT, 8>}},
    {{kvk_fat_kernel<KVK_GATHER, 4>, kvk_fat_kernel<KVK_SCATTER, 4>,
      kvk_fat_kernel<KVK_DIRECT, 4>},
     {kvk_fat_kernel<KVK_GATHER, 8>, kvk_fat_kernel<KVK_SCATTER, 8>,
      kvk_fat_kernel<KVK_DIRECT, 8>}},
};

static kernel_fn kernel_of(const struct kvk_program *p, int mode)
{
    return kernels[p->fat ? 1 : 0][p->unroll == 8 ? 1 : 0][mode];
}

int kvk_blocks_per_sm(const struct kvk_program *p, int *ret)
{
    int m = 1 << 30;
    for (int mode = 0; mode < 3; mode++) {
        int b = 0;
        KVK_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
            &b, (const void *)kernel_of(p, mode), p->threads, 0));
        m = b < m ? b : m;
    }
    *ret = m < 1 ? 1 : m;
    return 0;
}

int kvk_launch(const struct kvk_program *p, struct kvk_args *a, cudaStream_t stream)
{
    if (a->n == 0)
        return 0;
    uint32_t cap = (uint32_t)p->sm_count * (uint32_t)p->blocks_per_sm;
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.gridDim = dim3(a->n < cap ? a->n : cap);
    cfg.blockDim = dim3((unsigned)p->threads);
    cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr;
    cfg.numAttrs = p->pdl ? 1 : 0;
    void *params[1] = {a};
    const void *fn = (const void *)kernel_of(p, (int)a->mode);
    cudaError_t e = cudaLaunchKernelExC(&cfg, fn, params);
    if (e != cudaSuccess && cfg.numAttrs > 0) { /* PDL refused here: launch plainly */
        (void)cudaGetLastError();
        cfg.numAttrs = 0;
        e = cudaLaunchKernelExC(&cfg, fn, params);
    }
    if (e != cudaSuccess)
        return kvk_cuda_fail("cudaLaunchKernelExC(copy kernel)", e);
    return 0;
}

int kvk_warm(int device)
{
    int prev, rc = kvk_device_enter(device, &prev);
    if (rc < 0)
        return rc;
    struct kvk_program p;
    memset(&p, 0, sizeof(p));
    p.threads = KVK_THREADS;
    for (int fat = 0; fat < 2 && rc == 0; fat++)
        for (int u = 0; u < 2 && rc == 0; u++) {
            int b;
            p.fat = fat;
            p.unroll = u ? 8 : 4;
            rc = kvk_blocks_per_sm(&p, &b);
        }
    if (rc == 0)
        rc = kvk_stage_init(); /* the upload staging, before the first request */
    if (rc == 0)
        rc = kvk_upload_warm(device);
    kvk_device_leave(prev);
    return rc;
}
