/* plangeo.h: the random geometries of check_plan_matrix and check_plan_template (bodies in
 * tests/support/plangeo.c): presets drawn from tiny, kimi-linear-48b, qwen3-next-80b and
 * llama-3-70b with random TP, PP (even and uneven), attention-DP, arrangements, view splits,
 * NHD/HND, block sizes (equal or one twice the other) and block counts on each side. */
#ifndef KVF_PLANGEO_H
#define KVF_PLANGEO_H

#include <stdbool.h>
#include <stdint.h>

#include "parity.h"

struct geo {
    char ctx[160], gen[160];
    uint32_t n_ctx, n_gen;
    int32_t dp;
    bool tiny, convert, gqa;
};

/* One geometry from the seeded generator (parity.h par_rand). */
void random_geo(struct geo *g, uint64_t *rng);
/* Both sides of g with their requests (par_side_init); fails the running test if refused. */
void geo_sides(const struct geo *g, struct par_side *c, struct par_side *gs, uint64_t *rng);

#endif
