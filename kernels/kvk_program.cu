/* kvk_program.cu: copy programs (tasks built here, tables uploaded by kvk_upload.cu), the CUDA
 * error conversion, the public gather/scatter/direct entry points (argument and bounds checks,
 * then one launch), and the completion notification for event loops. The kernel itself is in
 * kvk_copy.cu. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvk_cuda.h"

int kvk_cuda_fail(const char *call, cudaError_t e)
{
    int err;
    switch (e) {
    case cudaErrorMemoryAllocation: err = -ENOMEM; break;
    case cudaErrorInvalidValue:
    case cudaErrorInvalidDevicePointer:
    case cudaErrorInvalidResourceHandle: err = -EINVAL; break;
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
    case cudaErrorInvalidDevice:
    case cudaErrorDevicesUnavailable: err = -ENODEV; break;
    default: err = -EIO; break;
    }
    return kvk_fail(err, "%s: %s (%s)", call, cudaGetErrorString(e), cudaGetErrorName(e));
}

int kvk_device_enter(int device, int *prev)
{
    KVK_TRY(cudaGetDevice(prev));
    if (*prev != device)
        KVK_TRY(cudaSetDevice(device));
    return 0;
}

void kvk_device_leave(int prev)
{
    int cur;
    if (cudaGetDevice(&cur) == cudaSuccess && cur != prev)
        cudaSetDevice(prev);
}

int kvk_device_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        kvk_cuda_fail("cudaGetDeviceCount", e);
        return 0;
    }
    if (n == 0)
        kvk_fail(0, "no CUDA device");
    return n;
}

/* Tuning knobs for benchmarks (kvf_kernels.h): unset or unparsable means the default. */
static uint32_t env_u32(const char *name, uint32_t dflt)
{
    const char *v = getenv(name);
    char *end;
    if (!v || !*v)
        return dflt;
    unsigned long x = strtoul(v, &end, 0);
    return (*end || x > UINT32_MAX) ? dflt : (uint32_t)x;
}

int kvk_program_config(struct kvk_program *p, int device, uint32_t *task_bytes,
                       uint32_t *piece_align)
{
    p->device = device;
    p->threads = (int)env_u32("KVK_THREADS", KVK_THREADS);
    if (p->threads < 64 || p->threads > KVK_THREADS || p->threads % 32)
        return kvk_fail(-EINVAL, "KVK_THREADS=%d: not a multiple of 32 in [64, %d]", p->threads,
                        KVK_THREADS);
    p->fat = env_u32("KVK_FAT", KVK_DEFAULT_FAT) != 0;
    p->unroll = (int)env_u32("KVK_UNROLL", KVK_DEFAULT_UNROLL);
    if (p->unroll != 4 && p->unroll != 8)
        return kvk_fail(-EINVAL, "KVK_UNROLL=%d: 4 or 8", p->unroll);
    *task_bytes = env_u32("KVK_TASK_BYTES", 0);
    *piece_align = env_u32("KVK_PIECE_ALIGN", 0);
    return 0;
}

static int program_new(const struct copy_op *ops, uint32_t n_ops, int device,
                       cudaStream_t stream, struct kvk_program **ret)
{
    if (!ret)
        return kvk_fail(-EINVAL, "kvk_program_new: NULL ret");
    uint64_t t = kvk_step_now();
    struct kvk_program *p = (struct kvk_program *)calloc(1, sizeof(*p));
    if (!p)
        return kvk_fail(-ENOMEM, "kvk_program_new: out of memory");
    uint32_t tb, pa;
    int rc = kvk_program_config(p, device, &tb, &pa);
    if (rc == 0)
        rc = kvk_tasks_index(ops, n_ops, tb, pa, &p->t); /* the GPU expands the tasks */
    if (rc < 0) {
        free(p);
        return rc;
    }
    t = kvk_step(KVK_STEP_HOST, t);
    int prev;
    rc = kvk_device_enter(device, &prev);
    if (rc < 0) {
        kvk_program_free(p);
        return rc;
    }
    t = kvk_step(KVK_STEP_DEVICE, t);
    rc = kvk_launch_shape(p);
    kvk_step(KVK_STEP_HOST, t);
    if (rc == 0)
        rc = kvk_upload(p, stream);
    t = kvk_step_now();
    kvk_device_leave(prev);
    kvk_step(KVK_STEP_DEVICE, t);
    kvk_step_upload_done();
    if (rc < 0) {
        kvk_program_free(p);
        return rc;
    }
    *ret = p;
    return 0;
}

int kvk_program_new(const struct copy_op *ops, uint32_t n_ops, int device,
                    struct kvk_program **ret)
{
    struct kvk_program *p = NULL;
    int rc = program_new(ops, n_ops, device, cudaStreamLegacy, &p);
    if (rc < 0)
        return rc;
    cudaError_t e = cudaEventSynchronize(p->ready); /* complete on return, for every stream */
    if (e != cudaSuccess) {
        kvk_program_free(p);
        return kvk_cuda_fail("cudaEventSynchronize(copy program upload)", e);
    }
    p->uploaded = 1;
    *ret = p;
    return 0;
}

int kvk_program_new_async(const struct copy_op *ops, uint32_t n_ops, int device,
                          struct CUstream_st *stream, struct kvk_program **ret)
{
    return program_new(ops, n_ops, device, stream ? stream : cudaStreamLegacy, ret);
}

int kvk_program_staged(const struct kvk_program *p)
{
    return p && p->staged;
}

struct kvk_program *kvk_program_free(struct kvk_program *p)
{
    if (!p)
        return NULL;
    if (p->from)
        kvk_tmpl_release(p); /* takes d_mem and ready when it keeps them */
    if (p->d_mem || p->ready) {
        int prev;
        if (kvk_device_enter(p->device, &prev) == 0) {
            kvk_upload_free(p);
            kvk_device_leave(prev);
        }
    }
    if (!p->borrowed)
        kvk_tasks_done(&p->t);
    free(p);
    return NULL;
}

uint64_t kvk_program_bytes(const struct kvk_program *p) { return p ? p->t.bytes : 0; }
uint32_t kvk_program_tasks(const struct kvk_program *p) { return p ? p->t.n_tasks : 0; }
int kvk_program_device(const struct kvk_program *p) { return p ? p->device : -1; }

static void set_bases(uint64_t *out, const struct kvk_mem *m)
{
    for (uint32_t i = 0; i < LAYOUT_MAX_POOLS; i++)
        out[i] = (m && i < m->n) ? m->base[i] : 0;
}

static int run(const struct kvk_program *p, kvk_mode_t mode, const struct kvk_mem *src,
               const struct kvk_mem *dst, uint64_t lo, uint64_t hi, uint64_t ext,
               cudaStream_t stream)
{
    if (!p)
        return kvk_fail(-EINVAL, "NULL program");
    if (lo > hi || hi > p->t.bytes)
        return kvk_fail(-EINVAL, "range [%llu, %llu) outside extent of %llu bytes",
                        (unsigned long long)lo, (unsigned long long)hi,
                        (unsigned long long)p->t.bytes);
    if (mode != KVK_DIRECT && hi > lo && ext == 0)
        return kvk_fail(-EINVAL, "NULL extent buffer");
    int rc;
    if (mode != KVK_SCATTER && (rc = kvk_tasks_check_mem(&p->t, src, 's')) < 0)
        return rc;
    if (mode != KVK_GATHER && (rc = kvk_tasks_check_mem(&p->t, dst, 'd')) < 0)
        return rc;
    if (lo == hi)
        return 0;
    struct kvk_args a;
    memset(&a, 0, sizeof(a));
    a.tasks = p->d_tasks;
    a.ops = p->d_ops;
    a.ftasks = p->d_ftasks;
    kvk_tasks_range(&p->t, lo, hi, &a.first, &a.n);
    a.mode = mode;
    a.lo = lo;
    a.hi = hi;
    a.ext = ext;
    set_bases(a.src, src);
    set_bases(a.dst, dst);
    int prev;
    if ((rc = kvk_device_enter(p->device, &prev)) < 0)
        return rc;
    if (!p->uploaded && stream != p->up_stream) { /* another stream: after the upload */
        cudaError_t e = cudaStreamWaitEvent(stream, p->ready, 0);
        if (e != cudaSuccess) {
            kvk_device_leave(prev);
            return kvk_cuda_fail("cudaStreamWaitEvent(copy program upload)", e);
        }
    }
    rc = kvk_launch(p, &a, stream);
    kvk_device_leave(prev);
    return rc;
}

int kvk_gather(const struct kvk_program *p, const struct kvk_mem *src, uint64_t lo, uint64_t hi,
               void *out, struct CUstream_st *stream)
{
    return run(p, KVK_GATHER, src, NULL, lo, hi, (uint64_t)(uintptr_t)out, stream);
}

int kvk_scatter(const struct kvk_program *p, const void *in, uint64_t lo, uint64_t hi,
                const struct kvk_mem *dst, struct CUstream_st *stream)
{
    return run(p, KVK_SCATTER, NULL, dst, lo, hi, (uint64_t)(uintptr_t)in, stream);
}

int kvk_direct(const struct kvk_program *p, const struct kvk_mem *src, const struct kvk_mem *dst,
               struct CUstream_st *stream)
{
    return run(p, KVK_DIRECT, src, dst, 0, p ? p->t.bytes : 0, 0, stream);
}

int kvk_direct_range(const struct kvk_program *p, const struct kvk_mem *src, uint64_t lo,
                     uint64_t hi, const struct kvk_mem *dst, struct CUstream_st *stream)
{
    return run(p, KVK_DIRECT, src, dst, lo, hi, 0, stream);
}

struct notify {
    kvk_done_cb fn;
    void *arg;
};

static void CUDART_CB notify_trampoline(void *data)
{
    struct notify n = *(struct notify *)data;
    free(data);
    n.fn(n.arg);
}

int kvk_notify_on_complete(struct CUstream_st *stream, kvk_done_cb fn, void *arg)
{
    if (!fn)
        return kvk_fail(-EINVAL, "NULL callback");
    struct notify *n = (struct notify *)malloc(sizeof(*n));
    if (!n)
        return kvk_fail(-ENOMEM, "kvk_notify_on_complete: out of memory");
    n->fn = fn;
    n->arg = arg;
    cudaError_t e = cudaLaunchHostFunc(stream, notify_trampoline, n);
    if (e != cudaSuccess) {
        free(n);
        return kvk_cuda_fail("cudaLaunchHostFunc", e);
    }
    return 0;
}
