/* bounce_way.h: the ways a bounce chunk leaves the context side (docs/DESIGN.md §5), as rows of
 * one table, chunk_ways[] (bounce_stage.c), tried in order for every granted landing slot, the
 * fewest copies first:
 *   device_am       a GPU writer's chunk gathered into its staging slot's device twin, sent as a
 *                   rendezvous message (bounce_dev.h: bdev_choose);
 *   gpu_to_peer     a kernel gathers it into the peer's landing slot, its arena mapped and
 *                   page-locked here (egpu_peer.h), then CHUNK;
 *   copy_to_peer    the copy threads gather it into the peer's landing slot mapped here
 *                   (shared memory, arena.shm_write copy), then CHUNK;
 *   cma_to_peer     the copy threads gather it into the landing slot at its address in the
 *                   peer daemon's process (process_vm_writev, arena.cma_write copy), then CHUNK;
 *   put_from_pools  one put per source run straight from the rank's pools (bounce_put.h:
 *                   bput_choose), flush, CHUNK;
 *   gather_put      gathered into a staging slot (or a heap buffer), put, flush, CHUNK;
 *   gather_am       gathered likewise, sent as one active message (rendezvous) the receiver
 *                   takes into the slot: the row that always applies.
 * A row is {name, choose, refused reasons, run, send}: choose says whether the row takes st's
 * chunk (0) or why not (the 1-based index of its reason); a choose that takes it leaves in st
 * what the run needs (the peer's slot, a pin). run starts it (a gather, or the wait for a
 * slot), and may still decline with a reason; send moves the gathered chunk. Each row's taken
 * count and every refusal are counted by reason in engine_counters.ways (stats
 * peers.chunk_ways, "row" and "row:reason"); the older names (peers.paths.chunk_*) read the
 * same counters. The chooses of rows without a file of their own are here; they call nothing
 * that calls back into a chunk's stages.
 *
 * Adding a way: its choose (here or in its mechanism's file), one value of bway_kind_t and one
 * row in chunk_ways[] with its run and send. Loop thread only. */
#ifndef KVF_BOUNCE_WAY_H
#define KVF_BOUNCE_WAY_H

typedef enum {
    BWAY_DEVICE_AM = 0,
    BWAY_GPU_TO_PEER,
    BWAY_COPY_TO_PEER,
    BWAY_CMA_TO_PEER,
    BWAY_PUT_FROM_POOLS,
    BWAY_GATHER_PUT,
    BWAY_GATHER_AM,
    BWAY__COUNT
} bway_kind_t;

#define BWAY_REASONS 6 /* refusal reasons a row may have at most */

#include <jansson.h>

struct engine;
struct stage;

/* stats peers.chunk_ways: each way's taken count ("row") and refusals ("row:reason"), from
 * chunk_ways[] (bounce_stage.c, where the table is). */
void bstage_ways_json(const struct engine *e, json_t *o);

/* Reasons, in the order of their numbers (1-based), of the chooses below. */
enum { BWAY_PEER_EXEC = 1, BWAY_PEER_SHM_PUT, BWAY_PEER_UNMAPPED, BWAY_PEER_OUTSIDE,
       BWAY_PEER_PIN };
enum { BWAY_CMA_GPU = 1, BWAY_CMA_NO_THREADS, BWAY_CMA_AM, BWAY_CMA_NO_LANE, BWAY_CMA_OUTSIDE };
enum { BWAY_PUT_NO_LANES = 1, BWAY_PUT_OUTSIDE };

/* gpu_to_peer: the writer's pools are on a GPU and its kernel may write the peer's landing slot
 * mapped here (pinned once per peer mapping: st->ppin, st->buf). */
int bway_gpu_to_peer(struct stage *st);
/* copy_to_peer: host pools, the peer's landing slot mapped here (st->buf). */
int bway_copy_to_peer(struct stage *st);
/* cma_to_peer: host pools, copy threads, the peer reachable over cma (st->buf, st->buf_pid). */
int bway_cma_to_peer(struct stage *st);
/* gather_put: the lanes to the peer do real puts and the grant lies in its arena. */
int bway_gather_put(struct stage *st);
/* gather_am: always. */
int bway_gather_am(struct stage *st);

#endif
