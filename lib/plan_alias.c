/* plan_alias.c: the per-request check that declared aliasing needs (layout.h, DESIGN.md §4).
 * Views of different groups that declare one alias may share memory (vLLM's hybrid allocator:
 * a page is an attention block or a state slot, owned by one group at a time), so the
 * registration check cannot prove their regions disjoint; instead every request is checked
 * here: no two destination regions it writes on the generation rank overlap. Only aliased
 * views are collected: layout_validate proved every other region disjoint from all regions.
 * Pure. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan_internal.h"

struct aregion {
    uint64_t pool, off, end;
    uint32_t g, v, layer, item;
};

static int aregion_cmp(const void *a, const void *b)
{
    const struct aregion *x = a, *y = b;
    if (x->pool != y->pool)
        return x->pool < y->pool ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return 0;
}

static void describe(const struct layout *l, const struct aregion *r, char *buf, size_t len)
{
    const struct layout_group *g = &l->groups[r->g];
    snprintf(buf, len, "groups.%.*s view %.*s layer %" PRIu32 " %s %" PRIu32, LAYOUT_SHORT_MAX,
             g->name, LAYOUT_SHORT_MAX, g->views[r->v].name, r->layer,
             g->kind == GROUP_STATE ? "slot" : "block", r->item);
}

int plan_alias_check(const struct layout *gen, const struct plan_ids *ids, char *msg,
                     size_t msglen)
{
    size_t n = 0;
    for (uint32_t g = 0; g < gen->n_groups; g++)
        for (uint32_t v = 0; v < gen->groups[g].n_views; v++)
            if (gen->groups[g].views[v].alias[0])
                n += (size_t)gen->groups[g].n_layers * ids->n[g];
    if (n < 2)
        return 0;
    struct aregion *rs = malloc(n * sizeof(*rs));
    if (!rs)
        return -ENOMEM;
    size_t k = 0;
    for (uint32_t g = 0; g < gen->n_groups; g++) {
        const struct layout_group *gr = &gen->groups[g];
        for (uint32_t v = 0; v < gr->n_views; v++) {
            const struct layout_view *vw = &gr->views[v];
            if (!vw->alias[0])
                continue;
            for (uint32_t l = 0; l < gr->n_layers; l++)
                for (uint32_t i = 0; i < ids->n[g]; i++) {
                    struct layout_loc at = layout_region_at(gen, vw, l, ids->ids[g][i]);
                    rs[k++] = (struct aregion){at.pool, at.off, at.off + vw->region_bytes, g, v,
                                               gr->layers[l], ids->ids[g][i]};
                }
        }
    }
    qsort(rs, n, sizeof(*rs), aregion_cmp);
    int rc = 0;
    size_t far = 0; /* the region reaching furthest so far in this pool */
    for (size_t i = 1; i < n && !rc; i++) {
        if (rs[i].pool != rs[far].pool) {
            far = i;
            continue;
        }
        if (rs[i].off < rs[far].end) {
            char a[96], b[96];
            describe(gen, &rs[far], a, sizeof(a));
            describe(gen, &rs[i], b, sizeof(b));
            snprintf(msg, msglen,
                     "%s and %s overlap in pool %" PRIu64 " (aliased views: one request may not "
                     "write the same memory twice)",
                     a, b, rs[i].pool);
            rc = -EINVAL;
        } else if (rs[i].end > rs[far].end) {
            far = i;
        }
    }
    free(rs);
    return rc;
}
