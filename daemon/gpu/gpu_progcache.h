/* gpu_progcache.h: the daemon's cache of copy programs uploaded to GPUs (issue 12: "programs
 * cached per (layout pair, block-list shape) or uploaded without a synchronous step"). A
 * program is a plan writer's copy ops split into tasks and uploaded to one device
 * (kernels/kvf_kernels.h); its ops are a function of the two layouts and the request's block
 * ids, so the key is (device, the ops byte for byte): a request repeating an earlier one's ops
 * launches at once with no task build. A miss (every request of an engine that hands out new
 * block ids, where no plan template serves it: gpu_tprog.h) is made by make, which uploads in stream order with no host wait
 * (kvk_program_new_async), so a miss costs the task build on the loop and nothing else.
 * Bounded: at most max entries (GPU_PROGCACHE_MAX, lowered by gpu_progcache_set_max); past it
 * the least recently used entry nobody holds is evicted. Entries held by launches still in
 * flight are never evicted; when all are held, the new program is handed out uncached and
 * freed after its last reference. Programs leave through the gpu retire list (gpu_retire.h),
 * freed while no GPU completion is outstanding (the completion path flushes it when the GPUs
 * go idle); the free itself is stream-ordered (cudaFreeAsync) and waits for nothing.
 * A program is immutable once made; a launch on a stream other than its upload's waits for the
 * upload on the GPU (kvf_kernels.h), so launches on any stream may share a cached one.
 * The cache is generic over the program object (make/free callbacks), so its bookkeeping is
 * tested without a GPU (tests/check_gpu_progcache.c). Loop thread only. */
#ifndef KVF_GPU_PROGCACHE_H
#define KVF_GPU_PROGCACHE_H

#include <stddef.h>
#include <stdint.h>

#include "copy.h"

struct gpu;
struct gpu_prog;

#define GPU_PROGCACHE_MAX 64u /* a kimi-k3 8k program holds about 1.3 MiB of device tables */

/* Makes the program of ops on device (arg: gpu_prog_get's make_arg, e.g. the launch stream
 * the upload is ordered before): 0 and *ret when nothing waited on the host, 1 and *ret when
 * the upload had to wait (counted), or -errno with the reason in msg. */
typedef int (*gpu_prog_make_fn)(const struct copy_op *ops, uint32_t n_ops, int device,
                                void *arg, void **ret, char *msg, size_t len);
typedef void (*gpu_prog_free_fn)(void *prog);

/* The program of (device, ops) with one reference for the caller: the cached one, or one made
 * now by make (then cached, evicting past the limit). 0 and *ret, -ENOMEM, or make's error. */
int gpu_prog_get(struct gpu *g, const struct copy_op *ops, uint32_t n_ops, int device,
                 gpu_prog_make_fn make, void *make_arg, gpu_prog_free_fn free_fn,
                 struct gpu_prog **ret, char *msg, size_t len);
/* The program object make returned, and the cache's own copy of its ops (valid while held). */
void *gpu_prog_obj(const struct gpu_prog *p);
const struct copy_op *gpu_prog_ops(const struct gpu_prog *p);
/* Drops the caller's reference once its launches with the program ended. NULL-safe; NULL. */
struct gpu_prog *gpu_prog_put(struct gpu *g, struct gpu_prog *p);

/* A program made elsewhere (a template's, gpu_tprog.h) under the same reference counting and
 * retirement, never cached: one reference for the caller; free_fn(obj) once the last one went
 * (through the retire list). NULL when out of memory (obj is then the caller's still). */
struct gpu_prog *gpu_prog_wrap(struct gpu *g, void *obj, int device, gpu_prog_free_fn free_fn);
/* One more reference to p (held: refs > 0). Returns p. */
struct gpu_prog *gpu_prog_ref(struct gpu_prog *p);

/* Lowers or restores the limit (0..GPU_PROGCACHE_MAX; 0: nothing is cached); evicts past it.
 * 0 or -EINVAL. */
int gpu_progcache_set_max(struct gpu *g, uint32_t max);

struct gpu_progcache_stats {
    uint32_t count, max;                   /* entries cached, the limit */
    uint64_t hits, misses, evicted, uncached; /* uncached: handed out past a full, held cache */
    uint64_t waited;                       /* misses whose upload waited on the host */
    /* programs per plan template (gpu_tprog.h) */
    uint32_t tmpl_live;                    /* held by templates now */
    uint64_t tmpl_made, tmpl_refused;      /* made; refused (the request took the ops path) */
    uint64_t req_template, req_ops;        /* requests whose every program came from a template;
                                            * requests with one or more per-request programs */
    /* where gpu_prog_get's time goes (ns, summed): hash, scan and the key's copy; make (the
     * task index and upload); eviction (with the frees it triggers while the GPUs are idle) */
    uint64_t lookup_ns, make_ns, evict_ns;
};
void gpu_progcache_stats(const struct gpu *g, struct gpu_progcache_stats *ret);

/* Teardown (gpu_free, after the streams ended): frees every program now. */
void gpu_progcache_flush(struct gpu *g);

#endif
