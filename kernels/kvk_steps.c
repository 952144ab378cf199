/* kvk_steps.c: where the host time of program uploads goes (kvf_kernels.h kvk_upload_steps):
 * one counter per step, summed over every thread with relaxed atomics, so a daemon's status can
 * show what a request's "programs" phase spends in which CUDA call. Pure C. */
#include <time.h>

#include "kvf_kernels.h"

static uint64_t steps_ns[KVK_UPLOAD_STEPS], steps_n;

static const char *const names[KVK_UPLOAD_STEPS] = {
    "host", "device", "event_create", "alloc", "stage_get", "fill", "copy_async", "expand",
    "event_record", "stream_wait",
};

uint64_t kvk_step_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t kvk_step(int step, uint64_t t0)
{
    uint64_t now = kvk_step_now();
    if (step >= 0 && step < KVK_UPLOAD_STEPS)
        __atomic_fetch_add(&steps_ns[step], now - t0, __ATOMIC_RELAXED);
    return now;
}

void kvk_step_upload_done(void)
{
    __atomic_fetch_add(&steps_n, 1, __ATOMIC_RELAXED);
}

uint64_t kvk_upload_steps(uint64_t ns[KVK_UPLOAD_STEPS])
{
    for (int i = 0; i < KVK_UPLOAD_STEPS; i++)
        ns[i] = __atomic_load_n(&steps_ns[i], __ATOMIC_RELAXED);
    return __atomic_load_n(&steps_n, __ATOMIC_RELAXED);
}

const char *kvk_upload_step_name(int i)
{
    return i >= 0 && i < KVK_UPLOAD_STEPS ? names[i] : "?";
}
