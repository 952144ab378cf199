/* gpu_priv.h: the inside of struct gpu, shared by daemon/gpu*.c only, and GPU_TRY.
 * Split by duty: gpu.c (discovery, lifetime, status), gpu_peer.c (peer access), gpu_ipc.c
 * (worker pool mappings), gpu_done.c (streams' completions to the loop), gpu_pin.c (pinned
 * arena, placement). */
#ifndef KVF_GPU_PRIV_H
#define KVF_GPU_PRIV_H

#include <pthread.h>

#include "cuda_err.h"
#include "gpu.h"
#include "gpu_retire.h"

/* GPU_TRY(call): evaluates to 0 or -errno and writes "call: reason (device N)" into err; needs
 * `dev`, `err` and `errlen` in scope. CUDA errors are converted here and nowhere else. */
#define GPU_TRY(call) cuda_err_check((int)(call), #call, dev, err, errlen)

struct gpu_mapping {
    struct gpu_mapping *next;
    uint8_t handle[GPU_IPC_HANDLE_BYTES];
    void *ptr;           /* owned: the IPC mapping */
    int device;          /* where the memory lives, as the worker declared it */
    int declared_device; /* what the worker said */
    int opened_on;       /* the device whose context the mapping was opened in: only kernels
                          * on that device may use ptr (gpu_ipc_view) */
    bool view;           /* a second mapping of an allocation, for kernels on opened_on */
    uint64_t bytes;      /* allocation size (declared size when it cannot be read) */
    bool size_verified;
    unsigned refs;
    /* a VMM pool (gpu_vmm.c): ptr is the reserved range, chunks the imported handles */
    bool vmm;
    uint32_t n_chunks;
    uint64_t chunk_bytes;
    unsigned long long *chunks; /* owned: CUmemGenericAllocationHandle each */
};

struct gpu_pinned {
    void *ptr; /* borrowed: the caller's memory */
    void *dev_ptr;
    uint64_t bytes;
    bool borrowed; /* page-locked by its owner already (a CUDA-aware UCX): not ours to unregister */
};

/* One outstanding completion; lives in g->pending until fired, then in g->done. */
struct gpu_done_node {
    struct gpu_done_node *prev, *next;
    struct gpu *g;
    struct CUstream_st *stream;
    int device;
    gpu_done_cb cb;
    void *arg;
    int status;
    uint64_t fired_ns; /* uv_hrtime when CUDA ran the host function; 0: failed by the watch */
    bool fired;
    bool synced;       /* gpu_free waited for its stream */
    bool watch_failed; /* failed by the watch: kept (a zombie) until gpu_free, in
                          case CUDA runs its host function after all */
    bool host_ran;     /* CUDA ran its host function (under done_mu): it may be freed */
    struct CUevent_st *ev; /* recorded after the work: the loop's spin polls it (gpu_spin.c) */
    uint64_t queued_ns;    /* uv_hrtime at gpu_notify: the spin's budget runs from here */
};

struct gpu_tprogs;

struct gpu {
    uv_loop_t *loop; /* borrowed: must outlive us */
    bool cpu_mode;
    char cpu_reason[GPU_REASON_MAX];
    int n_devices;
    struct gpu_device dev[GPU_MAX_DEVICES];
    struct CUstream_st *streams[GPU_MAX_DEVICES][GPU_STREAMS_PER_DEVICE]; /* owned */
    uint8_t peer_can[GPU_MAX_DEVICES][GPU_MAX_DEVICES];
    uint8_t peer_on[GPU_MAX_DEVICES][GPU_MAX_DEVICES];
    int peer_rank[GPU_MAX_DEVICES][GPU_MAX_DEVICES]; /* cudaDevP2PAttrPerformanceRank */

    struct gpu_mapping *mappings; /* owned list */
    size_t n_mappings;
    size_t max_mappings; /* <= GPU_MAX_MAPPINGS */
    uint64_t mapped_bytes;
    uint64_t mappings_opened, mapping_close_errors;

    struct gpu_pinned pinned[GPU_MAX_PINNED];
    size_t n_pinned;

    bool placement_decided;
    int placement_rc; /* 0 or the refusal */
    gpu_place_t placement;
    char placement_why[GPU_REASON_MAX];

    /* completions */
    uv_async_t done_async;
    uv_timer_t watch_timer;
    int handles_open; /* freed when the last close callback ran */
    bool freeing;
    pthread_mutex_t done_mu;      /* guards pending, done and every node's fired/status */
    struct gpu_done_node pending; /* sentinel: outstanding, not fired */
    struct gpu_done_node done;    /* sentinel: fired, awaiting the loop */
    struct gpu_done_node zombies; /* sentinel: delivered after a watch failure, not yet freed */
    struct gpu_done_node spun;    /* sentinel: delivered by the spin, host function still due */
    /* gpu_spin.c: the loop polls the events of fresh completions (loop thread only) */
    uv_idle_t spin_idle;
    uint64_t spin_ns; /* budget per completion from gpu_notify; 0: off (host functions only) */
    uint64_t spin_fired, spin_polls;
    struct CUevent_st *ev_pool[GPU_EV_POOL];
    int n_ev_pool;
    size_t outstanding;           /* loop thread only */
    uint64_t completions_ok, completions_failed;
    uint64_t wake_ns_total, wake_ns_max; /* host function -> callback on the loop */

    /* copy programs (gpu_progcache.c); loop thread only */
    struct gpu_prog *prog_head, *prog_tail; /* cached, most recently used first */
    uint32_t n_progs, max_progs;
    uint64_t prog_hits, prog_misses, prog_evicted, prog_uncached, prog_waited;
    uint64_t prog_lookup_ns, prog_make_ns, prog_evict_ns; /* gpu_progcache_stats */
    struct gpu_retire_list prog_retired; /* programs out of the cache, freed when idle */
    /* programs per plan template (gpu_tprog.c); loop thread only */
    struct gpu_tprogs *tprog_sets; /* every template's set, detached at gpu_free */
    uint32_t n_tprogs;
    uint64_t tprog_made, tprog_refused, req_template, req_ops;
    bool tprog_off; /* gpu.template_programs: false: every request uploads its own program */
};

/* gpu_spin.c (loop thread): an event recorded on stream for node n (NULL: none, no spin), the
 * spin armed for it, a node's event back to the pool, the idle handle's start and teardown. */
void gpu_spin_record(struct gpu *g, struct gpu_done_node *n);
void gpu_spin_arm(struct gpu *g);
void gpu_spin_put_event(struct gpu *g, struct gpu_done_node *n);
int gpu_spin_init(struct gpu *g);
void gpu_spin_stop(struct gpu *g);
/* gpu_done.c: node n completed (status), seen on the loop (false: it had fired already); then
 * the fired nodes' callbacks. */
bool gpu_done_fire(struct gpu *g, struct gpu_done_node *n, int status, uint64_t now);
void gpu_done_deliver(struct gpu *g);

/* gpu_peer.c: fills peer_can/peer_rank for discovered devices. 0 or -errno (err set). */
int gpu_peer_discover(struct gpu *g, char *err, size_t errlen);
/* gpu_ipc.c: the device of a pool about to be mapped: not CPU mode, in range, and with `now`
 * (a new mapping) below the mapping limit and not failed. 0 or -ENODEV/-ENOSPC (err set). */
int gpu_pool_device_check(const struct gpu *g, int device, bool now, char *err, size_t errlen);
/* gpu_ipc.c: links a new mapping in (one reference, counted). */
void gpu_mapping_link(struct gpu *g, struct gpu_mapping *m);
/* gpu_vmm.c: unmaps a VMM mapping and releases its chunks. 0 or -errno (err set). */
int gpu_vmm_unmap(struct gpu_mapping *m, char *err, size_t errlen);
/* gpu_ipc.c: closes every mapping (teardown). */
void gpu_ipc_close_all(struct gpu *g);
/* gpu_done.c: handle setup, teardown (sync streams, cancel), the watch. On failure after the
 * async handle was made, g belongs to the loop (handles_open > 0): its close callback frees it. */
int gpu_done_init(struct gpu *g);
void gpu_done_stop(struct gpu *g);
/* gpu_pin.c: unregisters every pinned range (teardown). */
void gpu_pin_release_all(struct gpu *g);
/* gpu.c: close callback of g's handles; the last one frees g. */
void gpu_handle_closed(uv_handle_t *h);
/* gpu.c: marks a device failed after a sticky error (logged once). */
void gpu_device_fail(struct gpu *g, int ordinal, const char *why);

#endif
