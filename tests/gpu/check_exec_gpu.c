/* check_exec_gpu.c: the GPU executor row (daemon/move/exec_gpu.h) on a real struct gpu, its
 * streams and its completions through a libuv loop: direct, gather and scatter of random copy
 * programs through move_exec_of(MOVE_EXEC_GPU) return MOVE_STARTED, call done exactly once on
 * the loop, and move exactly the CPU twin's bytes (destinations poisoned first, compared whole);
 * the daemon's program cache crossed at a limit of 2 (held entries stay, a third is handed out
 * uncached, a later miss evicts the least recently used unheld entry) with the bytes still
 * right after re-uploading an evicted program. Exits 77 (skipped) without a GPU. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef KVF_HAVE_CUDA
int main(void)
{
    printf("SKIP: built without CUDA (CUDA=0)\n");
    return 77;
}
#else

#include <cuda_runtime.h>
#include <uv.h>

#include "exec_gpu.h"
#include "gpu.h"
#include "gpu_progcache.h"
#include "gputest.h"


static uv_loop_t loop;
static struct gpu *g;

static void setup(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(gpu_new(&loop, &g), 0);
    ck_assert_msg(!gpu_cpu_mode(g), "CPU mode: %s", gpu_cpu_reason(g));
}

static void teardown(void)
{
    g = gpu_free(g);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

/* One side's pools on GPU 0 and their host shadows (what the device should hold). */
struct pools {
    uint32_t n;
    uint8_t *dev[LAYOUT_MAX_POOLS], *host[LAYOUT_MAX_POOLS];
    struct copy_mem mem; /* device addresses */
};

static void pools_init(struct pools *s, uint32_t n, const uint64_t *size, uint64_t seed)
{
    memset(s, 0, sizeof *s);
    s->n = s->mem.n = n;
    for (uint32_t p = 0; p < n; p++) {
        s->host[p] = malloc(size[p]);
        ck_assert_ptr_nonnull(s->host[p]);
        if (seed)
            gt_fill_random(s->host[p], size[p], seed + p);
        else
            memset(s->host[p], GT_POISON, size[p]);
        CK_CUDA(cudaMalloc((void **)&s->dev[p], size[p]));
        CK_CUDA(cudaMemcpy(s->dev[p], s->host[p], size[p], cudaMemcpyHostToDevice));
        s->mem.base[p] = s->dev[p];
        s->mem.size[p] = size[p];
    }
}

static void pools_expect(const struct pools *s, const char *what)
{
    for (uint32_t p = 0; p < s->n; p++) {
        uint64_t size = s->mem.size[p];
        uint8_t *got = malloc(size);
        ck_assert_ptr_nonnull(got);
        CK_CUDA(cudaMemcpy(got, s->dev[p], size, cudaMemcpyDeviceToHost));
        int64_t d = gt_first_diff(got, s->host[p], size);
        free(got);
        ck_assert_msg(d < 0, "%s: pool %u differs at byte %lld", what, p, (long long)d);
    }
}

static void pools_done(struct pools *s)
{
    for (uint32_t p = 0; p < s->n; p++) {
        free(s->host[p]);
        cudaFree(s->dev[p]);
    }
}

struct done_count {
    int calls, status;
};

static void on_done(void *user, int status)
{
    struct done_count *c = user;
    c->calls++;
    c->status = status;
}

/* Runs the loop until the row's completions came back (the gpu keeps the loop alive while any
 * is outstanding). */
static void run_until_done(struct done_count *c, int want)
{
    ck_assert_int_eq(c->calls, 0); /* never inside the call that started it */
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(c->calls, want);
    ck_assert_int_eq(c->status, 0);
}

/* direct of program gp through a binding on GPU 0, checked against the CPU twin. */
static void direct_checked(struct exec_gpu *x, const struct gt_prog *gp, uint64_t seed)
{
    struct pools src, dst;
    pools_init(&src, gp->n_src, gp->src_size, seed);
    pools_init(&dst, gp->n_dst, gp->dst_size, 0);
    char msg[256];
    ck_assert_msg(exec_gpu_bind(x, g, gp->ops, gp->n_ops, 0, gpu_stream(g, 0, 1), &src.mem,
                                &dst.mem, msg, sizeof msg) == 0, "bind: %s", msg);
    struct done_count c = {0, -1};
    int rc = move_exec_of(MOVE_EXEC_GPU)->direct(&x->mp, on_done, &c, msg, sizeof msg);
    ck_assert_msg(rc == MOVE_STARTED, "direct: %d %s", rc, msg);
    run_until_done(&c, 1);
    gt_ref(gp->ops, gp->n_ops, 'd', src.host, dst.host, NULL, 0, gp->bytes);
    pools_expect(&dst, "direct");
    /* the binding keeps its program; its pools are the test's, gone below */
    x->mp.src = x->mp.dst = NULL;
    pools_done(&src);
    pools_done(&dst);
}

START_TEST(gpu_row_direct_gather_scatter_complete_on_the_loop_with_the_cpu_twins_bytes)
{
    struct gt_prog gp;
    gt_prog_random(&gp, 4242, 40, 0);
    struct pools src, dst;
    pools_init(&src, gp.n_src, gp.src_size, 77);
    pools_init(&dst, gp.n_dst, gp.dst_size, 0);
    struct exec_gpu x;
    char msg[256];
    ck_assert_msg(exec_gpu_bind(&x, g, gp.ops, gp.n_ops, 0, gpu_stream(g, 0, 0), &src.mem,
                                &dst.mem, msg, sizeof msg) == 0, "bind: %s", msg);
    const struct move_exec *ex = move_exec_of(MOVE_EXEC_GPU);
    ck_assert_int_eq(ex->check(&x.mp, 's', msg, sizeof msg), 0);
    ck_assert_int_eq(ex->check(&x.mp, 'd', msg, sizeof msg), 0);
    /* gather a middle range into device memory, scatter it back: exactly those bytes move */
    uint64_t lo = gp.bytes / 3, hi = gp.bytes - gp.bytes / 5;
    uint8_t *ext = NULL, *got = malloc(hi - lo + 1), *want = malloc(hi - lo + 1);
    ck_assert_ptr_nonnull(got);
    ck_assert_ptr_nonnull(want);
    CK_CUDA(cudaMalloc((void **)&ext, hi - lo + 1));
    struct done_count c = {0, -1};
    ck_assert_int_eq(ex->gather(&x.mp, lo, hi, ext, on_done, &c, msg, sizeof msg), MOVE_STARTED);
    run_until_done(&c, 1);
    CK_CUDA(cudaMemcpy(got, ext, hi - lo, cudaMemcpyDeviceToHost));
    gt_ref(gp.ops, gp.n_ops, 'g', src.host, NULL, want, lo, hi);
    ck_assert_int_eq(gt_first_diff(got, want, hi - lo), -1);
    c = (struct done_count){0, -1};
    ck_assert_int_eq(ex->scatter(&x.mp, ext, lo, hi, on_done, &c, msg, sizeof msg),
                     MOVE_STARTED);
    run_until_done(&c, 1);
    gt_ref(gp.ops, gp.n_ops, 's', NULL, dst.host, want, lo, hi);
    pools_expect(&dst, "scatter");
    /* the whole extent pool to pool */
    c = (struct done_count){0, -1};
    ck_assert_int_eq(ex->direct(&x.mp, on_done, &c, msg, sizeof msg), MOVE_STARTED);
    run_until_done(&c, 1);
    gt_ref(gp.ops, gp.n_ops, 'd', src.host, dst.host, NULL, 0, gp.bytes);
    pools_expect(&dst, "direct");
    exec_gpu_unbind(&x);
    exec_gpu_unbind(&x); /* idempotent */
    cudaFree(ext);
    free(got);
    free(want);
    pools_done(&src);
    pools_done(&dst);
    gt_prog_done(&gp);
}
END_TEST

static struct gpu_progcache_stats stats(void)
{
    struct gpu_progcache_stats s;
    gpu_progcache_stats(g, &s);
    return s;
}

START_TEST(program_cache_crossed_at_its_limit_keeps_the_bytes_right)
{
    ck_assert_int_eq(gpu_progcache_set_max(g, 2), 0);
    struct gt_prog gp[3];
    struct exec_gpu x[3];
    for (int i = 0; i < 3; i++) {
        gt_prog_random(&gp[i], 900 + (uint64_t)i, 20, 0);
        direct_checked(&x[i], &gp[i], 10 + (uint64_t)i); /* all three held */
    }
    struct gpu_progcache_stats s = stats();
    ck_assert_uint_eq(s.misses, 3);
    ck_assert_uint_eq(s.count, 2);
    ck_assert_uint_eq(s.uncached, 1); /* past a full cache of held programs */
    ck_assert_uint_eq(s.evicted, 0);
    for (int i = 0; i < 3; i++)
        exec_gpu_unbind(&x[i]); /* the uncached one is freed: the GPU is idle */
    direct_checked(&x[0], &gp[0], 20); /* cached: a hit */
    ck_assert_uint_eq(stats().hits, 1);
    direct_checked(&x[2], &gp[2], 21); /* uncached before: a miss that evicts program 1 */
    s = stats();
    ck_assert_uint_eq(s.misses, 4);
    ck_assert_uint_eq(s.evicted, 1);
    ck_assert_uint_eq(s.count, 2);
    exec_gpu_unbind(&x[0]);
    exec_gpu_unbind(&x[2]);
    direct_checked(&x[1], &gp[1], 22); /* evicted: uploaded again, the same bytes */
    ck_assert_uint_eq(stats().misses, 5);
    exec_gpu_unbind(&x[1]);
    for (int i = 0; i < 3; i++)
        gt_prog_done(&gp[i]);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("exec_gpu");
    TCase *tc = tcase_create("row");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, gpu_row_direct_gather_scatter_complete_on_the_loop_with_the_cpu_twins_bytes);
    tcase_add_test(tc, program_cache_crossed_at_its_limit_keeps_the_bytes_right);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (kvk_device_count() < 1) {
        printf("SKIP: no CUDA device: %s\n", kvk_last_error());
        return 77;
    }
    return gt_run_nofork(suite());
}
#endif
