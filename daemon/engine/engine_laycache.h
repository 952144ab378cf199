/* engine_laycache.h: the generation layout travels once per (peer link, rank registration).
 *
 * A RECV_REQ names its generation layout by layout_id (the rank's registration id: a rank that
 * registers again, with any layout, gets a new one) and layout_slot. The sender (generation side)
 * decides what the receiver keeps: it tracks which id each of the peer's WIRE_LAYOUT_SLOTS slots
 * holds, sends the layout JSON into the least recently used slot the first time, and a bare
 * reference afterwards. The receiver (context side) keeps the decoded layout in the named slot,
 * replacing what was there, and answers a reference to a slot that does not hold that id with
 * BAD_REQUEST (never planning against another layout). Both halves live in struct epeer, so a
 * lost or reconnected peer starts empty on both sides. A large RECV_REQ may ride an AM
 * rendezvous and be delivered after a later small one, so the sender names a layout only once
 * the peer has answered (CHUNK or WRITER_DONE) the flow that carried it: until then every
 * RECV_REQ carries the JSON again. Loop thread only. */
#ifndef KVF_ENGINE_LAYCACHE_H
#define KVF_ENGINE_LAYCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"
#include "wire.h"

struct laycache {
    /* generation side: the id the peer holds in each slot (0: none), last use for LRU, the flow
     * that last carried it and whether the peer answered that flow (then it holds the layout) */
    uint64_t sent_id[WIRE_LAYOUT_SLOTS], sent_used[WIRE_LAYOUT_SLOTS], tick;
    uint64_t sent_flow[WIRE_LAYOUT_SLOTS];
    bool sent_ok[WIRE_LAYOUT_SLOTS];
    /* context side: what the peer sent us, decoded (one reference each; NULL: empty) */
    uint64_t held_id[WIRE_LAYOUT_SLOTS];
    struct laycache_ent *held[WIRE_LAYOUT_SLOTS];
};

/* A decoded layout shared by the cache and the flows planned against it (a layout is 100 KB:
 * each flow borrows it instead of copying it). */
struct laycache_ent {
    uint32_t refs;
    struct layout l;
};

/* Generation side: true when the peer holds layout `id` (in *slot: send the reference only);
 * false: send the layout into *slot with flow `flow` (the slot is id's from now on; the least
 * recently used empty or answered slot is taken for a new id). */
bool laycache_place(struct laycache *c, uint64_t id, uint64_t flow, uint32_t *slot);
/* Generation side: the peer answered our flow; a layout that flow carried is held. */
void laycache_answered(struct laycache *c, uint64_t flow);
/* Generation side: the layout sent into slot may not have arrived (a failed send). */
void laycache_forget(struct laycache *c, uint32_t slot);

/* Context side: the layout a RECV_REQ names. A sent one is decoded and kept (*decoded = true),
 * replacing the slot's; a reference must match the slot's id. Returns the layout with a
 * reference for the caller (laycache_unref), or NULL with a message in err. */
const struct layout *laycache_take(struct laycache *c, const struct wire_recv_req *q,
                                   bool *decoded, char *err, size_t len);
/* Drops a reference laycache_take gave; the layout is freed with its last one. Accepts NULL. */
void laycache_unref(const struct layout *l);

/* Drops what the context side keeps (flows keep their references) and forgets both halves. */
void laycache_clear(struct laycache *c);

#endif
