/* gpu.h: the daemon's CUDA plumbing (issue 6). One struct gpu per daemon, made at start from a
 * uv_loop_t (no struct daemon needed):
 *  - discovery: device count, names, PCI bus ids, the peer-access matrix. No GPU, no driver, a
 *    CUDA-less build or any CUDA error during discovery gives CPU mode with the reason recorded;
 *    never a failure of the daemon;
 *  - mappings of workers' GPU pools from their CUDA IPC handles, opened once on the device that
 *    holds the memory and closed when the rank goes;
 *  - peer access between device pairs (the same-node path);
 *  - daemon-owned streams, GPU_STREAMS_PER_DEVICE per device;
 *  - workers' CUDA interprocess events, opened once per rank, and the marks copies wait for on
 *    the GPU (gpu_event.c);
 *  - completion of stream work delivered to the loop: a host function (cudaLaunchHostFunc) only
 *    enqueues into a mutex-protected list and calls uv_async_send; the loop runs the callbacks.
 *    A stream that hits an error never runs its host functions: a timer notices the error while
 *    completions are outstanding and fails them, so nothing waits forever;
 *  - page-locking of the host arena (cudaHostRegister portable|mapped) and the arena placement
 *    decision (`device` only when UCX reports CUDA memory support), with the reason as text;
 *  - a status section.
 * CUDA errors are converted once, by GPU_TRY (gpu_priv.h), into -errno and a message that names
 * the call and the device ("cudaIpcOpenMemHandle: invalid argument (device 1)"); they fail the
 * registration or the request, never the daemon.
 * Ownership: struct gpu owns its streams, mappings, pinned registrations and its two libuv handles
 * (an async and a timer); it is freed from their close callbacks, so the loop must run after
 * gpu_free (daemon teardown does). Threads: loop thread only, except the internal host function.
 * Streams are `struct CUstream_st *`, which is what cudaStream_t is, so this header needs no CUDA
 * headers (the same convention as kernels/kvf_kernels.h). */
#ifndef KVF_GPU_H
#define KVF_GPU_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#define GPU_MAX_DEVICES 16
#define GPU_STREAMS_PER_DEVICE 4
#define GPU_IPC_HANDLE_BYTES 64 /* sizeof(cudaIpcMemHandle_t), = CUDA_POOL_HANDLE_BYTES */
#define GPU_MAX_MAPPINGS 4096   /* open IPC mappings per daemon */
#define GPU_MAX_MAPPING_BYTES (1ull << 42) /* 4 TiB: a larger declared pool is refused */
#define GPU_MAX_PINNED 64                  /* page-locked host ranges */
#define GPU_REASON_MAX 256
#define GPU_WATCH_MS 100 /* error check period while completions are outstanding */
#define GPU_EV_POOL 64    /* completion events kept for reuse */
#define GPU_SPIN_US_MAX 100000
#define GPU_EVENTS_MAX 256 /* CUDA interprocess events per rank (== KVF_EVENTS_MAX) */

struct CUstream_st;
struct CUevent_st;
struct gpu;
struct gpu_mapping;
struct gpu_events;

struct gpu_device {
    int ordinal;
    char name[256];
    char pci_bus_id[32]; /* "0000:18:00.0" */
    uint64_t memory_bytes;
    int cc_major, cc_minor;
    bool failed; /* a sticky CUDA error was seen: refuse new work */
    char failed_reason[GPU_REASON_MAX];
};

/* Runs discovery (may take a second on a GPU node: CUDA initialization) and inits the loop
 * handles. CPU mode is a success. Returns 0 and *ret, or -ENOMEM / a libuv error (-errno). */
int gpu_new(uv_loop_t *loop, struct gpu **ret);
/* Waits for the daemon streams (and any stream with a completion outstanding) to finish,
 * delivers outstanding completions with -ECANCELED, closes every mapping, unregisters pinned
 * memory, destroys the streams and closes the handles; the struct is freed by the last close
 * callback, so run the loop afterwards; call it before any walk that closes the loop's remaining
 * handles (daemon teardown: modules stop, then the walk). Blocks until the GPU work already
 * queued on the streams ends. Accepts NULL; returns NULL. */
struct gpu *gpu_free(struct gpu *g);

/* Discovery results. */
bool gpu_cpu_mode(const struct gpu *g);
const char *gpu_cpu_reason(const struct gpu *g);                       /* "" in GPU mode */
int gpu_device_count(const struct gpu *g);                             /* 0 in CPU mode */
const struct gpu_device *gpu_device(const struct gpu *g, int ordinal); /* NULL out of range */
/* This daemon's ordinal of the GPU with that PCI bus id (as cudaDeviceGetPCIBusId writes it, any
 * case), or -ENODEV. Workers may number GPUs differently (CUDA_VISIBLE_DEVICES); the bus id
 * names the same GPU in every process. */
int gpu_device_by_pci(const struct gpu *g, const char *pci_bus_id);

/* Peer access: can a's kernels reach b's memory (cudaDeviceCanAccessPeer), and did we enable it. */
bool gpu_peer_can_access(const struct gpu *g, int a, int b);
bool gpu_peer_enabled(const struct gpu *g, int a, int b);
/* Enables a -> b and b -> a (idempotent). 0, or -ENODEV (CPU mode, bad ordinal), -ENOTSUP
 * (the pair has no peer access), -errno from CUDA; message in err. */
int gpu_peer_enable(struct gpu *g, int a, int b, char *err, size_t errlen);
/* Enables every pair that can. Returns the number of pairs enabled, or the first error. */
int gpu_peer_enable_all(struct gpu *g, char *err, size_t errlen);

/* Maps the allocation a worker's pool lives in, from its IPC handle (the handle of a
 * cudaMalloc allocation; the pool is bytes [offset, offset + bytes) of it, as when a framework's
 * caching allocator hands out part of a block). `device` is the worker's ordinal, taken as said:
 * CUDA cannot tell an importer where IPC memory lives (pointer attributes name the importing
 * device), so a worker whose ordinals differ from ours (CUDA_VISIBLE_DEVICES) must translate
 * them (gpu_device_by_pci names a GPU exactly); a wrong ordinal still maps and copies correctly,
 * through peer access; gpu_mapping_device reports the ordinal used.
 * The declared range must lie inside the allocation (-ERANGE otherwise). The same handle opened
 * again (another pool of the same allocation, a re-registration) returns the same mapping with
 * one more reference. Returns 0 and *ret, or -errno with a message: -ENODEV (CPU mode with its
 * reason, bad or failed device), -EINVAL (empty or oversized range), -ENOSPC (GPU_MAX_MAPPINGS),
 * -ERANGE, or the error of cudaIpcOpenMemHandle named as such. */
int gpu_ipc_open(struct gpu *g, int device, const uint8_t handle[GPU_IPC_HANDLE_BYTES],
                 uint64_t offset, uint64_t bytes, struct gpu_mapping **ret, char *err,
                 size_t errlen);
/* Maps a worker's CUDA VMM pool (gpu_vmm.c): n_fds physical chunks of chunk_bytes each, exported
 * by the worker with cuMemExportToShareableHandle(POSIX_FILE_DESCRIPTOR) and passed with
 * SCM_RIGHTS (the fds stay the caller's), imported (cuMemImportFromShareableHandle) and mapped
 * back to back into one reserved range (cuMemAddressReserve, cuMemMap), readable and writable
 * from `device` and every device that has peer access to it (cuMemSetAccess), so kernels of
 * any of them use the same address (gpu_ipc_view returns the mapping itself). The pool is
 * bytes [offset, offset + bytes) of the range. Not shared between registrations. Returns 0 and
 * *ret, or -errno with a message naming the driver call: -ENODEV (CPU mode, bad device),
 * -EINVAL, -ENOSPC (GPU_MAX_MAPPINGS), -ERANGE, -ENOTSUP (a driver without the VMM API). */
int gpu_vmm_open(struct gpu *g, int device, const int *fds, uint32_t n_fds, uint64_t chunk_bytes,
                 uint64_t offset, uint64_t bytes, struct gpu_mapping **ret, char *err,
                 size_t errlen);
/* An IPC mapping serves kernels of the device it was opened on only (CUDA maps an IPC import
 * into the opening device's context; peer access does not reach it from another device). For a
 * kernel on `device` reading or writing m's allocation: the same allocation opened on `device`
 * (cudaIpcMemLazyEnablePeerAccess), one reference; m itself (one more reference) when m was
 * opened there. Counted among the mappings; release with gpu_ipc_close. 0, or -ENODEV (bad or
 * failed device), -ENOSPC, or the error of cudaIpcOpenMemHandle. */
int gpu_ipc_view(struct gpu *g, struct gpu_mapping *m, int device, struct gpu_mapping **ret,
                 char *err, size_t errlen);
/* Drops one reference; the last closes the IPC mapping (cudaIpcCloseMemHandle). No work that
 * touches the mapping may be in flight. A CUDA error on close is logged and counted; the mapping
 * is released anyway. Accepts NULL; returns NULL. */
struct gpu_mapping *gpu_ipc_close(struct gpu *g, struct gpu_mapping *m);
/* Lowers the open-mapping limit (1..GPU_MAX_MAPPINGS; default GPU_MAX_MAPPINGS): 0 or -EINVAL.
 * Mappings already open stay. */
int gpu_set_max_mappings(struct gpu *g, size_t max);
void *gpu_mapping_ptr(const struct gpu_mapping *m);      /* allocation base in this process */
int gpu_mapping_device(const struct gpu_mapping *m);     /* the pool's declared device */
int gpu_mapping_opened_on(const struct gpu_mapping *m);  /* whose kernels may use the ptr */
uint64_t gpu_mapping_bytes(const struct gpu_mapping *m); /* allocation size */
size_t gpu_mapping_count(const struct gpu *g);
uint64_t gpu_mapping_total_bytes(const struct gpu *g);

/* Daemon-owned stream idx % GPU_STREAMS_PER_DEVICE of a device; NULL in CPU mode or out of range.
 */
struct CUstream_st *gpu_stream(const struct gpu *g, int device, unsigned idx);

/* Completion: cb(arg, status) runs on the loop thread once all work enqueued on `stream` before
 * this call has finished (status 0), or with -errno when the stream's device reports an error
 * (the device is then marked failed), or -ECANCELED from gpu_free. `device` names the stream's
 * device. While completions are outstanding the loop stays alive. A foreign stream must outlive
 * its completions (the daemon's own streams do). Returns 0, or -errno with a message (the
 * callback will then never run). */
typedef void (*gpu_done_cb)(void *arg, int status);
int gpu_notify(struct gpu *g, int device, struct CUstream_st *stream, gpu_done_cb cb, void *arg,
               char *err, size_t errlen);
size_t gpu_notify_outstanding(const struct gpu *g);
/* How long (microseconds from gpu_notify, up to GPU_SPIN_US_MAX) the loop polls a completion's
 * event instead of waiting for CUDA's host function and the loop's wake-up (gpu_spin.c): the
 * loop does not sleep while such a completion is due. 0: host functions only. */
void gpu_set_completion_spin(struct gpu *g, uint64_t us);

/* Events (gpu_event.c, issue 28): a GPU rank's CUDA interprocess events, a ring it records
 * after each layer's writes and names in READY frames. Opened on `device` (the rank's pools'
 * GPU) from n handles (n * GPU_IPC_HANDLE_BYTES bytes of cudaIpcGetEventHandle), with a
 * stream of the set's own. 0 and *ret, or -errno with a message naming the event that does not
 * open (-ENODEV: CPU mode or no such GPU; -EINVAL: n out of 1..GPU_EVENTS_MAX). */
int gpu_event_open(struct gpu *g, int device, const uint8_t *handles, uint32_t n,
                   struct gpu_events **ret, char *err, size_t errlen);
/* Closes the events (a wait already queued keeps what it needs). NULL-safe; returns NULL. */
struct gpu_events *gpu_event_close(struct gpu_events *s);
uint32_t gpu_event_count(const struct gpu_events *s); /* 0 for NULL */
/* A READY naming event idx: the set's stream waits for idx's current record and records *mark
 * (a daemon event, made on first use; the caller owns it: gpu_event_mark_free) after it, so *mark
 * completes once that record has. 0, or -errno with a message (-EINVAL: idx past the set). */
int gpu_event_capture(struct gpu_events *s, uint32_t idx, struct CUevent_st **mark, char *err,
                      size_t errlen);
/* Work queued on stream after this waits on the GPU for mark's latest record (NULL: nothing
 * to wait for, 0). 0 or -errno with a message. */
int gpu_event_wait(struct CUstream_st *stream, struct CUevent_st *mark, char *err, size_t errlen);
/* Destroys a mark (released by CUDA once its record completed). NULL-safe; returns NULL. */
struct CUevent_st *gpu_event_mark_free(struct CUevent_st *mark);
/* A stream of its own on device for copies that wait for marks (a worker's event that never
 * completes then holds them alone, not the daemon's streams). Its owner frees it after its
 * completions came back (gpu_notify's rule for a foreign stream). 0 or -errno with why. */
int gpu_event_stream_new(struct gpu *g, int device, struct CUstream_st **ret, char *err,
                         size_t errlen);
/* Destroys it (CUDA releases it once its work ended). NULL-safe; returns NULL. */
struct CUstream_st *gpu_event_stream_free(struct CUstream_st *stream);

/* Page-locks host memory [ptr, ptr + bytes) for every device (cudaHostRegister portable|mapped)
 * and writes the device-side alias of ptr to *dev_ret. 0, or -ENODEV in CPU mode (host memory
 * needs no page-locking there), -ENOSPC (GPU_MAX_PINNED), -EINVAL, or the CUDA error. */
int gpu_host_register(struct gpu *g, void *ptr, uint64_t bytes, void **dev_ret, char *err,
                      size_t errlen);
/* Undoes gpu_host_register for ptr. 0, -ENOENT (not registered here) or the CUDA error. */
int gpu_host_unregister(struct gpu *g, void *ptr, char *err, size_t errlen);

/* Makes device dev's primary context current in this thread (cudaSetDevice, then a no-op
 * cudaFree(0) that creates it), for callers that allocate through the driver API themselves:
 * UCX's cuMemAlloc of the device arena (link_device_arena_map). 0, -ENODEV in CPU mode, or the
 * CUDA error. */
int gpu_make_current(struct gpu *g, int dev, char *err, size_t errlen);

/* Arena placement; the values follow config key arena.placement (auto, host, device). */
typedef enum { GPU_PLACE_AUTO = 0, GPU_PLACE_HOST = 1, GPU_PLACE_DEVICE = 2 } gpu_place_t;
const char *gpu_place_to_string(gpu_place_t p);
/* The decision, pure: `want` from config, have_gpu and no_gpu_reason from discovery, ucx_cuda
 * whether the UCX context reports CUDA memory support. Writes *ret (HOST or DEVICE) and the
 * reason into why and returns 0; or -EINVAL (bad want) / -ENODEV (device wanted, no GPU) /
 * -ENOTSUP (device wanted, UCX without CUDA) with what to change in why. */
int gpu_arena_decide(gpu_place_t want, bool have_gpu, const char *no_gpu_reason, bool ucx_cuda,
                     gpu_place_t *ret, char *why, size_t whylen);
/* The same from g's discovery; records the outcome (or the refusal) for gpu_status. */
int gpu_arena_placement(struct gpu *g, gpu_place_t want, bool ucx_cuda, gpu_place_t *ret, char *why,
                        size_t whylen);

/* Status section: mode and reason, devices, peer matrix, arena placement and why, pinned
 * ranges, open mappings (count, bytes), completions. Fills ret (an object the caller owns).
 * Returns 0 or -ENOMEM. */
int gpu_status(const struct gpu *g, json_t *ret);

#endif
