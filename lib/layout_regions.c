/* layout_regions.c: region bounds and overlap checks for layout_validate (layout_regions.h).
 *
 * A view with L layers and N items, strides a (layer) and b (item), region R, places region
 * (i, j) at base + i*a + j*b. The rule checked, exactly:
 *  - inside the pool: base + (L-1)*a + (N-1)*b + R <= pool bytes (128-bit arithmetic; every
 *    input is <= 2^53 and counts are < 2^32, so nothing overflows);
 *  - within a view: regions are disjoint iff no difference (di, dj) != (0, 0), |di| < L,
 *    |dj| < N, has |di*a + dj*b| < R. For each di in [0, L) the dj that could hit form one
 *    integer interval, so the check is exact and costs O(L);
 *  - across two views in one pool (any groups): if their bounding ranges
 *    [base, base + (L-1)a + (N-1)b + R) do not intersect they are disjoint. Otherwise, for each
 *    layer pair (i, k) the item offsets that collide are solved exactly in O(1) when the two item
 *    strides are equal (the usual case: K/V or conv/ssm interleaved), else by walking the items
 *    of the view with fewer items. That walk shares a budget of LAYOUT_REGION_BUDGET steps per
 *    layout; a layout needing more is refused ("cannot prove disjoint"), never accepted
 *    unchecked. A stride is ignored where its count is 1. Views with no layers have no regions. */
#include <errno.h>
#include <stdio.h>

#include "errors.h"
#include "layout_regions.h"

#define LAYOUT_REGION_BUDGET (1u << 22)

typedef __int128 i128;

struct vgeom {
    i128 base, a, b, r, span; /* span: bounding range length */
    i128 l, n;
};

static i128 floor_div(i128 x, i128 d) /* d > 0 */
{
    i128 q = x / d;
    return (x % d != 0 && x < 0) ? q - 1 : q;
}

/* Is there a dj in [jlo, jhi] with -r1 < t + dj*b < r2 ? (b >= 0, r1, r2 > 0). Regions x and
 * y = x + delta overlap iff -y.region < delta < x.region. */
static int hit(i128 t, i128 b, i128 jlo, i128 jhi, i128 r1, i128 r2)
{
    if (jlo > jhi)
        return 0;
    if (b == 0)
        return -r1 < t && t < r2;
    i128 lo = floor_div(-r1 - t, b) + 1;  /* smallest dj with t + dj*b > -r1 */
    i128 hi = -floor_div(t - r2, b) - 1; /* largest dj with t + dj*b < r2: ceil((r2-t)/b) - 1 */
    if (lo < jlo)
        lo = jlo;
    if (hi > jhi)
        hi = jhi;
    return lo <= hi;
}

static void geom(const struct layout_view *v, uint32_t n_layers, uint32_t n_items, struct vgeom *g)
{
    g->base = v->base;
    g->l = n_layers;
    g->n = n_items;
    g->a = n_layers > 1 ? (i128)v->layer_stride : 0;
    g->b = n_items > 1 ? (i128)v->item_stride : 0;
    g->r = v->region_bytes;
    g->span = (g->l - 1) * g->a + (g->n - 1) * g->b + g->r;
}

/* Within one view; returns the name of the colliding stride or NULL. */
static const char *self_overlap(const struct vgeom *g)
{
    if (hit(0, g->b, 1, g->n - 1, g->r, g->r))
        return "item_stride";
    for (i128 di = 1; di < g->l; di++)
        if (hit(di * g->a, g->b, -(g->n - 1), g->n - 1, g->r, g->r))
            return "layer_stride";
    return NULL;
}

/* Between two views; 1 overlap, 0 disjoint, -1 over budget. */
static int cross_overlap(const struct vgeom *x, const struct vgeom *y, uint64_t *budget)
{
    if (y->base >= x->base + x->span || x->base >= y->base + y->span)
        return 0;
    for (i128 i = 0; i < x->l; i++)
        for (i128 k = 0; k < y->l; k++) {
            i128 t = y->base + k * y->a - (x->base + i * x->a); /* y - x offsets at j = m = 0 */
            if (x->b == y->b) {
                if (hit(t, x->b, -(x->n - 1), y->n - 1, y->r, x->r))
                    return 1;
                continue;
            }
            /* Walk the items of the view with fewer, solve for the other's. */
            int walk_x = x->n <= y->n;
            i128 steps = walk_x ? x->n : y->n;
            if ((uint64_t)steps > *budget)
                return -1;
            *budget -= (uint64_t)steps;
            for (i128 j = 0; j < steps; j++) {
                /* overlap iff -y.r < (y - x) < x.r, y - x = t + m*y.b - j*x.b */
                int h = walk_x ? hit(t - j * x->b, y->b, 0, y->n - 1, y->r, x->r)
                               : hit(t + j * y->b, x->b, -(x->n - 1), 0, y->r, x->r);
                if (h)
                    return 1;
            }
        }
    return 0;
}

int layout_regions_check(const struct layout *l, char *err, size_t errlen)
{
    struct vgeom gs[LAYOUT_MAX_GROUPS * LAYOUT_MAX_VIEWS];
    uint32_t gi_of[LAYOUT_MAX_GROUPS * LAYOUT_MAX_VIEWS],
        vi_of[LAYOUT_MAX_GROUPS * LAYOUT_MAX_VIEWS];
    uint32_t pool_of[LAYOUT_MAX_GROUPS * LAYOUT_MAX_VIEWS];
    uint32_t nv = 0;
    for (uint32_t gi = 0; gi < l->n_groups; gi++) {
        const struct layout_group *g = &l->groups[gi];
        for (uint32_t vi = 0; vi < g->n_views; vi++) {
            const struct layout_view *v = &g->views[vi];
            if (g->n_layers == 0)
                continue; /* no regions */
            struct vgeom *x = &gs[nv];
            geom(v, g->n_layers, g->n_items, x);
            if (x->base + x->span > (i128)l->pools[v->pool].bytes)
                return err_inval(err, errlen,
                            "groups[%u].views[%u]: the last region ends at byte %llu, past pool %u "
                            "of %llu bytes",
                            gi, vi, (unsigned long long)(x->base + x->span), v->pool,
                            (unsigned long long)l->pools[v->pool].bytes);
            const char *f = self_overlap(x);
            if (f)
                return err_inval(
                    err, errlen,
                    "groups[%u].views[%u].%s: regions of different (layer, item) overlap "
                    "(layer_stride %llu, item_stride %llu, region_bytes %llu)",
                    gi, vi, f, (unsigned long long)v->layer_stride,
                    (unsigned long long)v->item_stride, (unsigned long long)v->region_bytes);
            gi_of[nv] = gi;
            vi_of[nv] = vi;
            pool_of[nv] = v->pool;
            nv++;
        }
    }
    /* A pool of 0 bytes holds only views without layers: any view with layers overflowed above. */
    uint64_t budget = LAYOUT_REGION_BUDGET;
    for (uint32_t p = 0; p < nv; p++)
        for (uint32_t q = 0; q < p; q++) {
            if (pool_of[p] != pool_of[q])
                continue;
            int rc = cross_overlap(&gs[q], &gs[p], &budget);
            if (rc > 0)
                return err_inval(
                    err, errlen,
                    "groups[%u].views[%u].base: regions overlap those of groups[%u].views[%u] "
                    "in pool %u",
                    gi_of[p], vi_of[p], gi_of[q], vi_of[q], pool_of[p]);
            if (rc < 0)
                return err_inval(
                    err, errlen,
                    "groups[%u].views[%u].item_stride: cannot prove its regions disjoint from "
                    "groups[%u].views[%u] in pool %u within %u steps (bounding ranges "
                    "intersect and item strides differ)",
                    gi_of[p], vi_of[p], gi_of[q], vi_of[q], pool_of[p], LAYOUT_REGION_BUDGET);
        }
    return 0;
}
