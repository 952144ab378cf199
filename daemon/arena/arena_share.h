/* arena_share.h: bytes held per owner (peer daemon) in one arena, for its per-peer share
 * (arena.h). Internal to daemon/arena/. One thread. */
#ifndef KVF_ARENA_SHARE_H
#define KVF_ARENA_SHARE_H

#include <stdint.h>

#include "arena.h"

struct arena_shares;

struct arena_shares *shares_new(void);
void shares_free(struct arena_shares *s);
/* Adds to owner's bytes (owner 0 is not counted). -ENOMEM when the table cannot grow: the
 * bytes are then not counted, the caller grants anyway (the share is a guard, not a ledger). */
int shares_add(struct arena_shares *s, uint64_t owner, uint64_t bytes);
void shares_sub(struct arena_shares *s, uint64_t owner, uint64_t bytes);
uint64_t shares_bytes(const struct arena_shares *s, uint64_t owner);
uint32_t shares_list(const struct arena_shares *s, struct arena_owner *out, uint32_t max);

#endif
