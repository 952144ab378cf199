/* engine_share.h: the landing arena's per-peer share as the engine names it (engine_share.c).
 * Loop thread only. */
#ifndef KVF_ENGINE_SHARE_H
#define KVF_ENGINE_SHARE_H

#include <stddef.h>
#include <stdint.h>

#include "engine_int.h"

/* The share key of a peer daemon: a hash of its daemon id, so the inbound and outbound link
 * peers of one daemon, and its flows before and after a reconnect, count as one. Never 0. */
uint64_t share_key(const struct epeer *p);
/* The peer was lost for silence (keepalive, -ETIMEDOUT) over lanes that reach straight into our
 * memory (shared memory puts, or cma on this host: its copy threads may write our landing
 * slots with process_vm_writev, arena.cma_write): its quarantined slots wait until it is back
 * (quar_peer_frozen), since a frozen or cut-off peer may still write them. A peer lost by a
 * transport error (killed, reset) cannot write any more. */
bool alive_hold(const struct epeer *p, int err);
/* Why a writer of owner `owner` found no landing slot: what is free, in use and quarantined,
 * what this peer holds of its share, and who holds the most, by daemon id. */
void share_why(struct engine *e, uint64_t owner, char *buf, size_t len);
/* "holders": [{peer, bytes}] of the landing arena, added to o (the arena command). */
void share_json(struct engine *e, json_t *o);

#endif
