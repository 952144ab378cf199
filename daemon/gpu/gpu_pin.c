/* gpu_pin.c: the host arena seen by CUDA (page-locked with cudaHostRegister portable|mapped, so
 * the gather kernel writes straight into it and the scatter kernel reads from it) and the
 * decision where the arena lives (gpu.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "gpu_priv.h"
#include "log.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static struct gpu_pinned *find(struct gpu *g, const void *ptr)
{
    for (size_t i = 0; i < g->n_pinned; i++)
        if (g->pinned[i].ptr == ptr)
            return &g->pinned[i];
    return NULL;
}

static void forget(struct gpu *g, struct gpu_pinned *p)
{
    *p = g->pinned[--g->n_pinned];
}

#ifdef KVF_HAVE_CUDA

/* A CUDA-aware UCX page-locks the host memory it maps (its cuda_copy transport registers it,
 * portable): the range is usable by every device as it is, and it is UCX's to unregister. Only
 * a range registered whole (both ends inside one registration) and seen by every device counts. */
static int borrow(void *ptr, uint64_t bytes, void **dev_ret, char *err, size_t errlen)
{
    int n = 0, dev = 0, rc;
    if ((rc = GPU_TRY(cudaGetDeviceCount(&n))) < 0)
        return rc;
    for (dev = 0; dev < n; dev++) {
        void *d = NULL, *last = (char *)ptr + bytes - 1;
        struct cudaPointerAttributes a, b;
        if ((rc = GPU_TRY(cudaSetDevice(dev))) < 0 ||
            (rc = GPU_TRY(cudaHostGetDevicePointer(&d, ptr, 0))) < 0 ||
            (rc = GPU_TRY(cudaPointerGetAttributes(&a, ptr))) < 0 ||
            (rc = GPU_TRY(cudaPointerGetAttributes(&b, last))) < 0)
            return rc;
        if (a.type != cudaMemoryTypeHost || b.type != cudaMemoryTypeHost || !b.devicePointer) {
            snprintf(err, errlen,
                     "host memory %p (%" PRIu64 " bytes) is partly page-locked by someone "
                     "else (device %d sees %s at its start, %s at its end)",
                     ptr, bytes, dev, a.type == cudaMemoryTypeHost ? "it" : "nothing",
                     b.type == cudaMemoryTypeHost ? "it" : "nothing");
            return -EBUSY;
        }
        if (dev == 0)
            *dev_ret = d;
    }
    (void)cudaSetDevice(0);
    return 0;
}

/* *borrowed: the range was page-locked already (borrow, above); ours to unregister otherwise. */
static int pin(void *ptr, uint64_t bytes, void **dev_ret, bool *borrowed, char *err,
               size_t errlen)
{
    int dev = 0, rc; /* portable: any device's context will do; name device 0 in messages */
    void *d = NULL;
    *borrowed = false;
    if ((rc = GPU_TRY(cudaSetDevice(dev))) < 0)
        return rc;
    cudaError_t st = cudaHostRegister(ptr, bytes, cudaHostRegisterPortable | cudaHostRegisterMapped);
    if (st == cudaErrorHostMemoryAlreadyRegistered) {
        (void)cudaGetLastError();
        *borrowed = true;
        return borrow(ptr, bytes, dev_ret, err, errlen);
    }
    if ((rc = GPU_TRY(st)) < 0)
        return rc;
    if ((rc = GPU_TRY(cudaHostGetDevicePointer(&d, ptr, 0))) < 0) {
        cudaHostUnregister(ptr);
        (void)cudaGetLastError();
        return rc;
    }
    *dev_ret = d;
    return 0;
}

static int unpin(void *ptr, char *err, size_t errlen)
{
    int dev = -1;
    return GPU_TRY(cudaHostUnregister(ptr));
}

#else /* !KVF_HAVE_CUDA: always CPU mode, refused before we get here */

static int pin(void *ptr, uint64_t bytes, void **dev_ret, bool *borrowed, char *err,
               size_t errlen)
{
    (void)ptr, (void)bytes, (void)dev_ret;
    *borrowed = false;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

static int unpin(void *ptr, char *err, size_t errlen)
{
    (void)ptr;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

#endif

int gpu_host_register(struct gpu *g, void *ptr, uint64_t bytes, void **dev_ret, char *err,
                      size_t errlen)
{
    int rc;
    if (g->cpu_mode) {
        snprintf(err, errlen,
                 "page-locking host memory for CUDA: CPU mode (%s); host memory "
                 "needs no page-locking there",
                 g->cpu_reason);
        return -ENODEV;
    }
    if (!ptr || bytes == 0) {
        snprintf(err, errlen, "page-locking host memory: empty range");
        return -EINVAL;
    }
    if (find(g, ptr)) {
        snprintf(err, errlen, "page-locking host memory: %p is already registered", ptr);
        return -EEXIST;
    }
    if (g->n_pinned >= GPU_MAX_PINNED) {
        snprintf(err, errlen, "page-locking host memory: too many ranges (limit %d)",
                 GPU_MAX_PINNED);
        return -ENOSPC;
    }
    void *d = NULL;
    bool borrowed = false;
    if ((rc = pin(ptr, bytes, &d, &borrowed, err, errlen)) < 0)
        return rc;
    if (borrowed)
        log_info("gpu: host memory %p (%" PRIu64 " bytes) was page-locked already (a CUDA-aware "
                 "UCX registers what it maps): used as it is, left to its owner to unregister",
                 ptr, bytes);
    g->pinned[g->n_pinned++] =
        (struct gpu_pinned){.ptr = ptr, .dev_ptr = d, .bytes = bytes, .borrowed = borrowed};
    *dev_ret = d;
    return 0;
}

int gpu_host_unregister(struct gpu *g, void *ptr, char *err, size_t errlen)
{
    struct gpu_pinned *p = find(g, ptr);
    if (!p) {
        snprintf(err, errlen, "host memory %p was not page-locked here", ptr);
        return -ENOENT;
    }
    int rc = p->borrowed ? 0 : unpin(ptr, err, errlen);
    forget(g, p); /* CUDA refusing to unregister leaves nothing for us to undo */
    return rc;
}

void gpu_pin_release_all(struct gpu *g)
{
    char err[GPU_REASON_MAX];
    while (g->n_pinned > 0) {
        struct gpu_pinned *p = &g->pinned[g->n_pinned - 1];
        if (!p->borrowed && unpin(p->ptr, err, sizeof(err)) < 0)
            log_warn("gpu: unregistering host memory at teardown: %s", err);
        forget(g, p);
    }
}

int gpu_make_current(struct gpu *g, int dev, char *err, size_t errlen)
{
    if (g->cpu_mode) {
        snprintf(err, errlen, "no GPU: %s", g->cpu_reason);
        return -ENODEV;
    }
#ifdef KVF_HAVE_CUDA
    int rc;
    if ((rc = GPU_TRY(cudaSetDevice(dev))) < 0 || (rc = GPU_TRY(cudaFree(NULL))) < 0)
        return rc;
    return 0;
#else
    (void)dev;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
#endif
}

/* placement */

const char *gpu_place_to_string(gpu_place_t p)
{
    switch (p) {
    case GPU_PLACE_AUTO:
        return "auto";
    case GPU_PLACE_HOST:
        return "host";
    case GPU_PLACE_DEVICE:
        return "device";
    }
    return "unknown";
}

int gpu_arena_decide(gpu_place_t want, bool have_gpu, const char *no_gpu_reason, bool ucx_cuda,
                     gpu_place_t *ret, char *why, size_t whylen)
{
    const char *r = no_gpu_reason && *no_gpu_reason ? no_gpu_reason : "no GPU";

    switch (want) {
    case GPU_PLACE_HOST:
        snprintf(why, whylen, "arena.placement is host%s",
                 have_gpu ? "; page-locked for CUDA (cudaHostRegister portable|mapped)" : "");
        *ret = GPU_PLACE_HOST;
        return 0;
    case GPU_PLACE_DEVICE:
        if (!have_gpu) {
            snprintf(why, whylen,
                     "arena.placement is device but there is no GPU (%s): set "
                     "arena.placement to auto or host",
                     r);
            return -ENODEV;
        }
        if (!ucx_cuda) {
            snprintf(why, whylen,
                     "arena.placement is device but the UCX in use has no CUDA "
                     "memory support (a stock Debian UCX has none): set "
                     "arena.placement to auto or host, or run a CUDA-aware UCX");
            return -ENOTSUP;
        }
        snprintf(why, whylen, "arena.placement is device and UCX reports CUDA memory support");
        *ret = GPU_PLACE_DEVICE;
        return 0;
    case GPU_PLACE_AUTO:
        if (!have_gpu)
            snprintf(why, whylen, "auto: no GPU (%s): host memory", r);
        else if (!ucx_cuda)
            snprintf(why, whylen,
                     "auto: UCX has no CUDA memory support: host memory "
                     "page-locked for CUDA (cudaHostRegister portable|mapped)");
        else
            snprintf(why, whylen, "auto: UCX reports CUDA memory support: device memory");
        *ret = have_gpu && ucx_cuda ? GPU_PLACE_DEVICE : GPU_PLACE_HOST;
        return 0;
    }
    snprintf(why, whylen, "arena.placement: unknown value %d", (int)want);
    return -EINVAL;
}

int gpu_arena_placement(struct gpu *g, gpu_place_t want, bool ucx_cuda, gpu_place_t *ret, char *why,
                        size_t whylen)
{
    gpu_place_t p = GPU_PLACE_HOST;
    int rc = gpu_arena_decide(want, !g->cpu_mode, g->cpu_reason, ucx_cuda, &p, g->placement_why,
                              sizeof(g->placement_why));
    g->placement_decided = true;
    g->placement_rc = rc;
    g->placement = p;
    snprintf(why, whylen, "%s", g->placement_why);
    if (rc == 0)
        *ret = p;
    return rc;
}
