/* readers.h: how many generation ranks will read a context rank's SEND when the worker left
 * n_readers 0 (kvferry.h): the daemon derives the count, so a context rank never has to replicate
 * the planner. One meaning on every path: the SEND is SENT once every generation rank that
 * reads it has read it; what "reads" counts follows the path's own tally (transfers.h):
 *  - same daemon: every generation rank RECVs every request (its instance's ranks: tp_size *
 *    pp_size; under attention-DP only the request's DP rank: pp_size);
 *  - between daemons: the generation ranks whose plan lists this context rank as a writer, found
 *    by planning each TP peer of the first reader (same PP stage, same ids). Other PP stages of a
 *    generation instance are not visible from here: with a generation pp_size > 1 the count
 *    stays unknown (0) and the SEND is released at its deadline, as before.
 * Pure functions over borrowed layouts; any thread. */
#ifndef KVF_READERS_H
#define KVF_READERS_H

#include <stdint.h>

#include "layout.h"
#include "plan.h"

/* The same-daemon count, from one generation rank's layout. */
uint32_t readers_local(const struct layout *gen);

/* The between-daemons count: `in` is the flow's plan input (in->gen the reading rank), writer the
 * context rank whose SEND it is. 0 when unknown (generation PP > 1, a plan failing). */
uint32_t readers_remote(const struct plan_input *in, uint32_t writer);

#endif
