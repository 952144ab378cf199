/* kvk_cuda.h: internals shared by the CUDA translation units of the copy kernels (C++ only):
 * the program object, the kernel's argument block, and KVK_TRY, which converts a CUDA error once,
 * where it arises, into -errno plus a message naming the call. */
#ifndef KVF_KVK_CUDA_H
#define KVF_KVK_CUDA_H

#include <cuda_runtime.h>

#include "kvf_kernels.h"
#include "kvk_tasks.h"

#define KVK_THREADS 512       /* most threads per block (and the default) */
#define KVK_DEFAULT_FAT 1     /* kernel family: 0 task + op tables, 1 self-contained tasks */
#define KVK_DEFAULT_UNROLL 4  /* 16-byte loads in flight per thread */

typedef enum { KVK_GATHER = 0, KVK_SCATTER = 1, KVK_DIRECT = 2 } kvk_mode_t;

struct kvk_program {
    struct kvk_tasks t;       /* owned: host copy of ops and tasks, extent index */
    int device;
    int sm_count;
    int threads;              /* threads per block */
    int blocks_per_sm;        /* resident copy-kernel blocks per SM (occupancy) */
    int pdl;                  /* launch with programmatic dependent launch (env KVK_PDL=0: off) */
    int fat;                  /* kernel reads self-contained tasks (KVK_FAT), else task + op */
    int unroll;               /* 16-byte loads in flight per thread: 4 or 8 (KVK_UNROLL) */
    struct kvk_op *d_ops;     /* owned, device memory of `device` */
    struct kvk_task *d_tasks; /* owned, device memory of `device` */
    struct kvk_ftask *d_ftasks; /* owned, device memory of `device`; fat kernel only */
};

/* Kernel arguments, passed by value (about 300 bytes). */
struct kvk_args {
    const struct kvk_task *tasks;
    const struct kvk_op *ops;
    const struct kvk_ftask *ftasks;
    uint32_t first, n;        /* tasks [first, first + n) */
    uint32_t mode;            /* kvk_mode_t */
    uint32_t pad_;
    uint64_t lo, hi;          /* extent bytes to copy (direct: 0, bytes) */
    uint64_t ext;             /* address of extent byte lo (gather: out, scatter: in) */
    uint64_t src[LAYOUT_MAX_POOLS];
    uint64_t dst[LAYOUT_MAX_POOLS];
};

int kvk_cuda_fail(const char *call, cudaError_t e);

#define KVK_TRY(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess)                                                                 \
            return kvk_cuda_fail(#call, e_);                                                   \
    } while (0)

/* Makes `device` current and remembers the previous one; restore with kvk_device_leave. */
int kvk_device_enter(int device, int *prev);
void kvk_device_leave(int prev);

/* Resident blocks per SM of the program's kernel family (the lowest over its modes). */
int kvk_blocks_per_sm(const struct kvk_program *p, int *ret);

/* Launches the copy kernel over tasks [first, first + n) (program's device must be current). */
int kvk_launch(const struct kvk_program *p, struct kvk_args *a, cudaStream_t stream);

#endif
