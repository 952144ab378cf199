/* readers.h: how many generation ranks will read a context rank's SEND when the worker left
 * n_readers 0 (kvferry.h): the daemon derives the count, so a context rank never has to replicate
 * the planner. One meaning on every path: the SEND is SENT once every generation rank that
 * reads it has read it; what "reads" counts follows the path's own tally (transfers.h):
 *  - same daemon: every generation rank RECVs every request (its instance's ranks: tp_size *
 *    pp_size; under attention-DP only the request's DP rank: pp_size);
 *  - between daemons: the generation ranks whose plan lists this context rank as a writer. In
 *    the reader's PP stage they are found by asking who writes for each TP peer of the reader (same stage,
 *    same ids; plan_writers, no copy program). Other stages are learnt from their own RECV_REQs (readers_tally): the count is
 *    complete once the stages seen hold every layer the context rank holds (PP stages hold
 *    disjoint layers, so no other stage reads it); until then it is unknown (0), and a count
 *    never completed (a plan failing) leaves the SEND to its deadline.
 * Pure functions over borrowed layouts; any thread. */
#ifndef KVF_READERS_H
#define KVF_READERS_H

#include <stdint.h>

#include "layout.h"
#include "plan.h"

/* The same-daemon count, from one generation rank's layout. */
uint32_t readers_local(const struct layout *gen);

/* What one SEND has learnt of its readers from the RECV_REQs planned so far (zeroed with it). */
struct readers_tally {
    uint64_t stages;                       /* generation PP stages seen (bit pp_rank) */
    uint32_t count;                        /* their readers of the writer */
    uint8_t layers[LAYOUT_MAX_LAYERS / 8]; /* global layers those stages hold */
};

/* The between-daemons count, called for each RECV_REQ planned against a SEND: `in` is the flow's
 * plan input (in->gen the reading rank), writer the context rank whose SEND it is, t the SEND's
 * tally. The count once known; 0 while unknown (stages unseen, a plan failing). */
uint32_t readers_remote(struct readers_tally *t, const struct plan_input *in, uint32_t writer);

#endif
