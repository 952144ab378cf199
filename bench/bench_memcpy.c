/* bench_memcpy.c: the memcpy ceiling for scripts/bench-remote: copies one buffer of SIZE bytes
 * (default 32 MiB, the arena chunk) into another, ITER times per round, best round of ROUNDS,
 * both buffers faulted in first. Prints one JSON object; GB/s = 1e9 B/s of bytes copied.
 *   build/bench/bench_memcpy [SIZE [ITER [ROUNDS]]] */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    uint64_t size = argc > 1 ? strtoull(argv[1], NULL, 0) : 32ull << 20;
    unsigned iter = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 0) : 16;
    unsigned rounds = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 0) : 5;
    if (size == 0 || size > (8ull << 30) || iter == 0 || rounds == 0) {
        fprintf(stderr, "usage: bench_memcpy [SIZE<=8GiB [ITER [ROUNDS]]]\n");
        return 2;
    }
    unsigned char *a = malloc(size), *b = malloc(size);
    if (!a || !b) {
        fprintf(stderr, "bench_memcpy: out of memory\n");
        return 1;
    }
    memset(a, 0x5a, size);
    memset(b, 0, size);
    double best = 0;
    for (unsigned r = 0; r < rounds; r++) {
        double t0 = now();
        for (unsigned i = 0; i < iter; i++)
            memcpy(i & 1 ? a : b, i & 1 ? b : a, size);
        double gbps = (double)size * iter / (now() - t0) / 1e9;
        if (gbps > best)
            best = gbps;
    }
    int ok = a[size - 1] == 0x5a && b[0] == 0x5a;
    printf("{\"size_bytes\":%" PRIu64 ",\"iterations\":%u,\"rounds\":%u,\"memcpy_GBps\":%.2f}\n",
           size, iter, rounds, best);
    free(a);
    free(b);
    return ok ? 0 : 1;
}
