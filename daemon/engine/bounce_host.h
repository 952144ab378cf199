/* bounce_host.h: the bounce path's host copies on the copy threads (daemon/move/copyeng.h): the
 * context side's gather into a staging slot and the generation side's scatter out of a landing
 * slot. The loop only submits and completes; nothing is copied inside a UCX callback (a CHUNK's
 * handler submits the scatter and returns, docs/UCX.md trap 14).
 *
 * Ownership. A job pins the rank's pool mappings (copyeng), so a rank that disconnects mid-copy
 * loses its pools only after the copy ended. The arena slot is held by its owner until the
 * completion ran: a staging stage is finished only after its gather's completion; a landing slot
 * stays FILLED in its reservation, is quarantined when the request fails and is not reclaimed
 * while a scatter of its flow runs (bh_flow_busy). A request with scatters running counts them
 * in rx->scatters_running (scatters into the rank's pools, GPU or host): it is not freed, and a
 * failure meanwhile reaches its worker only when they ended (xfer_hold, engine_gen.c).
 * engine_stop waits for every copy (bh_stop) before the arena is unmapped. Without a copy engine
 * (d->copy NULL) the copies run inline on the loop. Loop thread only. */
#ifndef KVF_BOUNCE_HOST_H
#define KVF_BOUNCE_HOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine_int.h"

/* Scatters landed chunk g (a grant of rx's writer widx) into the rank's pools. MOVE_DONE: the
 * bytes are in place (inline); MOVE_STARTED: bh_scatter_ended follows on the loop; < 0: the
 * reason in msg, nothing runs. */
int bh_scatter(struct rx *rx, uint32_t widx, const struct arena_grant *g, char *msg, size_t len);
/* Gathers st's chunk into st->buf. MOVE_DONE, or MOVE_STARTED (bstage_gathered follows on
 * the loop), or < 0 with the reason in msg. */
int bh_gather(struct stage *st, char *msg, size_t len);
/* st's flow ended: the rest of its gather is skipped (pieces running now finish), so a gather
 * into a failed peer's landing slot stops writing soon; bstage_gathered follows as usual. */
void bh_gather_halt(struct stage *st);
/* Whether a host copy of flow (landing side) still reads one of its slots. */
bool bh_flow_busy(const struct engine *e, uint64_t flow);
/* Teardown: waits for every copy of the engine and runs their completions. */
void bh_stop(struct engine *e);
/* A scatter of rx's writer widx (started under serial) into the rank's pools ended (status 0 or
 * -errno; who names the executor): the credit goes back, or the request fails; a failure held
 * while scatters ran reaches the worker when the last one ended. */
void bh_scatter_ended(struct rx *rx, uint32_t widx, uint32_t serial, const struct arena_grant *g,
                       int status, const char *who);

#endif
