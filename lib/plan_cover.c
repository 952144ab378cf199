/* plan_cover.c: coverage check of a finished plan (docs/DESIGN.md §4 rule 8), independent of how
 * the plan was built. It expands every op's destination runs, sorts them, refuses any overlap,
 * and compares their union with the union of the request's declared regions (every view of
 * every layer of every item of every group of the generation rank). Equal unions plus no
 * overlap means every destination byte is written exactly once. It also checks each writer's
 * ops tile its extent [0, bytes) in ascending ext_off, and that the extents sum to plan_bytes()
 * of the request. Pure. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "plan_internal.h"

struct ivl {
    uint64_t pool, off, len;
};

struct ivec {
    struct ivl *v;
    size_t n, cap;
};

static int ivec_push(struct ivec *a, uint64_t pool, uint64_t off, uint64_t len)
{
    if (len == 0)
        return 0;
    if (a->n && a->v[a->n - 1].pool == pool && a->v[a->n - 1].off + a->v[a->n - 1].len == off) {
        a->v[a->n - 1].len += len; /* adjacent: keep the list short */
        return 0;
    }
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 256;
        struct ivl *v = realloc(a->v, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        a->v = v;
        a->cap = cap;
    }
    a->v[a->n++] = (struct ivl){pool, off, len};
    return 0;
}

static int ivl_cmp(const void *a, const void *b)
{
    const struct ivl *x = a, *y = b;
    if (x->pool != y->pool)
        return x->pool < y->pool ? -1 : 1;
    if (x->off != y->off)
        return x->off < y->off ? -1 : 1;
    return 0;
}

/* Sorts, refuses any overlap, merges adjacent intervals in place. Returns the index of the
 * first overlapping interval + 1, or 0. */
static size_t sort_merge(struct ivec *a)
{
    if (a->n == 0)
        return 0;
    qsort(a->v, a->n, sizeof(a->v[0]), ivl_cmp);
    size_t w = 0;
    for (size_t i = 1; i < a->n; i++) {
        struct ivl *last = &a->v[w];
        if (a->v[i].pool == last->pool && a->v[i].off < last->off + last->len)
            return i + 1;
        if (a->v[i].pool == last->pool && a->v[i].off == last->off + last->len)
            last->len += a->v[i].len;
        else
            a->v[++w] = a->v[i];
    }
    a->n = w + 1;
    return 0;
}

static int expected_regions(const struct layout *gen, const struct plan_ids *ids, struct ivec *a)
{
    for (uint32_t g = 0; g < gen->n_groups; g++) {
        const struct layout_group *gr = &gen->groups[g];
        for (uint32_t l = 0; l < gr->n_layers; l++)
            for (uint32_t v = 0; v < gr->n_views; v++) {
                const struct layout_view *vw = &gr->views[v];
                for (uint32_t k = 0; k < ids->n[g]; k++) {
                    struct layout_loc at = layout_region_at(gen, vw, l, ids->ids[g][k]);
                    if (ivec_push(a, at.pool, at.off, vw->region_bytes))
                        return -ENOMEM;
                }
            }
    }
    return 0;
}

int plan_cover_check(const struct plan *p, const struct layout *gen, const struct plan_ids *ids,
                     char *msg, size_t msglen)
{
    struct ivec got = {0}, want = {0};
    int rc = -ENOMEM;
    uint64_t sum = 0;
    for (uint32_t w = 0; w < p->n_writers; w++) {
        const struct plan_writer *wr = &p->writers[w];
        uint64_t ext = 0;
        for (uint32_t i = 0; i < wr->n_ops; i++) {
            const struct copy_op *o = &wr->ops[i];
            if (o->ext_off != ext || o->len == 0 || o->count == 0) {
                snprintf(msg, msglen, "writer context rank %" PRIu32 " op %" PRIu32
                                      ": extent not tiled (ext_off %" PRIu64 ", expected %" PRIu64 ")",
                         wr->ctx_rank, i, o->ext_off, ext);
                rc = -EINVAL;
                goto out;
            }
            for (uint64_t k = 0; k < o->count; k++)
                if (ivec_push(&got, o->dst_pool, o->dst_off + k * (uint64_t)o->dst_stride, o->len))
                    goto out;
            ext += o->len * o->count;
        }
        if (ext != wr->bytes || wr->state_bytes + wr->kv_bytes != wr->bytes) {
            snprintf(msg, msglen, "writer context rank %" PRIu32 ": ops carry %" PRIu64
                                  " bytes, writer says %" PRIu64 " (state %" PRIu64 " + kv %" PRIu64 ")",
                     wr->ctx_rank, ext, wr->bytes, wr->state_bytes, wr->kv_bytes);
            rc = -EINVAL;
            goto out;
        }
        sum += ext;
    }
    struct request_bytes rb;
    plan_bytes(gen, ids->n, &rb);
    if (sum != rb.total || sum != p->total_bytes) {
        snprintf(msg, msglen, "extents sum to %" PRIu64 " bytes, the request is %" PRIu64
                              " bytes (plan_bytes)",
                 sum, rb.total);
        rc = -EINVAL;
        goto out;
    }
    if (expected_regions(gen, ids, &want))
        goto out;
    size_t bad = sort_merge(&got);
    if (bad) {
        const struct ivl *x = &got.v[bad - 1];
        snprintf(msg, msglen, "destination pool %" PRIu64 " offset %" PRIu64
                              " is written more than once",
                 x->pool, x->off);
        rc = -EINVAL;
        goto out;
    }
    bad = sort_merge(&want);
    if (bad) {
        const struct ivl *x = &want.v[bad - 1];
        snprintf(msg, msglen, "generation regions overlap at pool %" PRIu64 " offset %" PRIu64
                              " (duplicate item ids?)",
                 x->pool, x->off);
        rc = -EINVAL;
        goto out;
    }
    for (size_t i = 0; i < want.n || i < got.n; i++) {
        if (i < want.n && i < got.n && want.v[i].pool == got.v[i].pool &&
            want.v[i].off == got.v[i].off && want.v[i].len == got.v[i].len)
            continue;
        const struct ivl *x = i < want.n ? &want.v[i] : &got.v[i];
        snprintf(msg, msglen, "destination coverage differs from the request's regions near pool %"
                              PRIu64 " offset %" PRIu64 " (%s)",
                 x->pool, x->off, i < want.n ? "declared region not exactly covered"
                                             : "write outside the request");
        rc = -EINVAL;
        goto out;
    }
    rc = 0;
out:
    free(got.v);
    free(want.v);
    return rc;
}
