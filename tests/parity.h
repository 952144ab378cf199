/* parity.h: the bitwise parity harness shared by check_plan*.c (bodies in tests/support/parity.c).
 * A "side" is every rank of one instance built from a preset spec, with malloc'd pools and a
 * request's item ids per rank. The context side is filled with its shard of the global pattern;
 * each generation rank is planned, every writer's extent is gathered (whole, in odd chunks and
 * from random cut points) and scattered into POISONED generation pools through the generation
 * daemon's own plan (context ids unknown), then the whole generation pool is compared with the
 * expected image (poison + the rank's shard of the pattern): no missing byte, no stray write. */
#ifndef KVF_PARITY_H
#define KVF_PARITY_H

#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "pattern.h"
#include "plan.h"
#include "preset.h"

#define PAR_POISON 0xa5

struct par_side {
    struct preset_spec spec;
    uint32_t n;           /* ranks */
    struct layout *ranks; /* n */
    struct copy_mem *mem; /* n; pools owned */
    struct plan_ids *ids; /* n; ids point into idstore */
    uint32_t *idstore;
};

/* xorshift64*: the tests' seeded generator. */
uint64_t par_rand(uint64_t *s);

/* Builds every rank of spec, allocates its pools, and gives each rank a request of n_blocks
 * distinct random block ids per paged group and one random slot per state group. */
int par_side_init(struct par_side *s, const char *spec, layout_role_t role, uint32_t n_blocks,
                  uint64_t *rng, char *err, size_t errlen);

void par_side_free(struct par_side *s);

void par_poison(struct copy_mem *m);

/* Expected image of a generation rank's pools: poison + its shard of the pattern. */
void par_expected(const struct layout *l, const struct copy_mem *m, const struct plan_ids *ids,
                  uint32_t first_block, uint64_t seed, struct copy_mem *ret);

void par_mem_free(struct copy_mem *m);

void par_assert_equal(const struct copy_mem *got, const struct copy_mem *want,
                      const struct layout *l, const struct plan_ids *ids, uint32_t first_block,
                      uint64_t seed, const char *what);

struct par_opts {
    int32_t ctx_dp_rank; /* -1 unless the context runs attention-DP */
    uint64_t seed;
    int chunked; /* also gather/scatter in 4097-byte chunks and random cuts */
    uint64_t tokens; /* the request's prompt tokens (plan_input.tokens); 0: not given */
};

/* Gathers every writer's extent of plan `src_plan` (context ids known) in pieces and scatters
 * it with the generation daemon's plan `dst_plan` (same extents, context ids unknown). */
void par_move(const struct plan *src_plan, const struct plan *dst_plan, const struct par_side *ctx,
              const struct copy_mem *gmem, uint64_t chunk, uint64_t *rng);

struct plan_input par_input(const struct par_side *ctx, const struct par_side *gen, uint32_t gr,
                            const struct plan_ids *ctx_ids, int32_t dp_rank);

/* The whole parity run for one pair of specs. n_ctx_blocks / n_gen_blocks: the request's
 * blocks on each side, each in its own tokens_per_block (fewer generation tokens than context
 * tokens: prefix-cached generation side). Returns nothing; fails
 * the running test on any difference. Counts writers in *n_writers_total when not NULL. */
void par_run(const char *ctx_spec, const char *gen_spec, uint32_t n_ctx_blocks,
             uint32_t n_gen_blocks, const struct par_opts *o, uint32_t *n_writers_total);

#endif
