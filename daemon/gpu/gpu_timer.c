/* gpu_timer.c: see gpu_timer.h. */
#include <errno.h>
#include <stddef.h>

#include "gpu_timer.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

int gpu_timer_start(struct gpu_timer *t, struct CUstream_st *stream)
{
    cudaEvent_t a = NULL, b = NULL;
    if (cudaEventCreate(&a) != cudaSuccess || cudaEventCreate(&b) != cudaSuccess ||
        cudaEventRecord(a, stream) != cudaSuccess) {
        if (a)
            cudaEventDestroy(a);
        if (b)
            cudaEventDestroy(b);
        (void)cudaGetLastError();
        return -EIO;
    }
    t->start = a;
    t->end = b;
    return 0;
}

int gpu_timer_stop(struct gpu_timer *t, struct CUstream_st *stream)
{
    if (!t->end || cudaEventRecord(t->end, stream) != cudaSuccess) {
        (void)cudaGetLastError();
        gpu_timer_done(t);
        return -EIO;
    }
    return 0;
}

uint64_t gpu_timer_ns(const struct gpu_timer *t)
{
    float ms = 0;
    if (!t->end || cudaEventQuery(t->end) != cudaSuccess ||
        cudaEventElapsedTime(&ms, t->start, t->end) != cudaSuccess) {
        (void)cudaGetLastError();
        return 0;
    }
    return (uint64_t)((double)ms * 1e6);
}

void gpu_timer_done(struct gpu_timer *t)
{
    if (t->start)
        cudaEventDestroy(t->start);
    if (t->end)
        cudaEventDestroy(t->end);
    t->start = t->end = NULL;
}

#else /* !KVF_HAVE_CUDA */

int gpu_timer_start(struct gpu_timer *t, struct CUstream_st *stream)
{
    (void)stream;
    t->start = t->end = NULL;
    return -ENOTSUP;
}

int gpu_timer_stop(struct gpu_timer *t, struct CUstream_st *stream)
{
    (void)t, (void)stream;
    return -ENOTSUP;
}

uint64_t gpu_timer_ns(const struct gpu_timer *t)
{
    (void)t;
    return 0;
}

void gpu_timer_done(struct gpu_timer *t)
{
    t->start = t->end = NULL;
}

#endif
