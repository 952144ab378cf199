/* bounce_exec.h: the executors of the bounce path (docs/DESIGN.md §5b): how a chunk's bytes get
 * between a rank's pools and an arena slot, one row per kind of pool memory: host pools
 * (bounce_host.c: on the copy threads, or inline without them) and GPU pools (engine_gpu.c:
 * kernels through the arena's device alias). The row is chosen once per side of a request,
 * where its plan is checked against the rank's mapped pools (bexec_of: plan_rx on the
 * generation side, plan_with on the context side), and kept in rx->bx / tx->bx; the drivers
 * (engine_gen.c, engine_ctx.c, bounce_land.c, bounce_stage.c) call through it and never test
 * which memory it is.
 *
 * Completion as in move_exec.h: scatter and gather return MOVE_DONE when the bytes are in place
 * on return (the caller goes on: bland_landed, the chunk's send), MOVE_STARTED when the copy goes
 * on (bh_scatter_ended / bstage_gathered follow on the loop), or < 0 with the reason in msg
 * (nothing runs). A started scatter counts in rx->scatters_running: the request holds a failure
 * until it ended.
 *
 * Adding an executor: one file with its functions and a `const struct bounce_exec`, one value
 * of bexec_kind_t and one row in bounce_execs[] (bounce_exec.c). Loop thread only. */
#ifndef KVF_BOUNCE_EXEC_H
#define KVF_BOUNCE_EXEC_H

#include <stdbool.h>
#include <stddef.h>

#include "engine_int.h"

typedef enum { BEXEC_HOST = 0, BEXEC_GPU, BEXEC__COUNT } bexec_kind_t;

struct bounce_exec {
    const char *name;
    /* Its gathers write only page-locked memory: the arena's staging slots, or a peer's landing
     * slot whose mapping is page-locked here (egpu_peer.h); no put straight from the pools and
     * no heap buffer for a chunk larger than a slot. */
    bool staging_only;
    /* The writers' programs of a planned request (generation side) or flow (context side),
     * KVF_OK or the error with msg. NULL: nothing to prepare. */
    kvf_error_t (*rx_start)(struct rx *rx, char *msg, size_t len);
    kvf_error_t (*tx_plan)(struct tx *tx, char *msg, size_t len);
    /* Landed chunk g of rx's writer widx into the rank's pools. */
    int (*scatter)(struct rx *rx, uint32_t widx, const struct arena_grant *g, char *msg,
                   size_t len);
    /* st's chunk from the writer rank's pools into st->buf. */
    int (*gather)(struct stage *st, char *msg, size_t len);
};

extern const struct bounce_exec *const bounce_execs[BEXEC__COUNT];

/* The row for rk's pools as its registration mapped them. */
const struct bounce_exec *bexec_of(const struct reg_rank *rk);

#endif
