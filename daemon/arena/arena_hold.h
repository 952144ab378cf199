/* arena_hold.h: memory a failed peer may still read, held per peer until it cannot (docs/UCX.md
 * "cma under peer error handling").
 *
 * Why. With CMA_MEMORY_INVALIDATE=y an error-handling endpoint carries active-message rendezvous
 * over cma: the receiving daemon reads the sender's buffer with process_vm_readv. UCX 1.13 only
 * claims the invalidation; nothing revokes a read once a send has failed. A peer that froze
 * (SIGSTOP, a stalled host) or was cut off while it held the rendezvous can still read when it
 * runs again. So a failed chunk's buffer on the sending side is not reused, nor freed, while
 * that peer may read it: a staging slot stays QUARANTINED in its arena under the peer's key
 * (arena_resv_close with in_flight), a heap buffer is handed to the hold.
 *
 * Per key (a peer daemon, the engine's share key) the hold keeps when it ends (end_ms, or
 * HOLD_UNTIL_TOLD) and what it holds: slots and bytes quarantined in the arena
 * under that key, and heap buffers. At hold_tick once now >= end_ms the arena's quarantined slots
 * of the key come back (arena_reclaim_peer) and the buffers are freed. The engine decides the
 * times: a backstop when a chunk fails while its peer still looks up, a short delay after the
 * peer is lost and its endpoint closed, "until told" while a frozen peer might still run, "now"
 * once its process exited or it was heard again. A key whose hold ended lingers HOLD_LINGER_MS
 * (empty), so a chunk that fails just after joins an ended hold instead of starting a backstop.
 *
 * One thread (the daemon loop); time explicit (now_ms from the caller). Never logs. */
#ifndef KVF_ARENA_HOLD_H
#define KVF_ARENA_HOLD_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"

#define HOLD_LINGER_MS 60000u
#define HOLD_UNTIL_TOLD UINT64_MAX /* an end time: not before another hold_set */

struct arena_hold;

struct hold_stats {
    uint32_t peers;            /* keys holding something, or told to */
    uint32_t slots, buffers;   /* held now */
    uint64_t bytes;            /* held now, slots and buffers */
    uint32_t peers_until_told; /* keys with no end time (a frozen peer) */
    uint64_t holds_total;      /* slots and buffers ever held */
    uint64_t reclaimed_total;  /* slots and buffers given back */
    uint64_t reclaimed_bytes_total;
    uint64_t longest_ms;       /* the longest hold that ended, hold to reclaim */
};

/* a: the arena whose quarantined slots the holds reclaim (borrowed: must outlive the hold).
 * 0 or -ENOMEM. */
int hold_new(struct arena *a, struct arena_hold **ret);
/* Frees held buffers (the arena's slots stay as they are). Accepts NULL, returns NULL. */
struct arena_hold *hold_free(struct arena_hold *h);

/* One failed chunk's memory under key: a staging slot of `bytes` the caller quarantined in the
 * arena under key (buf NULL), or a heap buffer (buf: owned by the hold from now, freed when the
 * hold ends). end_ms: when it may end if the key has no end time yet (a backstop); a key that
 * already has one keeps it. 0, -EINVAL (key 0), or -ENOMEM (nothing recorded: the caller keeps
 * buf, and a slot stays quarantined until hold_set or hold_release of key). */
int hold_add(struct arena_hold *h, uint64_t key, void *buf, uint64_t bytes, uint64_t end_ms,
             uint64_t now_ms);
/* The key's hold ends at end_ms (HOLD_UNTIL_TOLD: not before another hold_set). create: also for a key that
 * holds nothing yet (a peer lost with chunks still in flight to it), so the chunks that fail
 * next join this time. Returns -ENOMEM when it could not record a new key, else 0. */
int hold_set(struct arena_hold *h, uint64_t key, uint64_t end_ms, bool create);
/* Whether key holds anything now. */
bool hold_has(const struct arena_hold *h, uint64_t key);
/* Ends the holds whose time came (now_ms >= end_ms): reclaims and frees. Returns how many slots
 * and buffers came back. */
uint32_t hold_tick(struct arena_hold *h, uint64_t now_ms);
/* Whether a hold has an end time to wait for (the engine keeps its tick running). */
bool hold_timed(const struct arena_hold *h);
void hold_get_stats(const struct arena_hold *h, struct hold_stats *ret);
/* For `kvferryctl arena` (the "staging" object's "held"): peers, slots, buffers, bytes,
 * peers_until_told, holds_total, reclaimed_total, reclaimed_bytes_total, longest_ms. NULL on
 * OOM. */
struct json_t;
struct json_t *hold_stats_json(const struct arena_hold *h);

#endif
