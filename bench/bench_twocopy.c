/* bench_twocopy.c: what the bounce path between two daemons of one host can reach at most on
 * this machine's cores (issue 12, bench/results/bounce-2core-session7.md). The bounce moves
 * every byte twice: the sender's copy thread writes the peer's landing slot (a CHUNK-byte slot
 * of a ring of SLOTS), the receiver's scatters the slot into the generation pools. Here two
 * threads do exactly those copies with the daemon's own run copy (copy_stream.h), pipelined
 * through the ring with no loop, no messages and no waiting but the ring's, from and to buffers
 * of BUFFER bytes (larger than the caches, as pools are). Beside it, in the same run, what
 * ucx_perftest's put of CHUNK bytes does over shared memory: one thread copying one CHUNK-byte
 * buffer into another, again and again, both staying in the cache. ratio = two-copy pipeline /
 * that one copy: the bounce / ucx_perftest figure cannot pass it. Best of ROUNDS each.
 *   build/bench/bench_twocopy [CHUNK [SLOTS [BUFFER [ROUNDS]]]]   (32 MiB, 16, 1 GiB, 5) */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "copy_stream.h"

static struct {
    uint8_t *src, *dst, *ring;
    uint64_t chunk, buf_chunks;
    uint32_t slots, n;
    atomic_uint made, taken; /* chunks written into the ring / copied out of it */
} g;

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *sender(void *arg)
{
    (void)arg;
    for (uint32_t i = 0; i < g.n; i++) {
        while (i - atomic_load(&g.taken) >= g.slots) /* the ring is full: wait for a slot */
            ;
        copy_stream_run(g.ring + (i % g.slots) * g.chunk, g.src + (i % g.buf_chunks) * g.chunk,
                        g.chunk);
        copy_stream_fence();
        atomic_store(&g.made, i + 1);
    }
    return NULL;
}

static void *receiver(void *arg)
{
    (void)arg;
    for (uint32_t i = 0; i < g.n; i++) {
        while (atomic_load(&g.made) <= i)
            ;
        copy_stream_run(g.dst + (i % g.buf_chunks) * g.chunk, g.ring + (i % g.slots) * g.chunk,
                        g.chunk);
        copy_stream_fence();
        atomic_store(&g.taken, i + 1);
    }
    return NULL;
}

static uint8_t *region(uint64_t n)
{
    /* shared memory, as memfd pools and the arena are (no huge pages), faulted in first */
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    memset(p, 0x5a, n);
    return p;
}

int main(int argc, char **argv)
{
    uint64_t chunk = argc > 1 ? strtoull(argv[1], NULL, 0) : 32ull << 20;
    uint32_t slots = argc > 2 ? (uint32_t)strtoul(argv[2], NULL, 0) : 16;
    uint64_t buffer = argc > 3 ? strtoull(argv[3], NULL, 0) : 1ull << 30;
    uint32_t rounds = argc > 4 ? (uint32_t)strtoul(argv[4], NULL, 0) : 5;
    if (chunk < 4096 || chunk > (1ull << 30) || slots < 2 || slots > 64 || buffer < chunk ||
        buffer > (16ull << 30) || rounds == 0 || rounds > 100) {
        fprintf(stderr, "usage: bench_twocopy [CHUNK 4KiB..1GiB [SLOTS 2..64 [BUFFER >= CHUNK, "
                        "<= 16GiB [ROUNDS 1..100]]]]\n");
        return 2;
    }
    g.chunk = chunk;
    g.slots = slots;
    g.buf_chunks = buffer / chunk;
    g.n = (uint32_t)(3 * g.buf_chunks); /* each buffer byte three times a round */
    g.src = region(g.buf_chunks * chunk);
    g.dst = region(g.buf_chunks * chunk);
    g.ring = region((uint64_t)slots * chunk);
    uint8_t *hot = region(chunk);
    if (!g.src || !g.dst || !g.ring || !hot) {
        fprintf(stderr, "bench_twocopy: out of memory\n");
        return 1;
    }
    double best_pipe = 0, best_one = 0;
    for (uint32_t r = 0; r < rounds; r++) { /* alternated, so load moves both alike */
        double t0 = now();
        for (uint32_t i = 0; i < 3 * 16; i++)
            memcpy(g.ring, hot, chunk); /* ucx_perftest's put: one buffer into one, in cache */
        double one = 3.0 * 16 * (double)chunk / (now() - t0) / 1e9;
        atomic_store(&g.made, 0);
        atomic_store(&g.taken, 0);
        pthread_t a, b;
        t0 = now();
        if (pthread_create(&a, NULL, sender, NULL) || pthread_create(&b, NULL, receiver, NULL)) {
            fprintf(stderr, "bench_twocopy: pthread_create failed\n");
            return 1;
        }
        pthread_join(a, NULL);
        pthread_join(b, NULL);
        double pipe = (double)g.n * (double)chunk / (now() - t0) / 1e9;
        best_one = one > best_one ? one : best_one;
        best_pipe = pipe > best_pipe ? pipe : best_pipe;
    }
    printf("{\"chunk\": %llu, \"slots\": %u, \"buffer\": %llu, \"kernel\": \"%s\", "
           "\"one_copy_in_cache_gbps\": %.2f, \"two_copy_pipeline_gbps\": %.2f, \"ratio\": %.2f}\n",
           (unsigned long long)chunk, slots, (unsigned long long)(g.buf_chunks * chunk),
           copy_stream_kernel(), best_one, best_pipe, best_pipe / best_one);
    return 0;
}
