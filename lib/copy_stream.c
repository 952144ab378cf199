/* copy_stream.c: the streaming run copy (copy_stream.h).
 * Why four stretches at once: the pools' pages are 4 KiB (shared memory gets no huge pages) and
 * a run of a copy program starts wherever its block lies, so one stream of loads stalls at
 * every page it enters (a TLB walk, the hardware prefetcher starting again). Copying 256 bytes
 * from each of four 4 KiB stretches in turn keeps four pages' misses in flight (glibc's memcpy
 * does the same above its non-temporal threshold, which our runs never reach). Measured on the
 * 2-core Xeon (bench/results/local-2core-session5.md), one thread, 4 KiB pages, shuffled
 * 16 KiB-4 MiB runs: 6.1-6.9 GB/s with one stretch (sse2), 8.2-9.4 with four (sse2), 8.7-10.7
 * (avx512); two copy threads on the presets' real programs: 1.24-1.36x the one-stretch kernel.
 * Prefetching the next run's first lines added nothing measurable, so there is none. */
#include <errno.h>
#include <string.h>

#include "copy_stream.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define COPY_STREAM_X86 1
#else
#define COPY_STREAM_X86 0
#endif

#define STRETCH 4096u /* a page: the unit the prefetcher and the TLB work in */
#define STEP 256u     /* bytes taken from one stretch before going to the next */

/* n bytes from s to d, one vector at a time: the loop body of a kernel. */
#define COPY_VECS(vec_t, load, store, d, s, n)                                                \
    do {                                                                                      \
        _Pragma("GCC unroll 16") for (unsigned q_ = 0; q_ < (n) / sizeof(vec_t); q_++)        \
            store((void *)((d) + q_ * sizeof(vec_t)),                                         \
                  load((const void *)((s) + q_ * sizeof(vec_t))));                            \
    } while (0)

/* A kernel: the head up to a 64-byte destination boundary and the tail under 64 bytes through
 * memcpy, the rest with streaming stores, `ways` stretches at a time while that many remain. */
#define STREAM_KERNEL(name, attr, vec_t, load, store, ways)                                   \
    attr static void name(uint8_t *d, const uint8_t *s, uint64_t n)                           \
    {                                                                                         \
        uint64_t head = (64 - ((uintptr_t)d & 63)) & 63;                                      \
        if (head > n)                                                                         \
            head = n;                                                                         \
        memcpy(d, s, head);                                                                   \
        d += head, s += head, n -= head;                                                      \
        for (; n >= (ways) * STRETCH;                                                         \
             d += (ways) * STRETCH, s += (ways) * STRETCH, n -= (ways) * STRETCH)             \
            for (unsigned o = 0; o < STRETCH; o += STEP)                                      \
                _Pragma("GCC unroll 4") for (unsigned w = 0; w < (ways); w++)                 \
                    COPY_VECS(vec_t, load, store, d + w * STRETCH + o, s + w * STRETCH + o,   \
                              STEP);                                                          \
        for (; n >= 64; d += 64, s += 64, n -= 64)                                            \
            COPY_VECS(vec_t, load, store, d, s, 64);                                          \
        memcpy(d, s, n);                                                                      \
    }

#if COPY_STREAM_X86
#define LOAD16(p) _mm_loadu_si128((const __m128i *)(p))
#define STORE16(p, v) _mm_stream_si128((__m128i *)(p), (v))
#define LOAD32(p) _mm256_loadu_si256((const __m256i *)(p))
#define STORE32(p, v) _mm256_stream_si256((__m256i *)(p), (v))
#define LOAD64(p) _mm512_loadu_si512((const void *)(p))
#define STORE64(p, v) _mm512_stream_si512((__m512i *)(p), (v))
#define NO_TARGET

STREAM_KERNEL(run_avx512, __attribute__((target("avx512f"))), __m512i, LOAD64, STORE64, 4)
STREAM_KERNEL(run_avx, __attribute__((target("avx"))), __m256i, LOAD32, STORE32, 4)
STREAM_KERNEL(run_sse2, NO_TARGET, __m128i, LOAD16, STORE16, 4)
STREAM_KERNEL(run_sse2_1way, NO_TARGET, __m128i, LOAD16, STORE16, 1)

static bool has_avx512(void) { return __builtin_cpu_supports("avx512f"); }
static bool has_avx(void) { return __builtin_cpu_supports("avx"); }
static bool has_sse2(void) { return __builtin_cpu_supports("sse2"); }
#endif

static void run_memcpy(uint8_t *d, const uint8_t *s, uint64_t n) { memcpy(d, s, n); }
static bool always(void) { return true; }

static const struct kernel {
    const char *name;
    void (*run)(uint8_t *d, const uint8_t *s, uint64_t n);
    bool (*supported)(void);
    bool fence; /* streaming stores: sfence before the bytes are handed on */
} kernels[] = {
#if COPY_STREAM_X86
    {"avx512", run_avx512, has_avx512, true},
    {"avx", run_avx, has_avx, true},
    {"sse2", run_sse2, has_sse2, true},
    {"sse2-1way", run_sse2_1way, has_sse2, true}, /* one stretch at a time: session 4's kernel */
#endif
    {"memcpy", run_memcpy, always, false},
};
#define N_KERNELS (sizeof(kernels) / sizeof(kernels[0]))

static int current = -1; /* index into kernels, atomic (relaxed: any valid index will do) */

static const struct kernel *kernel(void)
{
    int i = __atomic_load_n(&current, __ATOMIC_RELAXED);
    if (i < 0) { /* the first supported: every thread that races here picks the same */
#if COPY_STREAM_X86
        __builtin_cpu_init();
#endif
        for (i = 0; !kernels[i].supported(); i++)
            ;
        __atomic_store_n(&current, i, __ATOMIC_RELAXED);
    }
    return &kernels[i];
}

void copy_stream_run(uint8_t *d, const uint8_t *s, uint64_t n) { kernel()->run(d, s, n); }

void copy_stream_fence(void)
{
#if COPY_STREAM_X86
    if (kernel()->fence)
        _mm_sfence();
#endif
}

const char *copy_stream_kernel_at(uint32_t i, bool *ret_supported)
{
    if (i >= N_KERNELS)
        return NULL;
#if COPY_STREAM_X86
    __builtin_cpu_init();
#endif
    if (ret_supported)
        *ret_supported = kernels[i].supported();
    return kernels[i].name;
}

const char *copy_stream_kernel(void) { return kernel()->name; }

int copy_stream_kernel_set(const char *name)
{
    for (uint32_t i = 0; i < N_KERNELS; i++) {
        if (strcmp(kernels[i].name, name))
            continue;
#if COPY_STREAM_X86
        __builtin_cpu_init();
#endif
        if (!kernels[i].supported())
            return -ENOTSUP;
        __atomic_store_n(&current, (int)i, __ATOMIC_RELAXED);
        return 0;
    }
    return -EINVAL;
}
