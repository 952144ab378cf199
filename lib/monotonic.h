/* monotonic.h: the one reading of CLOCK_MONOTONIC in milliseconds (and nanoseconds) that the
 * client library, the tools and the tests share. Any thread. */
#ifndef KVF_MONOTONIC_H
#define KVF_MONOTONIC_H

#include <stdint.h>
#include <time.h>

static inline int64_t mono_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline uint64_t mono_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
