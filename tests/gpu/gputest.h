/* gputest.h: helpers shared by the GPU Check suites (header-only, static functions): random copy
 * programs with the shapes that break copy kernels (1..15-byte tails, odd offsets and strides,
 * negative strides, runs long enough to be split, many short runs), their pool sizes, the CPU
 * reference (lib/copy.h) of gather/scatter/direct, and the CK_NOFORK runner (CUDA does not
 * survive fork after initialisation). Only meaningful with KVF_HAVE_CUDA. */
#ifndef KVF_GPUTEST_H
#define KVF_GPUTEST_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "layout.h"
#include "plan.h"

#define GT_POISON 0xA5

/* A CUDA runtime call that must succeed in a test (callers include cuda_runtime.h). */
#define CK_CUDA(call)                                                                          \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        ck_assert_msg(e_ == cudaSuccess, "%s: %s", #call, cudaGetErrorString(e_));             \
    } while (0)

static inline uint64_t gt_rand(uint64_t *s)
{
    /* splitmix64 */
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static inline uint64_t gt_range(uint64_t *s, uint64_t lo, uint64_t hi) /* [lo, hi] */
{
    return lo + gt_rand(s) % (hi - lo + 1);
}

struct gt_prog {
    uint32_t n_ops;
    struct copy_op *ops;                  /* owned */
    uint64_t bytes;
    uint32_t n_src, n_dst;
    uint64_t src_size[LAYOUT_MAX_POOLS];  /* bytes each pool needs */
    uint64_t dst_size[LAYOUT_MAX_POOLS];
};

/* Places `count` runs of `len` on one side at *cursor of pool p: disjoint runs, random gaps,
 * stride sometimes negative; odd offsets unless aligned. */
static inline void gt_place(uint64_t *s, uint64_t *cursor, uint64_t len, uint64_t count,
                            int aligned, uint64_t *off, int64_t *stride)
{
    uint64_t gap = aligned ? 16 * gt_range(s, 0, 2) : gt_range(s, 0, 37);
    uint64_t sgap = aligned ? 16 * gt_range(s, 0, 3) : gt_range(s, 0, 19);
    uint64_t st = len + sgap;
    uint64_t start = *cursor + gap;
    if (count > 1 && gt_range(s, 0, 3) == 0) { /* negative stride: run 0 is the highest */
        *off = start + (count - 1) * st;
        *stride = -(int64_t)st;
    } else {
        *off = start;
        *stride = (int64_t)st;
    }
    *cursor = start + (count - 1) * st + len;
}

/* A random program of about n_ops ops over n_src source and n_dst destination pools.
 * big: also runs long enough to be cut into several tasks. */
static inline void gt_prog_random(struct gt_prog *g, uint64_t seed, uint32_t n_ops, int big)
{
    uint64_t s = seed;
    memset(g, 0, sizeof(*g));
    g->n_ops = n_ops;
    g->ops = calloc(n_ops, sizeof(*g->ops));
    ck_assert_ptr_nonnull(g->ops);
    g->n_src = (uint32_t)gt_range(&s, 1, 3);
    g->n_dst = (uint32_t)gt_range(&s, 1, 3);
    uint64_t scur[LAYOUT_MAX_POOLS] = {0}, dcur[LAYOUT_MAX_POOLS] = {0};
    for (uint32_t i = 0; i < n_ops; i++) {
        struct copy_op *o = &g->ops[i];
        int aligned = gt_range(&s, 0, 2) == 0;
        uint64_t kind = gt_range(&s, 0, 9);
        if (kind < 3) {
            o->len = gt_range(&s, 1, 15); /* tails only */
            o->count = gt_range(&s, 1, 300);
        } else if (kind < 8 || !big) {
            o->len = gt_range(&s, 16, 5000);
            o->count = gt_range(&s, 1, 20);
        } else {
            o->len = gt_range(&s, 32768, 3 * 65536 + 77);
            o->count = gt_range(&s, 1, 3);
        }
        if (aligned)
            o->len = (o->len + 15) & ~(uint64_t)15;
        o->src_pool = (uint32_t)gt_range(&s, 0, g->n_src - 1);
        o->dst_pool = (uint32_t)gt_range(&s, 0, g->n_dst - 1);
        gt_place(&s, &scur[o->src_pool], o->len, o->count, aligned, &o->src_off, &o->src_stride);
        gt_place(&s, &dcur[o->dst_pool], o->len, o->count, aligned, &o->dst_off, &o->dst_stride);
        o->ext_off = g->bytes;
        g->bytes += o->len * o->count;
    }
    for (uint32_t p = 0; p < LAYOUT_MAX_POOLS; p++) {
        g->src_size[p] = scur[p] + 64;
        g->dst_size[p] = dcur[p] + 64;
    }
}

static inline void gt_prog_done(struct gt_prog *g)
{
    free(g->ops);
    g->ops = NULL;
}

/* The CPU reference: lib/copy.h, the CPU twin of the kernels. mode: 'g' gather src -> ext
 * (ext points at extent byte lo), 's' scatter ext -> dst, 'd' direct src -> dst. Pools are
 * given as arrays of base pointers indexed by pool. */
static inline void gt_ref(const struct copy_op *ops, uint32_t n_ops, char mode, uint8_t **src,
                          uint8_t **dst, uint8_t *ext, uint64_t lo, uint64_t hi)
{
    struct copy_mem s = {.n = LAYOUT_MAX_POOLS}, d = {.n = LAYOUT_MAX_POOLS};
    for (uint32_t p = 0; p < LAYOUT_MAX_POOLS; p++) {
        s.base[p] = src ? src[p] : NULL;
        d.base[p] = dst ? dst[p] : NULL;
        s.size[p] = d.size[p] = UINT64_MAX;
    }
    if (mode == 'g')
        copy_gather(ops, n_ops, &s, lo, hi, ext);
    else if (mode == 's')
        copy_scatter(ops, n_ops, ext, lo, hi, &d);
    else
        copy_direct(ops, n_ops, &s, &d);
}

static inline void gt_fill_random(uint8_t *p, uint64_t n, uint64_t seed)
{
    uint64_t s = seed;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v = gt_rand(&s);
        memcpy(p + i, &v, 8);
    }
    for (; i < n; i++)
        p[i] = (uint8_t)gt_rand(&s);
}

/* Index of the first differing byte, or -1. */
static inline int64_t gt_first_diff(const uint8_t *a, const uint8_t *b, uint64_t n)
{
    if (memcmp(a, b, n) == 0)
        return -1;
    for (uint64_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (int64_t)i;
    return -1;
}

static inline int gt_run_nofork(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

#endif
