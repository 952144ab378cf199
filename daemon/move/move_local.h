/* move_local.h: the same-daemon path's copy (docs/DESIGN.md §5): writers' copy programs from
 * their host pools straight into the generation rank's pools, by one executor chosen here for
 * both callers: a request whose every rank is at this daemon (request/xfer_local.c) and a
 * writer of a remote request registered here (engine/path_local.c). Below MOVE_LOCAL_INLINE_MAX
 * bytes, or without copy threads, the host row of move_exec.h copies inline on the loop (a
 * thread hop costs more); otherwise one job on the copy threads (copyeng.h: one part per
 * writer, the pools pinned until it ended, completion back on the loop). GPU pools are not
 * this module's: the request side's copies of them run as kernels (request/xfer_gpu.c).
 * Loop thread only. */
#ifndef KVF_MOVE_LOCAL_H
#define KVF_MOVE_LOCAL_H

#include <stddef.h>
#include <stdint.h>

#include "copy.h"
#include "copyeng.h"

#define MOVE_LOCAL_INLINE_MAX (256u << 10)

/* One writer: its program over its source pools (borrowed for the call: copied at submit). */
struct move_local_part {
    const struct copy_op *ops;
    uint32_t n_ops;
    const struct copy_mem *src;
};

/* n parts (bytes in all) into dst. MOVE_DONE: copied on return (nothing follows; *busy_ns
 * the loop's copy time). MOVE_STARTED: on the copy threads, *job its handle (copyeng_cancel,
 * copyeng_halt), cb(job, done, user) follows on the loop. < 0: the copy threads refused it,
 * the reason in msg; nothing runs. ce NULL: inline. */
int move_local_run(struct copyeng *ce, const struct move_local_part *parts, uint32_t n,
                   const struct copy_mem *dst, uint64_t bytes, copyeng_done_cb cb, void *user,
                   struct copyeng_job **job, uint64_t *busy_ns, char *msg, size_t len);

#endif
