/* plan_cover.c: coverage check of a finished plan (docs/DESIGN.md §4 rule 8), independent of how
 * the plan was built. The request's declared regions (every view of every layer of every item
 * of every group of the generation rank; only the rows up to the prompt's last token of a
 * partial last block) are sorted and must not overlap. Then every op's destination runs are
 * marked in a bitmap over those regions, one bit per unit (the largest power of two dividing
 * every offset and length): a run outside the regions or over a marked unit is refused, and all
 * units must end marked: every destination byte written exactly once. In linear time (runs
 * that continue each other are marked as one, near the last region found); where the units
 * would be too many (runs at odd byte offsets) the runs are sorted and compared with the
 * regions instead, which is as strict. It also checks each writer's ops tile its extent [0, bytes) in ascending
 * ext_off, and that the extents sum to plan_bytes() of the request. Pure. */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stddef.h>
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

/* Byte d (0..15) of the sort key (pool, off): off's bytes first, least significant first. */
static inline unsigned key_byte(const struct ivl *x, unsigned d)
{
    return (unsigned)((d < 8 ? x->off >> (8 * d) : x->pool >> (8 * (d - 8))) & 0xff);
}

/* Sorts by (pool, off): an LSD radix sort (linear; a plan's runs number in the millions), bytes
 * every interval shares skipped; qsort for short lists. 0 or -ENOMEM. */
static int sort_ivls(struct ivec *a)
{
    if (a->n < 512) {
        qsort(a->v, a->n, sizeof(a->v[0]), ivl_cmp);
        return 0;
    }
    size_t(*cnt)[256] = calloc(16, sizeof(*cnt));
    struct ivl *tmp = malloc(a->n * sizeof(*tmp));
    if (!cnt || !tmp) {
        free(cnt);
        free(tmp);
        return -ENOMEM;
    }
    for (size_t i = 0; i < a->n; i++)
        for (unsigned d = 0; d < 16; d++)
            cnt[d][key_byte(&a->v[i], d)]++;
    struct ivl *src = a->v, *dst = tmp;
    for (unsigned d = 0; d < 16; d++) {
        if (cnt[d][key_byte(&src[0], d)] == a->n)
            continue; /* every key has this byte */
        size_t pos = 0;
        for (unsigned b = 0; b < 256; b++) {
            size_t c = cnt[d][b];
            cnt[d][b] = pos;
            pos += c;
        }
        for (size_t i = 0; i < a->n; i++)
            dst[cnt[d][key_byte(&src[i], d)]++] = src[i];
        struct ivl *t = src;
        src = dst;
        dst = t;
    }
    if (src != a->v) {
        free(a->v);
        a->v = src;
        a->cap = a->n;
    } else {
        free(tmp);
    }
    free(cnt);
    return 0;
}

/* Sorts, refuses any overlap, merges adjacent intervals in place. Returns the index of the
 * first overlapping interval + 1, 0, or (size_t)-1 when out of memory. */
static size_t sort_merge(struct ivec *a)
{
    if (a->n == 0)
        return 0;
    if (sort_ivls(a))
        return (size_t)-1;
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

/* The rows [0, rows) of every tensor of a region (a partial last block): one interval per
 * tensor (NHD), or per head (HND). */
static int partial_region(struct ivec *a, const struct layout_view *vw, struct layout_loc at,
                          uint32_t rows)
{
    for (uint32_t t = 0; t < vw->n_tensors; t++) {
        const struct layout_tensor *ts = &vw->tensors[t];
        uint32_t n = ts->order == ORDER_HND ? ts->heads : 1;
        uint64_t len = ts->order == ORDER_HND ? (uint64_t)rows * ts->inner
                                              : (uint64_t)rows * ts->heads * ts->inner;
        for (uint32_t h = 0; h < n; h++)
            if (ivec_push(a, at.pool, at.off + layout_row_off(ts, 0, h), len))
                return -ENOMEM;
    }
    return 0;
}

static int expected_regions(const struct layout *gen, const struct plan_ids *ids,
                            uint32_t last_rows, struct ivec *a)
{
    for (uint32_t g = 0; g < gen->n_groups; g++) {
        const struct layout_group *gr = &gen->groups[g];
        for (uint32_t l = 0; l < gr->n_layers; l++)
            for (uint32_t v = 0; v < gr->n_views; v++) {
                const struct layout_view *vw = &gr->views[v];
                for (uint32_t k = 0; k < ids->n[g]; k++) {
                    struct layout_loc at = layout_region_at(gen, vw, l, ids->ids[g][k]);
                    bool part = last_rows && gr->kind == GROUP_PAGED && k + 1 == ids->n[g];
                    if (part ? partial_region(a, vw, at, last_rows)
                             : ivec_push(a, at.pool, at.off, vw->region_bytes))
                        return -ENOMEM;
                }
            }
    }
    return 0;
}

/* Most bitmap units before the check sorts runs instead (32 MiB of bits). */
#define COVER_UNITS_MAX (1ull << 28)

/* The merged region of want holding byte off of pool (near *hint, which it updates), or -1. */
static ptrdiff_t region_of(const struct ivec *want, size_t *hint, uint64_t pool, uint64_t off)
{
    const struct ivl *h = &want->v[*hint];
    if (h->pool == pool && h->off <= off && off - h->off < h->len)
        return (ptrdiff_t)*hint;
    size_t lo = 0, hi = want->n; /* first region after (pool, off) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct ivl *m = &want->v[mid];
        if (m->pool < pool || (m->pool == pool && m->off <= off))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    h = &want->v[lo - 1];
    if (h->pool != pool || off - h->off >= h->len)
        return -1;
    *hint = lo - 1;
    return (ptrdiff_t)(lo - 1);
}

/* Sets bits [u, u + n); returns the first that was already set, or UINT64_MAX. */
static uint64_t mark_units(uint64_t *bits, uint64_t u, uint64_t n)
{
    uint64_t end = u + n, dup = UINT64_MAX;
    while (u < end) {
        uint64_t w = u / 64, lo = u % 64, hi = end - w * 64 < 64 ? end - w * 64 : 64;
        uint64_t m = (hi == 64 ? ~0ull : (1ull << hi) - 1) & ~((1ull << lo) - 1);
        if ((bits[w] & m) && dup == UINT64_MAX)
            dup = w * 64 + (uint64_t)__builtin_ctzll(bits[w] & m);
        bits[w] |= m;
        u = w * 64 + hi;
    }
    return dup;
}

struct bitcover {
    const struct ivec *want;
    uint64_t g, *first, *bits, marked;
    unsigned shift;                  /* log2(g): units by shifts, not divisions */
    size_t hint;
};

/* Marks one destination run (runs that continue each other arrive merged): 0 or -EINVAL. */
static int mark_run(struct bitcover *c, uint64_t pool, uint64_t off, uint64_t len, char *msg,
                    size_t msglen)
{
    const struct ivec *want = c->want;
    ptrdiff_t r = want->n ? region_of(want, &c->hint, pool, off) : -1;
    uint64_t room = r < 0 ? 0 : want->v[r].len - (off - want->v[r].off);
    if (r >= 0) {
        uint64_t n = (len < room ? len : room) >> c->shift;
        uint64_t u = c->first[r] + ((off - want->v[r].off) >> c->shift);
        uint64_t dup = mark_units(c->bits, u, n);
        if (dup != UINT64_MAX) {
            snprintf(msg, msglen, "destination pool %" PRIu64 " offset %" PRIu64
                                  " is written more than once",
                     pool, want->v[r].off + (dup - c->first[r]) * c->g);
            return -EINVAL;
        }
        c->marked += n;
    }
    if (len > room) {
        snprintf(msg, msglen, "destination coverage differs from the request's regions near "
                              "pool %" PRIu64 " offset %" PRIu64 " (write outside the request)",
                 pool, off + room);
        return -EINVAL;
    }
    return 0;
}

/* Marks every destination run in a bitmap of want's units: 0, -EINVAL (msg), -ENOMEM, or 1
 * when the units would be too many (the caller sorts instead). want is sorted and merged. */
static int cover_bitmap(const struct plan *p, const struct ivec *want, uint64_t want_bytes,
                        char *msg, size_t msglen)
{
    uint64_t bitsor = 0; /* the unit: the largest power of two dividing every offset and length */
    for (size_t i = 0; i < want->n; i++)
        bitsor |= want->v[i].off | want->v[i].len;
    for (uint32_t w = 0; w < p->n_writers; w++)
        for (uint32_t i = 0; i < p->writers[w].n_ops; i++) {
            const struct copy_op *o = &p->writers[w].ops[i];
            bitsor |= o->dst_off | o->len | (o->count > 1 ? (uint64_t)o->dst_stride : 0);
        }
    uint64_t g = bitsor & (~bitsor + 1);
    if (g == 0 || want_bytes / g > COVER_UNITS_MAX)
        return 1;
    struct bitcover c = {want, g, malloc((want->n ? want->n : 1) * sizeof(uint64_t)),
                         calloc(want_bytes / g / 64 + 1, sizeof(uint64_t)), 0,
                         (unsigned)__builtin_ctzll(g), 0};
    int rc = -ENOMEM;
    if (!c.first || !c.bits)
        goto out;
    uint64_t units = 0;
    for (size_t i = 0; i < want->n; i++) {
        c.first[i] = units;
        units += want->v[i].len / g;
    }
    struct ivl run = {0, 0, 0}; /* pending: runs that continue it join it */
    for (uint32_t w = 0; w < p->n_writers; w++)
        for (uint32_t i = 0; i < p->writers[w].n_ops; i++) {
            const struct copy_op *o = &p->writers[w].ops[i];
            for (uint64_t k = 0; k < o->count; k++) {
                uint64_t off = o->dst_off + k * (uint64_t)o->dst_stride;
                if (run.len && run.pool == o->dst_pool && run.off + run.len == off) {
                    run.len += o->len;
                    continue;
                }
                if (run.len && (rc = mark_run(&c, run.pool, run.off, run.len, msg, msglen)))
                    goto out;
                run = (struct ivl){o->dst_pool, off, o->len};
            }
        }
    if (run.len && (rc = mark_run(&c, run.pool, run.off, run.len, msg, msglen)))
        goto out;
    rc = 0;
    if (c.marked != units) { /* cannot happen once the byte sums agree; kept for strictness */
        snprintf(msg, msglen, "destination coverage differs from the request's regions "
                              "(declared region not exactly covered: %" PRIu64 " of %" PRIu64
                              " units)",
                 c.marked, units);
        rc = -EINVAL;
    }
out:
    free(c.first);
    free(c.bits);
    return rc;
}

/* The sorting fallback: every run expanded, sorted, merged, compared with want. */
static int cover_sorted(const struct plan *p, const struct ivec *want, char *msg, size_t msglen)
{
    struct ivec got = {0};
    int rc = -ENOMEM;
    for (uint32_t w = 0; w < p->n_writers; w++)
        for (uint32_t i = 0; i < p->writers[w].n_ops; i++) {
            const struct copy_op *o = &p->writers[w].ops[i];
            for (uint64_t k = 0; k < o->count; k++)
                if (ivec_push(&got, o->dst_pool, o->dst_off + k * (uint64_t)o->dst_stride, o->len))
                    goto out;
        }
    size_t bad = sort_merge(&got);
    if (bad == (size_t)-1)
        goto out;
    rc = -EINVAL;
    if (bad) {
        const struct ivl *x = &got.v[bad - 1];
        snprintf(msg, msglen, "destination pool %" PRIu64 " offset %" PRIu64
                              " is written more than once",
                 x->pool, x->off);
        goto out;
    }
    for (size_t i = 0; i < want->n || i < got.n; i++) {
        if (i < want->n && i < got.n && want->v[i].pool == got.v[i].pool &&
            want->v[i].off == got.v[i].off && want->v[i].len == got.v[i].len)
            continue;
        const struct ivl *x = i < want->n ? &want->v[i] : &got.v[i];
        snprintf(msg, msglen, "destination coverage differs from the request's regions near pool %"
                              PRIu64 " offset %" PRIu64 " (%s)",
                 x->pool, x->off, i < want->n ? "declared region not exactly covered"
                                              : "write outside the request");
        goto out;
    }
    rc = 0;
out:
    free(got.v);
    return rc;
}

static int cover_check(const struct plan *p, const struct layout *gen, const struct plan_ids *ids,
                       uint32_t last_rows, bool sorted, char *msg, size_t msglen)
{
    struct ivec want = {0};
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
    if (expected_regions(gen, ids, last_rows, &want))
        goto out;
    uint64_t want_bytes = 0;
    for (size_t i = 0; i < want.n; i++)
        want_bytes += want.v[i].len;
    struct request_bytes rb;
    plan_bytes(gen, ids->n, &rb);
    if (sum != want_bytes || sum != p->total_bytes || (!last_rows && sum != rb.total)) {
        snprintf(msg, msglen, "extents sum to %" PRIu64 " bytes, the request is %" PRIu64
                              " bytes (plan_bytes %" PRIu64 ")",
                 sum, want_bytes, rb.total);
        rc = -EINVAL;
        goto out;
    }
    size_t bad = sort_merge(&want);
    if (bad == (size_t)-1)
        goto out;
    if (bad) {
        const struct ivl *x = &want.v[bad - 1];
        snprintf(msg, msglen, "generation regions overlap at pool %" PRIu64 " offset %" PRIu64
                              " (duplicate item ids?)",
                 x->pool, x->off);
        rc = -EINVAL;
        goto out;
    }
    rc = sorted ? 1 : cover_bitmap(p, &want, want_bytes, msg, msglen);
    if (rc == 1)
        rc = cover_sorted(p, &want, msg, msglen);
out:
    free(want.v);
    return rc;
}

int plan_cover_check(const struct plan *p, const struct layout *gen, const struct plan_ids *ids,
                     uint32_t last_rows, char *msg, size_t msglen)
{
    return cover_check(p, gen, ids, last_rows, false, msg, msglen);
}

int plan_cover_check_sorted(const struct plan *p, const struct layout *gen,
                            const struct plan_ids *ids, uint32_t last_rows, char *msg,
                            size_t msglen)
{
    return cover_check(p, gen, ids, last_rows, true, msg, msglen);
}
