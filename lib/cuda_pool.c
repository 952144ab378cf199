/* cuda_pool.c: worker-side GPU pools exported by CUDA IPC (see cuda_pool.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_err.h"
#include "cuda_pool.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

_Static_assert(sizeof(cudaIpcMemHandle_t) == CUDA_POOL_HANDLE_BYTES, "IPC handle size changed");

static int range_ok(uint64_t bytes, uint64_t off, uint64_t len, char *err, size_t errlen)
{
    if (off > bytes || len > bytes - off) {
        snprintf(err, errlen, "range [%llu, +%llu) leaves the %llu-byte pool",
                 (unsigned long long)off, (unsigned long long)len, (unsigned long long)bytes);
        return -ERANGE;
    }
    return 0;
}

int cuda_pool_device_count(char *err, size_t errlen)
{
    int n = 0, dev = -1, rc;
    if ((rc = CUDA_ERR_TRY(cudaGetDeviceCount(&n))) < 0)
        return rc;
    return n;
}

int cuda_pool_new(int32_t device, uint64_t bytes, struct cuda_pool **ret, char *err, size_t errlen)
{
    int dev = device, rc, n;
    struct cuda_pool *p;

    if (bytes == 0 || bytes > CUDA_POOL_MAX_BYTES) {
        snprintf(err, errlen, "pool size %llu outside 1..%llu bytes", (unsigned long long)bytes,
                 (unsigned long long)CUDA_POOL_MAX_BYTES);
        return -EINVAL;
    }
    if ((n = cuda_pool_device_count(err, errlen)) < 0)
        return n;
    if (device < 0 || device >= n) {
        snprintf(err, errlen, "device %d: this process sees %d CUDA device%s", (int)device, n,
                 n == 1 ? "" : "s");
        return n == 0 ? -ENODEV : -EINVAL;
    }
    if (!(p = calloc(1, sizeof(*p)))) {
        snprintf(err, errlen, "cuda_pool: out of host memory");
        return -ENOMEM;
    }
    p->device = device;
    p->bytes = bytes;
    if ((rc = CUDA_ERR_TRY(cudaSetDevice(dev))) < 0)
        goto err_free_struct;
    if ((rc = CUDA_ERR_TRY(cudaDeviceGetPCIBusId(p->pci_bus_id, (int)sizeof(p->pci_bus_id), dev))) <
        0)
        goto err_free_struct;
    if ((rc = CUDA_ERR_TRY(cudaMalloc(&p->dptr, bytes))) < 0) {
        p->dptr = NULL;
        goto err_free_struct;
    }
    if ((rc = CUDA_ERR_TRY(cudaMemset(p->dptr, 0, bytes))) < 0 ||
        (rc = CUDA_ERR_TRY(cudaDeviceSynchronize())) < 0)
        goto err_free_mem;
    cudaIpcMemHandle_t h;
    if ((rc = CUDA_ERR_TRY(cudaIpcGetMemHandle(&h, p->dptr))) < 0)
        goto err_free_mem;
    memcpy(p->handle, &h, sizeof(h));
    *ret = p;
    return 0;

err_free_mem:
    cudaFree(p->dptr);
err_free_struct:
    free(p);
    return rc;
}

struct cuda_pool *cuda_pool_free(struct cuda_pool *p)
{
    if (!p)
        return NULL;
    if (p->dptr && cudaSetDevice(p->device) == cudaSuccess)
        cudaFree(p->dptr);
    (void)cudaGetLastError();
    free(p);
    return NULL;
}

int cuda_pool_write(struct cuda_pool *p, uint64_t off, const void *src, uint64_t len, char *err,
                    size_t errlen)
{
    int dev = p->device, rc;
    if ((rc = range_ok(p->bytes, off, len, err, errlen)) < 0)
        return rc;
    if ((rc = CUDA_ERR_TRY(cudaSetDevice(dev))) < 0)
        return rc;
    if ((rc = CUDA_ERR_TRY(cudaMemcpy((char *)p->dptr + off, src, len, cudaMemcpyHostToDevice))) <
        0)
        return rc;
    /* from pageable memory cudaMemcpy may return before the DMA lands: wait, so another process
     * told "written" sees the bytes */
    return CUDA_ERR_TRY(cudaDeviceSynchronize());
}

int cuda_pool_read(const struct cuda_pool *p, uint64_t off, void *dst, uint64_t len, char *err,
                   size_t errlen)
{
    int dev = p->device, rc;
    if ((rc = range_ok(p->bytes, off, len, err, errlen)) < 0)
        return rc;
    if ((rc = CUDA_ERR_TRY(cudaSetDevice(dev))) < 0)
        return rc;
    return CUDA_ERR_TRY(cudaMemcpy(dst, (const char *)p->dptr + off, len, cudaMemcpyDeviceToHost));
}

int cuda_pool_fill(struct cuda_pool *p, uint64_t off, uint64_t len, uint8_t byte, char *err,
                   size_t errlen)
{
    int dev = p->device, rc;
    if ((rc = range_ok(p->bytes, off, len, err, errlen)) < 0)
        return rc;
    if ((rc = CUDA_ERR_TRY(cudaSetDevice(dev))) < 0)
        return rc;
    if ((rc = CUDA_ERR_TRY(cudaMemset((char *)p->dptr + off, byte, len))) < 0)
        return rc;
    return CUDA_ERR_TRY(cudaDeviceSynchronize());
}

#else /* !KVF_HAVE_CUDA: refuse, saying why */

static int no_cuda(char *err, size_t errlen)
{
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

int cuda_pool_device_count(char *err, size_t errlen)
{
    return no_cuda(err, errlen);
}

int cuda_pool_new(int32_t device, uint64_t bytes, struct cuda_pool **ret, char *err, size_t errlen)
{
    (void)device, (void)bytes, (void)ret;
    return no_cuda(err, errlen);
}

struct cuda_pool *cuda_pool_free(struct cuda_pool *p)
{
    free(p); /* only reachable with a pool made elsewhere; there is no allocation to release */
    return NULL;
}

int cuda_pool_write(struct cuda_pool *p, uint64_t off, const void *src, uint64_t len, char *err,
                    size_t errlen)
{
    (void)p, (void)off, (void)src, (void)len;
    return no_cuda(err, errlen);
}

int cuda_pool_read(const struct cuda_pool *p, uint64_t off, void *dst, uint64_t len, char *err,
                   size_t errlen)
{
    (void)p, (void)off, (void)dst, (void)len;
    return no_cuda(err, errlen);
}

int cuda_pool_fill(struct cuda_pool *p, uint64_t off, uint64_t len, uint8_t byte, char *err,
                   size_t errlen)
{
    (void)p, (void)off, (void)len, (void)byte;
    return no_cuda(err, errlen);
}

#endif
