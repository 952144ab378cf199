/* tmplids.c: see tmplids.h. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "tmplids.h"

void ti_mem_copy(const struct copy_mem *m, struct copy_mem *ret, int poison)
{
    *ret = *m;
    for (uint32_t p = 0; p < m->n; p++) {
        ret->base[p] = malloc(m->size[p] ? m->size[p] : 1);
        ck_assert_ptr_nonnull(ret->base[p]);
        if (poison)
            memset(ret->base[p], PAR_POISON, m->size[p]);
        else
            memcpy(ret->base[p], m->base[p], m->size[p]);
    }
}

void ti_fill_random(struct copy_mem *m, uint64_t *rng)
{
    for (uint32_t p = 0; p < m->n; p++)
        for (uint64_t i = 0; i < m->size[p]; i += 8) {
            uint64_t v = par_rand(rng);
            memcpy(m->base[p] + i, &v, m->size[p] - i < 8 ? m->size[p] - i : 8);
        }
}

/* New distinct ids of like's counts for l into store: mode 0 consecutive, 1 reversed, 2 random
 * (a partial shuffle). */
void ti_new_ids(const struct layout *l, const struct plan_ids *like, int mode,
                    uint64_t *rng, uint32_t *store, struct plan_ids *ret)
{
    *ret = *like;
    for (uint32_t g = 0; g < l->n_groups; g++) {
        uint32_t n = like->n[g], items = l->groups[g].n_items;
        if (!like->ids[g])
            continue;
        ck_assert_uint_le(n, TI_MAX_IDS);
        uint32_t *all = malloc((size_t)items * sizeof *all);
        ck_assert_ptr_nonnull(all);
        uint32_t start = (uint32_t)(par_rand(rng) % (items - n + 1));
        for (uint32_t i = 0; i < items; i++)
            all[i] = i;
        for (uint32_t k = 0; k < n; k++) {
            uint32_t j = k + (uint32_t)(par_rand(rng) % (items - k)), x = all[k];
            all[k] = all[j];
            all[j] = x;
            store[k] = mode == 0 ? start + k : mode == 1 ? start + n - 1 - k : all[k];
        }
        free(all);
        ret->ids[g] = store;
        store += n;
    }
}
