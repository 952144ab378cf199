/* egpu_peer.h: a peer's arena, mapped here over shared memory (link_peer_arena_map), page-locked
 * for CUDA, so a GPU writer's gather kernel writes its chunk straight into the peer's landing
 * slot: one copy over PCIe (D2H into the slot the generation side scatters from), no staging
 * slot of this arena and no shared-memory put on the loop (docs/UCX.md "Copies into the peer's
 * arena", docs/DESIGN.md §5b).
 *
 * Ownership. A pin holds its link peer (link_peer_hold), so the mapping outlives it; every
 * stage whose kernel writes through it counts in its users (egpu_peer_use .. egpu_peer_unuse).
 * A pin is unpinned (cudaHostUnregister) and its peer released when the link no longer offers
 * that mapping (the peer went down, egpu_peer_down, or the last user left a closed one) and no
 * kernel uses it; egpu_peer_free_all at engine_stop, after every kernel was waited for. A
 * mapping CUDA refused is remembered: that peer's GPU chunks go through staging slots and puts
 * as before, and the refusal is logged once. Loop thread only. */
#ifndef KVF_EGPU_PEER_H
#define KVF_EGPU_PEER_H

#include <stddef.h>
#include <stdint.h>

#include "engine_int.h"

struct egpu_ppin;

/* A use of lp's arena, mapped here at base (len bytes), page-locked on first use (on the loop,
 * once per peer mapping; counted and timed); NULL when it cannot be (no GPU, CUDA refused it,
 * GPU_MAX_PINNED): then the chunk takes a staging slot. */
struct egpu_ppin *egpu_peer_use(struct engine *e, struct link_peer *lp, uint8_t *base, size_t len);
/* The kernel of one use ended (or never ran). */
void egpu_peer_unuse(struct engine *e, struct egpu_ppin *p);
/* The device alias of host address h inside p's mapping. */
void *egpu_peer_dev(const struct egpu_ppin *p, const uint8_t *h);
/* lp went down: its pins no kernel uses are unpinned now, the others when their last use ends. */
void egpu_peer_down(struct engine *e, struct link_peer *lp);
/* engine_stop, every kernel waited for: every pin unpinned, every peer released. */
void egpu_peer_free_all(struct engine *e);

#endif
