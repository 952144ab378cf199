/* check_gpu_ipc.c: the daemon's GPU module against real GPUs and real worker processes.
 * A worker is this binary re-executed with --worker (fork + exec, so no process inherits CUDA
 * state across fork): it allocates a pool with lib/cuda_pool.c, fills a pattern and sends its IPC
 * handle over a pipe; the test process (the daemon's side) maps it with gpu_ipc_open and checks
 * it bitwise, both ways. Also: bogus handles and limits fail with named errors and the process
 * stays usable; a worker killed while mapped leaves the daemon up and releasing; completions come
 * back through the uv loop; pinned host memory; peer access between two GPUs (that test is left
 * out, saying why, with fewer than 2 GPUs). Without CUDA or without a GPU: "SKIP: why", exit 77. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <uv.h>

#include "cuda_pool.h"
#include "gpu.h"
#include "log.h"
#include "testutil.h"
#include "ipc_worker.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

#define POOL_BYTES ((32u << 20) + 4093u) /* odd on purpose */

static int n_gpus;
static bool ipc_ok = true; /* false: CUDA IPC is not available on this machine (probe_ipc) */
static uv_loop_t loop;
static struct gpu *g;

static void gpu_up(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(gpu_new(&loop, &g), 0);
    ck_assert_msg(!gpu_cpu_mode(g), "CPU mode: %s", gpu_cpu_reason(g));
    ck_assert_int_eq(gpu_device_count(g), n_gpus);
}

static void gpu_down(void)
{
    g = gpu_free(g);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

static void read_mapping(const struct gpu_mapping *m, uint8_t *buf, uint64_t off, uint64_t len)
{
    ck_assert_int_eq(cudaSetDevice(gpu_mapping_device(m)), cudaSuccess);
    ck_assert_int_eq(
        cudaMemcpy(buf, (const char *)gpu_mapping_ptr(m) + off, len, cudaMemcpyDeviceToHost),
        cudaSuccess);
}

static json_t *status_get(const char *section)
{
    json_t *o = json_object();
    ck_assert_int_eq(gpu_status(g, o), 0);
    json_t *s = json_incref(json_object_get(o, section));
    json_decref(o);
    return s;
}

/* discovery */

START_TEST(discovery_names_every_device_with_its_bus_id)
{
    gpu_up();
    for (int i = 0; i < n_gpus; i++) {
        const struct gpu_device *d = gpu_device(g, i);
        ck_assert_ptr_nonnull(d);
        ck_assert_int_gt(strlen(d->name), 0);
        unsigned dom, bus, dv, fn;
        ck_assert_msg(sscanf(d->pci_bus_id, "%x:%x:%x.%x", &dom, &bus, &dv, &fn) == 4, "bus id %s",
                      d->pci_bus_id);
        ck_assert_int_eq(gpu_device_by_pci(g, d->pci_bus_id), i);
        ck_assert_uint_gt(d->memory_bytes, 0);
        ck_assert_ptr_nonnull(gpu_stream(g, i, 0));
        printf("device %d: %s %s sm_%d%d\n", i, d->name, d->pci_bus_id, d->cc_major, d->cc_minor);
    }
    ck_assert_int_eq(gpu_device_by_pci(g, "ffff:ff:1f.7"), -ENODEV);
    json_t *devs = status_get("devices");
    ck_assert_uint_eq(json_array_size(devs), (size_t)n_gpus);
    json_decref(devs);
    gpu_down();
}
END_TEST

/* IPC */

START_TEST(worker_pool_maps_once_and_reads_back_bitwise_both_ways)
{
    struct worker w;
    struct gpu_mapping *m = NULL, *m2 = NULL;
    char err[512];
    const uint64_t seed = 0x1234, seed2 = 0xfeed;
    uint8_t *buf = malloc(POOL_BYTES);

    worker_start(&w, 0, POOL_BYTES, seed); /* before this process touches CUDA */
    gpu_up();
    ck_assert_int_eq(gpu_device_by_pci(g, w.h.pci_bus_id), 0);

    /* a pool declared larger than its allocation is refused before anything is kept */
    ck_assert_int_eq(
        gpu_ipc_open(g, 0, w.h.handle, 0, POOL_BYTES + (64u << 20), &m, err, sizeof(err)), -ERANGE);
    ck_assert_msg(strstr(err, "declared as") != NULL, "err: %s", err);
    ck_assert_uint_eq(gpu_mapping_count(g), 0);

    ck_assert_int_eq(gpu_ipc_open(g, 0, w.h.handle, 0, POOL_BYTES, &m, err, sizeof(err)), 0);
    ck_assert_int_eq(gpu_mapping_device(m), 0);
    ck_assert_uint_ge(gpu_mapping_bytes(m), POOL_BYTES);
    ck_assert_uint_eq(gpu_mapping_count(g), 1);
    ck_assert_uint_eq(gpu_mapping_total_bytes(g), gpu_mapping_bytes(m));

    /* every byte the worker wrote, bitwise */
    read_mapping(m, buf, 0, POOL_BYTES);
    ck_assert_int_eq(pattern_diff(buf, seed, 0, POOL_BYTES), -1);

    /* the daemon writes the second half; the worker sees exactly that, and its first half kept */
    uint64_t half = POOL_BYTES / 2;
    pattern_fill(buf, seed2, half, POOL_BYTES - half);
    ck_assert_int_eq(cudaMemcpy((char *)gpu_mapping_ptr(m) + half, buf, POOL_BYTES - half,
                                cudaMemcpyHostToDevice),
                     cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_int_eq(worker_verify(&w, half, POOL_BYTES - half, seed2), -1);
    ck_assert_int_eq(worker_verify(&w, 0, half, seed), -1);
    ck_assert_int_ne(worker_verify(&w, 0, half, seed2), -1); /* the check can fail */

    /* another pool inside the same allocation: the same mapping, one more reference; a range
     * that leaves the allocation is refused and takes no reference */
    ck_assert_int_eq(gpu_ipc_open(g, 0, w.h.handle, half, POOL_BYTES - half, &m2, err, sizeof(err)),
                     0);
    ck_assert_ptr_eq(m2, m);
    struct gpu_mapping *m3 = NULL;
    ck_assert_int_eq(gpu_ipc_open(g, 0, w.h.handle, half, gpu_mapping_bytes(m) - half + 1, &m3, err,
                                  sizeof(err)),
                     -ERANGE);
    ck_assert_ptr_null(m3);
    ck_assert_int_eq(
        gpu_ipc_open(g, 0, w.h.handle, GPU_MAX_MAPPING_BYTES + 1, 1, &m3, err, sizeof(err)),
        -EINVAL);
    ck_assert_uint_eq(gpu_mapping_count(g), 1);
    json_t *ms = status_get("mappings");
    ck_assert_int_eq(json_integer_value(json_object_get(ms, "count")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(ms, "bytes")),
                     (json_int_t)gpu_mapping_bytes(m));
    json_decref(ms);

    m2 = gpu_ipc_close(g, m2);
    ck_assert_uint_eq(gpu_mapping_count(g), 1);
    m = gpu_ipc_close(g, m);
    ck_assert_uint_eq(gpu_mapping_count(g), 0);
    ck_assert_uint_eq(gpu_mapping_total_bytes(g), 0);
    ck_assert_int_eq(worker_stop(&w), 0);
    free(buf);
    gpu_down();
}
END_TEST

START_TEST(bogus_handle_and_bad_arguments_fail_with_named_errors_and_we_stay_up)
{
    uint8_t handle[GPU_IPC_HANDLE_BYTES];
    struct gpu_mapping *m = NULL;
    char err[512];
    gpu_up();

    for (int i = 0; i < GPU_IPC_HANDLE_BYTES; i++)
        handle[i] = (uint8_t)(i * 37 + 11);
    int rc = gpu_ipc_open(g, 0, handle, 0, 1 << 20, &m, err, sizeof(err));
    ck_assert_int_lt(rc, 0);
    ck_assert_ptr_null(m);
    ck_assert_msg(strncmp(err, "cudaIpcOpenMemHandle: ", 22) == 0 && strstr(err, "(device 0)"),
                  "err: %s", err);
    printf("bogus handle: %s (rc %d)\n", err, rc);
    memset(handle, 0, sizeof(handle));
    ck_assert_int_lt(gpu_ipc_open(g, 0, handle, 0, 1 << 20, &m, err, sizeof(err)), 0);

    ck_assert_int_eq(gpu_ipc_open(g, n_gpus, handle, 0, 1 << 20, &m, err, sizeof(err)), -ENODEV);
    ck_assert_ptr_nonnull(strstr(err, "this daemon sees"));
    ck_assert_int_eq(gpu_ipc_open(g, -1, handle, 0, 1 << 20, &m, err, sizeof(err)), -ENODEV);
    ck_assert_int_eq(gpu_ipc_open(g, 0, handle, 0, 0, &m, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(gpu_ipc_open(g, 0, handle, 0, GPU_MAX_MAPPING_BYTES + 1, &m, err, sizeof(err)),
                     -EINVAL);
    ck_assert_uint_eq(gpu_mapping_count(g), 0);
    ck_assert_ptr_null(m);

    /* still fully usable: a real allocation and copy on device 0 */
    void *d = NULL;
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&d, 4096), cudaSuccess);
    ck_assert_int_eq(cudaMemset(d, 0x3c, 4096), cudaSuccess);
    uint8_t back[4096];
    ck_assert_int_eq(cudaMemcpy(back, d, sizeof(back), cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_int_eq(back[0], 0x3c);
    ck_assert_int_eq(back[4095], 0x3c);
    cudaFree(d);
    gpu_down();
}
END_TEST

START_TEST(worker_killed_while_mapped_leaves_the_daemon_up_and_releasing)
{
    struct worker w, w2;
    struct gpu_mapping *m = NULL;
    char err[512];
    uint8_t *buf = malloc(POOL_BYTES);

    worker_start(&w, 0, POOL_BYTES, 7);
    gpu_up();
    ck_assert_int_eq(gpu_ipc_open(g, 0, w.h.handle, 0, POOL_BYTES, &m, err, sizeof(err)), 0);
    read_mapping(m, buf, 0, 4096);
    ck_assert_int_eq(pattern_diff(buf, 7, 0, 4096), -1);

    kill(w.pid, SIGKILL);
    int st;
    ck_assert_int_eq(waitpid(w.pid, &st, 0), w.pid);
    ck_assert(WIFSIGNALED(st));
    close(w.to);
    close(w.from);

    /* the rank is gone: the daemon releases its mapping (never touching the memory again) */
    m = gpu_ipc_close(g, m);
    ck_assert_uint_eq(gpu_mapping_count(g), 0);
    ck_assert_uint_eq(gpu_mapping_total_bytes(g), 0);

    /* and serves the next worker as before; fork+exec keeps our CUDA state out of the child */
    worker_start(&w2, 0, POOL_BYTES, 8);
    ck_assert_int_eq(gpu_ipc_open(g, 0, w2.h.handle, 0, POOL_BYTES, &m, err, sizeof(err)), 0);
    read_mapping(m, buf, 0, POOL_BYTES);
    ck_assert_int_eq(pattern_diff(buf, 8, 0, POOL_BYTES), -1);
    m = gpu_ipc_close(g, m);
    ck_assert_int_eq(worker_stop(&w2), 0);
    free(buf);
    gpu_down();
}
END_TEST

START_TEST(mapping_limit_refuses_a_new_allocation_but_not_a_known_one)
{
    struct worker w1, w2;
    struct gpu_mapping *m1 = NULL, *again = NULL, *m2 = (struct gpu_mapping *)0x1;
    char err[512];

    worker_start(&w1, 0, 1 << 20, 1);
    worker_start(&w2, 0, 1 << 20, 2);
    gpu_up();
    ck_assert_int_eq(gpu_set_max_mappings(g, 1), 0);
    ck_assert_int_eq(gpu_ipc_open(g, 0, w1.h.handle, 0, 1 << 20, &m1, err, sizeof(err)), 0);
    ck_assert_int_eq(gpu_ipc_open(g, 0, w2.h.handle, 0, 1 << 20, &m2, err, sizeof(err)), -ENOSPC);
    ck_assert_ptr_nonnull(strstr(err, "limit 1"));
    ck_assert_ptr_eq(m2, (struct gpu_mapping *)0x1);
    ck_assert_int_eq(gpu_ipc_open(g, 0, w1.h.handle, 0, 4096, &again, err, sizeof(err)), 0);
    ck_assert_ptr_eq(again, m1);
    again = gpu_ipc_close(g, again);
    m1 = gpu_ipc_close(g, m1);
    ck_assert_int_eq(gpu_ipc_open(g, 0, w2.h.handle, 0, 1 << 20, &m2, err, sizeof(err)), 0);
    m2 = gpu_ipc_close(g, m2);
    ck_assert_uint_eq(gpu_mapping_count(g), 0);
    ck_assert_int_eq(worker_stop(&w1), 0);
    ck_assert_int_eq(worker_stop(&w2), 0);
    gpu_down();
}
END_TEST

/* completions */

struct done_rec {
    int calls, bad_status, out_of_order;
    int last[GPU_MAX_DEVICES][GPU_STREAMS_PER_DEVICE];
    pthread_t loop_thread;
    int off_thread;
};
struct done_arg {
    struct done_rec *r;
    int dev, stream, seq;
};

static void on_done(void *arg, int status)
{
    struct done_arg *a = arg;
    struct done_rec *r = a->r;
    r->calls++;
    if (status != 0)
        r->bad_status++;
    if (a->seq != r->last[a->dev][a->stream] + 1)
        r->out_of_order++;
    r->last[a->dev][a->stream] = a->seq;
    if (!pthread_equal(pthread_self(), r->loop_thread))
        r->off_thread++;
}

START_TEST(completions_arrive_on_the_loop_in_stream_order_and_the_loop_closes)
{
    enum { PER_STREAM = 25, BUF = 16 << 20 };
    static struct done_arg args[GPU_MAX_DEVICES][GPU_STREAMS_PER_DEVICE][PER_STREAM];
    struct done_rec r = {.loop_thread = pthread_self()};
    void *bufs[GPU_MAX_DEVICES] = {0};
    char err[512];
    int total = 0;

    gpu_up();
    for (int d = 0; d < n_gpus; d++) {
        ck_assert_int_eq(cudaSetDevice(d), cudaSuccess);
        ck_assert_int_eq(cudaMalloc(&bufs[d], BUF), cudaSuccess);
        for (int s = 0; s < GPU_STREAMS_PER_DEVICE; s++) {
            r.last[d][s] = -1;
            for (int k = 0; k < PER_STREAM; k++) {
                cudaStream_t st = (cudaStream_t)gpu_stream(g, d, (unsigned)s);
                ck_assert_int_eq(cudaMemsetAsync(bufs[d], k, BUF, st), cudaSuccess);
                args[d][s][k] = (struct done_arg){.r = &r, .dev = d, .stream = s, .seq = k};
                ck_assert_int_eq(gpu_notify(g, d, gpu_stream(g, d, (unsigned)s), on_done,
                                            &args[d][s][k], err, sizeof(err)),
                                 0);
                total++;
            }
        }
    }
    ck_assert_uint_eq(gpu_notify_outstanding(g), (size_t)total);
    /* the loop stays alive exactly until the last completion */
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(r.calls, total);
    ck_assert_int_eq(r.bad_status, 0);
    ck_assert_int_eq(r.out_of_order, 0);
    ck_assert_int_eq(r.off_thread, 0);
    ck_assert_uint_eq(gpu_notify_outstanding(g), 0);
    json_t *c = status_get("completions");
    ck_assert_int_eq(json_integer_value(json_object_get(c, "ok")), total);
    ck_assert_int_eq(json_integer_value(json_object_get(c, "in_flight")), 0);
    json_decref(c);
    for (int d = 0; d < n_gpus; d++) {
        cudaSetDevice(d);
        cudaFree(bufs[d]);
    }
    gpu_down();
}
END_TEST

struct rt {
    int calls;
};

static void on_rt(void *arg, int status)
{
    struct rt *r = arg;
    if (status == 0)
        r->calls++;
}

/* Measures (and prints) the round trip of one completion on an idle stream: gpu_notify until the
 * callback runs on the loop. Bounded loosely so a lost wakeup fails rather than hangs. */
START_TEST(completion_round_trip_latency_is_printed)
{
    enum { N = 200 };
    struct rt r = {0};
    char err[512];
    uint64_t worst = 0, total = 0;

    gpu_up();
    for (int i = 0; i < N; i++) {
        uint64_t t0 = uv_hrtime();
        ck_assert_int_eq(gpu_notify(g, 0, gpu_stream(g, 0, 2), on_rt, &r, err, sizeof(err)), 0);
        ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
        uint64_t dt = uv_hrtime() - t0;
        total += dt;
        worst = dt > worst ? dt : worst;
        ck_assert_int_eq(r.calls, i + 1);
    }
    printf("completion round trip on an idle stream: mean %.1f us, worst %.1f us (%d trips)\n",
           total / 1e3 / N, worst / 1e3, N);
    ck_assert_uint_lt(worst, 1000000000ull); /* 1 s */
    gpu_down();
}
END_TEST

START_TEST(gpu_free_delivers_outstanding_completions)
{
    struct done_rec r = {.loop_thread = pthread_self()};
    struct done_arg a = {.r = &r, .dev = 0, .stream = 0, .seq = 0};
    void *d = NULL;
    char err[512];

    gpu_up();
    r.last[0][0] = -1;
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(cudaMalloc(&d, 64 << 20), cudaSuccess);
    cudaStream_t st = (cudaStream_t)gpu_stream(g, 0, 0);
    ck_assert_int_eq(cudaMemsetAsync(d, 1, 64 << 20, st), cudaSuccess);
    ck_assert_int_eq(gpu_notify(g, 0, gpu_stream(g, 0, 0), on_done, &a, err, sizeof(err)), 0);
    ck_assert_int_eq(cudaStreamSynchronize(st), cudaSuccess);
    cudaFree(d);
    g = gpu_free(g); /* delivers before it returns: nothing is left dangling */
    ck_assert_int_eq(r.calls, 1);
    ck_assert_int_eq(r.bad_status, 0);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

/* pinned arena */

START_TEST(host_arena_is_page_locked_and_written_by_the_gpu_through_its_alias)
{
    const size_t len = 8u << 20;
    char err[512];
    void *alias = NULL;
    gpu_up();
    /* shared memory, as UCX allocates an arena a same-host peer can put into */
    uint8_t *arena = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    ck_assert_ptr_ne(arena, MAP_FAILED);
    memset(arena, 0, len);

    ck_assert_int_eq(gpu_host_register(g, arena, len, &alias, err, sizeof(err)), 0);
    ck_assert_ptr_nonnull(alias);
    ck_assert_int_eq(gpu_host_register(g, arena, len, &alias, err, sizeof(err)), -EEXIST);
    json_t *p = status_get("pinned");
    ck_assert_int_eq(json_integer_value(json_object_get(p, "count")), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(p, "bytes")), (json_int_t)len);
    json_decref(p);

    for (int d = 0; d < n_gpus; d++) { /* portable: every device's copies land in it */
        cudaStream_t st = (cudaStream_t)gpu_stream(g, d, 1);
        void *dbuf = NULL;
        ck_assert_int_eq(cudaSetDevice(d), cudaSuccess);
        ck_assert_int_eq(cudaMalloc(&dbuf, 4096), cudaSuccess);
        ck_assert_int_eq(cudaMemsetAsync(dbuf, 0x40 + d, 4096, st), cudaSuccess);
        ck_assert_int_eq(
            cudaMemcpyAsync((char *)alias + (size_t)d * 4096, dbuf, 4096, cudaMemcpyDefault, st),
            cudaSuccess);
        ck_assert_int_eq(cudaStreamSynchronize(st), cudaSuccess);
        cudaFree(dbuf);
        ck_assert_int_eq(arena[(size_t)d * 4096], 0x40 + d);
        ck_assert_int_eq(arena[(size_t)d * 4096 + 4095], 0x40 + d);
    }
    /* the alias is what CUDA reports for the registered range */
    struct cudaPointerAttributes attr;
    ck_assert_int_eq(cudaPointerGetAttributes(&attr, arena), cudaSuccess);
    ck_assert_int_eq(attr.type, cudaMemoryTypeHost);
    ck_assert_ptr_eq(attr.devicePointer, alias);
    ck_assert_int_eq(arena[(size_t)n_gpus * 4096], 0);

    gpu_place_t pl;
    char why[512];
    ck_assert_int_eq(gpu_arena_placement(g, GPU_PLACE_AUTO, false, &pl, why, sizeof(why)), 0);
    ck_assert_int_eq(pl, GPU_PLACE_HOST);
    ck_assert_ptr_nonnull(strstr(why, "cudaHostRegister"));

    ck_assert_int_eq(gpu_host_unregister(g, arena, err, sizeof(err)), 0);
    ck_assert_int_eq(gpu_host_unregister(g, arena, err, sizeof(err)), -ENOENT);

    /* the page-locked range limit: GPU_MAX_PINNED ranges (4 KiB pages of the arena), then no */
    ck_assert_uint_ge(len, (GPU_MAX_PINNED + 1) * 4096u);
    for (int i = 0; i < GPU_MAX_PINNED; i++)
        ck_assert_int_eq(
            gpu_host_register(g, arena + (size_t)i * 4096, 4096, &alias, err, sizeof(err)), 0);
    ck_assert_int_eq(
        gpu_host_register(g, arena + (size_t)GPU_MAX_PINNED * 4096, 4096, &alias, err, sizeof(err)),
        -ENOSPC);
    ck_assert_ptr_nonnull(strstr(err, "too many ranges"));
    for (int i = 0; i < GPU_MAX_PINNED; i++)
        ck_assert_int_eq(gpu_host_unregister(g, arena + (size_t)i * 4096, err, sizeof(err)), 0);
    /* left registered at teardown: gpu_free undoes it */
    ck_assert_int_eq(gpu_host_register(g, arena, len, &alias, err, sizeof(err)), 0);
    gpu_down();
    munmap(arena, len);
}
END_TEST

/* peer access (2+ GPUs) */

START_TEST(peer_access_between_two_gpus_copies_bitwise_and_ipc_maps_on_the_owning_device)
{
    const size_t len = 16u << 20;
    char err[512];
    struct worker w;
    struct gpu_mapping *m = NULL;

    if (ipc_ok)
        worker_start(&w, 1, POOL_BYTES, 99); /* a pool on device 1, before we touch CUDA */
    gpu_up();
    if (!gpu_peer_can_access(g, 0, 1) || !gpu_peer_can_access(g, 1, 0)) {
        ck_assert_int_eq(gpu_peer_enable(g, 0, 1, err, sizeof(err)), -ENOTSUP);
        printf("SKIP (part): devices 0 and 1 have no peer access: %s\n", err);
    } else {
        ck_assert_int_eq(gpu_peer_enable(g, 0, 1, err, sizeof(err)), 0);
        ck_assert(gpu_peer_enabled(g, 0, 1) && gpu_peer_enabled(g, 1, 0));
        ck_assert_int_eq(gpu_peer_enable(g, 1, 0, err, sizeof(err)), 0); /* idempotent */
        ck_assert_int_ge(gpu_peer_enable_all(g, err, sizeof(err)), 1);

        uint8_t *h = malloc(len), *back = malloc(len);
        void *a = NULL, *b = NULL;
        pattern_fill(h, 5, 0, len);
        ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
        ck_assert_int_eq(cudaMalloc(&a, len), cudaSuccess);
        ck_assert_int_eq(cudaMemcpy(a, h, len, cudaMemcpyHostToDevice), cudaSuccess);
        ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
        ck_assert_int_eq(cudaMalloc(&b, len), cudaSuccess);
        ck_assert_int_eq(cudaMemcpyPeerAsync(b, 1, a, 0, len, (cudaStream_t)gpu_stream(g, 1, 0)),
                         cudaSuccess);
        ck_assert_int_eq(cudaStreamSynchronize((cudaStream_t)gpu_stream(g, 1, 0)), cudaSuccess);
        ck_assert_int_eq(cudaMemcpy(back, b, len, cudaMemcpyDeviceToHost), cudaSuccess);
        ck_assert_int_eq(pattern_diff(back, 5, 0, len), -1);
        cudaFree(b);
        cudaSetDevice(0);
        cudaFree(a);
        free(h);
        free(back);

        json_t *pa = status_get("peer_access");
        int enabled = 0;
        for (size_t i = 0; i < json_array_size(pa); i++)
            enabled += json_is_true(json_object_get(json_array_get(pa, i), "enabled"));
        ck_assert_int_ge(enabled, 2);
        json_decref(pa);
    }

    if (!ipc_ok) {
        printf("SKIP (part): no CUDA IPC here: the cross-device mapping is not checked\n");
        gpu_down();
        return;
    }
    /* the worker says device 0 (as with its own CUDA_VISIBLE_DEVICES); the memory is on 1 */
    int rc = gpu_ipc_open(g, 0, w.h.handle, 0, POOL_BYTES, &m, err, sizeof(err));
    ck_assert_msg(rc == 0, "open: %s", err);
    ck_assert_int_eq(gpu_mapping_device(m), 1);
    ck_assert_int_eq(gpu_device_by_pci(g, w.h.pci_bus_id), 1);
    uint8_t *buf = malloc(POOL_BYTES);
    read_mapping(m, buf, 0, POOL_BYTES);
    ck_assert_int_eq(pattern_diff(buf, 99, 0, POOL_BYTES), -1);
    free(buf);
    m = gpu_ipc_close(g, m);
    ck_assert_int_eq(worker_stop(&w), 0);
    gpu_down();
}
END_TEST

/* Counts GPUs in a child, so this process (the Check runner, which forks the tests) never
 * initializes CUDA. Returns the count, or -1 with the reason. */
static int probe(char *why, size_t len)
{
    int p[2];
    if (pipe(p) < 0)
        return snprintf(why, len, "pipe: %s", strerror(errno)), -1;
    pid_t pid = fork();
    if (pid == 0) {
        char err[256] = "";
        int n = cuda_pool_device_count(err, sizeof(err));
        if (n == 0)
            snprintf(err, sizeof(err), "no CUDA device visible");
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

/* One IPC round trip (worker export, gpu_ipc_open, read back) in a child. Returns 0, or the error
 * with its message: the tests that need IPC are left out only on -ENOTSUP / -EPERM (the machine
 * refuses CUDA IPC, as a sandbox may); any other failure lets them run and fail. */
static int probe_ipc(char *why, size_t len)
{
    int p[2];
    if (pipe(p) < 0)
        return snprintf(why, len, "pipe: %s", strerror(errno)), -EIO;
    pid_t pid = fork();
    if (pid == 0) {
        struct worker w;
        char err[256] = "";
        int rc = worker_spawn(&w, 0, 1 << 20, 3);
        if (rc < 0) {
            snprintf(err, sizeof(err), "worker: %.200s", w.h.err);
        } else {
            uv_loop_t l;
            struct gpu *pg = NULL;
            struct gpu_mapping *m = NULL;
            uint8_t buf[4096];
            uv_loop_init(&l);
            rc = gpu_new(&l, &pg);
            if (rc == 0)
                rc = gpu_ipc_open(pg, 0, w.h.handle, 0, 1 << 20, &m, err, sizeof(err));
            if (rc == 0 && (cudaMemcpy(buf, gpu_mapping_ptr(m), sizeof(buf),
                                       cudaMemcpyDeviceToHost) != cudaSuccess ||
                            pattern_diff(buf, 3, 0, sizeof(buf)) != -1)) {
                rc = -EIO;
                snprintf(err, sizeof(err), "read back through the mapping differs");
            }
            m = gpu_ipc_close(pg, m);
            pg = gpu_free(pg);
            uv_run(&l, UV_RUN_DEFAULT);
            uv_loop_close(&l);
        }
        worker_reap(&w);
        write_full(p[1], &rc, sizeof(rc));
        write_full(p[1], err, sizeof(err));
        _exit(0);
    }
    close(p[1]);
    int rc = -EIO;
    char err[256] = "IPC probe child died";
    if (read_full(p[0], &rc, sizeof(rc)) < 0 || read_full(p[0], err, sizeof(err)) < 0)
        rc = -EIO;
    close(p[0]);
    waitpid(pid, NULL, 0);
    snprintf(why, len, "%s", err);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc == 5 && strcmp(argv[1], "--worker") == 0)
        return worker_main(atoi(argv[2]), strtoull(argv[3], NULL, 10), strtoull(argv[4], NULL, 10));
    char why[256];
    signal(SIGPIPE, SIG_IGN);         /* a worker that quit early is an EPIPE, not our death */
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines printed by forked tests reach the log */
    n_gpus = probe(why, sizeof(why));
    if (n_gpus <= 0) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    log_set_level(LOG_LVL_WARN);
    int rc = probe_ipc(why, sizeof(why));
    if (rc == -ENOTSUP || rc == -EPERM) {
        ipc_ok = false;
        printf("SKIP: CUDA IPC is not available on this machine (%s): the IPC tests are left "
               "out\n",
               why);
    } else if (rc < 0) {
        printf("IPC probe failed (%s): the IPC tests run and will say more\n", why);
    }

    Suite *s = suite_create("gpu_ipc");
    TCase *tc = tcase_create("ipc");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, discovery_names_every_device_with_its_bus_id);
    tcase_add_test(tc, bogus_handle_and_bad_arguments_fail_with_named_errors_and_we_stay_up);
    if (ipc_ok) {
        tcase_add_test(tc, worker_pool_maps_once_and_reads_back_bitwise_both_ways);
        tcase_add_test(tc, worker_killed_while_mapped_leaves_the_daemon_up_and_releasing);
        tcase_add_test(tc, mapping_limit_refuses_a_new_allocation_but_not_a_known_one);
    }
    suite_add_tcase(s, tc);

    tc = tcase_create("completions");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, completions_arrive_on_the_loop_in_stream_order_and_the_loop_closes);
    tcase_add_test(tc, gpu_free_delivers_outstanding_completions);
    tcase_add_test(tc, completion_round_trip_latency_is_printed);
    suite_add_tcase(s, tc);

    tc = tcase_create("pinned");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, host_arena_is_page_locked_and_written_by_the_gpu_through_its_alias);
    suite_add_tcase(s, tc);

    tc = tcase_create("peer");
    tcase_set_timeout(tc, 60);
    if (n_gpus >= 2)
        tcase_add_test(
            tc, peer_access_between_two_gpus_copies_bitwise_and_ipc_maps_on_the_owning_device);
    else
        printf("SKIP: peer access test needs 2 GPUs, this machine has %d\n", n_gpus);
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
