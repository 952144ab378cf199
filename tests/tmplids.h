/* tmplids.h: what the template-program suites share (bodies in tests/support/tmplids.c): new
 * ids of a request's shape, pools filled or poisoned, copies of pools. */
#ifndef KVF_TMPLIDS_H
#define KVF_TMPLIDS_H

#include <stdint.h>

#include "copy.h"
#include "layout.h"
#include "parity.h"
#include "plan.h"

#define TI_MAX_IDS 256 /* ids per group ti_new_ids writes: store holds LAYOUT_MAX_GROUPS of them */

/* A copy of m's pools (same sizes): poisoned (PAR_POISON), or m's bytes. Free: par_mem_free. */
void ti_mem_copy(const struct copy_mem *m, struct copy_mem *ret, int poison);
/* Every byte of m's pools from the seeded generator. */
void ti_fill_random(struct copy_mem *m, uint64_t *rng);
/* New distinct ids of like's counts for l into store (LAYOUT_MAX_GROUPS * TI_MAX_IDS): mode 0
 * consecutive, 1 reversed, 2 random. */
void ti_new_ids(const struct layout *l, const struct plan_ids *like, int mode, uint64_t *rng,
                uint32_t *store, struct plan_ids *ret);

#endif
