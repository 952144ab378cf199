/* bench_copy.c: the CPU copy executor against memcpy (make bench-copy). A kimi-k3 request of
 * 8192 tokens at TP1, tpb 64 (state 433.4 MiB + 27 KiB per token: about 649 MiB) is gathered
 * from the context pools into one extent buffer and scattered into the generation pools, with
 * the plan's copy program, and compared with plain memcpy of the same byte count between the
 * same buffers, in the same run (best of N). Block ids in order, then shuffled (the realistic
 * case: one run per block and layer). Prints both ratios (goal >= 0.8). Also times plan_build
 * (the daemons plan every request) and pattern_fill (tests fill GBs with it). The machine is
 * shared: numbers are noisy; best-of-N damps it. Exit 1 if the copy is wrong, else 0. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "copy.h"
#include "pattern.h"
#include "plan.h"
#include "preset.h"

#define TOKENS 8192
#define REPS 9

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

struct side {
    struct layout l;
    struct copy_mem mem;
};

static int side_init(struct side *s, const char *spec, layout_role_t role)
{
    struct preset_spec ps;
    char err[256];
    if (preset_parse(spec, &ps, err, sizeof(err)) ||
        preset_build(&ps, "bench", role, -1, &s->l, err, sizeof(err))) {
        fprintf(stderr, "bench_copy: %s: %s\n", spec, err);
        return -1;
    }
    s->mem.n = s->l.n_pools;
    for (uint32_t p = 0; p < s->l.n_pools; p++) {
        s->mem.size[p] = s->l.pools[p].bytes;
        s->mem.base[p] = malloc(s->mem.size[p] ? s->mem.size[p] : 1);
        if (!s->mem.base[p])
            return -1;
        memset(s->mem.base[p], role == ROLE_CONTEXT ? 0x3c : 0, s->mem.size[p]); /* fault in */
    }
    return 0;
}

static void side_free(struct side *s)
{
    for (uint32_t p = 0; p < s->mem.n; p++)
        free(s->mem.base[p]);
}

/* memcpy of the same byte count between the same buffers: pools <-> extent, pool by pool. */
static void memcpy_pools(struct copy_mem *m, uint8_t *ext, int to_ext)
{
    uint64_t at = 0;
    for (uint32_t p = 0; p < m->n; p++) {
        if (to_ext)
            memcpy(ext + at, m->base[p], m->size[p]);
        else
            memcpy(m->base[p], ext + at, m->size[p]);
        at += m->size[p];
    }
}

static int run(const char *label, struct side *c, struct side *g, const uint32_t *blocks,
               uint32_t n_blocks, uint8_t *ext)
{
    uint32_t slot = 0;
    struct plan_ids cids = {0};
    struct plan_input in = {.gen = &g->l, .ctx = &c->l, .n_ctx = 1, .ctx_ids = &cids,
                            .ctx_dp_rank = -1};
    for (uint32_t gi = 0; gi < c->l.n_groups; gi++) {
        bool st = c->l.groups[gi].kind == GROUP_STATE;
        cids.n[gi] = in.gen_ids.n[gi] = st ? 1 : n_blocks;
        cids.ids[gi] = in.gen_ids.ids[gi] = st ? &slot : blocks;
    }
    struct plan p;
    struct plan_error pe;
    double tp = 1e9;
    for (int r = 0; r < REPS; r++) {
        double t = now();
        if (plan_build(&in, &p, &pe)) {
            fprintf(stderr, "bench_copy: plan: %s\n", pe.message);
            return -1;
        }
        t = now() - t;
        tp = t < tp ? t : tp;
        if (r + 1 < REPS)
            plan_done(&p);
    }
    const struct plan_writer *w = &p.writers[0];
    if (copy_check(w->ops, w->n_ops, &c->mem, 's') || copy_check(w->ops, w->n_ops, &g->mem, 'd')) {
        fprintf(stderr, "bench_copy: program outside the pools\n");
        plan_done(&p);
        return -1;
    }
    double best[4] = {1e9, 1e9, 1e9, 1e9};
    for (int r = 0; r < REPS; r++) {
        /* alternate which goes first, so neither always gets the warmer caches */
        double t0 = now(), t1, t2, t3, t4, d[4];
        if (r % 2 == 0) {
            memcpy_pools(&c->mem, ext, 1);
            t1 = now();
            copy_gather(w->ops, w->n_ops, &c->mem, 0, w->bytes, ext);
            t2 = now();
            d[0] = t1 - t0, d[1] = t2 - t1;
        } else {
            copy_gather(w->ops, w->n_ops, &c->mem, 0, w->bytes, ext);
            t1 = now();
            memcpy_pools(&c->mem, ext, 1);
            t2 = now();
            d[1] = t1 - t0, d[0] = t2 - t1;
        }
        if (r % 2 == 0) {
            memcpy_pools(&g->mem, ext, 0);
            t3 = now();
            copy_scatter(w->ops, w->n_ops, ext, 0, w->bytes, &g->mem);
            t4 = now();
            d[2] = t3 - t2, d[3] = t4 - t3;
        } else {
            copy_scatter(w->ops, w->n_ops, ext, 0, w->bytes, &g->mem);
            t3 = now();
            memcpy_pools(&g->mem, ext, 0);
            t4 = now();
            d[3] = t3 - t2, d[2] = t4 - t3;
        }
        for (int k = 0; k < 4; k++)
            if (d[k] < best[k])
                best[k] = d[k];
    }
    /* same layouts and ids on both sides: the generation pools must now equal the context's */
    int bad = 0;
    for (uint32_t i = 0; i < c->mem.n; i++)
        bad |= memcmp(c->mem.base[i], g->mem.base[i], c->mem.size[i]) != 0;
    double gb = (double)w->bytes / 1e9;
    printf("%-9s %" PRIu64 " bytes (%.1f MiB), %" PRIu32 " copy ops%s\n", label, w->bytes,
           (double)w->bytes / 1048576.0, w->n_ops, bad ? "  COPY WRONG" : "");
    printf("  plan_build %.0f us\n", tp * 1e6);
    printf("  gather : memcpy %6.2f GB/s  executor %6.2f GB/s  ratio %.2f\n", gb / best[0],
           gb / best[1], best[0] / best[1]);
    printf("  scatter: memcpy %6.2f GB/s  executor %6.2f GB/s  ratio %.2f\n", gb / best[2],
           gb / best[3], best[2] / best[3]);
    plan_done(&p);
    return bad ? -1 : 0;
}

int main(void)
{
    const char *spec = "kimi-k3:tp=1,tpb=64,blocks=128,slots=1";
    struct side c = {0}, g = {0};
    uint32_t n_blocks = TOKENS / 64, blocks[TOKENS / 64];
    int rc = 1;
    if (side_init(&c, spec, ROLE_CONTEXT) || side_init(&g, spec, ROLE_GENERATION))
        goto out;
    uint64_t total = 0;
    for (uint32_t p = 0; p < c.mem.n; p++)
        total += c.mem.size[p];
    uint8_t *ext = malloc(total);
    if (!ext)
        goto out;
    memset(ext, 0, total);
    printf("bench_copy: kimi-k3, %d tokens, TP1, tpb 64, best of %d (shared machine: noisy)\n",
           TOKENS, REPS);
    uint32_t slot = 0;
    struct plan_ids ids = {0};
    for (uint32_t gi = 0; gi < c.l.n_groups; gi++) {
        ids.n[gi] = c.l.groups[gi].kind == GROUP_STATE ? 1 : n_blocks;
        ids.ids[gi] = c.l.groups[gi].kind == GROUP_STATE ? &slot : blocks;
    }
    for (uint32_t i = 0; i < n_blocks; i++)
        blocks[i] = i;
    double tf = now();
    pattern_fill(&c.l, &c.mem, &ids, 0, 1);
    tf = now() - tf;
    double tv = now();
    int vrc = pattern_verify(&c.l, &c.mem, &ids, 0, 1, NULL, NULL, NULL, 0);
    tv = now() - tv;
    printf("pattern  fill %.2f GB/s, verify %.2f GB/s%s\n", (double)total / 1e9 / tf,
           (double)total / 1e9 / tv, vrc ? "  VERIFY FAILED" : "");
    rc = vrc || run("in-order", &c, &g, blocks, n_blocks, ext) ? 1 : 0;
    uint64_t s = 88172645463325252ull;
    for (uint32_t i = n_blocks - 1; i > 0; i--) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        uint32_t j = (uint32_t)(s % (i + 1)), t = blocks[i];
        blocks[i] = blocks[j];
        blocks[j] = t;
    }
    if (run("shuffled", &c, &g, blocks, n_blocks, ext))
        rc = 1;
    free(ext);
out:
    side_free(&c);
    side_free(&g);
    return rc;
}
