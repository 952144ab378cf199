/* check_gpu_cpu_mode.c: the daemon's GPU module and worker GPU pools where there is no GPU: a
 * build without CUDA (CI), or a CUDA build on a machine without GPU or driver. main() empties
 * CUDA_VISIBLE_DEVICES before anything touches CUDA, so a GPU node takes the same path
 * (cudaGetDeviceCount fails or finds nothing). Discovery gives CPU mode with the reason; every
 * GPU operation is refused with a message and nothing crashes; the placement decision and the
 * status section say so; the loop closes clean. */
#include <errno.h>
#include <string.h>
#include <uv.h>

#include "cfg.h"
#include "cuda_err.h"
#include "cuda_pool.h"
#include "gpu.h"
#include "log.h"
#include "testutil.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static uv_loop_t loop;
static struct gpu *g;

static void setup(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(gpu_new(&loop, &g), 0);
    ck_assert_ptr_nonnull(g);
}

static void teardown(void)
{
    g = gpu_free(g);
    ck_assert_ptr_null(g);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

/* discovery */

START_TEST(discovery_without_gpu_reports_cpu_mode_with_reason)
{
    ck_assert(gpu_cpu_mode(g));
    ck_assert_int_eq(gpu_device_count(g), 0);
    ck_assert_ptr_null(gpu_device(g, 0));
    ck_assert_int_eq(gpu_device_by_pci(g, "0000:18:00.0"), -ENODEV);
    ck_assert_int_eq(gpu_device_by_pci(g, NULL), -ENODEV);
    const char *why = gpu_cpu_reason(g);
#ifdef KVF_HAVE_CUDA
    /* no driver, no device, or none visible: the failing call is named */
    ck_assert_msg(strncmp(why, "cudaGetDeviceCount: ", 20) == 0 ||
                      strncmp(why, "no CUDA device visible", 22) == 0,
                  "reason: %s", why);
#else
    ck_assert_str_eq(why, CUDA_ERR_NO_CUDA);
#endif
}
END_TEST

START_TEST(gpu_object_does_not_hold_the_loop_and_closes_clean)
{
    /* nothing outstanding: the loop has nothing to wait for (teardown closes it) */
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_uint_eq(gpu_notify_outstanding(g), 0);
}
END_TEST

/* refusals */

START_TEST(ipc_open_in_cpu_mode_is_refused_with_the_reason)
{
    uint8_t handle[GPU_IPC_HANDLE_BYTES];
    struct gpu_mapping *m = (struct gpu_mapping *)0x1; /* must stay untouched */
    char err[512] = "";
    memset(handle, 0x5a, sizeof(handle));
    ck_assert_int_eq(gpu_ipc_open(g, 0, handle, 0, 1 << 20, &m, err, sizeof(err)), -ENODEV);
    ck_assert_ptr_eq(m, (struct gpu_mapping *)0x1);
    ck_assert_msg(strstr(err, "CPU mode") && strstr(err, gpu_cpu_reason(g)), "err: %s", err);
#ifndef KVF_HAVE_CUDA
    ck_assert_ptr_nonnull(strstr(err, "this build has no CUDA; use host pools"));
#endif
    ck_assert_uint_eq(gpu_mapping_count(g), 0);
    ck_assert_uint_eq(gpu_mapping_total_bytes(g), 0);
    ck_assert_int_eq(gpu_set_max_mappings(g, 0), -EINVAL);
    ck_assert_int_eq(gpu_set_max_mappings(g, GPU_MAX_MAPPINGS + 1), -EINVAL);
    ck_assert_int_eq(gpu_set_max_mappings(g, 1), 0);
    /* closing nothing is fine */
    ck_assert_ptr_null(gpu_ipc_close(g, NULL));
}
END_TEST

START_TEST(cuda_pool_alloc_is_refused_with_a_message)
{
    struct cuda_pool *p = NULL;
    char err[512] = "";
    int rc = cuda_pool_new(0, 1 << 20, &p, err, sizeof(err));
    ck_assert_ptr_null(p);
#ifdef KVF_HAVE_CUDA
    ck_assert_msg(rc == -ENODEV || rc == -EIO, "rc %d (%s)", rc, err);
    ck_assert_msg(strncmp(err, "cudaGetDeviceCount: ", 20) == 0 ||
                      strcmp(err, "device 0: this process sees 0 CUDA devices") == 0,
                  "err: %s", err);
    /* sizes are checked before CUDA is asked */
    ck_assert_int_eq(cuda_pool_new(0, 0, &p, err, sizeof(err)), -EINVAL);
    ck_assert_int_eq(cuda_pool_new(0, CUDA_POOL_MAX_BYTES + 1, &p, err, sizeof(err)), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "outside 1.."));
#else
    ck_assert_int_eq(rc, -ENOTSUP);
    ck_assert_str_eq(err, "this build has no CUDA; use host pools");
    ck_assert_int_eq(cuda_pool_device_count(err, sizeof(err)), -ENOTSUP);
#endif
    ck_assert_ptr_null(cuda_pool_free(NULL));
}
END_TEST

static int cb_calls;
static void count_cb(void *arg, int status)
{
    (void)arg, (void)status;
    cb_calls++;
}

START_TEST(every_gpu_operation_is_refused_and_nothing_runs)
{
    char err[512];
    void *dptr = NULL;
    static char host[1 << 16];

    cb_calls = 0;
    ck_assert_ptr_null(gpu_stream(g, 0, 0));
    ck_assert_int_eq(gpu_notify(g, 0, NULL, count_cb, NULL, err, sizeof(err)), -ENODEV);
    ck_assert_int_eq(gpu_peer_enable(g, 0, 1, err, sizeof(err)), -ENODEV);
    ck_assert_ptr_nonnull(strstr(err, "CPU mode"));
    ck_assert_int_eq(gpu_peer_enable_all(g, err, sizeof(err)), -ENODEV);
    ck_assert(!gpu_peer_can_access(g, 0, 1));
    ck_assert(!gpu_peer_enabled(g, 0, 1));
    ck_assert_int_eq(gpu_host_register(g, host, sizeof(host), &dptr, err, sizeof(err)), -ENODEV);
    ck_assert_ptr_nonnull(strstr(err, "needs no page-locking"));
    ck_assert_ptr_null(dptr);
    ck_assert_int_eq(gpu_host_unregister(g, host, err, sizeof(err)), -ENOENT);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(cb_calls, 0);
    ck_assert_uint_eq(gpu_notify_outstanding(g), 0);
}
END_TEST

/* CUDA errors become -errno and a message naming the call */

START_TEST(cuda_errors_convert_once_into_errno_and_a_named_message)
{
    char err[256] = "untouched";
    int dev = 1;
    size_t errlen = sizeof(err);
    ck_assert_int_eq(cuda_err_check(0, "cudaSetDevice(dev)", dev, err, errlen), 0);
    ck_assert_str_eq(err, "untouched");
#ifdef KVF_HAVE_CUDA
    ck_assert_int_eq(CUDA_ERR_TRY(cudaErrorInvalidValue), -EINVAL);
    ck_assert_int_eq(
        cuda_err_check(cudaErrorInvalidValue, "cudaIpcOpenMemHandle(&p, h, flags)", 1, err, errlen),
        -EINVAL);
    ck_assert_str_eq(err, "cudaIpcOpenMemHandle: invalid argument (device 1)");
    ck_assert_int_eq(cuda_err_check(cudaErrorMemoryAllocation, "cudaMalloc", -1, err, errlen),
                     -ENOMEM);
    ck_assert_str_eq(err, "cudaMalloc: out of memory");
    ck_assert_int_eq(cuda_err_to_errno(cudaErrorNoDevice), -ENODEV);
    ck_assert_int_eq(cuda_err_to_errno(cudaErrorInsufficientDriver), -ENODEV);
    ck_assert_int_eq(cuda_err_to_errno(cudaErrorPeerAccessAlreadyEnabled), -EALREADY);
    ck_assert_int_eq(cuda_err_to_errno(cudaErrorHostMemoryAlreadyRegistered), -EEXIST);
    ck_assert_int_eq(cuda_err_to_errno(cudaErrorNotReady), -EBUSY);
    ck_assert_int_eq(cuda_err_to_errno(cudaErrorIllegalAddress), -EIO);
#else
    ck_assert_int_eq(cuda_err_check(1, "cudaIpcOpenMemHandle(&p, h, flags)", 1, err, errlen),
                     -ENOTSUP);
    ck_assert_str_eq(err,
                     "cudaIpcOpenMemHandle: this build has no CUDA; use host pools (device 1)");
#endif
    /* a tiny buffer truncates, never overflows */
    char small[8];
    ck_assert_int_lt(cuda_err_check(2, "cudaMalloc", 0, small, sizeof(small)), 0);
    ck_assert_uint_eq(strlen(small), sizeof(small) - 1);
}
END_TEST

/* arena placement */

START_TEST(placement_auto_without_gpu_is_host_with_the_reason)
{
    gpu_place_t p = GPU_PLACE_DEVICE;
    char why[512];
    ck_assert_int_eq(
        gpu_arena_decide(GPU_PLACE_AUTO, false, "no driver", true, &p, why, sizeof(why)), 0);
    ck_assert_int_eq(p, GPU_PLACE_HOST);
    ck_assert_str_eq(why, "auto: no GPU (no driver): host memory");
}
END_TEST

START_TEST(placement_auto_with_gpu_follows_ucx_cuda_support)
{
    gpu_place_t p = GPU_PLACE_AUTO;
    char why[512];
    ck_assert_int_eq(gpu_arena_decide(GPU_PLACE_AUTO, true, "", false, &p, why, sizeof(why)), 0);
    ck_assert_int_eq(p, GPU_PLACE_HOST);
    ck_assert_ptr_nonnull(strstr(why, "UCX has no CUDA memory support"));
    ck_assert_ptr_nonnull(strstr(why, "cudaHostRegister"));
    ck_assert_int_eq(gpu_arena_decide(GPU_PLACE_AUTO, true, "", true, &p, why, sizeof(why)), 0);
    ck_assert_int_eq(p, GPU_PLACE_DEVICE);
    ck_assert_ptr_nonnull(strstr(why, "UCX reports CUDA memory support"));
}
END_TEST

START_TEST(placement_device_is_refused_with_what_to_change)
{
    gpu_place_t p = GPU_PLACE_AUTO;
    char why[512];
    ck_assert_int_eq(
        gpu_arena_decide(GPU_PLACE_DEVICE, false, "no driver", true, &p, why, sizeof(why)),
        -ENODEV);
    ck_assert_ptr_nonnull(strstr(why, "no GPU (no driver)"));
    ck_assert_ptr_nonnull(strstr(why, "set arena.placement to auto or host"));
    ck_assert_int_eq(gpu_arena_decide(GPU_PLACE_DEVICE, true, "", false, &p, why, sizeof(why)),
                     -ENOTSUP);
    ck_assert_ptr_nonnull(strstr(why, "no CUDA memory support"));
    ck_assert_int_eq(p, GPU_PLACE_AUTO); /* untouched on refusal */
    ck_assert_int_eq(gpu_arena_decide(GPU_PLACE_DEVICE, true, "", true, &p, why, sizeof(why)), 0);
    ck_assert_int_eq(p, GPU_PLACE_DEVICE);
    ck_assert_int_eq(gpu_arena_decide(GPU_PLACE_HOST, true, "", true, &p, why, sizeof(why)), 0);
    ck_assert_int_eq(p, GPU_PLACE_HOST);
    ck_assert_int_eq(gpu_arena_decide((gpu_place_t)7, true, "", true, &p, why, sizeof(why)),
                     -EINVAL);
}
END_TEST

START_TEST(placement_values_follow_the_config_enum)
{
    static const char *const names[] = {"auto", "host", "device"};
    for (int i = 0; i < 3; i++) {
        struct kvf_config c;
        char text[64], err[512];
        snprintf(text, sizeof(text), "arena:\n  placement: %s\n", names[i]);
        ck_assert_int_eq(cfg_load_string("t.yaml", text, strlen(text), &c, err, sizeof(err)), 0);
        ck_assert_int_eq(c.arena_placement, i);
        ck_assert_str_eq(gpu_place_to_string((gpu_place_t)c.arena_placement), names[i]);
        cfg_free(&c);
    }
}
END_TEST

/* status */

static json_t *status(void)
{
    json_t *o = json_object();
    ck_assert_int_eq(gpu_status(g, o), 0);
    return o;
}

START_TEST(status_section_says_cpu_mode_and_why)
{
    json_t *o = status();
    ck_assert_str_eq(json_string_value(json_object_get(o, "mode")), "cpu");
    ck_assert_str_eq(json_string_value(json_object_get(o, "reason")), gpu_cpu_reason(g));
    ck_assert_int_eq(json_integer_value(json_object_get(o, "device_count")), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(o, "devices")), 0);
    ck_assert_uint_eq(json_array_size(json_object_get(o, "peer_access")), 0);
    json_t *m = json_object_get(o, "mappings");
    ck_assert_int_eq(json_integer_value(json_object_get(m, "count")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(m, "bytes")), 0);
    json_t *a = json_object_get(o, "arena");
    ck_assert(json_is_false(json_object_get(a, "decided")));
    json_decref(o);

    gpu_place_t p;
    char why[512];
    ck_assert_int_eq(gpu_arena_placement(g, GPU_PLACE_AUTO, false, &p, why, sizeof(why)), 0);
    ck_assert_int_eq(p, GPU_PLACE_HOST);
    o = status();
    a = json_object_get(o, "arena");
    ck_assert_str_eq(json_string_value(json_object_get(a, "placement")), "host");
    ck_assert_str_eq(json_string_value(json_object_get(a, "why")), why);
    ck_assert_ptr_nonnull(strstr(why, gpu_cpu_reason(g)));
    json_decref(o);

    ck_assert_int_eq(gpu_arena_placement(g, GPU_PLACE_DEVICE, false, &p, why, sizeof(why)),
                     -ENODEV);
    o = status();
    a = json_object_get(o, "arena");
    ck_assert_str_eq(json_string_value(json_object_get(a, "placement")), "refused");
    ck_assert_str_eq(json_string_value(json_object_get(a, "why")), why);
    json_decref(o);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("gpu_cpu_mode");
    TCase *tc = tcase_create("discovery");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, discovery_without_gpu_reports_cpu_mode_with_reason);
    tcase_add_test(tc, gpu_object_does_not_hold_the_loop_and_closes_clean);
    suite_add_tcase(s, tc);

    tc = tcase_create("refusals");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, ipc_open_in_cpu_mode_is_refused_with_the_reason);
    tcase_add_test(tc, cuda_pool_alloc_is_refused_with_a_message);
    tcase_add_test(tc, every_gpu_operation_is_refused_and_nothing_runs);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_add_test(tc, cuda_errors_convert_once_into_errno_and_a_named_message);
    suite_add_tcase(s, tc);

    tc = tcase_create("placement");
    tcase_add_test(tc, placement_auto_without_gpu_is_host_with_the_reason);
    tcase_add_test(tc, placement_auto_with_gpu_follows_ucx_cuda_support);
    tcase_add_test(tc, placement_device_is_refused_with_what_to_change);
    tcase_add_test(tc, placement_values_follow_the_config_enum);
    suite_add_tcase(s, tc);

    tc = tcase_create("status");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, status_section_says_cpu_mode_and_why);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    /* the same path on a GPU node: no device is visible to this process */
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
    log_set_level(LOG_LVL_WARN);
    return tu_run(suite());
}
