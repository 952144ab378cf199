/* engine_fence.h: the proof that ends a returned peer's holds (engine_fence.c, docs/DESIGN.md
 * §6 "Quarantine that ends"). Loop thread only. */
#ifndef KVF_ENGINE_FENCE_H
#define KVF_ENGINE_FENCE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine_int.h"

/* Generation side: peer p is up (a new link of any direction). When landing slots or pools are
 * held for its daemon (a frozen or cut-off incarnation may still write them), they stay held and
 * p is sent a FENCE; else its lost row goes at once. */
void fence_peer_up(struct engine *e, struct epeer *p);
/* Generation side: the FENCE_DONE of m came on p: every write its daemon began into us before
 * the fence ended, so its holds end (the next tick reclaims, after any scatter reading them). */
void fence_on_done(struct engine *e, struct epeer *p, const struct wire_msg *m);
/* Context side: a FENCE came on p. Its daemon's other links of p's direction are closed (it
 * lost them: their flows fail), and FENCE_DONE goes out once no write into that daemon begun on
 * another link is in flight (fence_tick). */
void fence_on_fence(struct engine *e, struct epeer *p, const struct wire_msg *m);
/* Both sides: p is going down; its fences go (what they held stays held). */
void fence_peer_down(struct engine *e, struct epeer *p);
uint64_t fence_tick(struct engine *e, uint64_t now);
bool fence_pending(const struct engine *e);
void fence_free_all(struct engine *e);

#endif
