/* layout_regions.c: region bounds and overlap checks for layout_validate (layout_regions.h).
 *
 * The unit checked is a span: a uniform view with L layers and N items, strides a (layer) and b
 * (item), region R, places region (i, j) at base + i*a + j*b; a per-layer view is one span per
 * layer (L = 1, its own pool and base). The rule checked, exactly:
 *  - inside the pool: base + (L-1)*a + (N-1)*b + R <= pool bytes (128-bit arithmetic; every
 *    input is <= 2^53 and counts are < 2^32, so nothing overflows);
 *  - within a view: regions are disjoint iff no difference (di, dj) != (0, 0), |di| < L,
 *    |dj| < N, has |di*a + dj*b| < R. For each di in [0, L) the dj that could hit form one
 *    integer interval, so the check is exact and costs O(L);
 *  - across two spans in one pool (any views, any groups; two layers of one per-layer view too):
 *    spans are sorted by (pool, start) and only those whose bounding ranges
 *    [base, base + (L-1)a + (N-1)b + R) intersect are compared (a sweep). For each
 *    layer pair (i, k) the item offsets that collide are solved exactly in O(1) when the two item
 *    strides are equal (the usual case: K/V or conv/ssm interleaved), else by walking the items
 *    of the view with fewer items. That walk shares a budget of LAYOUT_REGION_BUDGET steps per
 *    layout; a layout needing more is refused ("cannot prove disjoint"), never accepted
 *    unchecked. A stride is ignored where its count is 1. Views with no layers have no regions.
 *  - declared aliasing: spans of views of different groups that declare the same alias are not
 *    compared (they share memory by design; the planner checks each request's destinations). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "layout_regions.h"

#define LAYOUT_REGION_BUDGET (1u << 22)

typedef __int128 i128;

struct vgeom {
    i128 base, a, b, r, span; /* span: bounding range length */
    i128 l, n;
    uint32_t pool, gi, vi, layer; /* layer: of a per-layer span, else UINT32_MAX */
    const char *alias;            /* NULL: none */
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

/* Span of view (gi, vi): all its layers (uniform), or local layer `layer` (per-layer). */
static void geom(const struct layout *l, uint32_t gi, uint32_t vi, uint32_t layer, struct vgeom *g)
{
    const struct layout_group *gr = &l->groups[gi];
    const struct layout_view *v = &gr->views[vi];
    uint32_t n_layers = v->per_layer ? 1 : gr->n_layers;
    struct layout_loc at = layout_region_at(l, v, v->per_layer ? layer : 0, 0);
    g->base = at.off;
    g->pool = at.pool;
    g->l = n_layers;
    g->n = gr->n_items;
    g->a = n_layers > 1 ? (i128)v->layer_stride : 0;
    g->b = gr->n_items > 1 ? (i128)v->item_stride : 0;
    g->r = v->region_bytes;
    g->span = (g->l - 1) * g->a + (g->n - 1) * g->b + g->r;
    g->gi = gi;
    g->vi = vi;
    g->layer = v->per_layer ? layer : UINT32_MAX;
    g->alias = v->alias[0] ? v->alias : NULL;
}

/* "groups[g].views[v]" or "groups[g].views[v].per_layer[l]". */
static const char *span_name(const struct vgeom *g, char *buf, size_t len)
{
    if (g->layer == UINT32_MAX)
        snprintf(buf, len, "groups[%u].views[%u]", g->gi, g->vi);
    else
        snprintf(buf, len, "groups[%u].views[%u].per_layer[%u]", g->gi, g->vi, g->layer);
    return buf;
}

/* Within one span; returns the name of the colliding stride or NULL. */
static const char *self_overlap(const struct vgeom *g)
{
    if (hit(0, g->b, 1, g->n - 1, g->r, g->r))
        return "item_stride";
    for (i128 di = 1; di < g->l; di++)
        if (hit(di * g->a, g->b, -(g->n - 1), g->n - 1, g->r, g->r))
            return "layer_stride";
    return NULL;
}

/* Between two spans whose bounding ranges intersect; 1 overlap, 0 disjoint, -1 over budget. */
static int cross_overlap(const struct vgeom *x, const struct vgeom *y, uint64_t *budget)
{
    if ((uint64_t)(x->l * y->l) > *budget)
        return -1;
    *budget -= (uint64_t)(x->l * y->l);
    for (i128 i = 0; i < x->l; i++)
        for (i128 k = 0; k < y->l; k++) {
            i128 t = y->base + k * y->a - (x->base + i * x->a); /* y - x offsets at j = m = 0 */
            if (x->b == y->b) {
                if (hit(t, x->b, -(x->n - 1), y->n - 1, y->r, x->r))
                    return 1;
                continue;
            }
            /* Walk the items of the span with fewer, solve for the other's. */
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

static int span_cmp(const void *a, const void *b)
{
    const struct vgeom *x = a, *y = b;
    if (x->pool != y->pool)
        return x->pool < y->pool ? -1 : 1;
    if (x->base != y->base)
        return x->base < y->base ? -1 : 1;
    return 0;
}

/* Declared to share memory: same alias, different groups. */
static int aliased(const struct vgeom *x, const struct vgeom *y)
{
    return x->alias && y->alias && x->gi != y->gi && strcmp(x->alias, y->alias) == 0;
}

/* Later in declaration order (the one a message names first). */
static int later(const struct vgeom *x, const struct vgeom *y)
{
    if (x->gi != y->gi)
        return x->gi > y->gi;
    if (x->vi != y->vi)
        return x->vi > y->vi;
    return x->layer > y->layer;
}

static int check_span(const struct layout *l, const struct vgeom *x, char *err, size_t errlen)
{
    char nm[64];
    const struct layout_view *v = &l->groups[x->gi].views[x->vi];
    if (x->base + x->span > (i128)l->pools[x->pool].bytes)
        return err_inval(err, errlen,
                         "%s: the last region ends at byte %llu, past pool %u of %llu bytes",
                         span_name(x, nm, sizeof(nm)), (unsigned long long)(x->base + x->span),
                         x->pool, (unsigned long long)l->pools[x->pool].bytes);
    const char *f = self_overlap(x);
    if (f)
        return err_inval(err, errlen,
                         "groups[%u].views[%u].%s: regions of different (layer, item) overlap "
                         "(layer_stride %llu, item_stride %llu, region_bytes %llu)",
                         x->gi, x->vi, f, (unsigned long long)v->layer_stride,
                         (unsigned long long)v->item_stride, (unsigned long long)v->region_bytes);
    return 0;
}

static int check_pairs(struct vgeom *gs, uint32_t nv, char *err, size_t errlen)
{
    uint64_t budget = LAYOUT_REGION_BUDGET;
    qsort(gs, nv, sizeof(gs[0]), span_cmp);
    for (uint32_t i = 0; i < nv; i++)
        for (uint32_t j = i + 1; j < nv && gs[j].pool == gs[i].pool &&
                                 gs[j].base < gs[i].base + gs[i].span;
             j++) {
            if (aliased(&gs[i], &gs[j]))
                continue;
            const struct vgeom *p = later(&gs[i], &gs[j]) ? &gs[i] : &gs[j];
            const struct vgeom *q = p == &gs[i] ? &gs[j] : &gs[i];
            int rc = cross_overlap(q, p, &budget);
            char a[64], b[64];
            if (rc > 0)
                return err_inval(err, errlen,
                                 "%s.base: regions overlap those of %s in pool %u (views of "
                                 "different groups that share memory by design declare one alias)",
                                 span_name(p, a, sizeof(a)), span_name(q, b, sizeof(b)), p->pool);
            if (rc < 0)
                return err_inval(err, errlen,
                                 "%s.item_stride: cannot prove its regions disjoint from %s in "
                                 "pool %u within %u steps (bounding ranges intersect)",
                                 span_name(p, a, sizeof(a)), span_name(q, b, sizeof(b)), p->pool,
                                 LAYOUT_REGION_BUDGET);
        }
    return 0;
}

int layout_regions_check(const struct layout *l, char *err, size_t errlen)
{
    uint32_t n = 0;
    for (uint32_t gi = 0; gi < l->n_groups; gi++)
        for (uint32_t vi = 0; vi < l->groups[gi].n_views; vi++)
            if (l->groups[gi].n_layers)
                n += l->groups[gi].views[vi].per_layer ? l->groups[gi].n_layers : 1;
    struct vgeom *gs = malloc((n ? n : 1) * sizeof(*gs));
    if (!gs) {
        snprintf(err, errlen, "layout: out of memory checking regions");
        return -ENOMEM;
    }
    uint32_t nv = 0;
    int rc = 0;
    for (uint32_t gi = 0; gi < l->n_groups && !rc; gi++) {
        const struct layout_group *g = &l->groups[gi];
        for (uint32_t vi = 0; vi < g->n_views && !rc && g->n_layers; vi++) {
            uint32_t spans = g->views[vi].per_layer ? g->n_layers : 1;
            for (uint32_t s = 0; s < spans && !rc; s++) {
                geom(l, gi, vi, s, &gs[nv]);
                rc = check_span(l, &gs[nv++], err, errlen);
            }
        }
    }
    /* A pool of 0 bytes holds only views without layers: any view with layers overflowed above. */
    if (!rc)
        rc = check_pairs(gs, nv, err, errlen);
    free(gs);
    return rc;
}
