/* cuda_pool.h: worker-side GPU pools. A pool is one cudaMalloc allocation on one device, exported
 * with cudaIpcGetMemHandle so the node's daemon can map it (daemon/gpu/gpu.h, gpu_ipc_open). The
 * handle is CUDA_POOL_HANDLE_BYTES plain bytes: it travels in the worker protocol's REGISTER as is.
 * Fill/read helpers (cudaMemcpy, synchronous) exist for tests, the simulator and small tools;
 * the data path uses kernels on streams.
 *
 * Builds without CUDA: every call that needs a GPU returns -ENOTSUP with CUDA_ERR_NO_CUDA
 * ("this build has no CUDA; use host pools").
 * Ownership: a pool owns its allocation. CUDA leaves undefined what happens to a process that
 * still maps memory whose exporter freed it (or exited): free a pool only after the daemon
 * closed its mapping (the rank unregistered); the daemon never touches a gone rank's memory.
 * Threads: one pool from one thread at a time. Calls set the current device of the calling
 * thread to the pool's device and leave it there (CUDA's usual worker convention).
 * Processes: CUDA does not survive fork(); create pools after the last fork. */
#ifndef KVF_CUDA_POOL_H
#define KVF_CUDA_POOL_H

#include <stddef.h>
#include <stdint.h>

#define CUDA_POOL_HANDLE_BYTES 64        /* sizeof(cudaIpcMemHandle_t) */
#define CUDA_POOL_MAX_BYTES (1ull << 42) /* 4 TiB: larger requests are refused, not attempted */
#define CUDA_POOL_PCI_ID_MAX 32

struct cuda_pool {
    int32_t device;                         /* CUDA ordinal in this process */
    uint64_t bytes;                         /* as asked */
    void *dptr;                             /* owned: device address of the allocation */
    uint8_t handle[CUDA_POOL_HANDLE_BYTES]; /* cudaIpcMemHandle_t of dptr */
    char pci_bus_id[CUDA_POOL_PCI_ID_MAX];  /* "0000:18:00.0": names the GPU across
                                               processes whatever CUDA_VISIBLE_DEVICES */
};

/* Allocates `bytes` (1..CUDA_POOL_MAX_BYTES) on `device`, zero-filled, and exports its IPC handle.
 * Returns 0 and *ret, or -errno with a message in err: -EINVAL (bad size or device ordinal),
 * -ENODEV (no such device / no GPU), -ENOMEM, -ENOTSUP (no CUDA in this build), -EIO. */
int cuda_pool_new(int32_t device, uint64_t bytes, struct cuda_pool **ret, char *err, size_t errlen);
/* Frees the allocation. Accepts NULL; returns NULL. */
struct cuda_pool *cuda_pool_free(struct cuda_pool *p);

/* Copies len bytes between host memory and pool bytes [off, off + len). -ERANGE when the range
 * leaves the pool; -errno with a message on CUDA failure. Synchronous: written bytes are in
 * device memory, visible to every process mapping the pool, when it returns. */
int cuda_pool_write(struct cuda_pool *p, uint64_t off, const void *src, uint64_t len, char *err,
                    size_t errlen);
int cuda_pool_read(const struct cuda_pool *p, uint64_t off, void *dst, uint64_t len, char *err,
                   size_t errlen);
/* Sets pool bytes [off, off + len) to `byte` (cudaMemset). Synchronous. */
int cuda_pool_fill(struct cuda_pool *p, uint64_t off, uint64_t len, uint8_t byte, char *err,
                   size_t errlen);

/* Number of CUDA devices this process sees: 0..n, or -errno with the reason in err (no CUDA in
 * this build, no driver, CUDA_VISIBLE_DEVICES empty, ...). Initializes CUDA in this process. */
int cuda_pool_device_count(char *err, size_t errlen);

#endif
