/* check_gpu_view.c: the address table the same-node GPU path hands to its kernels, against two
 * real GPUs and real worker processes (tests/gpu/ipc_worker.h). A CUDA IPC mapping serves only
 * kernels of the device it was opened on: a context rank's pools, opened on GPU 0 at REGISTER,
 * must be opened again on GPU 1 before a kernel of GPU 1 reads them (reg_gpu_mem_on). Before
 * that rule the first kvk_direct of a GPU 0 -> GPU 1 request faulted (illegal address) and
 * poisoned both devices. Checked here: the view's addresses, its device attribution, a
 * kvk_direct on GPU 1 from the context's pool (offset inside the allocation) into the
 * generation's pool, bit for bit, and every mapping closed when the ranks go.
 * Needs 2 GPUs with peer access and CUDA IPC; otherwise "SKIP: why", exit 77. */
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "cuda_pool.h"
#include "gpu.h"
#include "kvf_kernels.h"
#include "log.h"
#include "registry_gpu.h"
#include "testutil.h"
#include "ipc_worker.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

#define POOL_BYTES ((8u << 20) + 4096u)
#define SKEW 4096u /* the context's pool starts this far into its allocation */

/* A one-pool GPU rank's registration of worker w's allocation: bytes [off, POOL_BYTES). */
static struct reg_gpu *reg_of(struct gpu *g, const struct worker *w, int device, uint64_t off)
{
    struct layout l;
    struct proto_register reg;
    struct proto_pool pool;
    struct reg_gpu *r = NULL;
    char err[512];
    memset(&l, 0, sizeof l);
    memset(&reg, 0, sizeof reg);
    reg.pools = &pool;
    l.n_pools = reg.n_pools = 1;
    l.device = device;
    l.pools[0] = (struct layout_pool){.kind = POOL_CUDA, .device = device,
                                      .bytes = POOL_BYTES - off};
    reg.pools[0] = (struct proto_pool){.kind = POOL_CUDA, .device = device,
                                       .bytes = POOL_BYTES - off, .offset = off};
    memcpy(reg.pools[0].ipc_handle, w->h.handle, sizeof reg.pools[0].ipc_handle);
    int rc = reg_gpu_open(g, &l, &reg, &r, err, sizeof err);
    ck_assert_msg(rc == 0, "reg_gpu_open: %s", err);
    return r;
}

START_TEST(context_pools_on_gpu0_are_viewed_on_gpu1_and_copied_there_bitwise)
{
    struct worker wc, wg;
    uv_loop_t loop;
    struct gpu *g = NULL;
    char err[512];
    const uint64_t seed_c = 0xc0de, seed_g = 0x9e9;

    worker_start(&wc, 0, POOL_BYTES, seed_c); /* context rank: GPU 0 */
    worker_start(&wg, 1, POOL_BYTES, seed_g); /* generation rank: GPU 1 */
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(gpu_new(&loop, &g), 0);
    ck_assert_msg(!gpu_cpu_mode(g), "CPU mode: %s", gpu_cpu_reason(g));

    struct reg_gpu *ctx = reg_of(g, &wc, 0, SKEW), *gen = reg_of(g, &wg, 1, 0);
    ck_assert_int_eq(ctx->device, 0);
    ck_assert_int_eq(gen->device, 1);
    ck_assert_int_eq(gpu_mapping_opened_on(ctx->map[0]), 0);
    ck_assert_uint_eq(gpu_mapping_count(g), 2);

    /* the launch device is the generation's: its own table serves, the context's is a view */
    const struct copy_mem *dm = NULL, *sm = NULL, *again = NULL;
    ck_assert_int_eq(reg_gpu_mem_on(gen, 1, &dm, err, sizeof err), 0);
    ck_assert_ptr_eq(dm, &gen->mem);
    int rc = reg_gpu_mem_on(ctx, 1, &sm, err, sizeof err);
    ck_assert_msg(rc == 0, "view: %s", err);
    ck_assert_ptr_ne(sm, &ctx->mem);
    ck_assert_ptr_nonnull(ctx->view[1]);
    const struct gpu_mapping *v = ctx->view[1]->map[0];
    ck_assert_int_eq(gpu_mapping_opened_on(v), 1);
    ck_assert_int_eq(gpu_mapping_device(v), 0); /* the memory stays where it lives */
    ck_assert_ptr_eq(sm->base[0], (uint8_t *)gpu_mapping_ptr(v) + SKEW);
    ck_assert_uint_eq(sm->size[0], POOL_BYTES - SKEW);
    ck_assert_uint_eq(gpu_mapping_count(g), 3);
    ck_assert_int_eq(reg_gpu_mem_on(ctx, 1, &again, err, sizeof err), 0); /* made once */
    ck_assert_ptr_eq(again, sm);
    ck_assert_uint_eq(gpu_mapping_count(g), 3);
    ck_assert_int_eq(reg_gpu_mem_on(ctx, 0, &again, err, sizeof err), 0);
    ck_assert_ptr_eq(again, &ctx->mem);

    /* what xfer_gpu does: a program on GPU 1, launched there, from the view into gen's pool */
    const uint64_t len = POOL_BYTES - SKEW - 8192;
    struct copy_op op = {.src_pool = 0, .dst_pool = 0, .src_off = 0, .dst_off = SKEW,
                         .len = len, .count = 1};
    struct kvk_mem ks = {.n = 1}, kd = {.n = 1};
    ks.base[0] = (uint64_t)(uintptr_t)sm->base[0];
    ks.size[0] = sm->size[0];
    kd.base[0] = (uint64_t)(uintptr_t)dm->base[0];
    kd.size[0] = dm->size[0];
    struct kvk_program *p = NULL;
    ck_assert_msg(kvk_program_new(&op, 1, 1, &p) == 0, "%s", kvk_last_error());
    struct CUstream_st *s = gpu_stream(g, 1, 0);
    ck_assert_msg(kvk_direct(p, &ks, &kd, s) == 0, "%s", kvk_last_error());
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    cudaError_t ce = cudaStreamSynchronize((cudaStream_t)s);
    ck_assert_msg(ce == cudaSuccess, "kernel on GPU 1: %s", cudaGetErrorString(ce));
    p = kvk_program_free(p);

    /* gen's bytes [SKEW, SKEW + len) now hold ctx's allocation bytes [SKEW, SKEW + len),
     * which the pattern of seed_c defines by allocation offset; the rest is untouched */
    ck_assert_int_eq(worker_verify(&wg, SKEW, len, seed_c), -1);
    ck_assert_int_eq(worker_verify(&wg, 0, SKEW, seed_g), -1);
    ck_assert_int_eq(worker_verify(&wg, SKEW + len, POOL_BYTES - SKEW - len, seed_g), -1);

    ctx = reg_gpu_unref(ctx);
    gen = reg_gpu_unref(gen);
    ck_assert_uint_eq(gpu_mapping_count(g), 0);
    json_t *o = json_object();
    ck_assert_int_eq(gpu_status(g, o), 0);
    json_t *mp = json_object_get(json_object_get(o, "mappings"), "close_errors");
    ck_assert_int_eq(json_integer_value(mp), 0);
    json_decref(o);
    g = gpu_free(g);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    ck_assert_int_eq(worker_stop(&wc), 0);
    ck_assert_int_eq(worker_stop(&wg), 0);
}
END_TEST

/* GPUs (and peer access between 0 and 1) counted in a child: this process never starts CUDA,
 * since Check forks and CUDA does not survive fork. Returns the count, or -1 with why. */
static int probe(char *why, size_t len)
{
    int p[2];
    if (pipe(p) < 0)
        return snprintf(why, len, "pipe: %s", strerror(errno)), -1;
    pid_t pid = fork();
    if (pid == 0) {
        char err[256] = "";
        int n = cuda_pool_device_count(err, sizeof(err)), a = 0, b = 0;
        if (n >= 2 && (cudaDeviceCanAccessPeer(&a, 0, 1) != cudaSuccess ||
                       cudaDeviceCanAccessPeer(&b, 1, 0) != cudaSuccess || !a || !b)) {
            snprintf(err, sizeof err, "GPUs 0 and 1 have no peer access");
            n = 1;
        }
        write_full(p[1], &n, sizeof(n));
        write_full(p[1], err, sizeof(err));
        _exit(0);
    }
    close(p[1]);
    int n = -1;
    char err[256] = "probe child died";
    if (read_full(p[0], &n, sizeof(n)) < 0 || read_full(p[0], err, sizeof(err)) < 0)
        n = -1;
    close(p[0]);
    waitpid(pid, NULL, 0);
    snprintf(why, len, "%s", err);
    return n;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--worker") == 0)
        return worker_main(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    char why[256];
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    int n = probe(why, sizeof why);
    if (n < 2) {
        printf("SKIP: needs 2 GPUs with peer access: %s (%d found)\n", why, n);
        return 77;
    }
    log_set_level(LOG_LVL_WARN);
    Suite *s = suite_create("gpu_view");
    TCase *tc = tcase_create("view");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, context_pools_on_gpu0_are_viewed_on_gpu1_and_copied_there_bitwise);
    suite_add_tcase(s, tc);
    return tu_run(s);
}

#else /* !KVF_HAVE_CUDA */

int main(void)
{
    printf("SKIP: this build has no CUDA\n");
    return 77;
}

#endif
