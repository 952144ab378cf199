/* check_gpu_events.c: a streamed SEND whose readiness is CUDA interprocess events (issue 28), on
 * a real GPU against real daemons. This process is the context rank and the generation rank
 * (cudaMalloc pools registered by IPC handle); its prefill is simulated on one stream: per
 * layer a spinning kernel (kvk_spin: 50 ms before layer 0, 5 ms before the others), then the
 * layer's final bytes written (cudaMemcpyAsync), then cudaEventRecord of the ring's next event
 * (a ring of 2, re-recorded across layers), then READY naming it, at once: every READY is sent
 * while the first kernel still spins (asserted: its event is not complete then), and the stream
 * is never synchronized. Before each layer is written its bytes in the pools are wrong, so a
 * daemon copy that did not wait on the GPU for the event reads wrong bytes: the generation
 * rank's pools are read back and compared bitwise with the pattern (poison where nothing
 * lands). Same daemon (the streamed GPU copy program) and two daemons (the bounce gather).
 * Bad input on a GPU rank: handles that do not open (BAD_REQUEST naming the event and the
 * CUDA call), events passed twice, a READY naming an index past the ring (BAD_REQUEST naming
 * it), more than KVF_EVENTS_MAX; the daemon serves on: a stream after them is checked bitwise.
 * CK_NOFORK (CUDA does not survive fork; the daemons are fork + exec, which carries no CUDA
 * state). Without CUDA or a GPU: "SKIP: why", exit 77. */
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
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_pool.h"
#include "gputest.h"
#include "integration/remoteutil.h"
#include "kvf_kernels.h"
#include "pattern.h"

#define GE_CFG                                                                                 \
    "deadlines:\n  send_wait: 60s\n  transfer: 60s\n  lookup: 60s\n  stream_idle: 30s\n"      \
    "arena:\n  chunk: 64KiB\n"
#define GE_RING 2
#define GE_SPIN0_NS 50000000ull /* before layer 0: every READY is sent while it spins */
#define GE_SPIN_NS 5000000ull   /* before each other layer */

/* One rank of this process with GPU pools: r (its layout, ids, host mirror) and the pools. */
struct grank {
    struct ru_rank *r;
    struct cuda_pool *pool[LAYOUT_MAX_POOLS];
    uint8_t *final[LAYOUT_MAX_POOLS]; /* context: device copy of the final bytes */
};

static void grank_open(struct grank *g, struct ru_rank *r, const struct ru_daemon *d,
                       const char *home, uint8_t fill)
{
    memset(g, 0, sizeof *g);
    g->r = r;
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    char err[512];
    for (uint32_t p = 0; p < r->l.n_pools; p++) {
        r->l.pools[p].kind = POOL_CUDA;
        r->l.pools[p].device = 0;
        pools[p] = (struct kvf_pool){.kind = KVF_POOL_CUDA, .device = 0,
                                     .bytes = r->l.pools[p].bytes};
        if (!r->l.pools[p].bytes)
            continue; /* an empty pool is not mapped */
        ck_assert_msg(cuda_pool_new(0, r->l.pools[p].bytes, &g->pool[p], err, sizeof err) == 0,
                      "%s", err);
        CK_CUDA(cudaMemset(g->pool[p]->dptr, fill, r->l.pools[p].bytes));
        memcpy(pools[p].ipc_handle, g->pool[p]->handle, sizeof pools[p].ipc_handle);
    }
    char *json = layout_to_json(&r->l);
    ck_assert_ptr_nonnull(json);
    struct kvf_options o = {.no_reconnect = 1, .name = r->l.instance, .home = home};
    ck_assert_int_eq(kvf_connect(d->worker, &o, &r->c), 0);
    ck_assert_msg(kvf_register(r->c, json, pools, r->l.n_pools, err, sizeof err) == 0, "%s", err);
    free(json);
}

/* The daemon's open GPU mappings (status gpu.mappings.count), or -1. */
static long long mappings(const struct ru_daemon *d)
{
    json_t *r = ru_ctl(d, "status");
    json_t *v = json_object_get(json_object_get(json_object_get(r, "gpu"), "mappings"), "count");
    long long n = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
    json_decref(r);
    return n;
}

/* The exporter frees its memory and events only once no daemon maps them (cuda_pool.h). */
static void wait_unmapped(const struct ru_daemon *d)
{
    uint64_t end = ru_now_ms() + 10000;
    while (mappings(d) != 0 && ru_now_ms() < end)
        ru_sleep_ms(10);
    ck_assert_int_eq(mappings(d), 0);
}

static void grank_close(struct grank *g)
{
    for (uint32_t p = 0; p < g->r->l.n_pools; p++) {
        g->pool[p] = cuda_pool_free(g->pool[p]);
        if (g->final[p])
            CK_CUDA(cudaFree(g->final[p]));
        g->final[p] = NULL;
    }
}

/* The context rank's final bytes (its shard of the pattern) on the device, beside its pools. */
static void final_upload(struct grank *g, uint64_t seed)
{
    struct ru_rank *r = g->r;
    pattern_fill(&r->l, &r->mem, &r->pids, 0, seed);
    for (uint32_t p = 0; p < r->l.n_pools; p++) {
        CK_CUDA(cudaMalloc((void **)&g->final[p], r->l.pools[p].bytes ? r->l.pools[p].bytes : 1));
        CK_CUDA(cudaMemcpy(g->final[p], r->mem.base[p], r->l.pools[p].bytes,
                           cudaMemcpyHostToDevice));
    }
}

/* Layer id's regions of the request, final bytes into the pools, on stream. */
static void write_layer(struct grank *g, uint32_t id, cudaStream_t s)
{
    const struct ru_rank *r = g->r;
    for (uint32_t gi = 0; gi < r->l.n_groups; gi++) {
        const struct layout_group *gg = &r->l.groups[gi];
        for (uint32_t li = 0; li < gg->n_layers; li++) {
            if (gg->layers[li] != id)
                continue;
            for (uint32_t v = 0; v < gg->n_views; v++)
                for (uint32_t k = 0; k < r->pids.n[gi]; k++) {
                    struct layout_loc at = layout_region_at(&r->l, &gg->views[v], li,
                                                            r->pids.ids[gi][k]);
                    CK_CUDA(cudaMemcpyAsync((uint8_t *)g->pool[at.pool]->dptr + at.off,
                                            g->final[at.pool] + at.off,
                                            gg->views[v].region_bytes, cudaMemcpyDeviceToDevice,
                                            s));
                }
        }
    }
}

/* A ring of n interprocess events and their handles. */
static void ring_make(cudaEvent_t *ev, uint8_t *handles, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++) {
        CK_CUDA(cudaEventCreateWithFlags(&ev[i], cudaEventInterprocess | cudaEventDisableTiming));
        cudaIpcEventHandle_t h;
        CK_CUDA(cudaIpcGetEventHandle(&h, ev[i]));
        memcpy(handles + 64 * i, &h, 64);
    }
}

static void expect_failed(struct ru_rank *r, uint64_t req, kvf_error_t err, const char *has)
{
    struct kvf_event ev;
    int k = ru_wait_event(r, req, &ev, 10000);
    ck_assert_msg(k == KVF_EV_FAILED && ev.error == (int32_t)err && strstr(ev.message, has),
                  "request %llu: event %d %s: %s (want FAILED %s naming \"%s\")",
                  (unsigned long long)req, k, kvf_error_to_string(ev.error), ev.message,
                  kvf_error_to_string(err), has);
}

/* Streams request req from ctx (ring ev) to gen as the file's header says; checks every byte. */
static void stream_checked(struct grank *ctx, struct grank *gen, const cudaEvent_t *ev,
                           uint64_t req, uint64_t seed, const char *home, const char *what)
{
    struct ru_rank *c = ctx->r, *g = gen->r;
    uint32_t n = c->l.n_layers_total;
    final_upload(ctx, seed);
    cudaStream_t s;
    CK_CUDA(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    ck_assert_int_eq(kvf_send_begin(c->c, req, c->l.n_groups, c->counts, c->ids, 1), 0);
    struct kvf_recv_args a;
    ru_recv_args(g, req, c->l.instance, home, &a);
    ck_assert_int_eq(kvf_recv(g->c, &a), 0);
    uint64_t t0 = ru_now_ms();
    for (uint32_t l = 0; l < n; l++) {
        ck_assert_int_eq(kvk_spin(l ? GE_SPIN_NS : GE_SPIN0_NS, 1, s), 0);
        write_layer(ctx, l, s);
        CK_CUDA(cudaEventRecord(ev[l % GE_RING], s));
        ck_assert_int_eq(kvf_send_ready_event(c->c, req, l + 1, l % GE_RING), 0);
    }
    /* every READY left while layer 0's kernel still spins: the daemon had to wait on the GPU */
    cudaError_t q = cudaEventQuery(ev[0]);
    ck_assert_msg(q == cudaErrorNotReady, "%s: the first event completed before the READYs were "
                  "sent (%s): the case proves nothing", what, cudaGetErrorName(q));
    struct kvf_event e;
    int k = ru_wait_event(g, req, &e, 30000);
    ck_assert_msg(k == KVF_EV_DONE, "%s: %d %s: %s", what, k, kvf_error_to_string(e.error),
                  e.message);
    uint64_t took = ru_now_ms() - t0, min_ms = (GE_SPIN0_NS + (n - 1) * GE_SPIN_NS) / 1000000;
    ck_assert_int_eq(ru_wait_event(c, req, &e, 30000), KVF_EV_SENT);
    ck_assert_msg(took + 1 >= min_ms, "%s: DONE %llu ms after the first READY, before the "
                  "prefill's %llu ms of kernels ended", what, (unsigned long long)took,
                  (unsigned long long)min_ms);
    for (uint32_t p = 0; p < g->l.n_pools; p++)
        if (gen->pool[p])
            CK_CUDA(cudaMemcpy(g->mem.base[p], gen->pool[p]->dptr, g->l.pools[p].bytes,
                               cudaMemcpyDeviceToHost));
    ru_assert_parity(g, 0, seed, what);
    printf("%s: %u layers, DONE %llu ms after the READYs (kernels: %llu ms), bitwise OK\n", what,
           n, (unsigned long long)took, (unsigned long long)min_ms);
    CK_CUDA(cudaStreamDestroy(s));
    for (uint32_t p = 0; p < c->l.n_pools; p++) {
        CK_CUDA(cudaFree(ctx->final[p]));
        ctx->final[p] = NULL;
    }
}

static void run(bool two_daemons, bool bad_input)
{
    struct two t;
    two_start(&t, GE_CFG, GE_CFG, NULL);
    struct ru_inst ci, gi;
    uint64_t rng = 28;
    ru_inst_init(&ci, "tiny", "ctx", ROLE_CONTEXT, 4, &rng, 0);
    ru_inst_init(&gi, "tiny", "gen", ROLE_GENERATION, 4, &rng, RU_POISON);
    struct grank ctx, gen;
    grank_open(&ctx, &ci.r[0], &t.a, NULL, 0x3c);
    grank_open(&gen, &gi.r[0], two_daemons ? &t.b : &t.a, NULL, RU_POISON);
    cudaEvent_t ev[GE_RING];
    uint8_t h[(KVF_EVENTS_MAX + 1) * 64];
    char err[600] = "";
    if (bad_input) {
        memset(h, 0x77, sizeof h);
        ck_assert_int_eq(kvf_register_events(ci.r[0].c, h, KVF_EVENTS_MAX + 1, err, sizeof err),
                         -EINVAL);
        ck_assert_int_eq(kvf_register_events(ci.r[0].c, h, 2, err, sizeof err), -EINVAL);
        ck_assert_msg(strstr(err, "BAD_REQUEST") && strstr(err, "event 0 of 2") &&
                          strstr(err, "cudaIpcOpenEventHandle"), "%s", err);
        printf("handles that do not open: %s\n", err);
    }
    ring_make(ev, h, GE_RING);
    ck_assert_msg(kvf_register_events(ci.r[0].c, h, GE_RING, err, sizeof err) == 0, "%s", err);
    if (bad_input) {
        ck_assert_int_eq(kvf_register_events(ci.r[0].c, h, GE_RING, err, sizeof err), -EALREADY);
        ck_assert_int_eq(kvf_send_begin(ci.r[0].c, 9, ci.r[0].l.n_groups, ci.r[0].counts,
                                        ci.r[0].ids, 1), 0);
        ck_assert_int_eq(kvf_send_ready_event(ci.r[0].c, 9, 1, GE_RING), 0);
        expect_failed(&ci.r[0], 9, KVF_E_BAD_REQUEST, "names CUDA event 2, but context rank 0 "
                      "passed 2 (0..1)");
    }
    const char *home = two_daemons ? t.a.addr : NULL;
    stream_checked(&ctx, &gen, ev, 1, 2801, home, two_daemons ? "bounce" : "same daemon");
    stream_checked(&ctx, &gen, ev, 2, 2802, home, two_daemons ? "bounce again" : "again");
    ci.r[0].c = kvf_close(ci.r[0].c);
    gi.r[0].c = kvf_close(gi.r[0].c);
    wait_unmapped(&t.a); /* the rank left: its mappings and events closed */
    wait_unmapped(&t.b);
    grank_close(&gen);
    grank_close(&ctx);
    for (int i = 0; i < GE_RING; i++)
        CK_CUDA(cudaEventDestroy(ev[i]));
    ru_inst_free(&gi);
    ru_inst_free(&ci);
    two_stop(&t, 1);
}

START_TEST(gpu_events_same_daemon_copy_waits_on_the_gpu_bitwise)
{
    run(false, false);
}
END_TEST

START_TEST(gpu_events_bounce_gather_waits_on_the_gpu_bitwise)
{
    run(true, false);
}
END_TEST

START_TEST(gpu_events_bad_input_refused_naming_it_and_the_daemon_serves_on)
{
    run(false, true);
}
END_TEST

static int probe(char *why, size_t len)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n == 0) {
        snprintf(why, len, "%s", e != cudaSuccess ? cudaGetErrorString(e) : "no CUDA device");
        return 0;
    }
    return n;
}

int main(void)
{
    char why[256];
    pid_t p = fork(); /* the probe initialises CUDA: in a child, so daemons start from a clean
                       * process */
    if (p == 0)
        _exit(probe(why, sizeof why) > 0 ? 0 : 1);
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        probe(why, sizeof why);
        printf("SKIP: no GPU: %s\n", why);
        return 77;
    }
    Suite *s = suite_create("gpu_events");
    TCase *tc = tcase_create("events");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, gpu_events_same_daemon_copy_waits_on_the_gpu_bitwise);
    tcase_add_test(tc, gpu_events_bounce_gather_waits_on_the_gpu_bitwise);
    tcase_add_test(tc, gpu_events_bad_input_refused_naming_it_and_the_daemon_serves_on);
    suite_add_tcase(s, tc);
    return gt_run_nofork(s);
}

#endif
