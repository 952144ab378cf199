/* check_kernels.c: the CUDA copy kernels (kernels/kvf_kernels.h) against their CPU twin
 * (lib/copy.h), bitwise: random copy programs (1..15-byte tails, odd offsets, negative strides,
 * split long runs, many short runs), gather of random sub-ranges into a misaligned buffer,
 * scatter, direct, chunked round trips, a Kimi-shaped program, argument and bounds errors, and
 * completion reporting into a libuv loop; programs uploaded with and without a host wait, and
 * launched at once on the upload's stream and on others. Destinations are poisoned (0xA5) first and compared
 * whole, so bytes written outside the program fail too. Exits 77 (skipped) without a GPU. */
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

#include "gputest.h"
#include "kvf_kernels.h"


/* One side's pools: device memory plus a host shadow holding what the device should hold. */
struct side {
    uint32_t n;
    uint8_t *dev[LAYOUT_MAX_POOLS];
    uint8_t *host[LAYOUT_MAX_POOLS];
    uint64_t size[LAYOUT_MAX_POOLS];
};

static void side_init(struct side *s, uint32_t n, const uint64_t *size, int random, uint64_t seed)
{
    memset(s, 0, sizeof(*s));
    s->n = n;
    for (uint32_t p = 0; p < n; p++) {
        s->size[p] = size[p];
        s->host[p] = malloc(size[p]);
        ck_assert_ptr_nonnull(s->host[p]);
        if (random)
            gt_fill_random(s->host[p], size[p], seed + p);
        else
            memset(s->host[p], GT_POISON, size[p]);
        CK_CUDA(cudaMalloc((void **)&s->dev[p], size[p]));
        CK_CUDA(cudaMemcpy(s->dev[p], s->host[p], size[p], cudaMemcpyHostToDevice));
    }
}

static void side_done(struct side *s)
{
    for (uint32_t p = 0; p < s->n; p++) {
        free(s->host[p]);
        cudaFree(s->dev[p]);
    }
    memset(s, 0, sizeof(*s));
}

static void side_mem(const struct side *s, struct kvk_mem *m)
{
    memset(m, 0, sizeof(*m));
    m->n = s->n;
    for (uint32_t p = 0; p < s->n; p++) {
        m->base[p] = (uint64_t)(uintptr_t)s->dev[p];
        m->size[p] = s->size[p];
    }
}

/* Every byte of every device pool equals the shadow. */
static void side_expect(const struct side *s, const char *what)
{
    for (uint32_t p = 0; p < s->n; p++) {
        uint8_t *got = malloc(s->size[p]);
        ck_assert_ptr_nonnull(got);
        CK_CUDA(cudaMemcpy(got, s->dev[p], s->size[p], cudaMemcpyDeviceToHost));
        int64_t d = gt_first_diff(got, s->host[p], s->size[p]);
        uint8_t g = d >= 0 ? got[d] : 0, w = d >= 0 ? s->host[p][d] : 0;
        free(got);
        ck_assert_msg(d < 0, "%s: pool %u byte %lld: got 0x%02x want 0x%02x", what, p,
                      (long long)d, g, w);
    }
}

/* Every other program is uploaded with no host wait on a stream of its own, so the launches on
 * other streams (the legacy stream, the tests' own) must wait for its upload on the GPU. */
static cudaStream_t up_stream;

static struct kvk_program *prog_new(const struct gt_prog *g)
{
    static unsigned k;
    struct kvk_program *p = NULL;
    if (!up_stream)
        CK_CUDA(cudaStreamCreateWithFlags(&up_stream, cudaStreamNonBlocking));
    int rc = k++ % 2 ? kvk_program_new_async(g->ops, g->n_ops, 0, up_stream, &p)
                     : kvk_program_new(g->ops, g->n_ops, 0, &p);
    ck_assert_msg(rc == 0, "kvk_program_new: %d %s", rc, kvk_last_error());
    ck_assert_uint_eq(kvk_program_bytes(p), g->bytes);
    return p;
}

static void random_range(uint64_t *s, uint64_t bytes, int i, uint64_t *lo, uint64_t *hi)
{
    if (i == 0) {
        *lo = 0;
        *hi = bytes;
        return;
    }
    uint64_t a = gt_range(s, 0, bytes), b = gt_range(s, 0, bytes);
    *lo = a < b ? a : b;
    *hi = a < b ? b : a;
    if (i == 1 && bytes > 1) { /* a one-byte chunk */
        *lo = gt_range(s, 0, bytes - 1);
        *hi = *lo + 1;
    }
}

START_TEST(gather_random_subranges_match_cpu_reference_bitwise)
{
    for (uint64_t seed = 1; seed <= 24; seed++) {
        struct gt_prog g;
        gt_prog_random(&g, seed * 7919, 1 + (uint32_t)(seed * 13 % 70), (int)(seed & 1));
        struct kvk_program *p = prog_new(&g);
        struct side src;
        side_init(&src, g.n_src, g.src_size, 1, seed);
        struct kvk_mem m;
        side_mem(&src, &m);
        uint64_t off = seed % 16, cap = g.bytes + 64; /* out at an odd offset, guard bytes */
        uint8_t *dout, *got = malloc(cap), *want = malloc(cap);
        ck_assert_ptr_nonnull(got);
        ck_assert_ptr_nonnull(want);
        CK_CUDA(cudaMalloc((void **)&dout, cap));
        uint64_t rs = seed;
        for (int i = 0; i < 8; i++) {
            uint64_t lo, hi;
            random_range(&rs, g.bytes, i, &lo, &hi);
            CK_CUDA(cudaMemset(dout, GT_POISON, cap));
            int rc = kvk_gather(p, &m, lo, hi, dout + off, NULL);
            ck_assert_msg(rc == 0, "kvk_gather: %s", kvk_last_error());
            CK_CUDA(cudaDeviceSynchronize());
            CK_CUDA(cudaMemcpy(got, dout, cap, cudaMemcpyDeviceToHost));
            memset(want, GT_POISON, cap);
            gt_ref(g.ops, g.n_ops, 'g', src.host, NULL, want + off, lo, hi);
            int64_t d = gt_first_diff(got, want, cap);
            ck_assert_msg(d < 0, "seed %llu [%llu, %llu) of %llu: out byte %lld got 0x%02x want "
                          "0x%02x", (unsigned long long)seed, (unsigned long long)lo,
                          (unsigned long long)hi, (unsigned long long)g.bytes, (long long)d,
                          d >= 0 ? got[d] : 0, d >= 0 ? want[d] : 0);
        }
        cudaFree(dout);
        free(got);
        free(want);
        side_done(&src);
        kvk_program_free(p);
        gt_prog_done(&g);
    }
}
END_TEST

START_TEST(scatter_random_subranges_write_exactly_the_program_bytes)
{
    for (uint64_t seed = 1; seed <= 24; seed++) {
        struct gt_prog g;
        gt_prog_random(&g, seed * 104729, 1 + (uint32_t)(seed * 17 % 70), (int)(seed & 1));
        struct kvk_program *p = prog_new(&g);
        struct side dst;
        side_init(&dst, g.n_dst, g.dst_size, 0, 0);
        struct kvk_mem m;
        side_mem(&dst, &m);
        uint64_t off = (seed * 5) % 16;
        uint8_t *ext = malloc(g.bytes + 16), *dext;
        ck_assert_ptr_nonnull(ext);
        gt_fill_random(ext, g.bytes + 16, seed ^ 0x5555);
        CK_CUDA(cudaMalloc((void **)&dext, g.bytes + 16));
        CK_CUDA(cudaMemcpy(dext, ext, g.bytes + 16, cudaMemcpyHostToDevice));
        uint64_t rs = seed;
        for (int i = 1; i < 6; i++) { /* partial ranges only: untouched bytes stay poisoned */
            uint64_t lo, hi;
            random_range(&rs, g.bytes, i, &lo, &hi);
            int rc = kvk_scatter(p, dext + off, lo, hi, &m, NULL);
            ck_assert_msg(rc == 0, "kvk_scatter: %s", kvk_last_error());
            gt_ref(g.ops, g.n_ops, 's', NULL, dst.host, ext + off, lo, hi);
            CK_CUDA(cudaDeviceSynchronize());
            side_expect(&dst, "scatter");
        }
        cudaFree(dext);
        free(ext);
        side_done(&dst);
        kvk_program_free(p);
        gt_prog_done(&g);
    }
}
END_TEST

START_TEST(direct_pool_to_pool_matches_reference)
{
    for (uint64_t seed = 1; seed <= 16; seed++) {
        struct gt_prog g;
        gt_prog_random(&g, seed * 15485863, 1 + (uint32_t)(seed * 11 % 90), (int)(seed & 1));
        struct kvk_program *p = prog_new(&g);
        struct side src, dst;
        side_init(&src, g.n_src, g.src_size, 1, seed * 3);
        side_init(&dst, g.n_dst, g.dst_size, 0, 0);
        struct kvk_mem ms, md;
        side_mem(&src, &ms);
        side_mem(&dst, &md);
        int rc = kvk_direct(p, &ms, &md, NULL);
        ck_assert_msg(rc == 0, "kvk_direct: %s", kvk_last_error());
        gt_ref(g.ops, g.n_ops, 'd', src.host, dst.host, NULL, 0, 0);
        CK_CUDA(cudaDeviceSynchronize());
        side_expect(&dst, "direct");
        side_done(&src);
        side_done(&dst);
        kvk_program_free(p);
        gt_prog_done(&g);
    }
}
END_TEST

/* Programs uploaded with no host wait, each launched at once while earlier kernels still run:
 * on the upload's stream (stream order) and on a second stream (an event wait), the staging
 * reused as copies end. Every destination equals its program's CPU copy. */
START_TEST(async_uploads_launched_at_once_copy_every_byte)
{
    enum { N = 24 };
    cudaStream_t st[2];
    for (int i = 0; i < 2; i++)
        CK_CUDA(cudaStreamCreateWithFlags(&st[i], cudaStreamNonBlocking));
    static struct gt_prog g[N];
    static struct side src[N], dst[N];
    struct kvk_program *p[N];
    for (int i = 0; i < N; i++) {
        gt_prog_random(&g[i], 7919 * (uint64_t)(i + 1), 1 + (uint32_t)(i * 13 % 70), i & 1);
        side_init(&src[i], g[i].n_src, g[i].src_size, 1, 31 * (uint64_t)i);
        side_init(&dst[i], g[i].n_dst, g[i].dst_size, 0, 0);
    }
    for (int i = 0; i < N; i++) { /* no host wait anywhere in this loop */
        int rc = kvk_program_new_async(g[i].ops, g[i].n_ops, 0, st[0], &p[i]);
        ck_assert_msg(rc == 0, "kvk_program_new_async: %s", kvk_last_error());
        ck_assert_int_eq(kvk_program_staged(p[i]), 1);
        struct kvk_mem ms, md;
        side_mem(&src[i], &ms);
        side_mem(&dst[i], &md);
        rc = kvk_direct(p[i], &ms, &md, st[i % 3 == 2 ? 1 : 0]);
        ck_assert_msg(rc == 0, "kvk_direct: %s", kvk_last_error());
    }
    CK_CUDA(cudaDeviceSynchronize());
    for (int i = 0; i < N; i++) {
        gt_ref(g[i].ops, g[i].n_ops, 'd', src[i].host, dst[i].host, NULL, 0, 0);
        side_expect(&dst[i], "direct after an async upload");
        kvk_program_free(p[i]);
        side_done(&src[i]);
        side_done(&dst[i]);
        gt_prog_done(&g[i]);
    }
    for (int i = 0; i < 2; i++)
        CK_CUDA(cudaStreamDestroy(st[i]));
}
END_TEST

/* Gather an extent in chunks cut at random bytes, back to back on one stream, then scatter the
 * chunks: the destination equals a direct copy. Checks chained launches (PDL) keep order. */
static void roundtrip_chunks(const struct gt_prog *g, uint64_t seed, uint64_t max_chunk)
{
    struct kvk_program *p = prog_new(g);
    struct side src, dst;
    side_init(&src, g->n_src, g->src_size, 1, seed);
    side_init(&dst, g->n_dst, g->dst_size, 0, 0);
    struct kvk_mem ms, md;
    side_mem(&src, &ms);
    side_mem(&dst, &md);
    uint8_t *arena;
    CK_CUDA(cudaMalloc((void **)&arena, g->bytes + 16));
    cudaStream_t st;
    CK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    uint64_t rs = seed;
    for (int pass = 0; pass < 2; pass++) { /* 0: gather all chunks, 1: scatter all chunks */
        uint64_t at = 0;
        uint64_t rs0 = rs;
        while (at < g->bytes) {
            uint64_t n = gt_range(&rs0, 1, max_chunk);
            uint64_t hi = at + n < g->bytes ? at + n : g->bytes;
            int rc = pass == 0 ? kvk_gather(p, &ms, at, hi, arena + 3 + at, st)
                               : kvk_scatter(p, arena + 3 + at, at, hi, &md, st);
            ck_assert_msg(rc == 0, "chunk [%llu, %llu): %s", (unsigned long long)at,
                          (unsigned long long)hi, kvk_last_error());
            at = hi;
        }
        rs = gt_rand(&rs);
    }
    CK_CUDA(cudaStreamSynchronize(st));
    gt_ref(g->ops, g->n_ops, 'd', src.host, dst.host, NULL, 0, 0);
    side_expect(&dst, "gather+scatter round trip");
    CK_CUDA(cudaStreamDestroy(st));
    cudaFree(arena);
    side_done(&src);
    side_done(&dst);
    kvk_program_free(p);
}

START_TEST(chunked_gather_then_scatter_round_trips_every_byte)
{
    for (uint64_t seed = 1; seed <= 8; seed++) {
        struct gt_prog g;
        gt_prog_random(&g, seed * 7777, 40 + (uint32_t)seed * 10, 1);
        roundtrip_chunks(&g, seed, 1 + g.bytes / 5);
        gt_prog_done(&g);
    }
}
END_TEST

/* Kimi-shaped program (scaled down): KDA layers with conv split in 3 q|k|v section runs and
 * ssm rows, from a TP2 writer's half of the heads; MLA layers with scattered block ids. */
static void kimi_like(struct gt_prog *g, uint32_t kda, uint32_t mla, uint32_t blocks)
{
    memset(g, 0, sizeof(*g));
    g->ops = calloc(kda * 4 + mla * blocks, sizeof(*g->ops));
    ck_assert_ptr_nonnull(g->ops);
    g->n_src = 2;
    g->n_dst = 2;
    const uint64_t conv = 294912, ssm = 6291456, slot = conv + ssm, blk = 73728;
    uint64_t s = 42;
    uint32_t n = 0;
    for (uint32_t l = 0; l < kda; l++) {
        for (uint32_t sec = 0; sec < 3; sec++) { /* half the heads of each section */
            struct copy_op *o = &g->ops[n++];
            o->src_pool = 0;
            o->dst_pool = 0;
            o->src_off = l * slot * 2 + slot + sec * (conv / 3);
            o->dst_off = l * slot + sec * (conv / 3) + (conv / 6);
            o->len = conv / 6;
            o->count = 1;
            o->ext_off = g->bytes;
            g->bytes += o->len;
        }
        struct copy_op *o = &g->ops[n++];
        o->src_off = l * slot * 2 + slot + conv;
        o->dst_off = l * slot + conv + ssm / 2;
        o->len = ssm / 2;
        o->count = 1;
        o->ext_off = g->bytes;
        g->bytes += o->len;
    }
    for (uint32_t l = 0; l < mla; l++)
        for (uint32_t b = 0; b < blocks; b++) {
            struct copy_op *o = &g->ops[n++];
            o->src_pool = 1;
            o->dst_pool = 1;
            o->src_off = (l * 4 * blocks + gt_range(&s, 0, 3) + 4 * b) * blk;
            o->dst_off = (l * blocks + (b * 7 + l) % blocks) * blk;
            o->len = blk;
            o->count = 1;
            o->ext_off = g->bytes;
            g->bytes += blk;
        }
    g->n_ops = n;
    g->src_size[0] = kda * slot * 2;
    g->src_size[1] = mla * 4 * blocks * blk + 4 * blk;
    g->dst_size[0] = kda * slot;
    g->dst_size[1] = mla * blocks * blk;
}

START_TEST(kimi_shaped_program_round_trips_in_4mib_chunks)
{
    struct gt_prog g;
    kimi_like(&g, 6, 4, 48);
    roundtrip_chunks(&g, 99, 4u << 20);
    gt_prog_done(&g);
}
END_TEST

/* The tuning knobs change the split and the block shape, never the bytes. */
START_TEST(small_tasks_and_odd_block_sizes_copy_the_same_bytes)
{
    /* task bytes, threads, fat, unroll, piece alignment */
    static const char *const knobs[][5] = {
        {"4096", "96", "0", "4", "16"},      {"8192", "512", "1", "8", "4096"},
        {"1048576", "64", "1", "4", "512"},  {"16384", "256", "0", "8", "4096"},
        {"32768", "160", "1", "8", "16"},
    };
    static const char *const names[] = {"KVK_TASK_BYTES", "KVK_THREADS", "KVK_FAT", "KVK_UNROLL",
                                        "KVK_PIECE_ALIGN"};
    for (int i = 0; i < 5; i++) {
        for (int k = 0; k < 5; k++)
            setenv(names[k], knobs[i][k], 1);
        struct gt_prog g;
        gt_prog_random(&g, 4242 + (uint64_t)i, 80, 1);
        roundtrip_chunks(&g, (uint64_t)i, 1 + g.bytes / 3);
        gt_prog_done(&g);
    }
    for (int k = 0; k < 5; k++)
        unsetenv(names[k]);
    struct copy_op o = {.len = 64, .count = 1};
    struct kvk_program *p = NULL;
    setenv("KVK_THREADS", "100", 1);
    ck_assert_int_eq(kvk_program_new(&o, 1, 0, &p), -EINVAL);
    unsetenv("KVK_THREADS");
    setenv("KVK_UNROLL", "5", 1);
    ck_assert_int_eq(kvk_program_new(&o, 1, 0, &p), -EINVAL);
    unsetenv("KVK_UNROLL");
}
END_TEST

START_TEST(bad_programs_and_bounds_are_refused_with_a_message)
{
    struct copy_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].len = 100;
    ops[0].count = 2;
    ops[0].src_stride = ops[0].dst_stride = 100;
    ops[1] = ops[0];
    ops[1].ext_off = 150; /* overlaps op 0's extent */
    struct kvk_program *p = NULL;
    ck_assert_int_eq(kvk_program_new(ops, 2, 0, &p), -EINVAL);
    ck_assert_ptr_null(p);
    ck_assert_msg(strstr(kvk_last_error(), "op 1") != NULL, "%s", kvk_last_error());
    ops[1].ext_off = 200;
    ops[1].dst_pool = 1;
    ops[1].src_pool = PLAN_POOL_UNKNOWN;
    ck_assert_int_eq(kvk_program_new(ops, 2, 0, &p), 0);
    uint8_t *a, *b;
    CK_CUDA(cudaMalloc((void **)&a, 4096));
    CK_CUDA(cudaMalloc((void **)&b, 4096));
    struct kvk_mem m = {.n = 2};
    m.base[0] = m.base[1] = (uint64_t)(uintptr_t)a;
    m.size[0] = m.size[1] = 4096;
    ck_assert_int_eq(kvk_gather(p, &m, 0, 400, b, NULL), -EINVAL); /* unresolved source */
    ck_assert_int_eq(kvk_scatter(p, b, 0, 400, &m, NULL), 0);
    ck_assert_int_eq(kvk_scatter(p, b, 10, 401, &m, NULL), -EINVAL); /* past the extent */
    ck_assert_int_eq(kvk_scatter(p, b, 11, 10, &m, NULL), -EINVAL);
    ck_assert_int_eq(kvk_scatter(p, NULL, 0, 10, &m, NULL), -EINVAL);
    m.size[1] = 199; /* op 1 needs 200 bytes of destination pool 1 */
    ck_assert_int_eq(kvk_scatter(p, b, 0, 400, &m, NULL), -ERANGE);
    ck_assert_msg(strstr(kvk_last_error(), "pool 1") != NULL, "%s", kvk_last_error());
    m.n = 1;
    ck_assert_int_eq(kvk_scatter(p, b, 0, 400, &m, NULL), -ERANGE);
    CK_CUDA(cudaDeviceSynchronize());
    cudaFree(a);
    cudaFree(b);
    p = kvk_program_free(p);
    ck_assert_ptr_null(kvk_program_free(NULL));
    ck_assert_int_eq(kvk_program_new(ops, 2, 9999, &p), -ENODEV);
    ck_assert_msg(strstr(kvk_last_error(), "cudaSetDevice") != NULL, "%s", kvk_last_error());
}
END_TEST

struct wake {
    uv_async_t async;
    int fired;
};

static void on_async(uv_async_t *h)
{
    struct wake *w = h->data;
    w->fired++;
    uv_close((uv_handle_t *)h, NULL);
}

static void signal_async(void *arg)
{
    uv_async_send(arg); /* the only thing a CUDA host callback does */
}

START_TEST(notify_on_complete_wakes_a_uv_loop_after_the_copy_landed)
{
    struct gt_prog g;
    gt_prog_random(&g, 31337, 50, 1);
    struct kvk_program *p = prog_new(&g);
    struct side src;
    side_init(&src, g.n_src, g.src_size, 1, 5);
    struct kvk_mem m;
    side_mem(&src, &m);
    uint8_t *host;
    CK_CUDA(cudaHostAlloc((void **)&host, g.bytes, cudaHostAllocMapped | cudaHostAllocPortable));
    memset(host, GT_POISON, g.bytes);
    uint8_t *dhost;
    CK_CUDA(cudaHostGetDevicePointer((void **)&dhost, host, 0));
    cudaStream_t st;
    CK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct wake w = {.fired = 0};
    ck_assert_int_eq(uv_async_init(&loop, &w.async, on_async), 0);
    w.async.data = &w;
    ck_assert_int_eq(kvk_gather(p, &m, 0, g.bytes, dhost, st), 0);
    ck_assert_int_eq(kvk_notify_on_complete(st, signal_async, &w.async), 0);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(w.fired, 1);
    /* the loop woke only after the data was in host memory: check it without syncing */
    uint8_t *want = malloc(g.bytes);
    ck_assert_ptr_nonnull(want);
    gt_ref(g.ops, g.n_ops, 'g', src.host, NULL, want, 0, g.bytes);
    ck_assert_int_eq(gt_first_diff(host, want, g.bytes), -1);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    ck_assert_int_eq(kvk_notify_on_complete(st, NULL, NULL), -EINVAL);
    CK_CUDA(cudaStreamDestroy(st));
    free(want);
    cudaFreeHost(host);
    side_done(&src);
    kvk_program_free(p);
    gt_prog_done(&g);
}
END_TEST

static Suite *kernels_suite(void)
{
    Suite *s = suite_create("kernels");
    TCase *tc = tcase_create("random_programs");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gather_random_subranges_match_cpu_reference_bitwise);
    tcase_add_test(tc, scatter_random_subranges_write_exactly_the_program_bytes);
    tcase_add_test(tc, direct_pool_to_pool_matches_reference);
    tcase_add_test(tc, chunked_gather_then_scatter_round_trips_every_byte);
    tcase_add_test(tc, small_tasks_and_odd_block_sizes_copy_the_same_bytes);
    tcase_add_test(tc, async_uploads_launched_at_once_copy_every_byte);
    suite_add_tcase(s, tc);
    tc = tcase_create("geometry");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, kimi_shaped_program_round_trips_in_4mib_chunks);
    suite_add_tcase(s, tc);
    tc = tcase_create("errors");
    tcase_add_test(tc, bad_programs_and_bounds_are_refused_with_a_message);
    suite_add_tcase(s, tc);
    tc = tcase_create("notify");
    tcase_add_test(tc, notify_on_complete_wakes_a_uv_loop_after_the_copy_landed);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    if (kvk_device_count() < 1) {
        printf("SKIP: no CUDA device: %s\n", kvk_last_error());
        return 77;
    }
    return gt_run_nofork(kernels_suite());
}
#endif
