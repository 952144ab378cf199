/* pattern.h: the global deterministic test pattern used for bitwise parity (tests, kvferry-sim,
 * GPU suite). The value of every byte of a request's data is a function of logical coordinates
 * only: (seed, group name, global layer id, tensor name, logical item, outer index, GLOBAL head,
 * byte within the head's inner row); for paged groups (logical item, outer) enter as the request
 * token item * outer + o, so sides with different tokens_per_block agree. Rows sit where the
 * tensor's order (NHD, HND) puts them. So a context rank's shard and a generation rank's shard of
 * the same request agree wherever they hold the same logical byte, whatever their TP/PP/ADP,
 * view arrangement (joint/split, layer-/block-major) or pool placement.
 * Logical item: for paged groups the request's block index (ids[k] is request block
 * first_block + k: a prefix-cached generation rank holding the last n_gen of n_ctx blocks passes
 * first_block = n_ctx - n_gen); for state groups 0. Global head of local head h on a rank:
 * h + layout_first_head(). Pure; thread-safe. */
#ifndef KVF_PATTERN_H
#define KVF_PATTERN_H

#include <stddef.h>
#include <stdint.h>

#include "copy.h"
#include "layout.h"
#include "plan.h"

/* Writes the rank's shard of the request's pattern into its pools. */
void pattern_fill(const struct layout *l, const struct copy_mem *mem, const struct plan_ids *ids,
                  uint32_t first_block, uint64_t seed);

/* Compares the rank's pools with its shard of the pattern. Returns 0 when every byte matches;
 * else -1, writes the first differing byte's pool index and offset, and a description
 * ("group kda layer 3 tensor ssm item 0 outer 0 head 5 byte 17: got 0x12 want 0x34") to where. */
int pattern_verify(const struct layout *l, const struct copy_mem *mem, const struct plan_ids *ids,
                   uint32_t first_block, uint64_t seed, uint32_t *bad_pool, uint64_t *bad_off,
                   char *where, size_t wherelen);

/* The same for a prompt of `tokens` tokens (0: no limit): paged rows of request token >= tokens
 * are neither written nor checked. */
void pattern_fill_tokens(const struct layout *l, const struct copy_mem *mem,
                         const struct plan_ids *ids, uint32_t first_block, uint64_t seed,
                         uint64_t tokens);
int pattern_verify_tokens(const struct layout *l, const struct copy_mem *mem,
                          const struct plan_ids *ids, uint32_t first_block, uint64_t seed,
                          uint64_t tokens, uint32_t *bad_pool, uint64_t *bad_off, char *where,
                          size_t wherelen);
/* Only the paged rows of request token >= tokens (tokens > 0): that they still hold the
 * pattern of `seed` (what the rank wrote before a RECV that must leave them alone). */
int pattern_verify_past(const struct layout *l, const struct copy_mem *mem,
                        const struct plan_ids *ids, uint32_t first_block, uint64_t seed,
                        uint64_t tokens, uint32_t *bad_pool, uint64_t *bad_off, char *where,
                        size_t wherelen);

#endif
