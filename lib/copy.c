/* copy.c: the CPU copy executor (copy.h). Runs a writer's copy program: gather (source pools ->
 * extent bytes), scatter (extent bytes -> destination pools), direct (pool -> pool). Any byte
 * sub-range [lo, hi) of the extent can be gathered or scattered: the first op is found by
 * binary search (ops ascend by ext_off and tile the extent), then runs go through memcpy, or
 * through the streaming kernel of copy_stream.c in large programs.
 * copy_check is the bounds gate for programs from outside; the executors trust their input.
 * Thread-safe: the only shared state is copy_stream.c's choice of kernel. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "copy.h"
#include "copy_stream.h"

/* Streaming (non-temporal) stores pay off when the bytes copied will not be read again soon
 * and far exceed the caches: many medium runs (one block of one layer, tens of KiB) would
 * otherwise pay read-for-ownership on every destination line. Used for runs of at least
 * NT_MIN_RUN in programs of at least NT_MIN_TOTAL bytes: decided by the whole program, never
 * by the piece a thread copies, so a program cut into chunks streams as it does whole. */
#define NT_MIN_RUN (4u << 10)
#define NT_MIN_TOTAL (8u << 20)

static void copy_run(uint8_t *d, const uint8_t *s, uint64_t n, bool nt)
{
    if (nt)
        copy_stream_run(d, s, n);
    else
        memcpy(d, s, n);
}

static void copy_fence(bool nt)
{
    if (nt)
        copy_stream_fence(); /* streaming stores visible before we return */
}

/* Bytes of the whole program (ops tile the extent in order). */
static uint64_t program_bytes(const struct copy_op *ops, uint32_t n_ops)
{
    return n_ops ? ops[n_ops - 1].ext_off + ops[n_ops - 1].len * ops[n_ops - 1].count : 0;
}

int copy_check(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *mem, char side)
{
    if ((side != 's' && side != 'd') || !mem || mem->n > LAYOUT_MAX_POOLS || (n_ops && !ops))
        return -EINVAL;
    uint64_t ext = 0;
    for (uint32_t i = 0; i < n_ops; i++) {
        const struct copy_op *o = &ops[i];
        uint32_t pool = side == 's' ? o->src_pool : o->dst_pool;
        uint64_t off = side == 's' ? o->src_off : o->dst_off;
        int64_t stride = side == 's' ? o->src_stride : o->dst_stride;
        if (pool >= mem->n || !mem->base[pool] || o->len == 0 || o->count == 0 ||
            o->ext_off != ext)
            return -ERANGE;
        uint64_t astride = stride < 0 ? -(uint64_t)stride : (uint64_t)stride, span, lo, hi;
        if (__builtin_mul_overflow(o->count - 1, astride, &span))
            return -ERANGE;
        if (stride < 0) {
            if (span > off)
                return -ERANGE;
            lo = off - span;
            if (__builtin_add_overflow(off, o->len, &hi))
                return -ERANGE;
        } else {
            lo = off;
            if (__builtin_add_overflow(off, span, &hi) || __builtin_add_overflow(hi, o->len, &hi))
                return -ERANGE;
        }
        if (lo > mem->size[pool] || hi > mem->size[pool])
            return -ERANGE;
        uint64_t bytes;
        if (__builtin_mul_overflow(o->len, o->count, &bytes) ||
            __builtin_add_overflow(ext, bytes, &ext))
            return -ERANGE;
    }
    return 0;
}

/* First op whose extent bytes end after lo. */
static uint32_t first_op(const struct copy_op *ops, uint32_t n, uint64_t lo)
{
    uint32_t a = 0, b = n;
    while (a < b) {
        uint32_t m = a + (b - a) / 2;
        if (ops[m].ext_off + ops[m].len * ops[m].count <= lo)
            a = m + 1;
        else
            b = m;
    }
    return a;
}

/* to_ext: pool -> buf (gather), else buf -> pool (scatter). buf[0] is extent byte lo. */
static void copy_range(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *mem,
                       uint64_t lo, uint64_t hi, uint8_t *buf, int to_ext)
{
    uint64_t pos = lo;
    bool big = program_bytes(ops, n_ops) >= NT_MIN_TOTAL, used_nt = false;
    for (uint32_t i = first_op(ops, n_ops, lo); i < n_ops && pos < hi; i++) {
        const struct copy_op *o = &ops[i];
        uint32_t pool = to_ext ? o->src_pool : o->dst_pool;
        uint64_t off = to_ext ? o->src_off : o->dst_off;
        uint64_t stride = (uint64_t)(to_ext ? o->src_stride : o->dst_stride);
        uint64_t rel = pos - o->ext_off, k = rel / o->len, within = rel % o->len;
        uint8_t *base = mem->base[pool] + off;
        for (; k < o->count && pos < hi; k++, within = 0) {
            uint64_t n = o->len - within;
            if (n > hi - pos)
                n = hi - pos;
            uint8_t *p = base + k * stride + within;
            bool nt = big && n >= NT_MIN_RUN;
            used_nt |= nt;
            if (to_ext)
                copy_run(buf + (pos - lo), p, n, nt);
            else
                copy_run(p, buf + (pos - lo), n, nt);
            pos += n;
        }
    }
    copy_fence(used_nt);
}

void copy_gather(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                 uint64_t lo, uint64_t hi, uint8_t *out)
{
    if (lo < hi)
        copy_range(ops, n_ops, src, lo, hi, out, 1);
}

void copy_scatter(const struct copy_op *ops, uint32_t n_ops, const uint8_t *in, uint64_t lo,
                  uint64_t hi, const struct copy_mem *dst)
{
    if (lo < hi)
        copy_range(ops, n_ops, dst, lo, hi, (uint8_t *)in, 0);
}

void copy_direct(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                 const struct copy_mem *dst)
{
    bool nt_all = program_bytes(ops, n_ops) >= NT_MIN_TOTAL, used_nt = false;
    for (uint32_t i = 0; i < n_ops; i++) {
        const struct copy_op *o = &ops[i];
        const uint8_t *s = src->base[o->src_pool] + o->src_off;
        uint8_t *d = dst->base[o->dst_pool] + o->dst_off;
        bool nt = nt_all && o->len >= NT_MIN_RUN;
        used_nt |= nt;
        for (uint64_t k = 0; k < o->count; k++)
            copy_run(d + k * (uint64_t)o->dst_stride, s + k * (uint64_t)o->src_stride, o->len, nt);
    }
    copy_fence(used_nt);
}

void copy_direct_range(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                       uint64_t lo, uint64_t hi, const struct copy_mem *dst)
{
    if (lo >= hi || n_ops == 0)
        return;
    bool nt_all = program_bytes(ops, n_ops) >= NT_MIN_TOTAL, used_nt = false;
    uint64_t pos = lo;
    for (uint32_t i = first_op(ops, n_ops, lo); i < n_ops && pos < hi; i++) {
        const struct copy_op *o = &ops[i];
        const uint8_t *s = src->base[o->src_pool] + o->src_off;
        uint8_t *d = dst->base[o->dst_pool] + o->dst_off;
        uint64_t rel = pos - o->ext_off, k = rel / o->len, within = rel % o->len;
        for (; k < o->count && pos < hi; k++, within = 0) {
            uint64_t n = o->len - within;
            if (n > hi - pos)
                n = hi - pos;
            bool nt = nt_all && n >= NT_MIN_RUN;
            used_nt |= nt;
            copy_run(d + k * (uint64_t)o->dst_stride + within,
                     s + k * (uint64_t)o->src_stride + within, n, nt);
            pos += n;
        }
    }
    copy_fence(used_nt);
}

int copy_pair_runs(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                   const struct copy_mem *dst, uint64_t lo, uint64_t hi, copy_pair_cb cb,
                   void *arg)
{
    uint64_t pos = lo;
    for (uint32_t i = first_op(ops, n_ops, lo); i < n_ops && pos < hi; i++) {
        const struct copy_op *o = &ops[i];
        const uint8_t *s = src->base[o->src_pool] + o->src_off;
        uint64_t d = (uint64_t)(uintptr_t)dst->base[o->dst_pool] + o->dst_off;
        uint64_t rel = pos - o->ext_off, k = rel / o->len, within = rel % o->len;
        for (; k < o->count && pos < hi; k++, within = 0) {
            uint64_t n = o->len - within;
            if (n > hi - pos)
                n = hi - pos;
            int rc = cb(arg, s + k * (uint64_t)o->src_stride + within,
                        d + k * (uint64_t)o->dst_stride + within, n);
            if (rc < 0)
                return rc;
            pos += n;
        }
    }
    return 0;
}

int copy_src_runs(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                  uint64_t lo, uint64_t hi, copy_run_cb cb, void *arg)
{
    uint64_t pos = lo, run_pos = lo, run_n = 0;
    const uint8_t *run = NULL;
    uint32_t run_pool = 0;
    for (uint32_t i = first_op(ops, n_ops, lo); i < n_ops && pos < hi; i++) {
        const struct copy_op *o = &ops[i];
        uint64_t rel = pos - o->ext_off, k = rel / o->len, within = rel % o->len;
        const uint8_t *base = src->base[o->src_pool] + o->src_off;
        for (; k < o->count && pos < hi; k++, within = 0) {
            uint64_t n = o->len - within;
            if (n > hi - pos)
                n = hi - pos;
            const uint8_t *p = base + k * (uint64_t)o->src_stride + within;
            if (run && p == run + run_n && o->src_pool == run_pool) { /* contiguous: one run */
                run_n += n;
            } else {
                int rc = run ? cb(arg, run_pool, run, run_pos, run_n) : 0;
                if (rc < 0)
                    return rc;
                run = p, run_pool = o->src_pool, run_pos = pos, run_n = n;
            }
            pos += n;
        }
    }
    return run ? cb(arg, run_pool, run, run_pos, run_n) : 0;
}
