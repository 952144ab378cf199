/* bench_stream.c: a simulated prefill with a known time per layer, and its KV cache moved to a
 * generation rank (issue 28). Registers one context rank (at --ctx-sock) and one generation rank
 * (at --gen-sock; --home: the context daemon's "host:port" when it is another daemon) of a preset
 * model, TP1, sealed memfd pools, then per repetition, each mode in turn (A/B/C in one run):
 *   prefill: the prefill alone, each layer --layer-us of sleep (a GPU computes; the CPU is free)
 *   after:   the RECV posted, the prefill, then kvf_send: today's SEND after the prefill
 *   stream:  kvf_send_begin and the RECV posted, the prefill with kvf_send_ready(id + 1) after
 *            each layer: the transfer behind the prefill
 * and prints one JSON line per run: the mode, prefill_ms (its start to its last layer's end,
 * before that layer's READY), total_ms (its start to the generation rank's DONE), tail_ms (the
 * last layer's end to DONE: READY's write included), bytes. The summary line (medians over the
 * repetitions) compares with the goals: the tail at most one layer's share of the bytes at the
 * rate `after` measured plus 0.3 ms (and the same for the request's own last layer), stream's
 * total against prefill's (and prefill + one layer's transfer).
 * Usage: bench_stream --ctx-sock P --gen-sock P [--home H] [--model kimi-linear-48b]
 *        [--tokens 4096] [--layer-us 2000] [--reps 5] [--path local] */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "kvferry.h"
#include "layout.h"
#include "plan.h"
#include "plan_request.h"
#include "preset.h"
#include "bench_stream.h"

struct rank {
    struct layout l;
    struct kvf_client *c;
    uint32_t counts[LAYOUT_MAX_GROUPS];
    uint32_t ids[1 << 16];
    uint32_t n_ids;
};

static void sleep_until(double ms)
{
    struct timespec t = {.tv_sec = (time_t)(ms / 1e3),
                         .tv_nsec = (long)((ms - (double)(time_t)(ms / 1e3) * 1e3) * 1e6)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &t, NULL) == EINTR) {
    }
}

/* Rank of spec as instance inst, registered at sock: memfd pools (every page written), the
 * first `blocks` blocks and slot 0 as its request's items. */
static void rank_up(struct rank *r, const char *spec, const char *inst, layout_role_t role,
                    const char *sock, const char *home, uint32_t blocks)
{
    bs_layout(spec, inst, role, &r->l);
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    for (uint32_t i = 0; i < r->l.n_pools; i++) {
        int fd = memfd_create(inst, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, (off_t)r->l.pools[i].bytes) < 0)
            bs_die("memfd", -errno);
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
        uint8_t *m = mmap(NULL, r->l.pools[i].bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            bs_die("mmap", -errno);
        memset(m, 0x11, r->l.pools[i].bytes); /* the cache exists: its pages are there */
        munmap(m, r->l.pools[i].bytes);
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_HOST, .device = -1,
                                     .bytes = r->l.pools[i].bytes, .fd = fd};
    }
    bs_items(&r->l, blocks, r->counts, r->ids, &r->n_ids);
    r->c = bs_register(sock, home, &r->l, pools);
}

/* Bytes of the request's last layer (its marks): a hybrid model's last layer may be an attention
 * layer much larger than the average share. */
static double last_layer_mb(const struct rank *c, const struct rank *g)
{
    struct plan_ids cids;
    struct plan_input pin = {.gen = &g->l, .ctx = &c->l, .n_ctx = 1, .ctx_ids = &cids,
                             .ctx_dp_rank = -1};
    plan_ids_of(c->l.n_groups, c->counts, c->ids, &cids);
    plan_ids_of(g->l.n_groups, g->counts, g->ids, &pin.gen_ids);
    struct plan_marks m;
    struct plan_error pe;
    if (plan_marks_build(&pin, NULL, &m, &pe))
        return -1;
    uint32_t n = c->l.n_layers_total;
    double mb = (double)(plan_marks_below(&m, 0, n) - plan_marks_below(&m, 0, n - 1)) / 1e6;
    plan_marks_done(&m);
    return mb;
}

struct run {
    double prefill_ms, total_ms, tail_ms;
    uint64_t bytes;
};

static struct run one(const char *mode, struct rank *c, struct rank *g, const char *ctx_home,
                      uint64_t req, double layer_ms)
{
    uint32_t n = c->l.n_layers_total;
    bool send = strcmp(mode, "prefill") != 0, stream = strcmp(mode, "stream") == 0;
    struct kvf_recv_args a = {.req_id = req, .ctx_instance = c->l.instance, .ctx_dp_rank = -1,
                              .ctx_home = ctx_home, .n_groups = g->l.n_groups,
                              .counts = g->counts, .ids = g->ids};
    int rc;
    if (stream && (rc = kvf_send_begin(c->c, req, c->l.n_groups, c->counts, c->ids, 1)))
        bs_die("kvf_send_begin", rc);
    if (send && (rc = kvf_recv(g->c, &a)))
        bs_die("kvf_recv", rc);
    double t0 = bs_now_ms(), last = t0;
    for (uint32_t id = 0; id < n; id++) {
        sleep_until(t0 + layer_ms * (id + 1));
        last = bs_now_ms(); /* the layer is computed: READY is what the stream adds to it */
        if (stream && (rc = kvf_send_ready(c->c, req, id + 1)))
            bs_die("kvf_send_ready", rc);
    }
    struct run r = {.prefill_ms = last - t0};
    if (send && !stream && (rc = kvf_send(c->c, req, c->l.n_groups, c->counts, c->ids, 1)))
        bs_die("kvf_send", rc);
    if (send) {
        double done = bs_wait_end(g->c, req, &r.bytes, false);
        bs_wait_end(c->c, req, NULL, false);
        r.total_ms = done - t0;
        r.tail_ms = done - last;
    } else {
        r.total_ms = r.prefill_ms;
    }
    return r;
}

int main(int argc, char **argv)
{
    bs_name = "bench_stream";
    const char *csock = NULL, *gsock = NULL, *home = NULL, *model = "kimi-linear-48b",
               *path = "local";
    unsigned tokens = 4096, layer_us = 2000, reps = 5;
    static const struct option opts[] = {
        {"ctx-sock", 1, 0, 'c'}, {"gen-sock", 1, 0, 'g'}, {"home", 1, 0, 'H'},
        {"model", 1, 0, 'm'},    {"tokens", 1, 0, 't'},   {"layer-us", 1, 0, 'u'},
        {"reps", 1, 0, 'r'},     {"path", 1, 0, 'p'},     {0, 0, 0, 0}};
    for (int o; (o = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
        switch (o) {
        case 'c': csock = optarg; break;
        case 'g': gsock = optarg; break;
        case 'H': home = optarg; break;
        case 'm': model = optarg; break;
        case 't': tokens = (unsigned)atoi(optarg); break;
        case 'u': layer_us = (unsigned)atoi(optarg); break;
        case 'r': reps = (unsigned)atoi(optarg); break;
        case 'p': path = optarg; break;
        default: fprintf(stderr, "usage: see bench/bench_stream.c\n"); return 2;
        }
    }
    if (reps > 64)
        reps = 64;
    if (!csock || !gsock || !tokens || !reps)
        return fprintf(stderr, "bench_stream: --ctx-sock and --gen-sock are needed\n"), 2;
    uint32_t blocks = (tokens + 63) / 64;
    char spec[256];
    snprintf(spec, sizeof spec, "%s:tp=1,blocks=%u,slots=1", model, blocks);
    static struct rank c, g;
    rank_up(&c, spec, "ctx", ROLE_CONTEXT, csock, NULL, blocks);
    rank_up(&g, spec, "gen", ROLE_GENERATION, gsock, NULL, blocks);
    const char *modes[] = {"prefill", "after", "stream"};
    double layer_ms = layer_us / 1e3;
    uint64_t bytes = 0, req = 1;
    struct run *runs = calloc((size_t)reps * 3, sizeof *runs);
    if (!runs)
        bs_die("out of memory", -ENOMEM);
    one("after", &c, &g, home, req++, layer_ms); /* warm: the plans, the pages, the link */
    for (unsigned k = 0; k < reps; k++) {
        for (int m = 0; m < 3; m++) {
            struct run r = one(modes[m], &c, &g, home, req++, layer_ms);
            printf("{\"path\":\"%s\",\"model\":\"%s\",\"tokens\":%u,\"layers\":%u,"
                   "\"layer_ms\":%.3f,\"mode\":\"%s\",\"rep\":%u,\"prefill_ms\":%.3f,"
                   "\"total_ms\":%.3f,\"tail_ms\":%.3f,\"bytes\":%llu}\n",
                   path, model, tokens, c.l.n_layers_total, layer_ms, modes[m], k, r.prefill_ms,
                   r.total_ms, r.tail_ms, (unsigned long long)r.bytes);
            fflush(stdout);
            if (r.bytes)
                bytes = r.bytes;
            runs[(size_t)m * reps + k] = r;
        }
    }
    /* medians: a loaded machine (other processes on its cores) gives outliers both ways */
    double med[3][2];
    for (int m = 0; m < 3; m++) {
        struct run *rm = runs + (size_t)m * reps;
        for (int f = 0; f < 2; f++) {
            double v[64];
            for (unsigned k = 0; k < reps; k++)
                v[k] = f ? rm[k].tail_ms : rm[k].total_ms;
            med[m][f] = bs_median(v, reps);
        }
    }
    free(runs);
    double rate = bytes / (med[1][1] * 1e6);                  /* GB/s of the SEND after prefill */
    double share = bytes / (double)c.l.n_layers_total / 1e6;  /* MB a layer */
    double layer_xfer = share / rate;                         /* ms: one layer at that rate */
    double last_mb = last_layer_mb(&c, &g);
    printf("{\"path\":\"%s\",\"model\":\"%s\",\"tokens\":%u,\"summary\":true,\"reps\":%u,"
           "\"bytes\":%llu,\"prefill_ms\":%.3f,\"after_total_ms\":%.3f,\"after_tail_ms\":%.3f,"
           "\"rate_gbps\":%.3f,\"stream_total_ms\":%.3f,\"stream_tail_ms\":%.3f,"
           "\"layer_share_mb\":%.3f,\"goal_tail_ms\":%.3f,\"stream_over_prefill\":%.4f,"
           "\"after_over_prefill\":%.4f,\"goal_total_ms\":%.3f,\"last_layer_mb\":%.3f,"
           "\"goal_tail_last_ms\":%.3f}\n",
           path, model, tokens, reps, (unsigned long long)bytes, med[0][0], med[1][0], med[1][1],
           rate, med[2][0], med[2][1], share, layer_xfer + 0.3, med[2][0] / med[0][0],
           med[1][0] / med[0][0], med[0][0] + layer_xfer, last_mb, last_mb / rate + 0.3);
    kvf_close(c.c);
    kvf_close(g.c);
    return 0;
}
