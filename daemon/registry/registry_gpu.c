/* registry_gpu.c: a rank's GPU pool mappings (see registry_gpu.h). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "registry_gpu.h"

bool reg_gpu_wanted(const struct layout *l)
{
    for (uint32_t i = 0; i < l->n_pools; i++)
        if (l->pools[i].kind == POOL_CUDA)
            return true;
    return false;
}

struct reg_gpu *reg_gpu_ref(struct reg_gpu *r)
{
    if (r)
        r->refs++;
    return r;
}

static struct reg_gpu_view *view_free(struct gpu *g, struct reg_gpu_view *v)
{
    for (uint32_t i = 0; v && i < LAYOUT_MAX_POOLS; i++)
        v->map[i] = gpu_ipc_close(g, v->map[i]);
    free(v);
    return NULL;
}

static void close_all(struct reg_gpu *r)
{
    for (int d = 0; d < GPU_MAX_DEVICES; d++)
        r->view[d] = view_free(r->g, r->view[d]);
    for (uint32_t i = 0; i < LAYOUT_MAX_POOLS; i++)
        r->map[i] = gpu_ipc_close(r->g, r->map[i]);
}

int reg_gpu_mem_on(struct reg_gpu *r, int device, const struct copy_mem **ret, char *err,
                   size_t errlen)
{
    if (device == r->device || r->device < 0) {
        *ret = &r->mem;
        return 0;
    }
    if (device < 0 || device >= GPU_MAX_DEVICES) {
        snprintf(err, errlen, "GPU %d: no such device", device);
        return -ENODEV;
    }
    if (r->view[device]) {
        *ret = &r->view[device]->mem;
        return 0;
    }
    struct reg_gpu_view *v = calloc(1, sizeof *v);
    if (!v) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    v->mem.n = r->mem.n;
    for (uint32_t i = 0; i < r->mem.n && i < LAYOUT_MAX_POOLS; i++) {
        v->mem.size[i] = r->mem.size[i];
        if (!r->map[i])
            continue;
        char why[GPU_REASON_MAX + 64];
        int rc = gpu_ipc_view(r->g, r->map[i], device, &v->map[i], why, sizeof why);
        if (rc < 0) {
            snprintf(err, errlen, "pool %u (GPU %d) opened for GPU %d: %s", i, r->device,
                     device, why);
            view_free(r->g, v);
            return rc;
        }
        v->mem.base[i] = (uint8_t *)gpu_mapping_ptr(v->map[i]) + r->offset[i];
    }
    r->view[device] = v;
    *ret = &v->mem;
    return 0;
}

struct reg_gpu *reg_gpu_unref(struct reg_gpu *r)
{
    if (!r || --r->refs > 0)
        return NULL;
    close_all(r);
    r->events = gpu_event_close(r->events);
    free(r);
    return NULL;
}

int reg_gpu_events(struct reg_gpu *r, uint32_t rank, const struct proto_events *ev, char *msg,
                   size_t len)
{
    char why[GPU_REASON_MAX + 128];
    if (!r) {
        snprintf(msg, len, "EVENTS from rank %u, whose pools are host memory: CUDA events order "
                 "GPU work; register GPU pools, or say READY once the writes completed", rank);
        return -EINVAL;
    }
    if (r->events) {
        snprintf(msg, len, "EVENTS from rank %u, which passed %u events already (once per "
                 "registration)", rank, gpu_event_count(r->events));
        return -EALREADY;
    }
    if (r->device < 0) {
        snprintf(msg, len, "EVENTS from rank %u, which has no GPU pool mapped", rank);
        return -EINVAL;
    }
    int rc = gpu_event_open(r->g, r->device, ev->handles, ev->n, &r->events, why, sizeof why);
    if (rc < 0) {
        snprintf(msg, len, "rank %u's CUDA events: %s", rank, why);
        return rc;
    }
    snprintf(msg, len, "%u CUDA events of rank %u open on GPU %d", ev->n, rank, r->device);
    return 0;
}

int reg_gpu_open(struct gpu *g, const struct layout *l, const struct proto_register *reg,
                 struct reg_gpu **ret, char *err, size_t errlen)
{
    bool host = false, cuda = false;
    for (uint32_t i = 0; i < l->n_pools; i++) {
        if (l->pools[i].bytes == 0)
            continue;
        host |= l->pools[i].kind == POOL_HOST;
        cuda |= l->pools[i].kind == POOL_CUDA;
    }
    if (host && cuda) {
        snprintf(err, errlen, "the rank mixes host and GPU pools: register all its pools in GPU "
                 "memory (CUDA IPC handles) or all in host memory (memfds)");
        return -EINVAL;
    }
    if (!g || gpu_cpu_mode(g)) {
        uint32_t i = 0;
        while (i < l->n_pools && l->pools[i].kind != POOL_CUDA)
            i++;
        snprintf(err, errlen, "pool %u is GPU memory (device %d) but this kvferryd cannot map "
                 "GPU memory: %s; register host (memfd) pools or run kvferryd where it sees the "
                 "GPU", i, l->pools[i].device, g ? gpu_cpu_reason(g) : "no GPU module");
        return -ENODEV;
    }
    struct reg_gpu *r = calloc(1, sizeof *r);
    if (!r) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    r->g = g;
    r->refs = 1;
    r->device = -1;
    r->mem.n = l->n_pools;
    int rc = 0;
    for (uint32_t i = 0; i < l->n_pools; i++) {
        const struct proto_pool *p = &reg->pools[i];
        r->mem.size[i] = p->bytes;
        if (proto_pool_layout_kind(p) != POOL_CUDA || p->bytes == 0)
            continue;
        char why[GPU_REASON_MAX + 64];
        bool vmm = p->kind == PROTO_POOL_CUDA_VMM;
        rc = vmm ? gpu_vmm_open(g, p->device, p->fds, p->n_fds, p->chunk_bytes, p->offset,
                                p->bytes, &r->map[i], why, sizeof why)
                 : gpu_ipc_open(g, p->device, p->ipc_handle, p->offset, p->bytes, &r->map[i], why,
                                sizeof why);
        if (rc < 0) {
            snprintf(err, errlen, "pool %u (GPU memory, device %d): %s%s", i, p->device, why,
                     rc == -ENODEV || rc == -ENOSPC || rc == -ERANGE ? ""
                     : vmm ? "; VMM memory must be exported as POSIX fds (CUDA "
                             "CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR; PyTorch: "
                             "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True without fabric "
                             "handles), or allocate with expandable_segments:False"
                     : "; a legacy IPC handle opens cudaMalloc memory only: memory from "
                       "cuMemCreate (PyTorch expandable_segments:True, VMM allocators) is "
                       "registered as KVF_POOL_CUDA_VMM by its POSIX fds");
            goto err_close;
        }
        int dev = gpu_mapping_device(r->map[i]);
        if (r->device >= 0 && dev != r->device) {
            snprintf(err, errlen, "pool %u is on GPU %d, an earlier pool of the rank on GPU %d: "
                     "a rank's pools must be on one GPU", i, dev, r->device);
            rc = -EINVAL;
            goto err_close;
        }
        r->device = dev;
        r->offset[i] = p->offset;
        r->mem.base[i] = (uint8_t *)gpu_mapping_ptr(r->map[i]) + p->offset;
    }
    *ret = r;
    return 0;

err_close:
    close_all(r);
    free(r);
    return rc;
}
