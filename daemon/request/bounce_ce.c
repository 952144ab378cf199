/* bounce_ce.c: GPU bounce chunks through a device scratch and the copy engines (bounce_ce.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounce_ce.h"
#include "gpu_progcache.h"
#include "move_exec.h"

int bce_wanted(void)
{
    const char *s = getenv("KVF_BOUNCE_CE");
    return s && strcmp(s, "1") == 0;
}

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

static int cuda_failed(const struct exec_gpu *x, const char *what, cudaError_t e, char *msg,
                       size_t len)
{
    (void)cudaGetLastError();
    snprintf(msg, len, "GPU %d: %s: %s", x->device, what, cudaGetErrorString(e));
    return e == cudaErrorMemoryAllocation ? -ENOMEM : -EIO;
}

/* The binding's device is current for the copies and the scratch (restored after). */
static int dev_enter(const struct exec_gpu *x, int *prev, char *msg, size_t len)
{
    *prev = -1;
    cudaError_t e = cudaGetDevice(prev);
    if (e == cudaSuccess && *prev != x->device)
        e = cudaSetDevice(x->device);
    return e == cudaSuccess ? 0 : cuda_failed(x, "making the device current", e, msg, len);
}

static void dev_leave(const struct exec_gpu *x, int prev)
{
    if (prev >= 0 && prev != x->device)
        cudaSetDevice(prev);
}

/* The scratch holds at least n bytes (a smaller one is freed in stream order). */
static int scratch_fit(struct exec_gpu *x, struct bce_scratch *s, uint64_t n, char *msg,
                       size_t len)
{
    if (s->dev && s->len >= n)
        return 0;
    bce_scratch_free(x, s);
    cudaError_t e = cudaMallocAsync(&s->dev, n, (cudaStream_t)x->stream);
    if (e != cudaSuccess) {
        s->dev = NULL;
        return cuda_failed(x, "scratch for a chunk (cudaMallocAsync)", e, msg, len);
    }
    s->len = n;
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

static int gather_on(struct exec_gpu *x, struct bce_scratch *s, uint64_t lo, uint64_t hi,
                     uint8_t *out, gpu_done_cb done, void *user, char *msg, size_t len)
{
    int rc = scratch_fit(x, s, hi - lo, msg, len);
    if (rc < 0)
        return rc;
    rc = kvk_gather(gpu_prog_obj(x->prog), &x->src, lo, hi, s->dev, x->stream);
    if (rc < 0) {
        snprintf(msg, len, "GPU gather on device %d: %s", x->device, kvk_last_error());
        return rc;
    }
    cudaError_t e = cudaMemcpyAsync(out, s->dev, hi - lo, cudaMemcpyDeviceToHost,
                                    (cudaStream_t)x->stream);
    if (e != cudaSuccess) { /* the gather is queued: its stream is waited for before failing */
        cudaStreamSynchronize((cudaStream_t)x->stream);
        return cuda_failed(x, "copying a gathered chunk to host (cudaMemcpyAsync)", e, msg, len);
    }
    return queued(x, done, user, msg, len);
}

static int scatter_on(struct exec_gpu *x, struct bce_scratch *s, const uint8_t *in, uint64_t lo,
                      uint64_t hi, gpu_done_cb done, void *user, char *msg, size_t len)
{
    int rc = scratch_fit(x, s, hi - lo, msg, len);
    if (rc < 0)
        return rc;
    cudaError_t e = cudaMemcpyAsync(s->dev, in, hi - lo, cudaMemcpyHostToDevice,
                                    (cudaStream_t)x->stream);
    if (e != cudaSuccess)
        return cuda_failed(x, "copying a landed chunk to the GPU (cudaMemcpyAsync)", e, msg, len);
    rc = kvk_scatter(gpu_prog_obj(x->prog), s->dev, lo, hi, &x->dst, x->stream);
    if (rc < 0) { /* the copy is queued: waited for before failing */
        cudaStreamSynchronize((cudaStream_t)x->stream);
        snprintf(msg, len, "GPU scatter on device %d: %s", x->device, kvk_last_error());
        return rc;
    }
    return queued(x, done, user, msg, len);
}

int bce_gather(struct exec_gpu *x, struct bce_scratch *s, uint64_t lo, uint64_t hi, uint8_t *out,
               gpu_done_cb done, void *user, char *msg, size_t len)
{
    int prev, rc = dev_enter(x, &prev, msg, len);
    if (rc == 0)
        rc = gather_on(x, s, lo, hi, out, done, user, msg, len);
    dev_leave(x, prev);
    return rc;
}

int bce_scatter(struct exec_gpu *x, struct bce_scratch *s, const uint8_t *in, uint64_t lo,
                uint64_t hi, gpu_done_cb done, void *user, char *msg, size_t len)
{
    int prev, rc = dev_enter(x, &prev, msg, len);
    if (rc == 0)
        rc = scatter_on(x, s, in, lo, hi, done, user, msg, len);
    dev_leave(x, prev);
    return rc;
}

void bce_scratch_free(struct exec_gpu *x, struct bce_scratch *s)
{
    char msg[128];
    int prev;
    if (!s->dev || dev_enter(x, &prev, msg, sizeof msg) < 0)
        return;
    if (cudaFreeAsync(s->dev, (cudaStream_t)x->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaStreamSynchronize((cudaStream_t)x->stream);
        cudaFree(s->dev);
        (void)cudaGetLastError();
    }
    dev_leave(x, prev);
    s->dev = NULL;
    s->len = 0;
}

#else /* !KVF_HAVE_CUDA: no GPU job is ever made */

int bce_gather(struct exec_gpu *x, struct bce_scratch *s, uint64_t lo, uint64_t hi, uint8_t *out,
               gpu_done_cb done, void *user, char *msg, size_t len)
{
    (void)x, (void)s, (void)lo, (void)hi, (void)out, (void)done, (void)user;
    snprintf(msg, len, "this kvferryd was built without CUDA");
    return -ENOTSUP;
}

int bce_scatter(struct exec_gpu *x, struct bce_scratch *s, const uint8_t *in, uint64_t lo,
                uint64_t hi, gpu_done_cb done, void *user, char *msg, size_t len)
{
    (void)x, (void)s, (void)in, (void)lo, (void)hi, (void)done, (void)user;
    snprintf(msg, len, "this kvferryd was built without CUDA");
    return -ENOTSUP;
}

void bce_scratch_free(struct exec_gpu *x, struct bce_scratch *s)
{
    (void)x;
    s->dev = NULL;
}

#endif
