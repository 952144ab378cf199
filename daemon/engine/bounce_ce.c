/* bounce_ce.c: GPU bounce chunks through a device scratch and the copy engines (bounce_ce.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounce_ce.h"
#include "gpu_progcache.h"
#include "move_exec.h"

struct bce_scratch {
    void *dev; /* device memory of its device, stream-ordered; NULL: none yet */
    uint64_t len;
};

struct bce_table {
    struct bce_scratch s[GPU_MAX_DEVICES][GPU_STREAMS_PER_DEVICE];
};

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

static int cuda_failed(const struct exec_gpu *x, const char *what, cudaError_t e, char *msg,
                       size_t len)
{
    (void)cudaGetLastError();
    snprintf(msg, len, "GPU %d: %s: %s", x->device, what, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

/* The device is current for the copies and the scratch (restored after). */
static int dev_enter(int device, int *prev)
{
    *prev = -1;
    cudaError_t e = cudaGetDevice(prev);
    if (e == cudaSuccess && *prev != device)
        e = cudaSetDevice(device);
    return e == cudaSuccess ? 0 : -EIO;
}

static void dev_leave(int device, int prev)
{
    if (prev >= 0 && prev != device)
        cudaSetDevice(prev);
}

/* The scratch of x's stream, holding at least n bytes (a smaller one is freed in stream order:
 * every use of it so far is queued before). */
static int scratch_for(struct bce_table **t, const struct exec_gpu *x, uint64_t n, void **ret,
                       char *msg, size_t len)
{
    int si = -1;
    for (int i = 0; i < GPU_STREAMS_PER_DEVICE && si < 0; i++)
        if (gpu_stream(x->g, x->device, (unsigned)i) == x->stream)
            si = i;
    if (si < 0 || x->device < 0 || x->device >= GPU_MAX_DEVICES) {
        snprintf(msg, len, "GPU %d: a copy-engine chunk on a stream that is not the daemon's",
                 x->device);
        return -EINVAL;
    }
    if (!*t && !(*t = calloc(1, sizeof **t))) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    struct bce_scratch *s = &(*t)->s[x->device][si];
    cudaStream_t st = (cudaStream_t)x->stream;
    if (!s->dev || s->len < n) {
        if (s->dev)
            cudaFreeAsync(s->dev, st);
        s->dev = NULL;
        s->len = 0;
        cudaError_t e = cudaMallocAsync(&s->dev, n, st);
        if (e != cudaSuccess) {
            s->dev = NULL;
            return cuda_failed(x, "scratch for a chunk (cudaMallocAsync)", e, msg, len);
        }
        s->len = n;
    }
    *ret = s->dev;
    return 0;
}

static int queued(struct exec_gpu *x, gpu_done_cb done, void *user, char *msg, size_t len)
{
    char err[GPU_REASON_MAX + 64];
    int rc = gpu_notify(x->g, x->device, x->stream, done, user, err, sizeof err);
    if (rc < 0) { /* nothing may be freed under the copies: wait for them here */
        cudaStreamSynchronize((cudaStream_t)x->stream);
        (void)cudaGetLastError();
        snprintf(msg, len, "GPU completion on device %d: %s", x->device, err);
        return rc;
    }
    return MOVE_STARTED;
}

static int gather_on(struct bce_table **t, struct exec_gpu *x, uint64_t lo, uint64_t hi,
                     uint8_t *out, gpu_done_cb done, void *user, char *msg, size_t len)
{
    void *d;
    int rc = scratch_for(t, x, hi - lo, &d, msg, len);
    if (rc < 0)
        return rc;
    rc = kvk_gather(gpu_prog_obj(x->prog), &x->src, lo, hi, d, x->stream);
    if (rc < 0) {
        snprintf(msg, len, "GPU gather on device %d: %s", x->device, kvk_last_error());
        return rc;
    }
    cudaError_t e =
        cudaMemcpyAsync(out, d, hi - lo, cudaMemcpyDeviceToHost, (cudaStream_t)x->stream);
    if (e != cudaSuccess) { /* the gather is queued: its stream is waited for before failing */
        cudaStreamSynchronize((cudaStream_t)x->stream);
        return cuda_failed(x, "copying a gathered chunk to host (cudaMemcpyAsync)", e, msg, len);
    }
    return queued(x, done, user, msg, len);
}

static int scatter_on(struct bce_table **t, struct exec_gpu *x, const uint8_t *in, uint64_t lo,
                      uint64_t hi, gpu_done_cb done, void *user, char *msg, size_t len)
{
    void *d;
    int rc = scratch_for(t, x, hi - lo, &d, msg, len);
    if (rc < 0)
        return rc;
    cudaError_t e =
        cudaMemcpyAsync(d, in, hi - lo, cudaMemcpyHostToDevice, (cudaStream_t)x->stream);
    if (e != cudaSuccess)
        return cuda_failed(x, "copying a landed chunk to the GPU (cudaMemcpyAsync)", e, msg, len);
    rc = kvk_scatter(gpu_prog_obj(x->prog), d, lo, hi, &x->dst, x->stream);
    if (rc < 0) { /* the copy is queued: waited for before failing */
        cudaStreamSynchronize((cudaStream_t)x->stream);
        snprintf(msg, len, "GPU scatter on device %d: %s", x->device, kvk_last_error());
        return rc;
    }
    return queued(x, done, user, msg, len);
}

int bce_gather(struct bce_table **t, struct exec_gpu *x, uint64_t lo, uint64_t hi, uint8_t *out,
               gpu_done_cb done, void *user, char *msg, size_t len)
{
    int prev;
    if (dev_enter(x->device, &prev) < 0) {
        snprintf(msg, len, "GPU %d: cannot be made current", x->device);
        return -EIO;
    }
    int rc = gather_on(t, x, lo, hi, out, done, user, msg, len);
    dev_leave(x->device, prev);
    return rc;
}

int bce_scatter(struct bce_table **t, struct exec_gpu *x, const uint8_t *in, uint64_t lo,
                uint64_t hi, gpu_done_cb done, void *user, char *msg, size_t len)
{
    int prev;
    if (dev_enter(x->device, &prev) < 0) {
        snprintf(msg, len, "GPU %d: cannot be made current", x->device);
        return -EIO;
    }
    int rc = scatter_on(t, x, in, lo, hi, done, user, msg, len);
    dev_leave(x->device, prev);
    return rc;
}

void bce_free(struct bce_table **t, struct gpu *g)
{
    if (!*t)
        return;
    for (int d = 0; d < GPU_MAX_DEVICES; d++)
        for (int i = 0; i < GPU_STREAMS_PER_DEVICE; i++) {
            struct bce_scratch *s = &(*t)->s[d][i];
            int prev;
            if (!s->dev || dev_enter(d, &prev) < 0)
                continue;
            cudaFreeAsync(s->dev, (cudaStream_t)gpu_stream(g, d, (unsigned)i));
            (void)cudaGetLastError();
            dev_leave(d, prev);
        }
    free(*t);
    *t = NULL;
}

#else /* !KVF_HAVE_CUDA: no GPU job is ever made */

int bce_gather(struct bce_table **t, struct exec_gpu *x, uint64_t lo, uint64_t hi, uint8_t *out,
               gpu_done_cb done, void *user, char *msg, size_t len)
{
    (void)t, (void)x, (void)lo, (void)hi, (void)out, (void)done, (void)user;
    snprintf(msg, len, "this kvferryd was built without CUDA");
    return -ENOTSUP;
}

int bce_scatter(struct bce_table **t, struct exec_gpu *x, const uint8_t *in, uint64_t lo,
                uint64_t hi, gpu_done_cb done, void *user, char *msg, size_t len)
{
    (void)t, (void)x, (void)in, (void)lo, (void)hi, (void)done, (void)user;
    snprintf(msg, len, "this kvferryd was built without CUDA");
    return -ENOTSUP;
}

void bce_free(struct bce_table **t, struct gpu *g)
{
    (void)g;
    free(*t);
    *t = NULL;
}

#endif
