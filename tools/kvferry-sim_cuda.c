/* kvferry-sim_cuda.c: a simulated rank's GPU pools (--device / --devices). Each pool of the
 * layout is one cudaMalloc allocation (lib/cuda_pool.c) registered by its CUDA IPC handle. The
 * rank keeps its host memfd pools as staging: the context fills its pattern there and pushes
 * every pool to the GPU before it SENDs; the generation pushes its "wrong bytes" before it
 * RECVs and pulls every pool back to verify after DONE. Whole pools are copied (synchronous
 * cudaMemcpy), so the bytes checked are exactly the device's. Empty pools are not allocated. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pool.h"
#include "kvferry-sim.h"

struct sim_cuda {
    uint32_t n;
    struct cuda_pool *pool[LAYOUT_MAX_POOLS]; /* owned; NULL for empty pools */
};

int sim_cuda_device(const struct sim_opts *o, int32_t *ret, char *err, size_t errlen)
{
    *ret = -1;
    if (!o->devices)
        return 0;
    /* comma list: rank r takes entry r mod count */
    int32_t list[64];
    uint32_t n = 0;
    const char *s = o->devices;
    while (*s) {
        char *end;
        errno = 0;
        long v = strtol(s, &end, 10);
        if (errno || end == s || v < 0 || v > 1023 || (*end && *end != ',') || n == 64) {
            snprintf(err, errlen, "--devices '%s': want device ordinals, comma-separated",
                     o->devices);
            return -EINVAL;
        }
        list[n++] = (int32_t)v;
        s = *end ? end + 1 : end;
    }
    if (n == 0) {
        snprintf(err, errlen, "--devices: empty list");
        return -EINVAL;
    }
    *ret = list[(uint32_t)o->rank % n];
    return 0;
}

int sim_cuda_new(const struct layout *l, int32_t device, struct sim_cuda **ret, char *err,
                 size_t errlen)
{
    struct sim_cuda *c = calloc(1, sizeof *c);
    if (!c) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    c->n = l->n_pools;
    for (uint32_t i = 0; i < l->n_pools; i++) {
        if (l->pools[i].bytes == 0)
            continue;
        char why[256];
        int rc = cuda_pool_new(device, l->pools[i].bytes, &c->pool[i], why, sizeof why);
        if (rc) {
            snprintf(err, errlen, "GPU pool %u (%llu bytes on device %d): %s", i,
                     (unsigned long long)l->pools[i].bytes, device, why);
            sim_cuda_free(c);
            return rc;
        }
    }
    *ret = c;
    return 0;
}

struct sim_cuda *sim_cuda_free(struct sim_cuda *c)
{
    if (!c)
        return NULL;
    for (uint32_t i = 0; i < c->n; i++)
        c->pool[i] = cuda_pool_free(c->pool[i]);
    free(c);
    return NULL;
}

void sim_cuda_pools(const struct sim_cuda *c, const struct layout *l, struct kvf_pool *pools)
{
    for (uint32_t i = 0; i < l->n_pools; i++) {
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_CUDA, .device = l->pools[i].device,
                                     .bytes = l->pools[i].bytes, .fd = -1, .offset = 0};
        if (c->pool[i])
            memcpy(pools[i].ipc_handle, c->pool[i]->handle, sizeof pools[i].ipc_handle);
    }
}

int sim_cuda_push(struct sim_cuda *c, const struct copy_mem *host, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < c->n; i++) {
        int rc;
        if (c->pool[i] &&
            (rc = cuda_pool_write(c->pool[i], 0, host->base[i], host->size[i], err, errlen)))
            return rc;
    }
    return 0;
}

int sim_cuda_pull(const struct sim_cuda *c, struct copy_mem *host, char *err, size_t errlen)
{
    for (uint32_t i = 0; i < c->n; i++) {
        int rc;
        if (c->pool[i] &&
            (rc = cuda_pool_read(c->pool[i], 0, host->base[i], host->size[i], err, errlen)))
            return rc;
    }
    return 0;
}
