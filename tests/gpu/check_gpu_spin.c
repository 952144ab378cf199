/* check_gpu_spin.c: the completion spin (daemon/gpu/gpu_spin.c) on a real GPU: with a budget,
 * completions are fired by the loop polling their events (counted spin_fired), in stream order,
 * on the loop thread, every one exactly once, with their host functions still run before a node
 * is freed (the loop keeps running until every host function ran: no node leaks, checked by
 * gpu_free + valgrind-free teardown); a kernel longer than the budget still completes (through
 * its host function); budget 0 never spins; gpu_free with completions due delivers them. The
 * round trip of one completion with and without the spin is printed, not asserted (timing).
 * One GPU is enough. The first case holds CUDA's host-function thread behind a gate that only
 * the first completion's callback opens, so only the loop's poll can deliver it. Without CUDA or a GPU: "SKIP: why", exit 77. */
#include <check.h>
#include <stdio.h>

#ifndef KVF_HAVE_CUDA
int main(void)
{
    printf("SKIP: built without CUDA (CUDA=0)\n");
    return 77;
}
#else

#include <cuda_runtime.h>
#include <pthread.h>
#include <uv.h>

#include "gpu.h"
#include "gputest.h"
#include "kvf_kernels.h"

static uv_loop_t loop;
static struct gpu *g;

static void setup(uint64_t spin_us)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(gpu_new(&loop, &g), 0);
    ck_assert_msg(!gpu_cpu_mode(g), "CPU mode: %s", gpu_cpu_reason(g));
    gpu_set_completion_spin(g, spin_us);
}

static void teardown(void)
{
    g = gpu_free(g);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

static long long completions(const char *key)
{
    json_t *o = json_object();
    ck_assert_int_eq(gpu_status(g, o), 0);
    json_t *v = json_object_get(json_object_get(o, "completions"), key);
    long long n = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
    json_decref(o);
    return n;
}

struct rec {
    int calls, bad, out_of_order, off_thread, last[GPU_STREAMS_PER_DEVICE];
    pthread_t loop_thread;
};
struct arg {
    struct rec *r;
    int stream, seq;
};

static void on_done(void *p, int status)
{
    struct arg *a = p;
    a->r->calls++;
    a->r->bad += status != 0;
    a->r->out_of_order += a->seq != a->r->last[a->stream] + 1;
    a->r->last[a->stream] = a->seq;
    a->r->off_thread += !pthread_equal(pthread_self(), a->r->loop_thread);
}

/* CUDA's host-function thread is held here until the first completion's callback ran on the
 * loop: so the loop's poll is what fires the completions queued meanwhile (a spin that never
 * fires leaves the gate shut and the test fails at its timeout). */
static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static bool gate_open;

static void CUDART_CB gate(void *unused)
{
    (void)unused;
    pthread_mutex_lock(&gate_mu);
    while (!gate_open)
        pthread_cond_wait(&gate_cv, &gate_mu);
    pthread_mutex_unlock(&gate_mu);
}

static void gate_release(void)
{
    pthread_mutex_lock(&gate_mu);
    gate_open = true;
    pthread_cond_broadcast(&gate_cv);
    pthread_mutex_unlock(&gate_mu);
}

static void on_done_open(void *p, int status)
{
    on_done(p, status);
    gate_release();
}

START_TEST(spun_completions_arrive_once_in_stream_order_on_the_loop)
{
    enum { PER = 40, BUF = 8 << 20, WORK = GPU_STREAMS_PER_DEVICE - 1 };
    static struct arg args[GPU_STREAMS_PER_DEVICE][PER];
    struct rec r = {.loop_thread = pthread_self()};
    char err[512];
    void *buf[GPU_STREAMS_PER_DEVICE];
    setup(100000); /* 100 ms: every completion here is young enough */
    gate_open = false;
    /* the last stream holds CUDA's host-function thread; the others carry the work */
    CK_CUDA(cudaLaunchHostFunc((cudaStream_t)gpu_stream(g, 0, WORK), gate, NULL));
    for (int s = 0; s < WORK; s++) {
        CK_CUDA(cudaMalloc(&buf[s], BUF));
        r.last[s] = -1;
    }
    for (int k = 0; k < PER; k++)
        for (int s = 0; s < WORK; s++) {
            CK_CUDA(cudaMemsetAsync(buf[s], k, BUF, (cudaStream_t)gpu_stream(g, 0, (unsigned)s)));
            args[s][k] = (struct arg){&r, s, k};
            ck_assert_int_eq(gpu_notify(g, 0, gpu_stream(g, 0, (unsigned)s),
                                        k == 0 && s == 0 ? on_done_open : on_done, &args[s][k],
                                        err, sizeof err),
                             0);
        }
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    int total = PER * WORK;
    ck_assert_int_eq(r.calls, total);
    ck_assert_int_eq(r.bad, 0);
    ck_assert_int_eq(r.out_of_order, 0);
    ck_assert_int_eq(r.off_thread, 0);
    ck_assert_int_eq(completions("ok"), total);
    long long spun = completions("spin_fired");
    printf("spin: %lld of %d completions fired by the loop's poll (%lld polls)\n", spun, total,
           completions("spin_polls"));
    ck_assert_int_gt(spun, 0);
    ck_assert_int_le(spun, total);
    for (int s = 0; s < WORK; s++)
        CK_CUDA(cudaFree(buf[s]));
    teardown();
}
END_TEST

START_TEST(a_completion_past_the_budget_comes_through_its_host_function)
{
    struct rec r = {.loop_thread = pthread_self()};
    struct arg a = {&r, 0, 0};
    char err[512];
    void *d = NULL;
    setup(1); /* 1 us: a 1 GiB memset is far past it */
    r.last[0] = -1;
    CK_CUDA(cudaMalloc(&d, 1u << 30));
    CK_CUDA(cudaMemsetAsync(d, 7, 1u << 30, (cudaStream_t)gpu_stream(g, 0, 0)));
    ck_assert_int_eq(gpu_notify(g, 0, gpu_stream(g, 0, 0), on_done, &a, err, sizeof err), 0);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(r.calls, 1);
    ck_assert_int_eq(r.bad, 0);
    ck_assert_int_eq(completions("spin_fired"), 0);
    CK_CUDA(cudaFree(d));
    teardown();
}
END_TEST

START_TEST(budget_zero_never_spins)
{
    struct rec r = {.loop_thread = pthread_self()};
    struct arg a[8];
    char err[512];
    setup(0);
    r.last[0] = -1;
    for (int k = 0; k < 8; k++) {
        a[k] = (struct arg){&r, 0, k};
        ck_assert_int_eq(gpu_notify(g, 0, gpu_stream(g, 0, 0), on_done, &a[k], err, sizeof err),
                         0);
    }
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(r.calls, 8);
    ck_assert_int_eq(r.out_of_order, 0);
    ck_assert_int_eq(completions("spin_fired"), 0);
    ck_assert_int_eq(completions("spin_polls"), 0);
    teardown();
}
END_TEST

START_TEST(gpu_free_with_spun_completions_due_delivers_them)
{
    struct rec r = {.loop_thread = pthread_self()};
    struct arg a[16];
    char err[512];
    setup(100000);
    r.last[0] = -1;
    for (int k = 0; k < 16; k++) {
        a[k] = (struct arg){&r, 0, k};
        ck_assert_int_eq(gpu_notify(g, 0, gpu_stream(g, 0, 0), on_done, &a[k], err, sizeof err),
                         0);
    }
    /* a few loop turns only: some fired by the spin, some not yet */
    uv_run(&loop, UV_RUN_NOWAIT);
    g = gpu_free(g); /* delivers the rest, waits for every host function, frees every node */
    ck_assert_int_eq(r.calls, 16);
    ck_assert_int_eq(r.out_of_order, 0);
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}
END_TEST

static void on_rt(void *p, int status)
{
    (void)status;
    ++*(int *)p;
}

/* Round trip of one completion on an idle stream, host function only vs spin. */
START_TEST(round_trip_with_and_without_the_spin_is_printed)
{
    enum { N = 200 };
    char err[512];
    for (int spin = 0; spin < 2; spin++) {
        int calls = 0;
        uint64_t total = 0, worst = 0;
        setup(spin ? 2000 : 0);
        for (int i = 0; i < N; i++) {
            uint64_t t0 = uv_hrtime();
            ck_assert_int_eq(gpu_notify(g, 0, gpu_stream(g, 0, 1), on_rt, &calls, err, sizeof err),
                             0);
            ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
            uint64_t dt = uv_hrtime() - t0;
            total += dt;
            worst = dt > worst ? dt : worst;
        }
        ck_assert_int_eq(calls, N);
        printf("completion round trip, %s: mean %.1f us, worst %.1f us (%d trips)\n",
               spin ? "spin 2000 us" : "host function", total / 1e3 / N, worst / 1e3, N);
        teardown();
    }
}
END_TEST

int main(void)
{
    if (kvk_device_count() < 1) {
        printf("SKIP: no CUDA device: %s\n", kvk_last_error());
        return 77;
    }
    Suite *s = suite_create("gpu_spin");
    TCase *tc = tcase_create("spin");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, spun_completions_arrive_once_in_stream_order_on_the_loop);
    tcase_add_test(tc, a_completion_past_the_budget_comes_through_its_host_function);
    tcase_add_test(tc, budget_zero_never_spins);
    tcase_add_test(tc, gpu_free_with_spun_completions_due_delivers_them);
    tcase_add_test(tc, round_trip_with_and_without_the_spin_is_printed);
    suite_add_tcase(s, tc);
    return gt_run_nofork(s);
}
#endif
