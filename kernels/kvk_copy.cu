/* kvk_copy.cu: the copy kernel behind kvk_gather/kvk_scatter/kvk_direct. One launch covers a
 * whole chunk: a persistent grid (at most the resident blocks) walks the chunk's tasks; a block
 * copies one task at a time with all its threads.
 *   - a task inside one run: one contiguous segment: head bytes, then 16-byte accesses when
 *     source and destination are 16-aligned relative to each other (else the widest width they
 *     share: 8, 4, 2, 1), then tail bytes;
 *   - a task of several short runs: flat over its bytes at the widest width every address,
 *     stride and length allows, run index by 32-bit division.
 * On sm_90 the kernel is launched with programmatic dependent launch: it reads its (immutable)
 * task descriptors, then waits for the previous kernel in the stream (griddepcontrol.wait)
 * before touching any data, so back-to-back chunk launches overlap their prologues. */
#include <string.h>

#include "kvk_cuda.h"

template <typename T>
__device__ __forceinline__ void body_copy(const T *__restrict__ s, T *__restrict__ d, uint64_t n)
{
    const uint32_t st = blockDim.x;
    uint64_t i = threadIdx.x;
    for (; i + 3 * st < n; i += 4 * st) {
        T a0 = s[i], a1 = s[i + st], a2 = s[i + 2 * st], a3 = s[i + 3 * st];
        d[i] = a0;
        d[i + st] = a1;
        d[i + 2 * st] = a2;
        d[i + 3 * st] = a3;
    }
    for (; i < n; i += st)
        d[i] = s[i];
}

/* n bytes, s and d congruent modulo sizeof(T): head to align, body of T, tail. */
template <typename T>
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
    body_copy<T>((const T *)s, (T *)d, units);
    uint64_t tail = n - units * w;
    if (threadIdx.x < tail)
        d[units * w + threadIdx.x] = s[units * w + threadIdx.x];
}

__device__ __forceinline__ void copy_segment(const uint8_t *s, uint8_t *d, uint64_t n)
{
    uint32_t x = (uint32_t)(((uintptr_t)s ^ (uintptr_t)d) & 15);
    if (x == 0)
        seg_copy<uint4>(s, d, n);
    else if ((x & 7) == 0)
        seg_copy<uint2>(s, d, n);
    else if ((x & 3) == 0)
        seg_copy<uint32_t>(s, d, n);
    else if ((x & 1) == 0)
        seg_copy<uint16_t>(s, d, n);
    else
        seg_copy<uint8_t>(s, d, n);
}

/* Bytes [j0, j0 + n) of the run sequence starting at s / d (run kk at s + kk * ss), every address
 * a multiple of sizeof(T). len < task size <= KVK_TASK_MAX, so positions fit 32 bits. */
template <typename T>
__device__ __forceinline__ void runs_copy(const uint8_t *s, int64_t ss, uint8_t *d, int64_t ds,
                                          uint32_t len, uint32_t j0, uint32_t n)
{
    const uint32_t w = sizeof(T), st = blockDim.x, units = n / w;
    uint32_t i = threadIdx.x;
    for (; i + st < units; i += 2 * st) {
        uint32_t r0 = j0 + i * w, r1 = j0 + (i + st) * w;
        uint32_t k0 = r0 / len, k1 = r1 / len;
        const T v0 = *(const T *)(s + (int64_t)k0 * ss + (r0 - k0 * len));
        const T v1 = *(const T *)(s + (int64_t)k1 * ss + (r1 - k1 * len));
        *(T *)(d + (int64_t)k0 * ds + (r0 - k0 * len)) = v0;
        *(T *)(d + (int64_t)k1 * ds + (r1 - k1 * len)) = v1;
    }
    for (; i < units; i += st) {
        uint32_t r = j0 + i * w, k = r / len;
        *(T *)(d + (int64_t)k * ds + (r - k * len)) = *(const T *)(s + (int64_t)k * ss + (r - k * len));
    }
}

template <int MODE>
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
    const uint8_t *s = (const uint8_t *)sa;
    uint8_t *d = (uint8_t *)da;
    if (j0 + n <= op.len) {
        copy_segment(s + j0, d + j0, n);
        return;
    }
    uint32_t bits = op.align | (uint32_t)sa | (uint32_t)da | (uint32_t)j0 | (uint32_t)n | 16u;
    uint32_t w = bits & (0u - bits);
    uint32_t len = (uint32_t)op.len, j = (uint32_t)j0, nn = (uint32_t)n;
    switch (w) {
    case 16: runs_copy<uint4>(s, ss, d, ds, len, j, nn); break;
    case 8: runs_copy<uint2>(s, ss, d, ds, len, j, nn); break;
    case 4: runs_copy<uint32_t>(s, ss, d, ds, len, j, nn); break;
    case 2: runs_copy<uint16_t>(s, ss, d, ds, len, j, nn); break;
    default: runs_copy<uint8_t>(s, ss, d, ds, len, j, nn); break;
    }
}

template <int MODE>
__global__ void __launch_bounds__(KVK_THREADS, 2) kvk_copy_kernel(const __grid_constant__ kvk_args a)
{
    uint32_t t = blockIdx.x;
    kvk_task task = a.tasks[a.first + t];
    kvk_op op = a.ops[task.op];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
    for (;;) {
        /* issue the next task's descriptor loads before copying this one */
        uint32_t nt = t + gridDim.x;
        kvk_task next = task;
        if (nt < a.n)
            next = a.tasks[a.first + nt];
        run_task<MODE>(a, task, op);
        if (nt >= a.n)
            break;
        t = nt;
        task = next;
        op = a.ops[task.op];
    }
}

int kvk_blocks_per_sm(int threads, int *ret)
{
    int g = 0, s = 0, d = 0;
    KVK_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &g, (const void *)kvk_copy_kernel<KVK_GATHER>, threads, 0));
    KVK_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &s, (const void *)kvk_copy_kernel<KVK_SCATTER>, threads, 0));
    KVK_TRY(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
        &d, (const void *)kvk_copy_kernel<KVK_DIRECT>, threads, 0));
    int m = g < s ? g : s;
    m = m < d ? m : d;
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
    const void *fn = a->mode == KVK_GATHER    ? (const void *)kvk_copy_kernel<KVK_GATHER>
                     : a->mode == KVK_SCATTER ? (const void *)kvk_copy_kernel<KVK_SCATTER>
                                              : (const void *)kvk_copy_kernel<KVK_DIRECT>;
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
