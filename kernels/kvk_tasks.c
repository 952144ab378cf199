/* kvk_tasks.c: copy program validation, task splitting and sub-range lookup for the CUDA copy
 * kernels (see kvk_tasks.h). Pure C, no CUDA. */
#include "kvk_tasks.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static __thread char kvk_errbuf[256];

const char *kvk_last_error(void)
{
    return kvk_errbuf;
}

int kvk_fail(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(kvk_errbuf, sizeof(kvk_errbuf), fmt, ap);
    va_end(ap);
    return err;
}

static uint32_t align_of(uint64_t v)
{
    if (v == 0 || (v & 15) == 0)
        return 16;
    return (uint32_t)(v & -v);
}

/* [lo, hi) address range of one side of an op; -EINVAL on overflow or a negative address. */
static int side_range(const struct copy_op *o, uint64_t off, int64_t stride, uint64_t *ret_end)
{
    __int128 last = (__int128)off + (__int128)stride * (__int128)(o->count - 1);
    __int128 lo = last < (__int128)off ? last : (__int128)off;
    __int128 hi = (last > (__int128)off ? last : (__int128)off) + (__int128)o->len;
    if (lo < 0 || hi > (__int128)UINT64_MAX)
        return -EINVAL;
    *ret_end = (uint64_t)hi;
    return 0;
}

static int check_op(const struct copy_op *o, uint32_t i, uint64_t at, struct kvk_tasks *t)
{
    if (o->ext_off != at)
        return kvk_fail(-EINVAL, "op %u: ext_off %llu, expected %llu (ops must tile the extent "
                        "in ascending order)", i, (unsigned long long)o->ext_off,
                        (unsigned long long)at);
    if (o->len == 0 || o->count == 0)
        return 0;
    if ((__int128)o->len * o->count > (__int128)(UINT64_MAX - at))
        return kvk_fail(-EINVAL, "op %u: len %llu x count %llu overflows", i,
                        (unsigned long long)o->len, (unsigned long long)o->count);
    if (o->dst_pool >= LAYOUT_MAX_POOLS)
        return kvk_fail(-EINVAL, "op %u: dst_pool %u out of range", i, o->dst_pool);
    if (o->src_pool >= LAYOUT_MAX_POOLS && o->src_pool != PLAN_POOL_UNKNOWN)
        return kvk_fail(-EINVAL, "op %u: src_pool %u out of range", i, o->src_pool);
    uint64_t end;
    if (side_range(o, o->dst_off, o->dst_stride, &end) < 0)
        return kvk_fail(-EINVAL, "op %u: destination addresses overflow or go negative", i);
    if (end > t->need_dst[o->dst_pool])
        t->need_dst[o->dst_pool] = end;
    if (o->src_pool == PLAN_POOL_UNKNOWN) {
        t->src_unknown = 1;
        return 0;
    }
    if (side_range(o, o->src_off, o->src_stride, &end) < 0)
        return kvk_fail(-EINVAL, "op %u: source addresses overflow or go negative", i);
    if (end > t->need_src[o->src_pool])
        t->need_src[o->src_pool] = end;
    return 0;
}

/* Tasks op o splits into, and the piece size for long runs (0 when runs are grouped). */
static uint64_t op_tasks(const struct copy_op *o, uint64_t tb, uint64_t pa, uint64_t *piece,
                         uint64_t *group)
{
    *piece = 0;
    *group = 0;
    if (o->len == 0 || o->count == 0)
        return 0;
    if (o->len >= tb / 2) {
        uint64_t pieces = (o->len + tb - 1) / tb;
        uint64_t p = (o->len + pieces - 1) / pieces;
        p = (p + pa - 1) & ~(pa - 1);
        if (p > tb)
            p = tb;
        *piece = p;
        pieces = (o->len + p - 1) / p;
        if (o->count > UINT64_MAX / pieces)
            return UINT64_MAX;
        return o->count * pieces;
    }
    uint64_t g = tb / o->len;
    *group = g;
    return (o->count + g - 1) / g;
}

static void fill_op(struct kvk_op *k, const struct copy_op *o, uint64_t piece, uint64_t group)
{
    k->src_off = o->src_off;
    k->dst_off = o->dst_off;
    k->ext_off = o->ext_off;
    k->len = o->len;
    k->count = o->count;
    k->piece = (uint32_t)piece; /* <= task size */
    k->group = (uint32_t)group; /* <= task size / len */
    k->src_stride = o->src_stride;
    k->dst_stride = o->dst_stride;
    k->src_pool = o->src_pool;
    k->dst_pool = o->dst_pool;
    uint64_t bits = o->dst_off | o->ext_off | o->len;
    if (o->src_pool != PLAN_POOL_UNKNOWN)
        bits |= o->src_off;
    if (o->count > 1)
        bits |= (uint64_t)o->src_stride | (uint64_t)o->dst_stride;
    k->align = align_of(bits);
    k->pad_ = 0;
}

int kvk_tasks_index(const struct copy_op *ops, uint32_t n_ops, uint32_t task_bytes,
                    uint32_t piece_align, struct kvk_tasks *ret)
{
    struct kvk_tasks t;
    memset(&t, 0, sizeof(t));
    if (task_bytes == 0)
        task_bytes = KVK_TASK_BYTES;
    if (task_bytes < KVK_TASK_MIN || task_bytes > KVK_TASK_MAX || (task_bytes & (task_bytes - 1)))
        return kvk_fail(-EINVAL, "task size %u: not a power of two in [%u, %u]", task_bytes,
                        KVK_TASK_MIN, KVK_TASK_MAX);
    if (piece_align == 0)
        piece_align = KVK_PIECE_ALIGN;
    if (piece_align < 16 || piece_align > task_bytes || (piece_align & (piece_align - 1)))
        return kvk_fail(-EINVAL, "piece alignment %u: not a power of two in [16, %u]",
                        piece_align, task_bytes);
    t.task_bytes = task_bytes;
    if (n_ops > 0 && !ops)
        return kvk_fail(-EINVAL, "NULL ops with n_ops %u", n_ops);
    t.ops = calloc(n_ops ? n_ops : 1, sizeof(*t.ops));
    t.op_first = calloc((size_t)n_ops + 1, sizeof(*t.op_first));
    if (!t.ops || !t.op_first) {
        kvk_tasks_done(&t);
        return kvk_fail(-ENOMEM, "op table of %u ops: out of memory", n_ops);
    }
    uint64_t at = 0, n_tasks = 0;
    for (uint32_t i = 0; i < n_ops; i++) {
        int rc = check_op(&ops[i], i, at, &t);
        if (rc < 0) {
            kvk_tasks_done(&t);
            return rc;
        }
        at += ops[i].len * ops[i].count;
        uint64_t piece, group;
        uint64_t n = op_tasks(&ops[i], task_bytes, piece_align, &piece, &group);
        if (n > KVK_MAX_TASKS || n_tasks + n > KVK_MAX_TASKS) {
            kvk_tasks_done(&t);
            return kvk_fail(-E2BIG, "program splits into more than %u tasks", KVK_MAX_TASKS);
        }
        fill_op(&t.ops[i], &ops[i], piece, group);
        t.op_first[i] = (uint32_t)n_tasks;
        n_tasks += n;
    }
    t.op_first[n_ops] = (uint32_t)n_tasks;
    t.bytes = at;
    t.n_ops = n_ops;
    t.n_tasks = (uint32_t)n_tasks;
    *ret = t;
    return 0;
}

int kvk_tasks_build(const struct copy_op *ops, uint32_t n_ops, uint32_t task_bytes,
                    uint32_t piece_align, struct kvk_tasks *ret)
{
    struct kvk_tasks t;
    int rc = kvk_tasks_index(ops, n_ops, task_bytes, piece_align, &t);
    if (rc < 0)
        return rc;
    t.tasks = calloc(t.n_tasks ? t.n_tasks : 1, sizeof(*t.tasks));
    t.ext = calloc((size_t)t.n_tasks + 1, sizeof(*t.ext));
    if (!t.tasks || !t.ext) {
        kvk_tasks_done(&t);
        return kvk_fail(-ENOMEM, "task table of %u tasks: out of memory", t.n_tasks);
    }
    for (uint32_t i = 0; i < n_ops; i++) {
        const struct kvk_op *o = &t.ops[i];
        for (uint32_t k = t.op_first[i]; k < t.op_first[i + 1]; k++) {
            uint64_t pos;
            uint32_t bytes;
            kvk_op_task(o, k - t.op_first[i], &pos, &bytes);
            t.tasks[k] = (struct kvk_task){.pos = pos, .op = i, .bytes = bytes};
            t.ext[k] = o->ext_off + pos;
        }
    }
    t.ext[t.n_tasks] = t.bytes;
    *ret = t;
    return 0;
}

void kvk_tasks_fat(const struct kvk_tasks *t, struct kvk_ftask *f)
{
    for (uint32_t i = 0; i < t->n_tasks; i++)
        kvk_ftask_of(&t->ops[t->tasks[i].op], t->tasks[i].pos, t->tasks[i].bytes, &f[i]);
}

void kvk_tasks_done(struct kvk_tasks *t)
{
    if (!t)
        return;
    free(t->ops);
    free(t->op_first);
    free(t->tasks);
    free(t->ext);
    memset(t, 0, sizeof(*t));
}

/* The task holding extent byte x < bytes: the last op starting at or before x has bytes (an
 * empty op starts where the next one does), then the split's arithmetic inside it. */
static uint32_t task_at(const struct kvk_tasks *t, uint64_t x)
{
    uint32_t a = 0, b = t->n_ops;
    while (b - a > 1) {
        uint32_t m = a + (b - a) / 2;
        if (t->ops[m].ext_off <= x)
            a = m;
        else
            b = m;
    }
    const struct kvk_op *o = &t->ops[a];
    uint64_t rel = x - o->ext_off, k;
    if (o->piece) {
        uint64_t per_run = (o->len + o->piece - 1) / o->piece, r = rel / o->len;
        k = r * per_run + (rel - r * o->len) / o->piece;
    } else {
        k = rel / ((uint64_t)o->group * o->len);
    }
    return t->op_first[a] + (uint32_t)k;
}

void kvk_tasks_range(const struct kvk_tasks *t, uint64_t lo, uint64_t hi, uint32_t *first,
                     uint32_t *n)
{
    if (lo >= hi || hi > t->bytes) {
        *first = 0;
        *n = 0;
        return;
    }
    *first = task_at(t, lo);
    *n = task_at(t, hi - 1) + 1 - *first;
}

int kvk_tasks_check_mem(const struct kvk_tasks *t, const struct kvk_mem *mem, char side)
{
    const uint64_t *need = side == 's' ? t->need_src : t->need_dst;
    const char *name = side == 's' ? "source" : "destination";
    if (side == 's' && t->src_unknown)
        return kvk_fail(-EINVAL, "program has unresolved source pools: scatter only");
    if (!mem)
        return kvk_fail(-EINVAL, "NULL %s pools", name);
    for (uint32_t p = 0; p < LAYOUT_MAX_POOLS; p++) {
        if (need[p] == 0)
            continue;
        if (p >= mem->n || mem->base[p] == 0)
            return kvk_fail(-ERANGE, "%s pool %u is used but not given", name, p);
        if (mem->size[p] < need[p])
            return kvk_fail(-ERANGE, "%s pool %u: program needs %llu bytes, pool has %llu",
                            name, p, (unsigned long long)need[p],
                            (unsigned long long)mem->size[p]);
    }
    return 0;
}
