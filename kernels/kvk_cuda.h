/* kvk_cuda.h: internals shared by the CUDA translation units of the copy kernels (C++ only):
 * the program object, the kernel's argument block, and KVK_TRY, which converts a CUDA error once,
 * where it arises, into -errno plus a message naming the call. */
#ifndef KVF_KVK_CUDA_H
#define KVF_KVK_CUDA_H

#include <cuda_runtime.h>
#include <pthread.h>

#include "kvf_kernels.h"
#include "kvk_subst.h"
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
    /* The device tables, one stream-ordered allocation (cudaMallocAsync on up_stream) of
     * `device`: the fat kernel reads d_ftasks only, the op kernel d_ops and d_tasks. */
    void *d_mem;              /* owned */
    struct kvk_op *d_ops;     /* inside d_mem, or NULL */
    struct kvk_task *d_tasks; /* inside d_mem, or NULL */
    struct kvk_ftask *d_ftasks; /* inside d_mem, or NULL */
    cudaStream_t up_stream;   /* borrowed: the upload's stream (NULL: the legacy stream) */
    cudaEvent_t ready;        /* owned: recorded after the upload; other streams wait for it */
    int uploaded;             /* the host saw `ready` complete: no stream needs to wait */
    int staged;               /* the upload read page-locked staging (else it waited for it) */
    int borrowed;             /* t's arrays are a template program's (kvk_tmpl.cu): not freed */
    struct kvk_tprogram *from; /* a request's program: d_mem and ready go back to from's spares */
};

#define KVK_TMPL_SPARE 8 /* a template's request tables (device memory + event) kept for reuse */

/* A program kept per plan template (kvk_tmpl.cu): host tables, launch shape and device tables
 * (in shape.d_mem: ops | op_first | subst), uploaded once on shape.up_stream. */
struct kvk_tprogram {
    struct kvk_tmpl h;            /* owned */
    struct kvk_program shape;     /* device, launch shape, d_mem, d_ops, up_stream, ready */
    const uint32_t *d_first;      /* inside shape.d_mem */
    const struct kvk_subst *d_subst;
    pthread_mutex_t mu;           /* over spare */
    uint32_t n_spare;
    struct {
        void *d_mem;
        cudaEvent_t ready;
    } spare[KVK_TMPL_SPARE];      /* tables of requests whose programs were freed (their
                                   * launches ended: reused on any stream, no allocation) */
};

/* A request's program from tp is done: its tables become a spare (or are freed). */
void kvk_tmpl_release(struct kvk_program *p);

/* The environment's tuning of a new program on device (kvf_kernels.h): threads, family,
 * unroll into p, the split's task size and piece alignment into the rest. 0 or -EINVAL. */
int kvk_program_config(struct kvk_program *p, int device, uint32_t *task_bytes,
                       uint32_t *piece_align);
/* Copies n host buffers, each at a 256-byte aligned offset (kvk_stage_off), into device memory
 * d on stream through the page-locked staging (no host wait), or, with no room there, through
 * a temporary buffer it waits for (*staged 0). device: the current one (its staging events are
 * kept for reuse). 0 or -errno. */
int kvk_stage_copy(void *d, const void *const *parts, const uint64_t *lens, int n,
                   int device, cudaStream_t stream, int *staged);
uint64_t kvk_stage_off(uint64_t v); /* v rounded up to the staging alignment */
/* Launches the expand kernel on stream (device current): tasks [0, n_tasks) of ops (with the
 * request's ids when subst: a template's program) into ftasks (fat) or tasks, and with ops_out
 * the substituted ops. 0 or -errno. */
int kvk_expand(const struct kvk_op *ops, const uint32_t *op_first, const struct kvk_subst *subst,
               const uint32_t *ids, uint32_t n_ops, uint32_t n_tasks, struct kvk_ftask *ftasks,
               struct kvk_task *tasks, struct kvk_op *ops_out, cudaStream_t stream);
/* Once per device: the stream-ordered pool keeps freed memory cached (kvk_upload.cu). */
void kvk_pool_keep(int device);

/* Uploads p's tables (p->t built, p->device current) on stream with no host wait: page-locked
 * staging (kvk_upload.cu), cudaMallocAsync, cudaMemcpyAsync, event. 0 or -errno. */
int kvk_upload(struct kvk_program *p, cudaStream_t stream);
/* Releases p's device tables (stream-ordered) and event (p->device current). */
void kvk_upload_free(struct kvk_program *p);
/* SM count and resident blocks per SM of p's kernel family on p's device, cached per process. */
int kvk_launch_shape(struct kvk_program *p);
/* Allocates the process's page-locked staging (kvk_warm calls it): 0 or -errno. */
int kvk_stage_init(void);
/* Loads the expand kernel and primes `device`'s stream-ordered pool (device current), so the
 * first program pays neither (kvk_warm calls it). 0 or -errno. */
int kvk_upload_warm(int device);

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
