/* bench_copyeng.c: the copy engine (daemon/copyeng.h) against its ceiling measured in the same
 * run: T threads each memcpy'ing 1/T of the same bytes (pthreads, no engine). The program is
 * the same-daemon path's shape: RUN-byte runs scattered over two source pools into two
 * destination pools, BYTES in all. Prints one JSON object with both figures and their ratio,
 * best of ROUNDS each, alternating (GB/s = 1e9 B/s).
 *   build/bench/bench_copyeng [THREADS [BYTES [RUN [ROUNDS]]]]   (0 threads: one per CPU) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "copyeng.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

struct slice {
    uint8_t *d;
    const uint8_t *s;
    uint64_t n;
};

static void *memcpy_thread(void *arg)
{
    struct slice *s = arg;
    memcpy(s->d, s->s, s->n);
    return NULL;
}

static double memcpy_round(uint8_t *dst, const uint8_t *src, uint64_t bytes, uint32_t t)
{
    pthread_t th[COPYENG_MAX_THREADS];
    struct slice sl[COPYENG_MAX_THREADS];
    double t0 = now_s();
    for (uint32_t i = 0; i < t; i++) {
        uint64_t lo = bytes * i / t, hi = bytes * (i + 1) / t;
        sl[i] = (struct slice){dst + lo, src + lo, hi - lo};
        pthread_create(&th[i], NULL, memcpy_thread, &sl[i]);
    }
    for (uint32_t i = 0; i < t; i++)
        pthread_join(th[i], NULL);
    return bytes / (now_s() - t0) / 1e9;
}

static int done;
static void on_done(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j, (void)d, (void)user;
    done = 1;
}

int main(int argc, char **argv)
{
    uint32_t t = argc > 1 ? (uint32_t)atoi(argv[1]) : 0;
    uint64_t bytes = argc > 2 ? strtoull(argv[2], NULL, 0) : 512ull << 20;
    uint64_t run = argc > 3 ? strtoull(argv[3], NULL, 0) : 64u << 10;
    int rounds = argc > 4 ? atoi(argv[4]) : 5;
    if (!t)
        t = copyeng_default_threads();
    if (t > COPYENG_MAX_THREADS || run == 0 || bytes < 4 * run || rounds < 1) {
        fprintf(stderr, "usage: bench_copyeng [THREADS [BYTES [RUN [ROUNDS]]]]\n");
        return 2;
    }
    uint64_t pool = bytes / 2, n_runs = bytes / run;
    bytes = n_runs * run;
    struct copy_mem src = {.n = 2}, dst = {.n = 2};
    for (int i = 0; i < 2; i++) {
        src.base[i] = malloc(pool + run);
        dst.base[i] = malloc(pool + run);
        src.size[i] = dst.size[i] = pool + run;
        if (!src.base[i] || !dst.base[i])
            return 1;
        memset(src.base[i], 1 + i, pool + run);
        memset(dst.base[i], 0, pool + run);
    }
    struct copy_op *ops = calloc(n_runs, sizeof *ops);
    uint64_t per = pool / run, s = 88172645463325252ull;
    for (uint64_t k = 0; k < n_runs; k++) { /* source runs shuffled, destination in order */
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint64_t from = s % (2 * per);
        ops[k] = (struct copy_op){.src_pool = (uint32_t)(from / per), .dst_pool = (uint32_t)(k / per % 2),
                                  .src_off = from % per * run, .dst_off = k % per * run,
                                  .ext_off = k * run, .len = run, .count = 1};
    }
    uint8_t *mfrom = malloc(bytes), *mto = malloc(bytes);
    memset(mfrom, 3, bytes);
    memset(mto, 0, bytes);
    uv_loop_t loop;
    uv_loop_init(&loop);
    struct copyeng *e = NULL;
    struct copyeng_params p = {.loop = &loop, .threads = t};
    if (copyeng_new(&p, &e) < 0)
        return 1;
    double best_m = 0, best_e = 0;
    for (int r = 0; r < rounds + 1; r++) { /* round 0 warms both up */
        double m = memcpy_round(mto, mfrom, bytes, t);
        struct copyeng_part part = {.kind = COPYENG_DIRECT, .ops = ops, .n_ops = (uint32_t)n_runs,
                                    .src = &src, .dst = &dst};
        done = 0;
        double t0 = now_s();
        copyeng_submit(e, &part, 1, on_done, NULL, NULL);
        while (!done)
            uv_run(&loop, UV_RUN_ONCE);
        double g = bytes / (now_s() - t0) / 1e9;
        if (r > 0) {
            best_m = m > best_m ? m : best_m;
            best_e = g > best_e ? g : best_e;
        }
    }
    printf("{\"threads\": %u, \"bytes\": %llu, \"run_bytes\": %llu, \"memcpy_threads_gbps\": %.2f, "
           "\"copyeng_gbps\": %.2f, \"ratio\": %.2f}\n", t, (unsigned long long)bytes,
           (unsigned long long)run, best_m, best_e, best_e / best_m);
    copyeng_free(e);
    uv_run(&loop, UV_RUN_DEFAULT);
    uv_loop_close(&loop);
    return 0;
}
