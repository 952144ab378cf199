/* gpu_ipc.c: workers' GPU pools mapped into the daemon from their CUDA IPC handles, once per
 * allocation, on the device the worker declared; closed when the last user lets go (gpu.h).
 * An IPC mapping is usable only by kernels of the device it was opened on (peer access does not
 * extend to another context's IPC imports): kernels on another device get a view, the same
 * handle opened again on their device (gpu_ipc_view). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_priv.h"
#include "log.h"

#ifdef KVF_HAVE_CUDA
#include <cuda.h>
#include <cuda_runtime_api.h>

_Static_assert(sizeof(cudaIpcMemHandle_t) == GPU_IPC_HANDLE_BYTES, "IPC handle size changed");

/* cuMemGetAddressRange through the runtime's driver entry point (no link against libcuda). */
typedef CUresult (*addr_range_fn)(CUdeviceptr *base, size_t *size, CUdeviceptr ptr);

static addr_range_fn addr_range(void)
{
    static addr_range_fn fn;
    static bool tried; /* loop thread only */
    if (!tried) {
        void *p = NULL;
        enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
        tried = true;
        if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &p, 3020, cudaEnableDefault,
                                             &q) == cudaSuccess &&
            q == cudaDriverEntryPointSuccess)
            fn = (addr_range_fn)p;
        else
            log_warn("gpu: cuMemGetAddressRange unavailable: pool sizes of workers go unchecked");
        (void)cudaGetLastError();
    }
    return fn;
}

static int map_on(int dev, const uint8_t *handle, void **ptr_ret, char *err, size_t errlen)
{
    cudaIpcMemHandle_t h;
    int rc;
    memcpy(&h, handle, sizeof(h));
    if ((rc = GPU_TRY(cudaSetDevice(dev))) < 0)
        return rc;
    return GPU_TRY(cudaIpcOpenMemHandle(ptr_ret, h, cudaIpcMemLazyEnablePeerAccess));
}

static int unmap(int dev, void *ptr, char *err, size_t errlen)
{
    int rc;
    if ((rc = GPU_TRY(cudaSetDevice(dev))) < 0)
        return rc;
    return GPU_TRY(cudaIpcCloseMemHandle(ptr));
}

/* Maps the handle on the declared device and reads the allocation's size. Where the memory
 * lives cannot be asked: for an IPC import, the runtime's cudaPointerGetAttributes and the
 * driver's CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL both name the importing device (seen on H200s),
 * so the worker's ordinal is taken as said; a wrong one still maps (lazy peer access). */
static int map(struct gpu *g, struct gpu_mapping *m, char *err, size_t errlen)
{
    int dev = m->declared_device, rc;

    (void)g;
    if ((rc = map_on(dev, m->handle, &m->ptr, err, errlen)) < 0)
        return rc;
    m->device = dev;
    m->opened_on = dev;
    addr_range_fn fn = addr_range();
    if (fn) {
        CUdeviceptr base = 0;
        size_t size = 0;
        CUresult cr = fn(&base, &size, (CUdeviceptr)(uintptr_t)m->ptr);
        if (cr != CUDA_SUCCESS) {
            snprintf(err, errlen, "cuMemGetAddressRange: driver error %d (device %d)", (int)cr,
                     dev);
            rc = -EIO;
            goto err_unmap;
        }
        m->bytes = size - ((uintptr_t)m->ptr - (uintptr_t)base);
        m->size_verified = true;
    }
    return 0;

err_unmap:
    unmap(dev, m->ptr, NULL, 0);
    m->ptr = NULL;
    return rc;
}

/* A view: m's allocation opened again on `dev`, for kernels there. */
static int map_view(struct gpu_mapping *v, int dev, char *err, size_t errlen)
{
    v->opened_on = dev;
    return map_on(dev, v->handle, &v->ptr, err, errlen);
}

#else /* !KVF_HAVE_CUDA: g is always in CPU mode, refused before we get here */

static int map_view(struct gpu_mapping *v, int dev, char *err, size_t errlen)
{
    (void)v, (void)dev;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

static int map(struct gpu *g, struct gpu_mapping *m, char *err, size_t errlen)
{
    (void)g, (void)m;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

static int unmap(int dev, void *ptr, char *err, size_t errlen)
{
    (void)dev, (void)ptr;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

#endif

/* The mapping of handle (view_on < 0), or its view on device view_on. */
static struct gpu_mapping *find(const struct gpu *g, const uint8_t *handle, int view_on)
{
    for (struct gpu_mapping *m = g->mappings; m; m = m->next)
        if (!m->vmm && memcmp(m->handle, handle, GPU_IPC_HANDLE_BYTES) == 0 &&
            (view_on < 0 ? !m->view : m->view && m->opened_on == view_on))
            return m;
    return NULL;
}

/* The declared pool [offset, offset + bytes) against the allocation; offset + bytes cannot
 * overflow (both are bounded by GPU_MAX_MAPPING_BYTES). */
static int range_check(const struct gpu_mapping *m, uint64_t offset, uint64_t bytes, char *err,
                       size_t errlen)
{
    if (!m->size_verified || offset + bytes <= m->bytes)
        return 0;
    snprintf(err, errlen,
             "pool declared as bytes [%llu, %llu) of its allocation, but the "
             "allocation on device %d holds %llu",
             (unsigned long long)offset, (unsigned long long)(offset + bytes), m->device,
             (unsigned long long)m->bytes);
    return -ERANGE;
}

void gpu_mapping_link(struct gpu *g, struct gpu_mapping *m)
{
    m->refs = 1;
    m->next = g->mappings;
    g->mappings = m;
    g->n_mappings++;
    g->mapped_bytes += m->bytes;
    g->mappings_opened++;
}

int gpu_pool_device_check(const struct gpu *g, int device, bool now, char *err, size_t errlen)
{
    if (g->cpu_mode) {
        snprintf(err, errlen, "cannot map a GPU pool (device %d): the daemon runs in CPU mode: %s",
                 device, g->cpu_reason);
        return -ENODEV;
    }
    if (device < 0 || device >= g->n_devices) {
        snprintf(err, errlen, "GPU pool on device %d: this daemon sees %d CUDA device%s", device,
                 g->n_devices, g->n_devices == 1 ? "" : "s");
        return -ENODEV;
    }
    if (now && g->n_mappings >= g->max_mappings) {
        snprintf(err, errlen, "too many GPU pool mappings open (limit %zu)", g->max_mappings);
        return -ENOSPC;
    }
    if (now && g->dev[device].failed) {
        snprintf(err, errlen, "device %d failed earlier: %s", device, g->dev[device].failed_reason);
        return -ENODEV;
    }
    return 0;
}

int gpu_ipc_open(struct gpu *g, int device, const uint8_t handle[GPU_IPC_HANDLE_BYTES],
                 uint64_t offset, uint64_t bytes, struct gpu_mapping **ret, char *err,
                 size_t errlen)
{
    struct gpu_mapping *m;
    int rc;

    if ((rc = gpu_pool_device_check(g, device, false, err, errlen)) < 0)
        return rc;
    if (bytes == 0 || bytes > GPU_MAX_MAPPING_BYTES || offset > GPU_MAX_MAPPING_BYTES) {
        snprintf(err, errlen,
                 "GPU pool of %llu bytes at offset %llu: size must be 1..%llu "
                 "bytes and offset at most that",
                 (unsigned long long)bytes, (unsigned long long)offset,
                 (unsigned long long)GPU_MAX_MAPPING_BYTES);
        return -EINVAL;
    }
    if ((m = find(g, handle, -1))) {
        if ((rc = range_check(m, offset, bytes, err, errlen)) < 0)
            return rc;
        m->refs++;
        *ret = m;
        return 0;
    }
    if ((rc = gpu_pool_device_check(g, device, true, err, errlen)) < 0)
        return rc;
    if (!(m = calloc(1, sizeof(*m)))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    memcpy(m->handle, handle, GPU_IPC_HANDLE_BYTES);
    m->declared_device = device;
    m->bytes = offset + bytes; /* what we know until the driver says */
    if ((rc = map(g, m, err, errlen)) < 0)
        goto err_free;
    if ((rc = range_check(m, offset, bytes, err, errlen)) < 0)
        goto err_unmap;
    gpu_mapping_link(g, m);
    *ret = m;
    return 0;

err_unmap:
    unmap(m->opened_on, m->ptr, NULL, 0);
err_free:
    free(m);
    return rc;
}

int gpu_ipc_view(struct gpu *g, struct gpu_mapping *m, int device, struct gpu_mapping **ret,
                 char *err, size_t errlen)
{
    struct gpu_mapping *v = NULL; /* gcc 12 -O1 cannot see that find() sets it */
    int rc;

    if (device < 0 || device >= g->n_devices) {
        snprintf(err, errlen, "GPU pool view on device %d: this daemon sees %d CUDA device%s",
                 device, g->n_devices, g->n_devices == 1 ? "" : "s");
        return -ENODEV;
    }
    if (m->vmm && device != m->opened_on && !gpu_peer_can_access(g, device, m->opened_on)) {
        snprintf(err, errlen, "the VMM pool on device %d is not reachable from device %d (no "
                 "peer access)", m->opened_on, device);
        return -ENODEV;
    }
    if (device == m->opened_on || m->vmm || (v = find(g, m->handle, device))) {
        /* a VMM range is mapped for every peer at open: the same address serves them all */
        v = device == m->opened_on || m->vmm ? m : v;
        v->refs++;
        *ret = v;
        return 0;
    }
    if (g->n_mappings >= g->max_mappings) {
        snprintf(err, errlen, "too many GPU pool mappings open (limit %zu)", g->max_mappings);
        return -ENOSPC;
    }
    if (g->dev[device].failed) {
        snprintf(err, errlen, "device %d failed earlier: %s", device, g->dev[device].failed_reason);
        return -ENODEV;
    }
    if (!(v = calloc(1, sizeof(*v)))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    memcpy(v->handle, m->handle, GPU_IPC_HANDLE_BYTES);
    v->declared_device = m->declared_device;
    v->device = m->device;
    v->bytes = m->bytes;
    v->size_verified = m->size_verified;
    v->view = true;
    if ((rc = map_view(v, device, err, errlen)) < 0) {
        free(v);
        return rc;
    }
    log_debug("gpu: pool of device %d viewed from device %d at %p (opened there at %p)",
              m->device, device, v->ptr, m->ptr);
    gpu_mapping_link(g, v);
    *ret = v;
    return 0;
}

static void release(struct gpu *g, struct gpu_mapping *m)
{
    char err[GPU_REASON_MAX];
    int rc = m->vmm ? gpu_vmm_unmap(m, err, sizeof err) : unmap(m->opened_on, m->ptr, err, sizeof err);
    if (rc < 0) {
        g->mapping_close_errors++;
        log_warn("gpu: closing a pool mapping on device %d: %s", m->opened_on, err);
    }
    g->n_mappings--;
    g->mapped_bytes -= m->bytes;
    free(m);
}

struct gpu_mapping *gpu_ipc_close(struct gpu *g, struct gpu_mapping *m)
{
    if (!m || --m->refs > 0)
        return NULL;
    for (struct gpu_mapping **p = &g->mappings; *p; p = &(*p)->next)
        if (*p == m) {
            *p = m->next;
            break;
        }
    release(g, m);
    return NULL;
}

void gpu_ipc_close_all(struct gpu *g)
{
    while (g->mappings) {
        struct gpu_mapping *m = g->mappings;
        g->mappings = m->next;
        release(g, m);
    }
}

int gpu_set_max_mappings(struct gpu *g, size_t max)
{
    if (max < 1 || max > GPU_MAX_MAPPINGS)
        return -EINVAL;
    g->max_mappings = max;
    return 0;
}

void *gpu_mapping_ptr(const struct gpu_mapping *m)
{
    return m->ptr;
}
int gpu_mapping_device(const struct gpu_mapping *m)
{
    return m->device;
}
int gpu_mapping_opened_on(const struct gpu_mapping *m)
{
    return m->opened_on;
}
uint64_t gpu_mapping_bytes(const struct gpu_mapping *m)
{
    return m->bytes;
}
size_t gpu_mapping_count(const struct gpu *g)
{
    return g->n_mappings;
}
uint64_t gpu_mapping_total_bytes(const struct gpu *g)
{
    return g->mapped_bytes;
}
