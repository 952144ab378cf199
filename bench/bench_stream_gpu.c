/* bench_stream_gpu.c: a streamed SEND with CUDA-event readiness on the same daemon's GPU path
 * (issue 28). One context rank (GPU --ctx-device) and one generation rank (GPU --gen-device) of
 * a preset model, TP1, cudaMalloc pools registered by IPC handle at one kvferryd (--sock). The
 * prefill is simulated on one stream: per layer a kernel holding --spin-blocks SMs (default:
 * all of the context GPU's) for --layer-us. Per repetition, each mode in turn (same run):
 *   prefill: the prefill alone (no hooks)
 *   hooks:   the prefill with the engine's per-layer hook: cudaEventRecord of a ring's next
 *            interprocess event and kvf_send_ready_event, on a streaming SEND nobody reads
 *            (cancelled after): the hooks' cost to the prefill alone
 *   after:   the RECV posted, the prefill, cudaStreamSynchronize, then kvf_send: today's SEND
 *   stream:  kvf_send_begin and the RECV posted, the prefill with the hooks: the daemon's copy
 *            of each layer waits for its event on the GPU, the prefill never synchronizes
 * prefill_ms: its start to the GPU's end of its last layer (a timing event the bench waits for,
 * not the engine); total_ms: start to the generation rank's DONE; tail_ms: the last layer's end
 * to DONE. One JSON line per run; the summary (medians) gives the ratios and the goals:
 * streamed total <= 1.05 x prefill, tail <= one layer's share at the `after` rate + 0.3 ms,
 * hooks within 2% of the prefill alone.
 * Usage: bench_stream_gpu --sock P [--model kimi-linear-48b] [--tokens 4096] [--layer-us 2000]
 *        [--reps 5] [--ring N (default: one per layer)] [--ctx-device 0] [--gen-device 0]
 *        [--spin-blocks N] */
#include <stdio.h>
#include <stdlib.h>

#ifndef KVF_HAVE_CUDA
int main(void)
{
    printf("bench_stream_gpu: no CUDA in this build\n");
    return 0;
}
#else

#include <cuda_runtime.h>
#include <errno.h>
#include <getopt.h>
#include <string.h>
#include <time.h>

#include "cuda_pool.h"
#include "kvf_kernels.h"
#include "kvferry.h"
#include "layout.h"
#include "preset.h"
#include "bench_stream.h"

#define RING_MAX KVF_EVENTS_MAX

struct rank {
    struct layout l;
    struct kvf_client *c;
    struct cuda_pool *pool[LAYOUT_MAX_POOLS];
    uint32_t counts[LAYOUT_MAX_GROUPS];
    uint32_t ids[1 << 16];
    uint32_t n_ids;
};

#define CU(call)                                                                               \
    do {                                                                                       \
        cudaError_t e_ = (call);                                                               \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "bench_stream_gpu: %s: %s\n", #call, cudaGetErrorString(e_));      \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* Rank of spec as instance inst on GPU dev, registered at sock; the first `blocks` blocks and
 * slot 0 are its request's items. */
static void rank_up(struct rank *r, const char *spec, const char *inst, layout_role_t role,
                    const char *sock, int dev, uint32_t blocks)
{
    char err[512];
    bs_layout(spec, inst, role, &r->l);
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    for (uint32_t i = 0; i < r->l.n_pools; i++) {
        r->l.pools[i].kind = POOL_CUDA;
        r->l.pools[i].device = dev;
        int rc = cuda_pool_new(dev, r->l.pools[i].bytes, &r->pool[i], err, sizeof err);
        if (rc)
            bs_die(err, rc);
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_CUDA, .device = dev,
                                     .bytes = r->l.pools[i].bytes};
        memcpy(pools[i].ipc_handle, r->pool[i]->handle, sizeof pools[i].ipc_handle);
    }
    bs_items(&r->l, blocks, r->counts, r->ids, &r->n_ids);
    r->c = bs_register(sock, NULL, &r->l, pools);
}

struct run {
    double prefill_ms, total_ms, tail_ms;
    uint64_t bytes;
};

struct bench {
    struct rank *c, *g;
    cudaStream_t s;
    cudaEvent_t ring[RING_MAX], end;
    uint32_t n_ring, blocks;
    uint64_t layer_ns;
};

enum mode { PREFILL, HOOKS, AFTER, STREAM, N_MODES };
static const char *const mode_names[N_MODES] = {"prefill", "hooks", "after", "stream"};

static struct run one(struct bench *b, enum mode m, uint64_t req)
{
    struct rank *c = b->c, *g = b->g;
    uint32_t n = c->l.n_layers_total;
    bool hooks = m == HOOKS || m == STREAM, recv = m == AFTER || m == STREAM;
    struct kvf_recv_args a = {.req_id = req, .ctx_instance = c->l.instance, .ctx_dp_rank = -1,
                              .n_groups = g->l.n_groups, .counts = g->counts, .ids = g->ids};
    int rc;
    if (hooks && (rc = kvf_send_begin(c->c, req, c->l.n_groups, c->counts, c->ids, 1)))
        bs_die("kvf_send_begin", rc);
    if (recv && (rc = kvf_recv(g->c, &a)))
        bs_die("kvf_recv", rc);
    double t0 = bs_now_ms();
    for (uint32_t id = 0; id < n; id++) {
        if ((rc = kvk_spin(b->layer_ns, b->blocks, b->s)))
            bs_die(kvk_last_error(), rc);
        if (!hooks)
            continue;
        CU(cudaEventRecord(b->ring[id % b->n_ring], b->s)); /* the engine's hook, no sync */
        if ((rc = kvf_send_ready_event(c->c, req, id + 1, id % b->n_ring)))
            bs_die("kvf_send_ready_event", rc);
    }
    CU(cudaEventRecord(b->end, b->s));
    CU(cudaEventSynchronize(b->end)); /* the bench's measurement, not the engine's wait */
    double last = bs_now_ms();
    struct run r = {.prefill_ms = last - t0, .total_ms = last - t0};
    if (m == AFTER && (rc = kvf_send(c->c, req, c->l.n_groups, c->counts, c->ids, 1)))
        bs_die("kvf_send", rc);
    if (m == HOOKS) { /* nobody reads it: cancelled */
        if ((rc = kvf_cancel(c->c, req)))
            bs_die("kvf_cancel", rc);
        bs_wait_end(c->c, req, NULL, true);
    }
    if (recv) {
        double done = bs_wait_end(g->c, req, &r.bytes, false);
        bs_wait_end(c->c, req, NULL, false);
        r.total_ms = done - t0;
        r.tail_ms = done - last;
    }
    return r;
}

int main(int argc, char **argv)
{
    bs_name = "bench_stream_gpu";
    const char *sock = NULL, *model = "kimi-linear-48b";
    unsigned tokens = 4096, layer_us = 2000, reps = 5, ring = 0;
    int cdev = 0, gdev = 0, blocks = 0;
    static const struct option opts[] = {
        {"sock", 1, 0, 's'},       {"model", 1, 0, 'm'},      {"tokens", 1, 0, 't'},
        {"layer-us", 1, 0, 'u'},   {"reps", 1, 0, 'r'},       {"ring", 1, 0, 'R'},
        {"ctx-device", 1, 0, 'c'}, {"gen-device", 1, 0, 'g'}, {"spin-blocks", 1, 0, 'b'},
        {0, 0, 0, 0}};
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (o) {
        case 's': sock = optarg; break;
        case 'm': model = optarg; break;
        case 't': tokens = (unsigned)atoi(optarg); break;
        case 'u': layer_us = (unsigned)atoi(optarg); break;
        case 'r': reps = (unsigned)atoi(optarg); break;
        case 'R': ring = (unsigned)atoi(optarg); break;
        case 'c': cdev = atoi(optarg); break;
        case 'g': gdev = atoi(optarg); break;
        case 'b': blocks = atoi(optarg); break;
        default: fprintf(stderr, "usage: see bench/bench_stream_gpu.c\n"); return 2;
        }
    }
    if (reps > 64)
        reps = 64;
    if (!sock || !tokens || !reps || ring > RING_MAX)
        return fprintf(stderr, "bench_stream_gpu: --sock is needed; --ring 1..%d\n", RING_MAX), 2;
    if (blocks <= 0)
        CU(cudaDeviceGetAttribute(&blocks, cudaDevAttrMultiProcessorCount, cdev));
    uint32_t nblk = (tokens + 63) / 64;
    char spec[256];
    snprintf(spec, sizeof spec, "%s:tp=1,blocks=%u,slots=1", model, nblk);
    static struct rank c, g;
    rank_up(&c, spec, "ctx", ROLE_CONTEXT, sock, cdev, nblk);
    rank_up(&g, spec, "gen", ROLE_GENERATION, sock, gdev, nblk);
    if (ring == 0) /* one event per layer: none is re-recorded before its READY is handled */
        ring = c.l.n_layers_total < RING_MAX ? c.l.n_layers_total : RING_MAX;
    struct bench b = {.c = &c, .g = &g, .n_ring = ring, .blocks = (uint32_t)blocks,
                      .layer_ns = (uint64_t)layer_us * 1000};
    CU(cudaSetDevice(cdev));
    CU(cudaStreamCreateWithFlags(&b.s, cudaStreamNonBlocking));
    CU(cudaEventCreateWithFlags(&b.end, cudaEventBlockingSync | cudaEventDisableTiming));
    uint8_t handles[RING_MAX * 64];
    for (uint32_t i = 0; i < ring; i++) {
        CU(cudaEventCreateWithFlags(&b.ring[i], cudaEventInterprocess | cudaEventDisableTiming));
        CU(cudaIpcGetEventHandle((cudaIpcEventHandle_t *)(handles + 64 * i), b.ring[i]));
    }
    char err[512];
    int rc = kvf_register_events(c.c, handles, ring, err, sizeof err);
    if (rc)
        bs_die(err, rc);
    uint64_t bytes = 0, req = 1;
    struct run *runs = calloc((size_t)reps * N_MODES, sizeof *runs);
    if (!runs)
        bs_die("out of memory", -ENOMEM);
    one(&b, AFTER, req++); /* warm: programs, mappings, kernels loaded */
    one(&b, STREAM, req++);
    for (unsigned k = 0; k < reps; k++)
        for (int m = 0; m < N_MODES; m++) {
            struct run r = one(&b, (enum mode)m, req++);
            printf("{\"path\":\"local-gpu\",\"model\":\"%s\",\"tokens\":%u,\"layers\":%u,"
                   "\"layer_ms\":%.3f,\"spin_blocks\":%d,\"ctx_device\":%d,\"gen_device\":%d,"
                   "\"mode\":\"%s\",\"rep\":%u,\"prefill_ms\":%.3f,\"total_ms\":%.3f,"
                   "\"tail_ms\":%.3f,\"bytes\":%llu}\n",
                   model, tokens, c.l.n_layers_total, layer_us / 1e3, blocks, cdev, gdev,
                   mode_names[m], k, r.prefill_ms, r.total_ms, r.tail_ms,
                   (unsigned long long)r.bytes);
            fflush(stdout);
            if (r.bytes)
                bytes = r.bytes;
            runs[(size_t)m * reps + k] = r;
        }
    double med[N_MODES][3];
    for (int m = 0; m < N_MODES; m++)
        for (int f = 0; f < 3; f++) {
            double v[64];
            for (unsigned k = 0; k < reps; k++) {
                const struct run *r = &runs[(size_t)m * reps + k];
                v[k] = f == 0 ? r->prefill_ms : f == 1 ? r->total_ms : r->tail_ms;
            }
            med[m][f] = bs_median(v, reps);
        }
    free(runs);
    double rate = bytes / (med[AFTER][2] * 1e6);             /* GB/s of the SEND after prefill */
    double share = bytes / (double)c.l.n_layers_total / 1e6; /* MB a layer */
    printf("{\"path\":\"local-gpu\",\"model\":\"%s\",\"tokens\":%u,\"summary\":true,"
           "\"reps\":%u,\"bytes\":%llu,\"ring\":%u,\"prefill_ms\":%.3f,\"hooks_prefill_ms\":%.3f,"
           "\"hooks_over_prefill\":%.4f,\"after_total_ms\":%.3f,\"after_tail_ms\":%.3f,"
           "\"rate_gbps\":%.3f,\"stream_prefill_ms\":%.3f,\"stream_total_ms\":%.3f,"
           "\"stream_tail_ms\":%.3f,\"stream_over_prefill\":%.4f,\"after_over_prefill\":%.4f,"
           "\"layer_share_mb\":%.3f,\"goal_tail_ms\":%.3f}\n",
           model, tokens, reps, (unsigned long long)bytes, ring, med[PREFILL][0],
           med[HOOKS][0], med[HOOKS][0] / med[PREFILL][0], med[AFTER][1], med[AFTER][2], rate,
           med[STREAM][0], med[STREAM][1], med[STREAM][2], med[STREAM][1] / med[PREFILL][0],
           med[AFTER][1] / med[PREFILL][0], share, share / rate + 0.3);
    for (uint32_t i = 0; i < ring; i++)
        cudaEventDestroy(b.ring[i]);
    kvf_close(c.c);
    kvf_close(g.c);
    return 0;
}

#endif
