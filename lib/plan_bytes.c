/* plan_bytes.c: the one accounting of request bytes (docs/DESIGN.md §4 rule 3). Every pool view
 * of every group counts: bytes = sum over groups g, views v of
 *   n_layers(g) x n_items[g] x region_bytes(v),
 * split into state (state groups) and kv (paged groups). Reservation, bounds checks, stats,
 * plan coverage and the bench all call this. Pure. */
#include "plan.h"

void plan_bytes(const struct layout *l, const uint32_t n_items[LAYOUT_MAX_GROUPS],
                struct request_bytes *ret)
{
    struct request_bytes b = {0};
    uint32_t ng = l->n_groups < LAYOUT_MAX_GROUPS ? l->n_groups : LAYOUT_MAX_GROUPS;
    for (uint32_t g = 0; g < ng; g++) {
        const struct layout_group *gr = &l->groups[g];
        uint32_t nv = gr->n_views < LAYOUT_MAX_VIEWS ? gr->n_views : LAYOUT_MAX_VIEWS;
        uint64_t per_item = 0;
        for (uint32_t v = 0; v < nv; v++)
            per_item += gr->views[v].region_bytes;
        uint64_t bytes = per_item * gr->n_layers * n_items[g];
        if (gr->kind == GROUP_STATE)
            b.state += bytes;
        else
            b.kv += bytes;
    }
    b.total = b.state + b.kv;
    *ret = b;
}

void plan_items_for_tokens(const struct layout *l, uint64_t tokens, uint32_t ret[LAYOUT_MAX_GROUPS])
{
    uint32_t tpb = l->tokens_per_block ? l->tokens_per_block : 1;
    uint64_t blocks = (tokens + tpb - 1) / tpb;
    if (blocks > UINT32_MAX)
        blocks = UINT32_MAX;
    for (uint32_t g = 0; g < LAYOUT_MAX_GROUPS; g++)
        ret[g] = 0;
    uint32_t ng = l->n_groups < LAYOUT_MAX_GROUPS ? l->n_groups : LAYOUT_MAX_GROUPS;
    for (uint32_t g = 0; g < ng; g++)
        ret[g] = l->groups[g].kind == GROUP_STATE ? 1 : (uint32_t)blocks;
}
