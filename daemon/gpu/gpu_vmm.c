/* gpu_vmm.c: workers' GPU pools of CUDA VMM memory (cuMemCreate: PyTorch's expandable segments,
 * VMM allocators such as vLLM's sleep mode or SGLang's memory saver), which have no legacy IPC
 * handle: each physical chunk comes as a POSIX fd (cuMemExportToShareableHandle, SCM_RIGHTS),
 * is imported here and mapped back to back into one reserved range, as the worker maps it
 * (gpu.h gpu_vmm_open). The driver API is reached through the runtime's entry points, so the
 * daemon does not link libcuda. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_priv.h"
#include "log.h"

#ifdef KVF_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

struct vmm_api {
    CUresult (*import)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
    CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
    CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
    CUresult (*set_access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
    CUresult (*unmap)(CUdeviceptr, size_t);
    CUresult (*addr_free)(CUdeviceptr, size_t);
    CUresult (*release)(CUmemGenericAllocationHandle);
    CUresult (*err_string)(CUresult, const char **);
};

/* Loop thread only. NULL when the driver lacks an entry point (reason logged once). */
static const struct vmm_api *api(void)
{
    static struct vmm_api a;
    static int state; /* 0 untried, 1 ok, -1 missing */
    if (state)
        return state > 0 ? &a : NULL;
    struct { const char *name; void **fn; } t[] = {
        {"cuMemImportFromShareableHandle", (void **)&a.import},
        {"cuMemAddressReserve", (void **)&a.reserve},
        {"cuMemMap", (void **)&a.map},
        {"cuMemSetAccess", (void **)&a.set_access},
        {"cuMemUnmap", (void **)&a.unmap},
        {"cuMemAddressFree", (void **)&a.addr_free},
        {"cuMemRelease", (void **)&a.release},
        {"cuGetErrorString", (void **)&a.err_string},
    };
    state = 1;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        if (cudaGetDriverEntryPointByVersion(t[i].name, t[i].fn, 10020, cudaEnableDefault, &q) !=
                cudaSuccess || q != cudaDriverEntryPointSuccess) {
            log_warn("gpu: %s unavailable: VMM pools cannot be mapped", t[i].name);
            state = -1;
        }
    }
    (void)cudaGetLastError();
    return state > 0 ? &a : NULL;
}

static int drv(const struct vmm_api *a, CUresult r, const char *call, int dev, char *err,
               size_t errlen)
{
    if (r == CUDA_SUCCESS)
        return 0;
    const char *s = NULL;
    if (a->err_string(r, &s) != CUDA_SUCCESS || !s)
        s = "unknown error";
    snprintf(err, errlen, "%s: %s (driver error %d, device %d)", call, s, (int)r, dev);
    return r == CUDA_ERROR_OUT_OF_MEMORY ? -ENOMEM : r == CUDA_ERROR_NOT_SUPPORTED ? -ENOTSUP
                                                                                    : -EINVAL;
}

/* Unmaps [0, mapped) chunks, frees the range, releases `imported` handles. */
static int undo(const struct vmm_api *a, struct gpu_mapping *m, uint32_t mapped, uint32_t imported,
                bool reserved, char *err, size_t errlen)
{
    int rc = 0, dev = m->opened_on;
    CUdeviceptr va = (CUdeviceptr)(uintptr_t)m->ptr;
    for (uint32_t k = 0; k < mapped; k++)
        if (!rc)
            rc = drv(a, a->unmap(va + k * m->chunk_bytes, m->chunk_bytes), "cuMemUnmap", dev, err,
                     errlen);
    if (reserved && !rc)
        rc = drv(a, a->addr_free(va, m->chunk_bytes * m->n_chunks), "cuMemAddressFree", dev, err,
                 errlen);
    for (uint32_t k = 0; k < imported; k++) {
        int r2 = drv(a, a->release(m->chunks[k]), "cuMemRelease", dev, err, errlen);
        rc = rc ? rc : r2;
    }
    return rc;
}

static int vmm_map(struct gpu *g, struct gpu_mapping *m, const int *fds, char *err, size_t errlen)
{
    const struct vmm_api *a = api();
    int dev = m->opened_on, rc;
    if (!a) {
        snprintf(err, errlen, "this CUDA driver has no VMM API (cuMemImportFromShareableHandle)");
        return -ENOTSUP;
    }
    if ((rc = GPU_TRY(cudaSetDevice(dev))) < 0)
        return rc;
    uint32_t imported = 0, mapped = 0;
    bool reserved = false;
    for (; imported < m->n_chunks; imported++)
        if ((rc = drv(a, a->import(&m->chunks[imported], (void *)(uintptr_t)fds[imported],
                                   CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                      "cuMemImportFromShareableHandle", dev, err, errlen)) < 0)
            goto fail;
    CUdeviceptr va = 0;
    uint64_t span = m->chunk_bytes * m->n_chunks;
    if ((rc = drv(a, a->reserve(&va, span, 0, 0, 0), "cuMemAddressReserve", dev, err, errlen)) < 0)
        goto fail;
    reserved = true;
    m->ptr = (void *)(uintptr_t)va;
    for (; mapped < m->n_chunks; mapped++)
        if ((rc = drv(a, a->map(va + mapped * m->chunk_bytes, m->chunk_bytes, 0,
                                m->chunks[mapped], 0),
                      "cuMemMap (is the chunk size a multiple of the allocation granularity?)",
                      dev, err, errlen)) < 0)
            goto fail;
    CUmemAccessDesc d[GPU_MAX_DEVICES];
    size_t nd = 0;
    for (int o = 0; o < g->n_devices && o < GPU_MAX_DEVICES; o++)
        if (o == dev || gpu_peer_can_access(g, o, dev))
            d[nd++] = (CUmemAccessDesc){.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = o},
                                        .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
    if (a->set_access(va, span, d, nd) != CUDA_SUCCESS) { /* peers refused: the device alone */
        d[0].location.id = dev;
        if ((rc = drv(a, a->set_access(va, span, d, 1), "cuMemSetAccess", dev, err, errlen)) < 0)
            goto fail;
        log_warn("gpu: VMM pool on device %d mapped for that device only (peers refused)", dev);
    }
    return 0;

fail:
    undo(a, m, mapped, imported, reserved, NULL, 0);
    m->ptr = NULL;
    return rc;
}

int gpu_vmm_unmap(struct gpu_mapping *m, char *err, size_t errlen)
{
    const struct vmm_api *a = api();
    int rc = a ? undo(a, m, m->n_chunks, m->n_chunks, true, err, errlen) : -ENOTSUP;
    free(m->chunks);
    m->chunks = NULL;
    return rc;
}

#else /* !KVF_HAVE_CUDA: CPU mode refuses before we get here */

static int vmm_map(struct gpu *g, struct gpu_mapping *m, const int *fds, char *err, size_t errlen)
{
    (void)g, (void)m, (void)fds;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

int gpu_vmm_unmap(struct gpu_mapping *m, char *err, size_t errlen)
{
    free(m->chunks);
    m->chunks = NULL;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

#endif

int gpu_vmm_open(struct gpu *g, int device, const int *fds, uint32_t n_fds, uint64_t chunk_bytes,
                 uint64_t offset, uint64_t bytes, struct gpu_mapping **ret, char *err,
                 size_t errlen)
{
    int rc = gpu_pool_device_check(g, device, true, err, errlen);
    if (rc < 0)
        return rc;
    if (!fds || n_fds == 0 || chunk_bytes == 0 || chunk_bytes > GPU_MAX_MAPPING_BYTES / n_fds) {
        snprintf(err, errlen, "VMM pool of %u chunks of %llu bytes: 1.. chunks, at most %llu "
                 "bytes in all", n_fds, (unsigned long long)chunk_bytes,
                 (unsigned long long)GPU_MAX_MAPPING_BYTES);
        return -EINVAL;
    }
    uint64_t span = chunk_bytes * n_fds;
    if (bytes == 0 || offset > span || bytes > span - offset) {
        snprintf(err, errlen, "VMM pool declared as bytes [%llu, +%llu) of %llu mapped bytes",
                 (unsigned long long)offset, (unsigned long long)bytes,
                 (unsigned long long)span);
        return -ERANGE;
    }
    struct gpu_mapping *m = calloc(1, sizeof *m);
    unsigned long long *chunks = calloc(n_fds, sizeof *chunks);
    if (!m || !chunks) {
        free(m);
        free(chunks);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    m->vmm = true;
    m->chunks = chunks;
    m->n_chunks = n_fds;
    m->chunk_bytes = chunk_bytes;
    m->declared_device = m->device = m->opened_on = device;
    m->bytes = span;
    m->size_verified = true;
    rc = vmm_map(g, m, fds, err, errlen);
    if (rc < 0) {
        free(m->chunks);
        free(m);
        return rc;
    }
    log_debug("gpu: VMM pool of %u x %llu bytes on device %d mapped at %p", n_fds,
              (unsigned long long)chunk_bytes, device, m->ptr);
    gpu_mapping_link(g, m);
    *ret = m;
    return 0;
}
