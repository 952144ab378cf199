/* check_kernels_peer.c: the direct copy kernel across two GPUs (the local path between two
 * ranks of one node): program on GPU 0, source pools on GPU 0, destination pools on GPU 1 (peer
 * writes), and the reverse (peer reads). Bitwise against the CPU reference, destinations
 * poisoned. Exits 77 (skipped) with fewer than two GPUs or without peer access. */
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

#include "gputest.h"
#include "kvf_kernels.h"


struct pools {
    uint32_t n;
    int dev;
    uint8_t *d[LAYOUT_MAX_POOLS], *h[LAYOUT_MAX_POOLS];
    uint64_t size[LAYOUT_MAX_POOLS];
};

static void pools_init(struct pools *p, int dev, uint32_t n, const uint64_t *size, int random,
                       uint64_t seed)
{
    memset(p, 0, sizeof(*p));
    p->n = n;
    p->dev = dev;
    CK_CUDA(cudaSetDevice(dev));
    for (uint32_t i = 0; i < n; i++) {
        p->size[i] = size[i];
        p->h[i] = malloc(size[i]);
        ck_assert_ptr_nonnull(p->h[i]);
        if (random)
            gt_fill_random(p->h[i], size[i], seed + i);
        else
            memset(p->h[i], GT_POISON, size[i]);
        CK_CUDA(cudaMalloc((void **)&p->d[i], size[i]));
        CK_CUDA(cudaMemcpy(p->d[i], p->h[i], size[i], cudaMemcpyHostToDevice));
    }
    CK_CUDA(cudaSetDevice(0));
}

static void pools_mem(const struct pools *p, struct kvk_mem *m)
{
    memset(m, 0, sizeof(*m));
    m->n = p->n;
    for (uint32_t i = 0; i < p->n; i++) {
        m->base[i] = (uint64_t)(uintptr_t)p->d[i];
        m->size[i] = p->size[i];
    }
}

static void pools_expect_and_free(struct pools *p, int check)
{
    for (uint32_t i = 0; i < p->n; i++) {
        if (check) {
            uint8_t *got = malloc(p->size[i]);
            ck_assert_ptr_nonnull(got);
            CK_CUDA(cudaMemcpy(got, p->d[i], p->size[i], cudaMemcpyDeviceToHost));
            int64_t d = gt_first_diff(got, p->h[i], p->size[i]);
            free(got);
            ck_assert_msg(d < 0, "GPU %d pool %u byte %lld differs", p->dev, i, (long long)d);
        }
        cudaFree(p->d[i]);
        free(p->h[i]);
    }
}

static void direct_across(int src_dev, int dst_dev, uint64_t seed)
{
    struct gt_prog g;
    gt_prog_random(&g, seed, 60, 1);
    struct kvk_program *p = NULL;
    int rc = kvk_program_new(g.ops, g.n_ops, 0, &p);
    ck_assert_msg(rc == 0, "%s", kvk_last_error());
    struct pools s, d;
    pools_init(&s, src_dev, g.n_src, g.src_size, 1, seed);
    pools_init(&d, dst_dev, g.n_dst, g.dst_size, 0, 0);
    struct kvk_mem ms, md;
    pools_mem(&s, &ms);
    pools_mem(&d, &md);
    rc = kvk_direct(p, &ms, &md, NULL);
    ck_assert_msg(rc == 0, "kvk_direct: %s", kvk_last_error());
    CK_CUDA(cudaDeviceSynchronize());
    gt_ref(g.ops, g.n_ops, 'd', s.h, d.h, NULL, 0, 0);
    pools_expect_and_free(&d, 1);
    pools_expect_and_free(&s, 0);
    kvk_program_free(p);
    gt_prog_done(&g);
}

START_TEST(direct_gpu0_to_gpu1_peer_writes_match_reference)
{
    for (uint64_t seed = 1; seed <= 6; seed++)
        direct_across(0, 1, seed * 1000003);
}
END_TEST

START_TEST(direct_gpu1_to_gpu0_peer_reads_match_reference)
{
    for (uint64_t seed = 1; seed <= 6; seed++)
        direct_across(1, 0, seed * 999983);
}
END_TEST

static Suite *peer_suite(void)
{
    Suite *s = suite_create("kernels_peer");
    TCase *tc = tcase_create("peer");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, direct_gpu0_to_gpu1_peer_writes_match_reference);
    tcase_add_test(tc, direct_gpu1_to_gpu0_peer_reads_match_reference);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    int n = kvk_device_count();
    if (n < 2) {
        printf("SKIP: peer copy needs 2 GPUs, found %d %s\n", n, kvk_last_error());
        return 77;
    }
    int a = 0, b = 0;
    if (cudaDeviceCanAccessPeer(&a, 0, 1) != cudaSuccess ||
        cudaDeviceCanAccessPeer(&b, 1, 0) != cudaSuccess || !a || !b) {
        printf("SKIP: GPUs 0 and 1 cannot access each other's memory\n");
        return 77;
    }
    cudaSetDevice(1);
    cudaError_t e1 = cudaDeviceEnablePeerAccess(0, 0);
    cudaSetDevice(0);
    cudaError_t e0 = cudaDeviceEnablePeerAccess(1, 0);
    if ((e0 != cudaSuccess && e0 != cudaErrorPeerAccessAlreadyEnabled) ||
        (e1 != cudaSuccess && e1 != cudaErrorPeerAccessAlreadyEnabled)) {
        printf("FAIL: cudaDeviceEnablePeerAccess: %s / %s\n", cudaGetErrorString(e0),
               cudaGetErrorString(e1));
        return 1;
    }
    return gt_run_nofork(peer_suite());
}
#endif
