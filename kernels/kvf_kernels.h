/* kvf_kernels.h: CUDA kernels that execute a plan writer's copy program (struct copy_op,
 * lib/plan.h) on the GPU: gather (pools -> packed extent bytes [lo, hi)), scatter (extent bytes
 * [lo, hi) -> pools) and direct (pools -> pools, also to or from a peer GPU's memory). The GPU
 * twin of lib/copy.h, with the same meaning of every op.
 *
 * A program is uploaded once (kvk_program_new; kvk_program_new_async with no host wait; or
 * made per request from a plan template's program with only the request's ids uploaded,
 * kvk_program_of_ids, kvk_tmpl.cu): its
 * runs are split into tasks of at most KVK_TASK_BYTES, kept in device memory of the program's
 * device, with a host index of task extent offsets so a sub-range [lo, hi) finds its tasks by binary search. One launch copies a
 * whole chunk (many runs), on a stream the caller owns. 16-byte accesses where source, dest and
 * length allow, narrower accesses and a byte tail where not.
 *
 * Plain C header: usable from gcc-compiled C. Streams are `struct CUstream_st *`, which is what
 * cudaStream_t is (NULL: the legacy default stream). Pointers passed here are device-accessible
 * addresses: device memory of the program's device, a peer device's memory with peer access
 * enabled, or mapped pinned host memory (cudaHostAlloc mapped / cudaHostRegister mapped; pass
 * cudaHostGetDevicePointer's address).
 *
 * Errors: functions return 0 or a negative errno (-EINVAL bad argument, -ERANGE a program op
 * outside the given pools, -ENOMEM, -ENODEV no usable device, -EIO any other CUDA failure); the
 * CUDA call that failed and why is then in kvk_last_error() (thread-local). Nothing aborts.
 * Ownership: a program owns its device and host tables; ops passed in are copied.
 * Tuning (benchmarks): the environment at kvk_program_new may set KVK_TASK_BYTES (power of two,
 * 4 KiB..1 MiB, default 64 KiB), KVK_THREADS (threads per block, multiple of 32, 64..512,
 * default 512), KVK_FAT (1 default: self-contained tasks prefetched into shared memory; 0: task
 * + op tables), KVK_UNROLL (4 default, or 8 loads in flight per thread), KVK_PIECE_ALIGN (where
 * long runs are cut, power of two >= 16, default 4096) and KVK_PDL=0 (no programmatic
 * dependent launch). The bytes copied never depend on them (tests/gpu cover each).
 * Threads: a program is immutable after kvk_program_new; any thread may launch with it
 * concurrently (on any streams); kvk_program_free only after its launches completed. */
#ifndef KVF_KERNELS_H
#define KVF_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

struct CUstream_st;
struct kvk_program;

#define KVK_TASK_BYTES (64u * 1024u) /* most bytes one task (one block's unit of work) copies */

/* Device-accessible base address and size of each pool of one side, by pool index. */
struct kvk_mem {
    uint32_t n;
    uint64_t base[LAYOUT_MAX_POOLS];
    uint64_t size[LAYOUT_MAX_POOLS];
};

/* Validates the program (ascending ext_off tiling [0, bytes), no overflow, no negative address),
 * splits it into tasks and uploads them to `device`. Pool indices are checked at launch against
 * the kvk_mem given there; a program with src_pool == PLAN_POOL_UNKNOWN can only scatter.
 * Returns 0 and *ret, or -errno (kvk_last_error() says why). The current device is restored.
 * On return the upload has completed: a launch on any stream of the device sees the program. */
int kvk_program_new(const struct copy_op *ops, uint32_t n_ops, int device,
                    struct kvk_program **ret);
/* The same with no host wait (issue 12: programs uploaded without a synchronous step): the
 * tables go from page-locked staging to stream-ordered device memory on `stream` (NULL: the
 * legacy stream), ordered before any launch on that stream; a launch on another stream waits
 * for the upload on the GPU (an event), so any stream may use the program at once. When the
 * staging is exhausted the upload waits for its copy instead (kvk_program_staged says 0). */
int kvk_program_new_async(const struct copy_op *ops, uint32_t n_ops, int device,
                          struct CUstream_st *stream, struct kvk_program **ret);
/* 1 when p's upload read the page-locked staging (no host wait), 0 when it waited. */
int kvk_program_staged(const struct kvk_program *p);
/* Frees device tables (stream-ordered: cudaFreeAsync waits for nothing) and host tables;
 * only after every launch with p ended (and its upload's stream still exists). Accepts NULL;
 * returns NULL. */
struct kvk_program *kvk_program_free(struct kvk_program *p);

uint64_t kvk_program_bytes(const struct kvk_program *p); /* extent length */
uint32_t kvk_program_tasks(const struct kvk_program *p); /* tasks after splitting */
int kvk_program_device(const struct kvk_program *p);

/* Programs kept per plan template (docs/PLANNING.md "Templates", host tables kvk_subst.h):
 * the template's ops at item 0 (one per block, ext tiling as for kvk_program_new) with each
 * op's id slots and item strides, and each slot's limit (ids are below it). Uploaded once on
 * stream (no host wait, as kvk_program_new_async); the pools a launch is given must hold what
 * the largest ids reach (checked at each launch). 0 or -errno (kvk_last_error()). */
struct kvk_subst;
struct kvk_tprogram;
int kvk_tprogram_new(const struct copy_op *ops, const struct kvk_subst *subst, uint32_t n_ops,
                     const uint32_t *limit, uint32_t n_slots, int device,
                     struct CUstream_st *stream, struct kvk_tprogram **ret);
/* Only after every program made from it (kvk_program_of_ids) was freed. NULL-safe; NULL. */
struct kvk_tprogram *kvk_tprogram_free(struct kvk_tprogram *tp);
uint32_t kvk_tprogram_slots(const struct kvk_tprogram *tp);
uint32_t kvk_tprogram_tasks(const struct kvk_tprogram *tp);
/* One request's program from template tp: its n_ids ids (tp's slot order; each below its
 * slot's limit, else -ERANGE) uploaded on stream through the page-locked staging, and its task
 * table written by the GPU, in stream order (no host wait). Used like any program (gather,
 * scatter, direct on any stream; kvk_program_free, after its launches ended: its device tables
 * then serve tp's next request), while tp lives. Threads: any. */
int kvk_program_of_ids(struct kvk_tprogram *tp, const uint32_t *ids, uint32_t n_ids,
                       struct CUstream_st *stream, struct kvk_program **ret);

/* Extent bytes [lo, hi) from the source pools into out (out[0] is extent byte lo).
 * lo <= hi <= bytes. Asynchronous on stream (launched with the program's device current). */
int kvk_gather(const struct kvk_program *p, const struct kvk_mem *src, uint64_t lo, uint64_t hi,
               void *out, struct CUstream_st *stream);
/* Extent bytes [lo, hi) from in (in[0] is extent byte lo) into the destination pools. */
int kvk_scatter(const struct kvk_program *p, const void *in, uint64_t lo, uint64_t hi,
                const struct kvk_mem *dst, struct CUstream_st *stream);
/* Source pools straight into destination pools (the local path; either side may be a peer
 * device's memory). */
int kvk_direct(const struct kvk_program *p, const struct kvk_mem *src, const struct kvk_mem *dst,
               struct CUstream_st *stream);
/* Extent bytes [lo, hi) alone, pools to pools (a streamed SEND's final prefix, issue 28). */
int kvk_direct_range(const struct kvk_program *p, const struct kvk_mem *src, uint64_t lo,
                     uint64_t hi, const struct kvk_mem *dst, struct CUstream_st *stream);

/* Holds `blocks` SMs busy for ns nanoseconds of GPU time, asynchronously on stream (a prefill
 * layer's stand-in for tests and benchmarks, kvk_spin.cu): what is queued after it runs later.
 * 0 or -errno. */
int kvk_spin(uint64_t ns, uint32_t blocks, struct CUstream_st *stream);

/* Completion reporting for an event loop: fn(arg) runs on a CUDA-owned thread once every work
 * enqueued on stream before this call has finished. fn must only signal (uv_async_send, a
 * write to an eventfd) and must not call CUDA. If the stream hits an error fn may never run:
 * pair it with a deadline. Returns 0 or -errno. */
typedef void (*kvk_done_cb)(void *arg);
int kvk_notify_on_complete(struct CUstream_st *stream, kvk_done_cb fn, void *arg);

/* Loads every copy kernel onto `device` now (an occupancy query of each), so the first request
 * does not pay CUDA's lazy module loading (CUDA_MODULE_LOADING=LAZY, the default since 12.2),
 * allocates the process's upload staging (32 MiB page-locked, once) and primes the device's
 * stream-ordered memory pool (the program tables' home).
 * 0 or -errno. The current device is restored. */
int kvk_warm(int device);

/* Host time of program uploads by step (kvk_program_new*, kvk_tprogram_new and
 * kvk_program_of_ids), ns summed over the process's life and every thread, for profiles (the
 * daemon's status): host work (task index, id checks), device switches, event creation, device
 * allocation, the staging's piece, filling it, the copy's enqueue, the expand kernel's launch,
 * event records, waits on another stream's event. Returns the uploads counted. */
enum {
    KVK_STEP_HOST, KVK_STEP_DEVICE, KVK_STEP_EVENT_CREATE, KVK_STEP_ALLOC, KVK_STEP_STAGE_GET,
    KVK_STEP_FILL, KVK_STEP_COPY_ASYNC, KVK_STEP_EXPAND, KVK_STEP_EVENT_RECORD,
    KVK_STEP_STREAM_WAIT, KVK_UPLOAD_STEPS
};
uint64_t kvk_upload_steps(uint64_t ns[KVK_UPLOAD_STEPS]);
const char *kvk_upload_step_name(int i); /* "alloc", ... */
/* Internal: a monotonic clock, and `kvk_step(step, t0)` adds now - t0 to step, returns now. */
uint64_t kvk_step_now(void);
uint64_t kvk_step(int step, uint64_t t0);
void kvk_step_upload_done(void);

/* The last failure of this thread: "cudaMalloc(task table): out of memory
 * (cudaErrorMemoryAllocation)". Never NULL. */
const char *kvk_last_error(void);

/* Devices usable by this process: 0 when none or the driver is missing (why: kvk_last_error). */
int kvk_device_count(void);

#ifdef __cplusplus
}
#endif
#endif
