/* check_gpu_progcache.c: the daemon's cache of GPU copy programs (daemon/gpu/gpu_progcache.h)
 * on a real struct gpu (CPU mode where there is no GPU; the bookkeeping is the same): a hit
 * needs the same device and the same ops byte for byte; the limit is crossed and the least
 * recently used unheld entry leaves (freed, since no GPU completion is outstanding); held
 * entries are never evicted and a program past a full, held cache is handed out uncached and
 * freed after its last release; a failed make caches nothing; teardown frees every program.
 * The program objects are host buffers made by the test (the cache never looks inside). */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "gpu.h"
#include "gpu_progcache.h"
#include "testutil.h"

static uv_loop_t loop;
static struct gpu *g;
static int made, freed, fail_make;

/* arg non-NULL: the program is made, but its upload waited on the host (make returns 1) */
static int make(const struct copy_op *ops, uint32_t n_ops, int device, void *arg, void **ret,
                char *msg, size_t len)
{
    (void)ops, (void)n_ops, (void)device;
    if (fail_make) {
        snprintf(msg, len, "no room on the device");
        return -ENOMEM;
    }
    int *p = malloc(sizeof *p);
    ck_assert_ptr_nonnull(p);
    *p = ++made;
    *ret = p;
    return arg ? 1 : 0;
}

static void free_obj(void *p)
{
    freed++;
    free(p);
}

static void setup(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(gpu_new(&loop, &g), 0);
    made = freed = fail_make = 0;
}

static void teardown(void)
{
    g = gpu_free(g);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

/* Program k: one op whose source offset is k. */
static struct copy_op op_of(uint64_t k)
{
    return (struct copy_op){.src_off = k, .len = 64, .count = 1};
}

static struct gpu_prog *get(uint64_t k, int device)
{
    struct copy_op op = op_of(k);
    struct gpu_prog *p = NULL;
    char msg[128];
    ck_assert_int_eq(gpu_prog_get(g, &op, 1, device, make, NULL, free_obj, &p, msg, sizeof msg),
                     0);
    ck_assert_ptr_nonnull(p);
    ck_assert_mem_eq(gpu_prog_ops(p), &op, sizeof op);
    return p;
}

static struct gpu_progcache_stats stats(void)
{
    struct gpu_progcache_stats s;
    gpu_progcache_stats(g, &s);
    return s;
}

START_TEST(same_ops_and_device_hit_anything_else_misses)
{
    struct gpu_prog *a = get(1, 0), *b = get(1, 0);
    ck_assert_ptr_eq(a, b);
    ck_assert_int_eq(made, 1);
    struct gpu_prog *c = get(1, 1), *d = get(2, 0); /* another device, another op */
    ck_assert_ptr_ne(c, a);
    ck_assert_ptr_ne(d, a);
    ck_assert_int_eq(made, 3);
    struct gpu_progcache_stats s = stats();
    ck_assert_uint_eq(s.hits, 1);
    ck_assert_uint_eq(s.misses, 3);
    ck_assert_uint_eq(s.count, 3);
    ck_assert_uint_eq(s.max, GPU_PROGCACHE_MAX);
    gpu_prog_put(g, a);
    gpu_prog_put(g, b);
    gpu_prog_put(g, c);
    gpu_prog_put(g, d);
    ck_assert_int_eq(freed, 0); /* released entries stay cached */
    teardown();
    ck_assert_int_eq(freed, 3); /* gpu_free frees them all */
    setup();
}
END_TEST

START_TEST(crossing_the_limit_evicts_the_least_recently_used)
{
    ck_assert_int_eq(gpu_progcache_set_max(g, 3), 0);
    for (uint64_t k = 1; k <= 3; k++)
        gpu_prog_put(g, get(k, 0));
    gpu_prog_put(g, get(1, 0)); /* 1 is now the most recent: 2 is the oldest */
    gpu_prog_put(g, get(4, 0)); /* the fourth program crosses the limit of 3 */
    struct gpu_progcache_stats s = stats();
    ck_assert_uint_eq(s.count, 3);
    ck_assert_uint_eq(s.evicted, 1);
    ck_assert_int_eq(freed, 1); /* no GPU work outstanding: freed at once */
    int before = made;
    gpu_prog_put(g, get(1, 0)); /* still cached */
    ck_assert_int_eq(made, before);
    gpu_prog_put(g, get(2, 0)); /* was evicted: made again, evicting 3 */
    ck_assert_int_eq(made, before + 1);
    ck_assert_uint_eq(stats().evicted, 2);
    ck_assert_uint_eq(stats().count, 3);
}
END_TEST

START_TEST(held_entries_stay_and_a_program_past_a_full_held_cache_is_uncached)
{
    ck_assert_int_eq(gpu_progcache_set_max(g, 2), 0);
    struct gpu_prog *a = get(1, 0), *b = get(2, 0), *c = get(3, 0);
    struct gpu_progcache_stats s = stats();
    ck_assert_uint_eq(s.count, 2);
    ck_assert_uint_eq(s.evicted, 0);
    ck_assert_uint_eq(s.uncached, 1);
    ck_assert_int_eq(freed, 0);
    gpu_prog_put(g, c); /* its last release frees the uncached one */
    ck_assert_int_eq(freed, 1);
    struct gpu_prog *c2 = get(3, 0); /* not cached: made again, still uncached */
    ck_assert_ptr_nonnull(c2);
    ck_assert_int_eq(made, 4);
    gpu_prog_put(g, c2);
    ck_assert_int_eq(freed, 2);
    gpu_prog_put(g, a);
    gpu_prog_put(g, b);
    ck_assert_int_eq(gpu_progcache_set_max(g, 0), 0); /* nothing cached: the unheld go */
    ck_assert_uint_eq(stats().count, 0);
    ck_assert_int_eq(freed, 4);
    ck_assert_int_eq(gpu_progcache_set_max(g, GPU_PROGCACHE_MAX + 1), -EINVAL);
}
END_TEST

START_TEST(a_failed_make_caches_nothing_and_says_why)
{
    struct copy_op op = op_of(7);
    struct gpu_prog *p = NULL;
    char msg[128] = "";
    fail_make = 1;
    ck_assert_int_eq(gpu_prog_get(g, &op, 1, 0, make, NULL, free_obj, &p, msg, sizeof msg),
                     -ENOMEM);
    ck_assert_ptr_null(p);
    ck_assert_str_eq(msg, "no room on the device");
    ck_assert_uint_eq(stats().count, 0);
    fail_make = 0;
    gpu_prog_put(g, get(7, 0));
    ck_assert_uint_eq(stats().count, 1);
    ck_assert_ptr_null(gpu_prog_put(g, NULL));
}
END_TEST

START_TEST(an_upload_that_waited_is_counted_and_still_cached)
{
    struct copy_op op = op_of(9);
    struct gpu_prog *p = NULL;
    char msg[128];
    int waited = 1;
    ck_assert_int_eq(gpu_prog_get(g, &op, 1, 0, make, &waited, free_obj, &p, msg, sizeof msg),
                     0);
    ck_assert_ptr_nonnull(p);
    gpu_prog_put(g, get(1, 0)); /* made with no wait */
    struct gpu_progcache_stats s = stats();
    ck_assert_uint_eq(s.misses, 2);
    ck_assert_uint_eq(s.waited, 1);
    ck_assert_uint_eq(s.count, 2);
    gpu_prog_put(g, p);
    ck_assert_ptr_eq(p = get(9, 0), p); /* a hit: the waited-for program serves again */
    ck_assert_uint_eq(stats().hits, 1);
    gpu_prog_put(g, p);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_progcache");
    TCase *tc = tcase_create("cache");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, same_ops_and_device_hit_anything_else_misses);
    tcase_add_test(tc, crossing_the_limit_evicts_the_least_recently_used);
    tcase_add_test(tc, held_entries_stay_and_a_program_past_a_full_held_cache_is_uncached);
    tcase_add_test(tc, a_failed_make_caches_nothing_and_says_why);
    tcase_add_test(tc, an_upload_that_waited_is_counted_and_still_cached);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
