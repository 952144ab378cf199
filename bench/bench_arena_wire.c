/* bench_arena_wire.c: cost of the credit bookkeeping and of the control codec, per operation,
 * so the engine's per-chunk overhead can be compared with a chunk's transfer time
 * (a 32 MiB chunk at 10 GB/s is 3.4 ms). Single thread, CPU only, about one second. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "arena.h"
#include "wire.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static struct arena *g_arena;
static uint64_t g_landed;

/* A zero-latency sender: every grant is reported and released at once, and the window refilled. */
static void on_grant(struct arena_resv *r, const struct arena_grant *g, uint32_t n, void *user)
{
    (void)user;
    for (uint32_t i = 0; i < n; i++) {
        if (arena_report(g_arena, r, g[i].slot, g[i].generation, g[i].ext_off, g[i].length, NULL) ||
            arena_release(g_arena, r, g[i].slot, g[i].generation))
            abort();
        g_landed += g[i].length;
    }
    if (r->granted < r->bytes && r->state == RESV_IDLE && arena_want(g_arena, r, 4, 0) < 0)
        abort();
}

static void on_timeout(struct arena_resv *r, void *user)
{
    (void)r, (void)user;
    abort();
}

static void bench_arena(void)
{
    struct arena_params p = {.size = 4ull << 30, .chunk = 32u << 20, .reserve_timeout_ms = 1000,
                             .max_waiters = 1024, .max_credits = 8, .on_grant = on_grant,
                             .on_timeout = on_timeout};
    if (arena_new(&p, &g_arena))
        abort();
    enum { NREQ = 64, CHUNKS = 2000 };
    static struct arena_resv rs[NREQ];
    double t0 = now_s();
    for (int i = 0; i < NREQ; i++) {
        arena_resv_init(&rs[i], (uint64_t)i, 1, (uint64_t)CHUNKS * p.chunk);
        if (arena_want(g_arena, &rs[i], 4, 0) < 0)
            abort();
    }
    double dt = now_s() - t0;
    struct arena_stats st;
    arena_get_stats(g_arena, &st);
    printf("arena: %llu grant+report+release cycles in %.3f s: %.0f ns per chunk "
           "(%d requests x %d chunks of 32 MiB)\n",
           (unsigned long long)st.grants_total, dt, dt * 1e9 / (double)st.grants_total, NREQ, CHUNKS);
    if (g_landed != (uint64_t)NREQ * CHUNKS * p.chunk)
        abort();
    for (int i = 0; i < NREQ; i++)
        arena_resv_close(g_arena, &rs[i], false);
    g_arena = arena_free(g_arena);
}

static void bench_codec(const char *name, const struct wire_msg *m, int iters)
{
    uint8_t *buf = malloc(WIRE_MSG_MAX);
    size_t len = 0;
    if (!buf)
        abort();
    double t0 = now_s();
    for (int i = 0; i < iters; i++)
        if (wire_encode_into(m, buf, WIRE_MSG_MAX, &len))
            abort();
    double te = now_s() - t0;
    t0 = now_s();
    for (int i = 0; i < iters; i++) {
        struct wire_msg d;
        if (wire_decode(buf, len, &d))
            abort();
        wire_msg_done(&d);
    }
    double td = now_s() - t0;
    printf("wire %-9s %8zu bytes: encode %9.0f ns (%.2f GB/s), decode %9.0f ns (%.2f GB/s)\n", name,
           len, te * 1e9 / iters, (double)len * iters / te / 1e9, td * 1e9 / iters,
           (double)len * iters / td / 1e9);
    free(buf);
}

int main(void)
{
    bench_arena();
    struct wire_msg m;
    memset(&m, 0, sizeof(m));
    m.type = WIRE_CHUNK;
    m.u.chunk = (struct wire_chunk){.req_id = 1, .writer = 1, .slot = 3, .generation = 9,
                                    .ext_off = 1ull << 30, .length = 32u << 20};
    bench_codec("CHUNK", &m, 1000000);
    /* RECV_REQ of an 8k-token request with 2 paged groups (128 blocks each) and one state slot */
    static uint32_t ids[128], slot[1] = {5};
    static char json[32 * 1024];
    for (uint32_t i = 0; i < 128; i++)
        ids[i] = 1000 + i * 7;
    memset(json, ' ', sizeof(json));
    json[0] = '{', json[sizeof(json) - 1] = '}';
    memset(&m, 0, sizeof(m));
    m.type = WIRE_RECV_REQ;
    struct wire_recv_req *q = &m.u.recv_req;
    q->req_id = 1, q->table_epoch = 1, q->ctx_dp_rank = -1, q->writer = 0;
    strcpy(q->ctx_instance, "ctx");
    q->gen_json = json, q->gen_json_len = sizeof(json);
    q->n_groups = 3, q->n_ids[0] = 128, q->ids[0] = ids, q->n_ids[1] = 128, q->ids[1] = ids;
    q->n_ids[2] = 1, q->ids[2] = slot;
    q->path = WIRE_PATH_BOUNCE, q->extent_bytes = 649ull << 20, q->n_grants = 4;
    for (uint32_t i = 0; i < 4; i++)
        q->grants[i] = (struct wire_grant){.slot = i, .generation = 1, .offset = (uint64_t)i << 25,
                                           .length = 32u << 20, .ext_off = (uint64_t)i << 25};
    bench_codec("RECV_REQ", &m, 20000);
    /* the largest block list a request may carry */
    uint32_t *big = malloc(PLAN_MAX_IDS * sizeof(uint32_t));
    if (!big)
        abort();
    for (uint32_t i = 0; i < PLAN_MAX_IDS; i++)
        big[i] = i;
    q->n_groups = 1, q->n_ids[0] = PLAN_MAX_IDS, q->ids[0] = big;
    bench_codec("RECV_1M", &m, 20);
    free(big);
    return 0;
}
