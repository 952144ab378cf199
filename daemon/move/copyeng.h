/* copyeng.h: the host copy executor off the loop (docs/DESIGN.md §5 "executors"). N copy threads
 * run copy programs (lib/copy.h: direct, gather, scatter) between mapped host pools and
 * extent buffers; the loop only submits and completes. Shaped as a mover's executor: one
 * submit of a job of parts, one completion callback, cancel.
 *
 * Threads. copyeng_new starts `threads` copy threads. Every function below is for the loop
 * thread that owns the engine (the one whose uv_loop_t it was given). Copy threads own
 * nothing but the piece they run: they read the job's copied ops and pool tables (immutable
 * after submit) and write the destination bytes; they touch no loop state, only the
 * engine's queues (one mutex) and the job's atomic counters. Completions go back to the loop
 * through one uv_async_t; callbacks run on the loop, never on a copy thread.
 *
 * Splitting. A part of more than COPYENG_PIECE_MIN bytes is cut into pieces of extent bytes
 * [lo, hi) (one per thread, at most COPYENG_PIECE_MAX each), so one large program uses every
 * thread and a cancel waits at most one piece per thread. Prefault pieces wait in a background
 * queue that threads take from only when every copy queue is empty, so a pool being prefaulted
 * at REGISTER never delays another rank's copies.
 *
 * NUMA. Where /sys/devices/system/node lists more than one node with CPUs, threads are
 * spread round-robin over the nodes and bound to their node's CPUs; a part is queued on the
 * node that holds its destination's first page (move_pages), and an idle thread takes work
 * from other nodes when its own queue is empty. One node: no binding, one queue.
 *
 * Ownership. copyeng_submit copies the parts' ops and pool tables into the job (the caller
 * may free its plan on return) and pins every pool mapping named (mempin.h), so the owner of
 * a mapping may let it go at any time (mempin_unmap) and it stays mapped until the job
 * ended. Extent buffers (gather's out, scatter's in) are borrowed: they must outlive the
 * job's callback or its cancel's end (e.g. an arena slot held until then). The job is owned
 * by the engine: it is freed after its callback returns, or after its last running piece
 * ended when it was cancelled.
 *
 * Errors. A submit fails (-EINVAL bad part, -ENOMEM) with nothing queued and nothing pinned.
 * A job's callback status is 0, -ECANCELED when the engine is freed under it (or it was
 * halted), or the first error of a copy into another process (buf_pid, dst_pid: -ESRCH,
 * -EPERM, -EFAULT; the job's other pieces still run). */
#ifndef KVF_COPYENG_H
#define KVF_COPYENG_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "copy.h"

#define COPYENG_MAX_THREADS 256u
#define COPYENG_MAX_PARTS 4096u
#define COPYENG_PIECE_MIN (256u << 10)
#define COPYENG_PIECE_MAX (4u << 20)

struct copyeng;
struct copyeng_job;

typedef enum {
    COPYENG_DIRECT = 0, /* src pools -> dst pools */
    COPYENG_GATHER,     /* src pools -> buf (extent bytes [lo, hi)) */
    COPYENG_SCATTER,    /* buf (extent bytes [lo, hi)) -> dst pools */
    COPYENG_PREFAULT,   /* the resident pages under src's runs mapped in (prefault.h; src: the
                         * pools to map, writable when .write); in the background: a thread
                         * takes such a piece only when no copy waits */
} copyeng_kind_t;

/* One program to run. ops ascend by ext_off and tile the program's extent (plan.h); the
 * caller has bounded them (copy_check) against src and dst. lo/hi: the extent bytes to move
 * (all kinds; hi == 0 means the whole extent). buf[0] is extent byte lo. */
struct copyeng_part {
    copyeng_kind_t kind;
    const struct copy_op *ops; /* copied at submit */
    uint32_t n_ops;
    const struct copy_mem *src; /* copied at submit; direct, gather, prefault */
    const struct copy_mem *dst; /* copied at submit; direct, scatter */
    uint8_t *buf;               /* borrowed: gather, scatter */
    uint32_t buf_pid;           /* gather: buf is an address in process buf_pid, written with
                                 * process_vm_writev (copy_remote.h); 0: in ours */
    uint32_t dst_pid;           /* direct: dst's pools are in process dst_pid (their bases are
                                 * addresses there, bounded by the caller; not pinned here),
                                 * written with process_vm_writev; 0: in ours */
    uint64_t lo, hi;
    bool write;                 /* prefault: populate writable (a destination), else readable */
};

/* What a finished job reports. */
struct copyeng_done {
    int status;       /* 0, -ECANCELED (the engine was freed: some pieces did not run), or a
                       * remote gather's error */
    uint64_t bytes;   /* extent bytes of all parts */
    uint64_t busy_ns; /* the copy threads' time on its pieces, summed */
    uint64_t wall_ns; /* submit to this callback */
};

/* On the loop when every piece of j has run; j is freed after it returns. */
typedef void (*copyeng_done_cb)(struct copyeng_job *j, const struct copyeng_done *d, void *user);

struct copyeng_params {
    uv_loop_t *loop;  /* borrowed: must outlive the engine */
    uint32_t threads; /* 1..COPYENG_MAX_THREADS; 0 = copyeng_default_threads() */
    uint32_t nodes;   /* 0 = the machine's NUMA nodes; > 0: that many queues, no CPU binding
                       * (tests exercise the node queues and stealing on one node) */
};

struct copyeng_stats {
    uint32_t threads, nodes;
    uint64_t jobs, pieces, bytes, busy_ns, cancelled, stolen;
    uint32_t queued_pieces, running_jobs;
};

/* Online CPUs, at least 1, at most COPYENG_MAX_THREADS. */
uint32_t copyeng_default_threads(void);

/* Starts the threads and the loop's async handle. 0 and *ret, or -EINVAL / -ENOMEM / -errno
 * (a thread could not start: those started are joined). */
int copyeng_new(const struct copyeng_params *p, struct copyeng **ret);
/* Cancels what is queued, waits for the running pieces, joins the threads, runs the
 * callbacks of jobs not cancelled with -ECANCELED, unpins, and closes the async handle: the
 * engine is freed from its close callback (run the loop once more). Accepts NULL; returns
 * NULL. */
struct copyeng *copyeng_free(struct copyeng *e);

/* Blocks the loop until every queued and running piece ended, then runs the callbacks of the
 * jobs that ended (cancelled ones: none). For teardown, before memory that running jobs borrow
 * (an arena slot) goes away; the engine stays usable. Accepts NULL. */
void copyeng_quiesce(struct copyeng *e);

/* Queues a job of n parts (1..COPYENG_MAX_PARTS). On success *ret (may be NULL) is the job
 * handle, valid until its callback returns or copyeng_cancel. */
int copyeng_submit(struct copyeng *e, const struct copyeng_part *parts, uint32_t n,
                   copyeng_done_cb cb, void *user, struct copyeng_job **ret);
/* The owner no longer wants j: its callback will not run; pieces not started are skipped;
 * its pins drop when the pieces running now ended. Returns at once (the loop never waits). */
void copyeng_cancel(struct copyeng_job *j);
/* The owner stops j: pieces not started are skipped; its callback still runs, once the pieces
 * running now ended (status -ECANCELED if one was skipped), so the owner knows when nothing
 * writes its destination any more. Returns at once. */
void copyeng_halt(struct copyeng_job *j);

void copyeng_get_stats(const struct copyeng *e, struct copyeng_stats *ret);
/* `status` section: threads, nodes, jobs_total, pieces_total, bytes_total, busy_seconds_total,
 * cancelled_total, stolen_total, queued_pieces, running_jobs. NULL on OOM. */
json_t *copyeng_stats_json(const struct copyeng *e);

#endif
