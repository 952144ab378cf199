/* kvk_tasks.h: host side of the CUDA copy kernels, pure C (no CUDA headers): validates a copy
 * program, splits its runs into tasks of bounded size (the unit one thread block copies), finds
 * the tasks of an extent sub-range, and keeps the thread-local error message of kvf_kernels.h.
 * Built in every configuration, so its logic is unit-tested on CPU-only machines.
 * Ownership: kvk_tasks_build's result owns its arrays (free with kvk_tasks_done). */
#ifndef KVF_KVK_TASKS_H
#define KVF_KVK_TASKS_H

#include <stdint.h>

#include "kvf_kernels.h"
#include "layout.h"
#include "plan.h"

#ifdef __cplusplus
extern "C" {
#endif

#define KVK_MAX_TASKS (1u << 22) /* 256 GiB of extent at 64 KiB tasks */
#define KVK_TASK_MIN (4u * 1024u)
#define KVK_TASK_MAX (1024u * 1024u)
#define KVK_PIECE_ALIGN 4096u /* measured: 16-byte-aligned pieces cost 6% on H200 */

#ifdef __CUDACC__
#define KVK_HD __host__ __device__
#else
#define KVK_HD
#endif

/* One op as the kernel reads it: copy_op plus the alignment every offset, stride and length of
 * the op share (a power of two <= 16) and how it splits into tasks: runs of len >= task/2 cut
 * into pieces of `piece` bytes (each run ceil(len / piece) tasks), shorter runs grouped `group`
 * whole runs to a task (piece 0). */
struct kvk_op {
    uint64_t src_off, dst_off, ext_off, len, count;
    int64_t src_stride, dst_stride;
    uint32_t src_pool, dst_pool;
    uint32_t align;
    uint32_t piece, group;
    uint32_t pad_;
};

/* A task: `bytes` bytes of op `op` starting at byte `pos` of its run sequence (pos = k*len + j).
 * Either inside one run (runs of len >= task_bytes/2 are cut into equal 16-aligned pieces)
 * or whole consecutive runs (shorter runs are grouped). Extent offset: op.ext_off + pos. */
struct kvk_task {
    uint64_t pos;
    uint32_t op;
    uint32_t bytes;
};

/* A self-contained task (64 bytes, one prefetch per task): where its first byte is on each side
 * and, for a task of several runs, the run geometry. Pool offsets are of the task's first byte
 * (src_pos is 0 when the source is unresolved). len == 0: the task lies inside one run. */
struct kvk_ftask {
    uint64_t src_pos, dst_pos, ext_pos;
    int64_t src_stride, dst_stride;
    uint32_t len, j0;           /* several runs: run length, offset of the first byte in its run */
    uint32_t bytes;
    uint16_t src_pool, dst_pool;
    uint32_t align;
    uint32_t pad_;
};

struct kvk_tasks {
    uint64_t bytes;                        /* extent length */
    uint32_t task_bytes;                   /* most bytes of one task */
    uint32_t n_ops, n_tasks;
    struct kvk_op *ops;                    /* owned, n_ops */
    uint32_t *op_first;                    /* owned, n_ops + 1: op i's tasks [op_first[i], [i+1]) */
    struct kvk_task *tasks;                /* owned, n_tasks, ascending extent offset; NULL after
                                            * kvk_tasks_index (the GPU expands them) */
    uint64_t *ext;                         /* owned, n_tasks + 1: task extent starts, then bytes;
                                            * NULL after kvk_tasks_index */
    uint64_t need_src[LAYOUT_MAX_POOLS];   /* bytes each source pool must have */
    uint64_t need_dst[LAYOUT_MAX_POOLS];
    int src_unknown;                       /* some op has src_pool == PLAN_POOL_UNKNOWN */
};

/* Validates and splits into tasks of at most task_bytes (0: KVK_TASK_BYTES; else a power of two
 * in [KVK_TASK_MIN, KVK_TASK_MAX]); pieces of long runs start at multiples of piece_align
 * (0: KVK_PIECE_ALIGN; else a power of two in [16, task_bytes]). 0, or -EINVAL (bad tiling, pool index, overflow, negative
 * address, task size), -E2BIG (more than KVK_MAX_TASKS tasks), -ENOMEM; kvk_last_error() says
 * which op and why. */
int kvk_tasks_build(const struct copy_op *ops, uint32_t n_ops, uint32_t task_bytes,
                    uint32_t piece_align, struct kvk_tasks *ret);
/* The same without the per-task arrays (tasks, ext NULL): O(n_ops), what a launch needs when
 * the GPU expands the tasks from the ops (kvk_op_task). Same errors. */
int kvk_tasks_index(const struct copy_op *ops, uint32_t n_ops, uint32_t task_bytes,
                    uint32_t piece_align, struct kvk_tasks *ret);

/* Task k (0-based inside op o): its position in o's run sequence and its bytes. The one
 * definition of the split, for the host (kvk_tasks_build) and the GPU (the expand kernel). */
static inline KVK_HD void kvk_op_task(const struct kvk_op *o, uint64_t k, uint64_t *pos,
                                      uint32_t *bytes)
{
    uint64_t n;
    if (o->piece) {
        uint64_t per_run = (o->len + o->piece - 1) / o->piece, r = k / per_run;
        uint64_t j = (k - r * per_run) * o->piece;
        *pos = r * o->len + j;
        n = o->len - j < o->piece ? o->len - j : o->piece;
    } else {
        uint64_t step = (uint64_t)o->group * o->len, total = o->len * o->count;
        *pos = k * step;
        n = total - *pos < step ? total - *pos : step;
    }
    *bytes = (uint32_t)n;
}

/* The op holding task k: the last op whose first task is <= k (an empty op shares the next
 * op's first task, so it is never found). op_first as in struct kvk_tasks; k < its last. */
static inline KVK_HD uint32_t kvk_op_of_task(const uint32_t *op_first, uint32_t n_ops,
                                             uint32_t k)
{
    uint32_t a = 0, b = n_ops;
    while (b - a > 1) {
        uint32_t m = a + (b - a) / 2;
        if (op_first[m] <= k)
            a = m;
        else
            b = m;
    }
    return a;
}

/* The self-contained form of the task at pos (bytes long) of op o. */
static inline KVK_HD void kvk_ftask_of(const struct kvk_op *o, uint64_t pos, uint32_t bytes,
                                       struct kvk_ftask *f)
{
    uint64_t k0 = pos / o->len, j0 = pos - k0 * o->len;
    int single = j0 + bytes <= o->len;
    f->src_pos = o->src_pool == PLAN_POOL_UNKNOWN
                     ? 0 : o->src_off + (uint64_t)((int64_t)k0 * o->src_stride) + j0;
    f->dst_pos = o->dst_off + (uint64_t)((int64_t)k0 * o->dst_stride) + j0;
    f->ext_pos = o->ext_off + pos;
    f->src_stride = o->src_stride;
    f->dst_stride = o->dst_stride;
    f->len = single ? 0 : (uint32_t)o->len; /* several runs only when len < task size */
    f->j0 = single ? 0 : (uint32_t)j0;
    f->bytes = bytes;
    f->src_pool = (uint16_t)(o->src_pool == PLAN_POOL_UNKNOWN ? 0xffff : o->src_pool);
    f->dst_pool = (uint16_t)o->dst_pool;
    f->align = o->align;
    f->pad_ = 0;
}
void kvk_tasks_done(struct kvk_tasks *t);

/* Writes the self-contained form of t's tasks into out (t->n_tasks entries; the caller's
 * memory, e.g. a page-locked staging buffer the upload reads). */
void kvk_tasks_fat(const struct kvk_tasks *t, struct kvk_ftask *out);

/* Tasks intersecting extent bytes [lo, hi): [*first, *first + *n). lo < hi <= bytes. Needs
 * only the ops and op_first (works after kvk_tasks_index). */
void kvk_tasks_range(const struct kvk_tasks *t, uint64_t lo, uint64_t hi, uint32_t *first,
                     uint32_t *n);

/* 0 when mem covers every pool the program uses on that side ('s' or 'd'), else -ERANGE
 * (or -EINVAL for an unknown source pool) with the pool named in kvk_last_error(). */
int kvk_tasks_check_mem(const struct kvk_tasks *t, const struct kvk_mem *mem, char side);

/* Sets this thread's message (printf format) and returns err, for `return kvk_fail(...)`. */
int kvk_fail(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#ifdef __cplusplus
}
#endif
#endif
