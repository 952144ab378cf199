/* check_kvk_tasks.c: the host side of the CUDA copy kernels, on the CPU: program validation,
 * splitting into bounded tasks that tile the extent exactly once, sub-range lookup, and the
 * index a program keeps (no per-task arrays) against the full build. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvk_tasks.h"
#include "testutil.h"

static uint64_t rnd(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint32_t random_ops(struct copy_op *ops, uint32_t max, uint64_t seed)
{
    uint64_t s = seed, at = 0;
    uint32_t n = 1 + (uint32_t)(rnd(&s) % max);
    for (uint32_t i = 0; i < n; i++) {
        struct copy_op *o = &ops[i];
        memset(o, 0, sizeof(*o));
        switch (rnd(&s) % 4) {
        case 0: o->len = 1 + rnd(&s) % 15; o->count = 1 + rnd(&s) % 50000; break;
        case 1: o->len = 16 + rnd(&s) % 40000; o->count = 1 + rnd(&s) % 100; break;
        case 2: o->len = 32768 + rnd(&s) % 300000; o->count = 1 + rnd(&s) % 4; break;
        default: o->len = KVK_TASK_BYTES * (1 + rnd(&s) % 3); o->count = 2; break;
        }
        o->src_stride = (int64_t)o->len + (int64_t)(rnd(&s) % 64);
        o->dst_stride = (int64_t)o->len;
        o->src_pool = (uint32_t)(rnd(&s) % 3);
        o->dst_pool = (uint32_t)(rnd(&s) % 2);
        o->ext_off = at;
        at += o->len * o->count;
    }
    return n;
}

START_TEST(tasks_tile_the_extent_once_and_stay_bounded)
{
    static struct copy_op ops[64];
    for (uint64_t seed = 1; seed <= 200; seed++) {
        uint32_t tb = seed % 3 == 0 ? 16384 : seed % 3 == 1 ? 0 : 262144;
        uint32_t n = random_ops(ops, 64, seed);
        struct kvk_tasks t;
        ck_assert_int_eq(kvk_tasks_build(ops, n, tb, 0, &t), 0);
        uint64_t at = 0;
        for (uint32_t k = 0; k < t.n_tasks; k++) {
            const struct kvk_task *x = &t.tasks[k];
            const struct copy_op *o = &ops[x->op];
            ck_assert_uint_eq(t.ext[k], at);
            ck_assert_uint_eq(o->ext_off + x->pos, at);
            ck_assert_uint_gt(x->bytes, 0);
            ck_assert_uint_le(x->bytes, t.task_bytes);
            uint64_t j0 = x->pos % o->len;
            if (o->len >= t.task_bytes / 2) /* pieces of long runs never cross a run */
                ck_assert_uint_le(j0 + x->bytes, o->len);
            at += x->bytes;
        }
        ck_assert_uint_eq(at, t.bytes);
        ck_assert_uint_eq(t.ext[t.n_tasks], t.bytes);
        for (uint32_t i = 0; i < n; i++) {
            const struct copy_op *o = &ops[i];
            uint64_t end = (o->count - 1) * (uint64_t)o->src_stride + o->len;
            ck_assert_uint_ge(t.need_src[o->src_pool], end);
            ck_assert_uint_le(t.ops[i].align, 16);
        }
        kvk_tasks_done(&t);
    }
}
END_TEST

/* Empty ops (len or count 0) between, before and after the others: no tasks of their own. */
static uint32_t with_empty_ops(struct copy_op *ops, uint32_t n, uint32_t max, uint64_t seed)
{
    uint64_t s = seed;
    for (uint32_t k = 0; k < 3 && n < max; k++) {
        uint32_t at = k == 0 ? 0 : k == 1 ? n : (uint32_t)(rnd(&s) % (n + 1));
        memmove(&ops[at + 1], &ops[at], (n - at) * sizeof(ops[0]));
        uint64_t ext = at < n ? ops[at + 1].ext_off : ops[at - 1].ext_off +
                                                         ops[at - 1].len * ops[at - 1].count;
        ops[at] = (struct copy_op){.len = k == 2 ? 0 : 64, .count = k == 2 ? 5 : 0,
                                   .ext_off = ext, .src_stride = 64, .dst_stride = 64};
        n++;
    }
    return n;
}

/* kvk_tasks_index (what a program keeps: no per-task arrays) splits and bounds exactly like the
 * full build, and its range lookup, the one the GPU path uses, gives the same tasks, empty ops
 * anywhere. The GPU expands the tasks from op_first by kvk_op_task, checked against the build. */
START_TEST(the_index_alone_splits_and_finds_ranges_like_the_full_build)
{
    static struct copy_op ops[40];
    uint64_t s = 11;
    for (uint64_t seed = 1; seed <= 40; seed++) {
        uint32_t n = with_empty_ops(ops, random_ops(ops, 32, seed * 17), 40, seed);
        uint32_t tb = seed % 3 ? 0 : 16384;
        struct kvk_tasks full, idx;
        ck_assert_int_eq(kvk_tasks_build(ops, n, tb, 0, &full), 0);
        ck_assert_int_eq(kvk_tasks_index(ops, n, tb, 0, &idx), 0);
        ck_assert_ptr_null(idx.tasks);
        ck_assert_ptr_null(idx.ext);
        ck_assert_uint_eq(idx.n_tasks, full.n_tasks);
        ck_assert_uint_eq(idx.bytes, full.bytes);
        ck_assert_mem_eq(idx.op_first, full.op_first, ((size_t)n + 1) * sizeof(uint32_t));
        ck_assert_mem_eq(idx.need_src, full.need_src, sizeof(idx.need_src));
        ck_assert_mem_eq(idx.need_dst, full.need_dst, sizeof(idx.need_dst));
        for (uint32_t k = 0; k < full.n_tasks; k++) { /* the expand kernel's formula */
            uint32_t i = full.tasks[k].op, bytes;
            uint64_t pos;
            ck_assert(idx.op_first[i] <= k && k < idx.op_first[i + 1]);
            kvk_op_task(&idx.ops[i], k - idx.op_first[i], &pos, &bytes);
            ck_assert_uint_eq(pos, full.tasks[k].pos);
            ck_assert_uint_eq(bytes, full.tasks[k].bytes);
        }
        for (int i = 0; i < 60; i++) {
            uint64_t a = rnd(&s) % idx.bytes, b = rnd(&s) % idx.bytes;
            uint64_t lo = a < b ? a : b, hi = (a < b ? b : a) + 1;
            uint32_t first, cnt;
            kvk_tasks_range(&idx, lo, hi, &first, &cnt);
            ck_assert(full.ext[first] <= lo && full.ext[first + 1] > lo);
            ck_assert(full.ext[first + cnt - 1] < hi && full.ext[first + cnt] >= hi);
        }
        kvk_tasks_done(&full);
        kvk_tasks_done(&idx);
    }
}
END_TEST

START_TEST(range_lookup_returns_exactly_the_intersecting_tasks)
{
    static struct copy_op ops[32];
    uint64_t s = 7;
    for (uint64_t seed = 1; seed <= 50; seed++) {
        uint32_t tb = seed % 2 ? 0 : 8192;
        uint32_t n = random_ops(ops, 32, seed * 31);
        struct kvk_tasks t;
        ck_assert_int_eq(kvk_tasks_build(ops, n, tb, 0, &t), 0);
        for (int i = 0; i < 50; i++) {
            uint64_t a = rnd(&s) % t.bytes, b = rnd(&s) % t.bytes;
            uint64_t lo = a < b ? a : b, hi = (a < b ? b : a) + 1;
            uint32_t first, cnt;
            kvk_tasks_range(&t, lo, hi, &first, &cnt);
            /* tasks are sorted and contiguous: the answer is exact when its ends intersect
             * and the tasks just outside it do not */
            ck_assert_uint_gt(cnt, 0);
            ck_assert_uint_le(first + cnt, t.n_tasks);
            ck_assert(t.ext[first] <= lo && t.ext[first + 1] > lo);
            ck_assert(t.ext[first + cnt - 1] < hi && t.ext[first + cnt] >= hi);
        }
        kvk_tasks_done(&t);
    }
}
END_TEST

START_TEST(alignment_is_the_widest_every_offset_allows)
{
    struct copy_op o;
    memset(&o, 0, sizeof(o));
    o.len = 4096;
    o.count = 4;
    o.src_stride = o.dst_stride = 8192;
    struct kvk_tasks t;
    ck_assert_int_eq(kvk_tasks_build(&o, 1, 0, 0, &t), 0);
    ck_assert_uint_eq(t.ops[0].align, 16);
    kvk_tasks_done(&t);
    o.dst_stride = 8196;
    ck_assert_int_eq(kvk_tasks_build(&o, 1, 0, 0, &t), 0);
    ck_assert_uint_eq(t.ops[0].align, 4);
    kvk_tasks_done(&t);
    o.count = 1; /* a single run: strides do not matter */
    o.src_off = 24;
    ck_assert_int_eq(kvk_tasks_build(&o, 1, 0, 0, &t), 0);
    ck_assert_uint_eq(t.ops[0].align, 8);
    kvk_tasks_done(&t);
}
END_TEST

START_TEST(invalid_programs_are_refused_naming_the_op)
{
    struct copy_op o[2];
    memset(o, 0, sizeof(o));
    o[0].len = 10;
    o[0].count = 3;
    o[0].src_stride = o[0].dst_stride = 10;
    o[1] = o[0];
    o[1].ext_off = 30;
    struct kvk_tasks t;
    ck_assert_int_eq(kvk_tasks_build(o, 2, 0, 0, &t), 0);
    kvk_tasks_done(&t);
    o[1].ext_off = 31; /* gap */
    ck_assert_int_eq(kvk_tasks_build(o, 2, 0, 0, &t), -EINVAL);
    ck_assert_ptr_nonnull(strstr(kvk_last_error(), "op 1"));
    o[1].ext_off = 30;
    o[1].dst_stride = -20; /* run 2 would start at -40 */
    ck_assert_int_eq(kvk_tasks_build(o, 2, 0, 0, &t), -EINVAL);
    ck_assert_ptr_nonnull(strstr(kvk_last_error(), "destination"));
    o[1].dst_stride = 10;
    o[1].src_off = UINT64_MAX - 15; /* overflows */
    ck_assert_int_eq(kvk_tasks_build(o, 2, 0, 0, &t), -EINVAL);
    o[1].src_off = 0;
    o[1].dst_pool = LAYOUT_MAX_POOLS;
    ck_assert_int_eq(kvk_tasks_build(o, 2, 0, 0, &t), -EINVAL);
    o[1].dst_pool = 0;
    o[1].len = UINT64_MAX / 2;
    ck_assert_int_eq(kvk_tasks_build(o, 2, 0, 0, &t), -EINVAL);
    o[1].len = 1; /* 2^30 one-byte runs: more than KVK_MAX_TASKS after grouping? no: 2^14 */
    o[1].count = 1u << 30;
    o[1].src_stride = o[1].dst_stride = 1;
    ck_assert_int_eq(kvk_tasks_build(o, 2, 0, 0, &t), 0);
    ck_assert_uint_eq(t.n_tasks, 1 + (1u << 30) / KVK_TASK_BYTES);
    kvk_tasks_done(&t);
    o[1].len = KVK_TASK_BYTES; /* 2^30 full tasks: refused before allocating */
    ck_assert_int_eq(kvk_tasks_build(o, 2, 0, 0, &t), -E2BIG);
    ck_assert_int_eq(kvk_tasks_build(o, 1, 3000, 0, &t), -EINVAL); /* task size not a power of 2 */
    ck_assert_int_eq(kvk_tasks_build(o, 1, 2048, 0, &t), -EINVAL);
    ck_assert_int_eq(kvk_tasks_build(o, 1, 2u << 20, 0, &t), -EINVAL);
    ck_assert_int_eq(kvk_tasks_build(NULL, 0, 0, 0, &t), 0);
    ck_assert_uint_eq(t.n_tasks, 0);
    kvk_tasks_done(&t);
    kvk_tasks_done(NULL);
}
END_TEST

START_TEST(pools_smaller_than_the_program_needs_are_refused)
{
    struct copy_op o;
    memset(&o, 0, sizeof(o));
    o.len = 100;
    o.count = 3;
    o.src_stride = -200;
    o.src_off = 400;
    o.dst_stride = 100;
    o.dst_pool = 2;
    struct kvk_tasks t;
    ck_assert_int_eq(kvk_tasks_build(&o, 1, 0, 0, &t), 0);
    ck_assert_uint_eq(t.need_src[0], 500);
    ck_assert_uint_eq(t.need_dst[2], 300);
    struct kvk_mem m = {.n = 3};
    m.base[0] = m.base[2] = 4096;
    m.size[0] = 500;
    m.size[2] = 300;
    ck_assert_int_eq(kvk_tasks_check_mem(&t, &m, 's'), 0);
    ck_assert_int_eq(kvk_tasks_check_mem(&t, &m, 'd'), 0);
    m.size[2] = 299;
    ck_assert_int_eq(kvk_tasks_check_mem(&t, &m, 'd'), -ERANGE);
    m.n = 2;
    ck_assert_int_eq(kvk_tasks_check_mem(&t, &m, 'd'), -ERANGE);
    ck_assert_int_eq(kvk_tasks_check_mem(&t, NULL, 's'), -EINVAL);
    kvk_tasks_done(&t);
}
END_TEST

/* The fat form places every byte where the op says, by the kernel's own formulas. */
START_TEST(fat_tasks_locate_every_byte_like_their_ops)
{
    static struct copy_op ops[48];
    uint64_t s = 99;
    for (uint64_t seed = 1; seed <= 60; seed++) {
        uint32_t n = random_ops(ops, 48, seed * 7);
        uint32_t pa = seed % 2 ? 4096 : 0, tb = seed % 3 ? 0 : 16384;
        struct kvk_tasks t;
        struct kvk_ftask *f;
        ck_assert_int_eq(kvk_tasks_build(ops, n, tb, pa, &t), 0);
        f = calloc(t.n_tasks ? t.n_tasks : 1, sizeof(*f));
        ck_assert_ptr_nonnull(f);
        kvk_tasks_fat(&t, f);
        for (uint32_t i = 0; i < t.n_tasks; i++) {
            const struct copy_op *o = &ops[t.tasks[i].op];
            ck_assert_uint_eq(f[i].ext_pos, t.ext[i]);
            ck_assert_uint_eq(f[i].bytes, t.tasks[i].bytes);
            if (pa && o->len >= t.task_bytes / 2) /* pieces start on the piece alignment */
                ck_assert_uint_eq((t.tasks[i].pos % o->len) % pa, 0);
            for (int k = 0; k < 6; k++) {
                uint64_t b = k == 0 ? 0 : k == 1 ? f[i].bytes - 1 : rnd(&s) % f[i].bytes;
                uint64_t e = f[i].ext_pos + b - o->ext_off, run = e / o->len, j = e % o->len;
                uint64_t want_s = o->src_off + run * (uint64_t)o->src_stride + j;
                uint64_t want_d = o->dst_off + run * (uint64_t)o->dst_stride + j;
                uint64_t got_s, got_d;
                if (f[i].len == 0) {
                    got_s = f[i].src_pos + b;
                    got_d = f[i].dst_pos + b;
                } else {
                    uint64_t r = f[i].j0 + b, kk = r / f[i].len, jj = r % f[i].len;
                    got_s = f[i].src_pos - f[i].j0 + kk * (uint64_t)f[i].src_stride + jj;
                    got_d = f[i].dst_pos - f[i].j0 + kk * (uint64_t)f[i].dst_stride + jj;
                }
                ck_assert_uint_eq(got_s, want_s);
                ck_assert_uint_eq(got_d, want_d);
                ck_assert_uint_eq(f[i].src_pool, o->src_pool);
                ck_assert_uint_eq(f[i].dst_pool, o->dst_pool);
            }
        }
        free(f);
        kvk_tasks_done(&t);
    }
    struct copy_op o = {.len = 100, .count = 1};
    struct kvk_tasks t;
    ck_assert_int_eq(kvk_tasks_build(&o, 1, 0, 8, &t), -EINVAL); /* piece alignment < 16 */
    ck_assert_int_eq(kvk_tasks_build(&o, 1, 8192, 16384, &t), -EINVAL);
    ck_assert_int_eq(kvk_tasks_build(&o, 1, 0, 48, &t), -EINVAL);
}
END_TEST

static Suite *kvk_tasks_suite(void)
{
    Suite *s = suite_create("kvk_tasks");
    TCase *tc = tcase_create("split");
    tcase_add_test(tc, tasks_tile_the_extent_once_and_stay_bounded);
    tcase_add_test(tc, range_lookup_returns_exactly_the_intersecting_tasks);
    tcase_add_test(tc, the_index_alone_splits_and_finds_ranges_like_the_full_build);
    tcase_add_test(tc, alignment_is_the_widest_every_offset_allows);
    tcase_add_test(tc, fat_tasks_locate_every_byte_like_their_ops);
    suite_add_tcase(s, tc);
    tc = tcase_create("limits");
    tcase_add_test(tc, invalid_programs_are_refused_naming_the_op);
    tcase_add_test(tc, pools_smaller_than_the_program_needs_are_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(kvk_tasks_suite());
}
