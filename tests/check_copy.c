/* check_copy.c: the CPU copy executor (copy.h): sub-range gather/scatter equal the full gather
 * and a byte-by-byte reference, copy_direct equals gather+scatter, copy_check refuses programs
 * that leave their pools; and the compression of plan_opvec_add (merges, never changes bytes). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "copy_stream.h"
#include "plan_internal.h"
#include "testutil.h"

static uint64_t rnd(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

#define POOL 131072

struct prog {
    struct copy_op ops[64];
    uint32_t n;
    uint64_t bytes;
    struct copy_mem src, dst;
};

/* A random program over two source and two destination pools: runs of random len, count and
 * (possibly negative) strides that stay inside the pools; destinations never overlap (each op
 * writes its own slice of the destination pool). */
static void make_prog(struct prog *p, uint64_t seed)
{
    uint64_t s = seed * 2654435761u + 1;
    memset(p, 0, sizeof(*p));
    p->src.n = p->dst.n = 2;
    for (int i = 0; i < 2; i++) {
        p->src.base[i] = malloc(POOL);
        p->dst.base[i] = calloc(1, POOL);
        p->src.size[i] = p->dst.size[i] = POOL;
        for (int b = 0; b < POOL; b++)
            p->src.base[i][b] = (uint8_t)rnd(&s);
    }
    uint64_t dcur[2] = {0, 0};
    p->n = 1 + rnd(&s) % 40;
    for (uint32_t i = 0; i < p->n; i++) {
        struct copy_op *o = &p->ops[i];
        o->src_pool = rnd(&s) % 2;
        o->dst_pool = rnd(&s) % 2;
        o->len = 1 + rnd(&s) % 300;
        o->count = 1 + rnd(&s) % 5;
        int64_t sstr = (int64_t)(rnd(&s) % 700) - 350;
        o->src_stride = sstr;
        uint64_t span = (o->count - 1) * (uint64_t)(sstr < 0 ? -sstr : sstr);
        o->src_off = (sstr < 0 ? span : 0) + rnd(&s) % (POOL - span - o->len);
        /* destination: its own slice, runs spaced by len + gap, forward or backward */
        uint64_t gap = rnd(&s) % 50, step = o->len + gap;
        bool back = rnd(&s) % 2;
        o->dst_stride = back ? -(int64_t)step : (int64_t)step;
        uint64_t dspan = (o->count - 1) * step;
        o->dst_off = dcur[o->dst_pool] + (back ? dspan : 0);
        dcur[o->dst_pool] += dspan + o->len + 1;
        ck_assert_uint_le(dcur[o->dst_pool], POOL);
        o->ext_off = p->bytes;
        p->bytes += o->len * o->count;
    }
}

static void free_prog(struct prog *p)
{
    for (int i = 0; i < 2; i++) {
        free(p->src.base[i]);
        free(p->dst.base[i]);
    }
}

static void reference_gather(const struct prog *p, uint8_t *out)
{
    for (uint32_t i = 0; i < p->n; i++) {
        const struct copy_op *o = &p->ops[i];
        for (uint64_t k = 0; k < o->count; k++)
            for (uint64_t b = 0; b < o->len; b++)
                out[o->ext_off + k * o->len + b] =
                    p->src.base[o->src_pool][o->src_off + k * o->src_stride + b];
    }
}

START_TEST(copy_gather_any_subrange_equals_the_full_gather)
{
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct prog p;
        make_prog(&p, seed);
        ck_assert_int_eq(copy_check(p.ops, p.n, &p.src, 's'), 0);
        ck_assert_int_eq(copy_check(p.ops, p.n, &p.dst, 'd'), 0);
        uint8_t *ref = malloc(p.bytes), *full = malloc(p.bytes), *part = malloc(p.bytes);
        reference_gather(&p, ref);
        copy_gather(p.ops, p.n, &p.src, 0, p.bytes, full);
        ck_assert(memcmp(ref, full, p.bytes) == 0);
        uint64_t s = seed;
        for (int t = 0; t < 20; t++) {
            uint64_t lo = rnd(&s) % (p.bytes + 1), hi = lo + rnd(&s) % (p.bytes - lo + 1);
            memset(part, 0, p.bytes);
            copy_gather(p.ops, p.n, &p.src, lo, hi, part);
            ck_assert(memcmp(part, full + lo, hi - lo) == 0);
        }
        /* in odd chunks */
        for (uint64_t lo = 0; lo < p.bytes; lo += 37)
            copy_gather(p.ops, p.n, &p.src, lo, lo + 37 < p.bytes ? lo + 37 : p.bytes, part + lo);
        ck_assert(memcmp(part, full, p.bytes) == 0);
        free(ref);
        free(full);
        free(part);
        free_prog(&p);
    }
}
END_TEST

START_TEST(copy_scatter_in_pieces_equals_direct_copy)
{
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct prog p;
        make_prog(&p, seed);
        uint8_t *ext = malloc(p.bytes);
        copy_gather(p.ops, p.n, &p.src, 0, p.bytes, ext);
        uint8_t *direct[2] = {calloc(1, POOL), calloc(1, POOL)};
        struct copy_mem dm = {2, {direct[0], direct[1]}, {POOL, POOL}};
        copy_direct(p.ops, p.n, &p.src, &dm);
        uint64_t s = seed + 99;
        for (uint64_t lo = 0; lo < p.bytes;) {
            uint64_t hi = lo + 1 + rnd(&s) % 500;
            if (hi > p.bytes)
                hi = p.bytes;
            copy_scatter(p.ops, p.n, ext + lo, lo, hi, &p.dst);
            lo = hi;
        }
        for (int i = 0; i < 2; i++)
            ck_assert(memcmp(p.dst.base[i], direct[i], POOL) == 0);
        /* and the destination holds what the reference gather says, run by run */
        for (uint32_t i = 0; i < p.n; i++) {
            const struct copy_op *o = &p.ops[i];
            for (uint64_t k = 0; k < o->count; k++)
                ck_assert(memcmp(p.dst.base[o->dst_pool] + o->dst_off + k * o->dst_stride,
                                 ext + o->ext_off + k * o->len, o->len) == 0);
        }
        free(direct[0]);
        free(direct[1]);
        free(ext);
        free_prog(&p);
    }
}
END_TEST

START_TEST(copy_check_refuses_programs_outside_their_pools)
{
    struct prog p;
    make_prog(&p, 7);
    struct copy_op o = p.ops[0];
    ck_assert_int_eq(copy_check(&o, 1, &p.src, 's'), 0);
    struct copy_op bad = o;
    bad.src_pool = 2;
    ck_assert_int_eq(copy_check(&bad, 1, &p.src, 's'), -ERANGE);
    bad = o;
    bad.src_pool = PLAN_POOL_UNKNOWN;
    ck_assert_int_eq(copy_check(&bad, 1, &p.src, 's'), -ERANGE);
    bad = o;
    bad.src_off = POOL - bad.len + 1;
    bad.count = 1;
    ck_assert_int_eq(copy_check(&bad, 1, &p.src, 's'), -ERANGE);
    bad.src_off = POOL - bad.len;
    ck_assert_int_eq(copy_check(&bad, 1, &p.src, 's'), 0); /* the last byte is inside */
    bad = o;
    bad.src_off = 100;
    bad.count = 3;
    bad.src_stride = -51; /* second run would start below 0 */
    ck_assert_int_eq(copy_check(&bad, 1, &p.src, 's'), -ERANGE);
    bad.src_stride = (int64_t)POOL; /* third run past the end */
    ck_assert_int_eq(copy_check(&bad, 1, &p.src, 's'), -ERANGE);
    bad = o;
    bad.count = UINT64_MAX; /* overflowing spans */
    bad.src_stride = INT64_MAX;
    ck_assert_int_eq(copy_check(&bad, 1, &p.src, 's'), -ERANGE);
    bad = o;
    bad.len = 0;
    ck_assert_int_eq(copy_check(&bad, 1, &p.src, 's'), -ERANGE);
    bad = o;
    bad.dst_off = UINT64_MAX - 2;
    ck_assert_int_eq(copy_check(&bad, 1, &p.dst, 'd'), -ERANGE);
    /* ops must tile the extent in order (the sub-range search relies on it) */
    struct copy_op two[2] = {o, o};
    two[1].ext_off = o.ext_off + o.len * o.count + 1;
    ck_assert_int_eq(copy_check(two, 2, &p.src, 's'), -ERANGE);
    ck_assert_int_eq(copy_check(&o, 1, &p.src, 'x'), -EINVAL);
    free_prog(&p);
}
END_TEST

START_TEST(plan_compression_merges_runs_without_changing_bytes)
{
    struct plan_opvec v = {0};
    /* 10 contiguous runs -> one op with a long len */
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(plan_opvec_add(&v, 0, 1000 + i * 8, 1, 500 + i * 8, 8, false), 0);
    ck_assert_int_eq(plan_opvec_finish(&v), 0);
    ck_assert_uint_eq(v.n, 1);
    ck_assert_uint_eq(v.ops[0].len, 80);
    ck_assert_uint_eq(v.ops[0].count, 1);
    /* 5 strided runs (src +100, dst -64) -> one op with count 5 */
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(plan_opvec_add(&v, 1, 4000 + i * 100, 0, 9000 - i * 64, 32, true), 0);
    ck_assert_int_eq(plan_opvec_finish(&v), 0);
    ck_assert_uint_eq(v.n, 2);
    ck_assert_uint_eq(v.ops[1].count, 5);
    ck_assert_int_eq(v.ops[1].src_stride, 100);
    ck_assert_int_eq(v.ops[1].dst_stride, -64);
    ck_assert_uint_eq(v.ops[1].ext_off, 80);
    /* a run breaking the stride starts a new op; a different pool too */
    ck_assert_int_eq(plan_opvec_add(&v, 1, 4000 + 5 * 100 + 1, 0, 9000 - 5 * 64, 32, true), 0);
    ck_assert_int_eq(plan_opvec_finish(&v), 0);
    ck_assert_uint_eq(v.n, 3);
    ck_assert_int_eq(plan_opvec_add(&v, 0, 0, 0, 0, 32, true), 0);
    ck_assert_int_eq(plan_opvec_finish(&v), 0);
    ck_assert_uint_eq(v.n, 4);
    ck_assert_uint_eq(v.bytes, 80 + 5 * 32 + 32 + 32);
    ck_assert_uint_eq(v.state_bytes, 5 * 32 + 64);
    ck_assert_uint_eq(v.kv_bytes, 80);
    /* unknown sources merge on extent and destination alone */
    struct plan_opvec u = {0};
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(plan_opvec_add(&u, PLAN_POOL_UNKNOWN, 12345 * i, 0, i * 16, 16, false), 0);
    ck_assert_int_eq(plan_opvec_finish(&u), 0);
    ck_assert_uint_eq(u.n, 1);
    ck_assert_uint_eq(u.ops[0].len, 64);
    ck_assert_uint_eq(u.ops[0].src_off, 0);
    plan_opvec_done(&v);
    plan_opvec_done(&u);
    plan_opvec_done(NULL);
}
END_TEST

static void check_large_program(uint64_t seed);

/* Copies of at least 8 MiB take the streaming-store path, with each kernel this CPU runs:
 * unaligned destinations, odd run lengths, sub-ranges and pieces (under 8 MiB each, as the copy
 * threads cut them) starting mid-run, the last op; the bytes must equal plain memcpy's. */
START_TEST(copy_large_streaming_path_equals_memcpy)
{
    const char *was = copy_stream_kernel(), *kern;
    bool supported;
    for (uint32_t ki = 0; (kern = copy_stream_kernel_at(ki, &supported)); ki++) {
        if (!supported)
            continue;
        ck_assert_int_eq(copy_stream_kernel_set(kern), 0);
        check_large_program(42 + ki);
    }
    ck_assert_int_eq(copy_stream_kernel_set(was), 0);
}
END_TEST

static void check_large_program(uint64_t seed)
{
    const uint64_t pool = 24u << 20;
    uint64_t s = seed;
    struct copy_mem src = {1, {malloc(pool)}, {pool}}, dst = {1, {calloc(1, pool)}, {pool}},
                    ref = {1, {calloc(1, pool)}, {pool}};
    ck_assert_ptr_nonnull(src.base[0]);
    for (uint64_t i = 0; i < pool / 8; i++) {
        uint64_t v = rnd(&s);
        memcpy(src.base[0] + i * 8, &v, 8);
    }
    struct copy_op ops[200];
    uint64_t ext = 0, dcur = 3;
    uint32_t n = 0;
    while (n < 200 && dcur + 140000 * 2 < pool) {
        struct copy_op *o = &ops[n++];
        o->src_pool = o->dst_pool = 0;
        o->len = 4096 + rnd(&s) % 65536 + (rnd(&s) % 2) * 7;
        o->count = 1 + rnd(&s) % 2;
        o->src_stride = (int64_t)(o->len + rnd(&s) % 99);
        o->src_off = rnd(&s) % (pool - 3 * 140000);
        o->dst_stride = (int64_t)(o->len + 1 + rnd(&s) % 13);
        o->dst_off = dcur;
        dcur += o->count * (uint64_t)o->dst_stride + 5;
        o->ext_off = ext;
        ext += o->len * o->count;
    }
    ck_assert_uint_ge(ext, 8u << 20);
    ck_assert_int_eq(copy_check(ops, n, &src, 's'), 0);
    ck_assert_int_eq(copy_check(ops, n, &dst, 'd'), 0);
    uint8_t *want = malloc(ext), *got = malloc(ext);
    for (uint32_t i = 0; i < n; i++)
        for (uint64_t k = 0; k < ops[i].count; k++) {
            memcpy(want + ops[i].ext_off + k * ops[i].len,
                   src.base[0] + ops[i].src_off + k * ops[i].src_stride, ops[i].len);
            memcpy(ref.base[0] + ops[i].dst_off + k * ops[i].dst_stride,
                   src.base[0] + ops[i].src_off + k * ops[i].src_stride, ops[i].len);
        }
    copy_gather(ops, n, &src, 0, ext, got);
    ck_assert(memcmp(got, want, ext) == 0);
    uint64_t cut = 1 + rnd(&s) % 1000; /* a big sub-range starting mid-run */
    memset(got, 0, ext);
    copy_gather(ops, n, &src, cut, ext, got);
    ck_assert(memcmp(got, want + cut, ext - cut) == 0);
    copy_scatter(ops, n, want, 0, ext, &dst);
    ck_assert(memcmp(dst.base[0], ref.base[0], pool) == 0);
    memset(dst.base[0], 0, pool);
    copy_direct(ops, n, &src, &dst);
    ck_assert(memcmp(dst.base[0], ref.base[0], pool) == 0);
    memset(dst.base[0], 0, pool); /* in pieces cut mid-run, as the copy threads run it */
    for (uint64_t lo = 0, step = 1 + rnd(&s) % (3u << 20); lo < ext; lo += step)
        copy_direct_range(ops, n, &src, lo, lo + step < ext ? lo + step : ext, &dst);
    ck_assert(memcmp(dst.base[0], ref.base[0], pool) == 0);
    memset(got, 0, ext); /* gather and scatter in pieces: each streams (the program is large) */
    memset(dst.base[0], 0, pool);
    for (uint64_t lo = 0, step = 1 + rnd(&s) % (3u << 20); lo < ext; lo += step) {
        uint64_t hi = lo + step < ext ? lo + step : ext;
        copy_gather(ops, n, &src, lo, hi, got + lo);
        copy_scatter(ops, n, want + lo, lo, hi, &dst);
    }
    ck_assert(memcmp(got, want, ext) == 0);
    ck_assert(memcmp(dst.base[0], ref.base[0], pool) == 0);
    free(want);
    free(got);
    free(src.base[0]);
    free(dst.base[0]);
    free(ref.base[0]);
}

START_TEST(copy_direct_range_in_pieces_equals_direct_copy)
{
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct prog p, q;
        make_prog(&p, seed);
        make_prog(&q, seed);
        copy_direct(p.ops, p.n, &p.src, &p.dst);
        uint64_t s = seed;
        for (uint64_t lo = 0; lo < q.bytes;) {
            uint64_t hi = lo + 1 + rnd(&s) % (q.bytes - lo);
            copy_direct_range(q.ops, q.n, &q.src, lo, hi, &q.dst);
            lo = hi;
        }
        for (int i = 0; i < 2; i++)
            ck_assert(memcmp(p.dst.base[i], q.dst.base[i], POOL) == 0);
        free_prog(&p);
        free_prog(&q);
    }
}
END_TEST

struct walk {
    uint8_t *out;
    uint64_t pos, runs;
    const struct copy_mem *src;
    int ok;
};

static int on_run(void *arg, uint32_t pool, const uint8_t *src, uint64_t pos, uint64_t len)
{
    struct walk *w = arg;
    w->ok &= pos == w->pos && pool < w->src->n && src >= w->src->base[pool] &&
             src + len <= w->src->base[pool] + w->src->size[pool];
    memcpy(w->out, src, len);
    w->out += len;
    w->pos += len;
    w->runs++;
    return 0;
}

/* The source runs of any sub-range, laid end to end, are its gather, in extent order, each
 * inside its pool, and never more runs than the program has (neighbours merged). */
START_TEST(copy_src_runs_of_any_subrange_are_its_gather)
{
    for (uint64_t seed = 1; seed <= 200; seed++) {
        struct prog p;
        make_prog(&p, seed);
        uint8_t *full = malloc(p.bytes), *part = malloc(p.bytes + 1);
        copy_gather(p.ops, p.n, &p.src, 0, p.bytes, full);
        uint64_t s = seed, total = 0;
        for (uint32_t i = 0; i < p.n; i++)
            total += p.ops[i].count;
        for (int t = 0; t < 20; t++) {
            uint64_t lo = rnd(&s) % (p.bytes + 1), hi = lo + rnd(&s) % (p.bytes - lo + 1);
            struct walk w = {part, lo, 0, &p.src, 1};
            ck_assert_int_eq(copy_src_runs(p.ops, p.n, &p.src, lo, hi, on_run, &w), 0);
            ck_assert(w.ok);
            ck_assert_uint_eq(w.pos, hi);
            ck_assert_uint_le(w.runs, total);
            ck_assert(memcmp(part, full + lo, hi - lo) == 0);
        }
        free(full);
        free(part);
        free_prog(&p);
    }
    /* one op of 4 back-to-back runs: one run */
    uint8_t pool[64];
    struct copy_mem m = {.n = 1, .base = {pool}, .size = {sizeof pool}};
    struct copy_op o = {.len = 16, .count = 4, .src_stride = 16, .dst_stride = 16};
    uint8_t out[64];
    struct walk w = {out, 0, 0, &m, 1};
    ck_assert_int_eq(copy_src_runs(&o, 1, &m, 0, 64, on_run, &w), 0);
    ck_assert_uint_eq(w.runs, 1);
}
END_TEST

static Suite *copy_suite(void)
{
    Suite *s = suite_create("copy");
    TCase *tc = tcase_create("executor");
    tcase_add_test(tc, copy_gather_any_subrange_equals_the_full_gather);
    tcase_add_test(tc, copy_scatter_in_pieces_equals_direct_copy);
    tcase_add_test(tc, copy_check_refuses_programs_outside_their_pools);
    tcase_add_test(tc, copy_large_streaming_path_equals_memcpy);
    tcase_add_test(tc, copy_direct_range_in_pieces_equals_direct_copy);
    tcase_add_test(tc, copy_src_runs_of_any_subrange_are_its_gather);
    suite_add_tcase(s, tc);
    tc = tcase_create("compression");
    tcase_add_test(tc, plan_compression_merges_runs_without_changing_bytes);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(copy_suite()); }
