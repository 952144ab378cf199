/* engine_lost.h: peers lost a moment ago, and the death watch that frees what a frozen one held
 * (engine_lost.c). Loop thread only. */
#ifndef KVF_ENGINE_LOST_H
#define KVF_ENGINE_LOST_H

#include <stdbool.h>
#include <stdint.h>

#include "engine_int.h"

#define LOST_ROWS_MAX 16         /* lingering `lost` rows kept (watched ones are not dropped) */
#define LOST_KEEP_MS (5 * 60000) /* how long a row that holds nothing lingers */
#define LOST_WATCH_MAX 64        /* frozen peers watched for their exit at once */
#define LOST_POLL_MS 20          /* without a pidfd: how often a watched pid is looked at */
#define LOST_RETRY_MS 500        /* a held peer we dialed: dialed again after this, doubling */
#define LOST_RETRY_MAX_MS 30000  /* ... up to this */

/* Peer p (its link peer lp) was lost with err. held: its quarantined slots are held under key
 * until it fences its writes on a new link (engine_fence.c, quar_peer_frozen); then the pidfd of its process is taken from the
 * link and watched, and once that process exits they are reclaimed (quar_peer_back). */
void lost_add(struct engine *e, const struct epeer *p, struct link_peer *lp, int err, bool held,
              uint64_t key);
/* Held peers we had dialed are dialed again (backoff LOST_RETRY_MS doubling to
 * LOST_RETRY_MAX_MS) until their fence or exit ends the hold: a peer that comes back with no
 * request of ours for it gets its slots back all the same. From the engine's tick. */
uint64_t lost_redial(struct engine *e, uint64_t now);
/* The daemon of key holds nothing here any more (nothing was held when it came back, or its
 * fence ended the hold): its lingering row and watch go. */
void lost_back(struct engine *e, uint64_t key);
/* "lost": [{peer, addr, state, seen_ms, lost_ms, held, why}] added to o (the peers command). */
void lost_json(struct engine *e, json_t *o);
/* The lingering row of key: its daemon id and what its slots wait for (NULL: none). */
const struct elost *lost_find(const struct engine *e, uint64_t key, const char **id,
                              const char **why);
/* Closes the watches; their memory goes with the loop's close callbacks. */
void lost_stop(struct engine *e);

#endif
