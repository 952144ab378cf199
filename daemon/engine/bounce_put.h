/* bounce_put.h: the bounce path's put straight from the context rank's pools into the landing
 * slot, without the gather into a staging slot (docs/UCX.md "Put from the pools").
 *
 * Registration. A context rank's host pools are registered with UCX once, when it registers
 * (ucp_mem_map of the mapped pool, link_mem_register), and released when it goes: at once when
 * no put from them is in flight, else after the last such chunk's flush.
 *
 * The rule, per chunk (bput_choose, a row of bounce_way.h), counted by reason: a chunk is put
 * from the pools when the peer's put lanes are real puts (shared memory or RDMA: the landing
 * slot is in the peer's UCX-allocated arena; an active-message chunk needs one buffer), the rank
 * is registered, and the chunk's source runs (contiguous runs of the copy program, neighbours
 * merged) average at least arena.direct_run bytes; otherwise it is gathered first (each put
 * costs a UCX request: many small runs are cheaper gathered).
 *
 * Ownership. While a direct chunk is in flight its stage holds a reference on the registration
 * and the registration pins the rank's pool mappings (mempin.h), so a rank that disconnects
 * mid-put keeps its pools mapped and registered until the flush ended. Loop thread only. */
#ifndef KVF_BOUNCE_PUT_H
#define KVF_BOUNCE_PUT_H

#include <stdbool.h>

#include "engine_int.h"

/* REGISTER of a context rank with host pools: its pools are registered with UCX. */
void bput_rank_registered(struct engine *e, struct reg_rank *rk);
/* Before the registry removes rk: its registration goes now or after its last put. */
void bput_rank_removed(struct engine *e, struct reg_rank *rk);
/* engine_stop: every registration released (puts ended: the link is going). */
void bput_free_all(struct engine *e);
/* The choose of the way put_from_pools (bounce_way.h): 0 when st's chunk is put straight from
 * the pools, else why not (counted by chunk_ways[]; the older names peers.paths.chunk_gather_*
 * read the same counters). */
enum { BPUT_GPU_POOLS = 1, BPUT_NO_PUT_LANES, BPUT_DIRECT_OFF, BPUT_NO_REGISTRATION,
       BPUT_SMALL_RUNS };
int bput_choose(struct stage *st);
/* Issues the puts of st's chunk (direct) into its landing slot, each reporting to put_done(st);
 * st then holds the registration until bput_release. 0 or -errno (puts issued so far still
 * report; the caller flushes or finishes st). */
int bput_start(struct stage *st, link_done_cb put_done);
/* st's chunk ended: its hold on the registration drops. */
void bput_release(struct stage *st);

#endif
