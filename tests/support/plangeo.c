/* plangeo.c: see plangeo.h. */
#include <stdio.h>
#include <string.h>

#include "parity.h"
#include "plangeo.h"

static void side_spec(char *buf, size_t len, const char *model, const char *extra,
                      uint32_t n_layers, const uint32_t *tps, uint32_t n_tps, uint32_t tpb,
                      uint64_t *rng, bool *adp_ret, uint32_t *tp_ret)
{
    uint32_t tp = tps[par_rand(rng) % n_tps];
    uint32_t pp = 1 + par_rand(rng) % 3;
    bool adp = par_rand(rng) % 3 == 0;
    int n = snprintf(buf, len,
                     "%s:tp=%u,pp=%u,adp=%d,tpb=%u,arr=%s,state=%s,kv=%s,blocks=8,slots=%u,"
                     "order=%s%s",
                     model, tp, pp, adp, tpb, par_rand(rng) % 2 ? "block" : "layer",
                     par_rand(rng) % 2 ? "split" : "joint", par_rand(rng) % 2 ? "split" : "joint",
                     n_layers > 8 ? 1 : 3, par_rand(rng) % 3 ? "nhd" : "hnd", extra);
    if (pp > 1 && par_rand(rng) % 2) { /* uneven split, every stage at least one layer */
        uint32_t left = n_layers;
        n += snprintf(buf + n, len - n, ",pp_layers=");
        for (uint32_t s = 0; s < pp; s++) {
            uint32_t take = s + 1 == pp ? left : 1 + par_rand(rng) % (left - (pp - s - 1));
            left -= take;
            n += snprintf(buf + n, len - n, "%s%u", s ? "+" : "", take);
        }
    }
    *adp_ret = adp;
    *tp_ret = tp;
}

/* Models drawn: tiny (most), kimi-linear-48b (~45 MiB pools, costly: rare), and the GQA
 * hybrids with replicated KV heads at TP above their 2 (qwen3-next) or 8 (llama) heads. */
void random_geo(struct geo *g, uint64_t *rng)
{
    static const uint32_t tiny_tps[] = {1, 2, 4}, k_tps[] = {1, 2, 4, 8}, l_tps[] = {1, 2, 8, 16};
    uint64_t pick = par_rand(rng) % 32;
    const char *model = "tiny", *extra = "";
    const uint32_t *tps = tiny_tps;
    uint32_t n_tps = 3, layers = 8;
    if (pick == 0)
        model = "kimi-linear-48b", tps = k_tps, n_tps = 4, layers = 27;
    else if (pick < 4)
        model = "qwen3-next-80b", extra = ",hd=16", tps = k_tps, n_tps = 4, layers = 48;
    else if (pick < 6)
        model = "llama-3-70b", tps = l_tps, n_tps = 4, layers = 80;
    g->tiny = pick >= 6 || (pick >= 1 && pick < 4);
    /* block sizes: equal, or one twice the other (rule 10) */
    uint32_t ct = par_rand(rng) % 2 ? 32 : 16, gt = ct;
    if (par_rand(rng) % 3 == 0)
        gt = ct == 16 ? 32 : 16;
    if (pick == 0)
        ct = gt = par_rand(rng) % 2 ? 64 : 16;
    bool cadp, gadp;
    uint32_t ctp, gtp;
    side_spec(g->ctx, sizeof(g->ctx), model, extra, layers, tps, n_tps, ct, rng, &cadp, &ctp);
    side_spec(g->gen, sizeof(g->gen), model, extra, layers, tps, n_tps, gt, rng, &gadp, &gtp);
    g->n_ctx = par_rand(rng) % 7;
    if (gt > ct)
        g->n_ctx &= ~1u; /* the context's blocks end on a generation block */
    uint32_t total = g->n_ctx * ct / gt; /* the request in generation blocks */
    total = total > 8 ? 8 : total;
    g->n_gen = total ? par_rand(rng) % (total + 1) : 0;
    g->dp = cadp ? (int32_t)(par_rand(rng) % ctp) : -1;
    g->convert = ct != gt || strstr(g->ctx, "hnd") != strstr(g->gen, "hnd");
    g->gqa = pick >= 1 && pick < 6;
}


void geo_sides(const struct geo *g, struct par_side *c, struct par_side *gs, uint64_t *rng)
{
    char err[256];
    ck_assert_msg(par_side_init(c, g->ctx, ROLE_CONTEXT, g->n_ctx, rng, err, sizeof(err)) == 0,
                  "%s: %s", g->ctx, err);
    ck_assert_msg(par_side_init(gs, g->gen, ROLE_GENERATION, g->n_gen, rng, err,
                                sizeof(err)) == 0, "%s: %s", g->gen, err);
}
