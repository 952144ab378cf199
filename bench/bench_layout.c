/* bench_layout.c: what many pools cost the control path (issue 9's measurement behind the
 * limits in layout.h). Builds per-layer layouts as JSON, SGLang-style (one pool per view and
 * layer): a Llama-3-70B rank (80 layers, 8 KV heads, head_dim 128, bf16, 16 tokens a block,
 * 4096 blocks; views k and v: 160 pools) and the largest layout allowed (128 layers x 8 views:
 * 1024 pools), then times, best of REPS: jansson parsing alone (the floor of any decoder),
 * layout_from_json (parse + strict decode + layout_validate), layout_validate alone, and
 * plan_build of an 8192-token request (512 blocks; compat + plan + coverage check) from a TP2
 * context to a TP1 generation rank; each also as the same model with one pool per view (a v1
 * uniform layout, the reference in the same run). Prints microseconds and decode / parse ratios.
 * Exit 1 if anything is refused. */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plan.h"

#define REPS 7
#define BLOCKS 4096
#define REQ_BLOCKS 512

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* JSON of rank `rank` of a tp-way per-layer GQA model: `views` views, each its own pools
 * (uniform: one pool per view, layer-major, as a v1 layout: the reference). */
static char *model_json(uint32_t layers, uint32_t views, uint32_t tp, uint32_t rank, int uniform)
{
    const uint32_t heads = 8, hd = 128, tpb = 16;
    uint64_t region = (uint64_t)tpb * (heads / tp) * hd * 2;
    json_t *ps = json_array(), *vs = json_array(), *ls = json_array();
    for (uint32_t k = 0; k < layers; k++)
        json_array_append_new(ls, json_integer(k));
    for (uint32_t v = 0; v < views; v++) {
        char name[8];
        snprintf(name, sizeof(name), views == 2 ? (v ? "v" : "k") : "t%u", v);
        json_t *vo = json_pack("{s:s,s:I,s:I,s:[{s:s,s:i,s:i,s:i,s:i,s:i,s:s,s:s}]}", "name", name,
                               "item_stride", (json_int_t)region, "region_bytes",
                               (json_int_t)region, "tensors", "name", name, "offset", 0, "outer",
                               (int)tpb, "heads", (int)(heads / tp), "inner", (int)(hd * 2),
                               "global_heads", (int)heads, "shard", "sharded", "dtype", "bf16");
        if (uniform) {
            json_object_set_new(vo, "pool", json_integer(v));
            json_object_set_new(vo, "base", json_integer(0));
            json_object_set_new(vo, "layer_stride", json_integer((json_int_t)(region * BLOCKS)));
            json_array_append_new(ps, json_pack("{s:s,s:i,s:I}", "kind", "host", "device", -1,
                                                "bytes", (json_int_t)(region * BLOCKS * layers)));
        } else {
            json_t *pl = json_array();
            for (uint32_t k = 0; k < layers; k++) {
                json_array_append_new(pl, json_pack("{s:i,s:i}", "pool", (int)(v * layers + k),
                                                    "base", 0));
                json_array_append_new(ps, json_pack("{s:s,s:i,s:I}", "kind", "host", "device",
                                                    -1, "bytes", (json_int_t)(region * BLOCKS)));
            }
            json_object_set_new(vo, "per_layer", pl);
        }
        json_array_append_new(vs, vo);
    }
    json_t *o = json_pack("{s:s,s:s,s:i,s:i,s:i,s:i,s:b,s:i,s:s,s:i,s:i,s:o,s:[{s:s,s:s,s:o,"
                          "s:i,s:o}]}",
                          "instance", "bench", "role", "context", "tp_size", (int)tp, "tp_rank",
                          (int)rank, "pp_size", 1, "pp_rank", 0, "attention_dp", 0, "device", -1,
                          "fingerprint", "bench/v1", "tokens_per_block", (int)tpb,
                          "n_layers_total", (int)layers, "pools", ps, "groups", "name", "attn",
                          "kind", "paged", "layers", ls, "n_items", BLOCKS, "views", vs);
    char *t = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return t;
}

static int measure(const char *what, uint32_t layers, uint32_t views, int uniform)
{
    char err[512];
    char *gen_t = model_json(layers, views, 1, 0, uniform);
    char *ctx_t[2] = {model_json(layers, views, 2, 0, uniform),
                      model_json(layers, views, 2, 1, uniform)};
    struct layout *gen = malloc(sizeof(*gen)), *ctx = calloc(2, sizeof(*ctx));
    size_t len = strlen(gen_t);
    double parse = 1e9, decode = 1e9, validate = 1e9, plan = 1e9;
    for (int r = 0; r < REPS; r++) {
        double t0 = now();
        json_t *o = json_loadb(gen_t, len, JSON_REJECT_DUPLICATES, NULL);
        double t1 = now();
        json_decref(o);
        if (!o)
            return 1;
        parse = t1 - t0 < parse ? t1 - t0 : parse;
        t0 = now();
        int rc = layout_from_json(gen_t, len, gen, err, sizeof(err));
        t1 = now();
        if (rc) {
            fprintf(stderr, "%s: %s\n", what, err);
            return 1;
        }
        decode = t1 - t0 < decode ? t1 - t0 : decode;
        t0 = now();
        rc = layout_validate(gen, err, sizeof(err));
        t1 = now();
        validate = t1 - t0 < validate ? t1 - t0 : validate;
    }
    for (int c = 0; c < 2; c++)
        if (layout_from_json(ctx_t[c], strlen(ctx_t[c]), &ctx[c], err, sizeof(err))) {
            fprintf(stderr, "%s ctx: %s\n", what, err);
            return 1;
        }
    gen->role = ROLE_GENERATION;
    uint32_t *ids = malloc(REQ_BLOCKS * sizeof(uint32_t));
    for (uint32_t k = 0; k < REQ_BLOCKS; k++)
        ids[k] = (k * 7919u) % BLOCKS; /* scattered, as an allocator leaves them */
    struct plan_ids cids[2] = {{.n = {REQ_BLOCKS}, .ids = {ids}}, {.n = {REQ_BLOCKS}, .ids = {ids}}};
    struct plan_input in = {.gen = gen, .gen_ids = {.n = {REQ_BLOCKS}, .ids = {ids}}, .ctx = ctx,
                            .n_ctx = 2, .ctx_ids = cids, .ctx_dp_rank = -1};
    uint64_t bytes = 0, ops = 0;
    for (int r = 0; r < REPS; r++) {
        struct plan p;
        struct plan_error pe;
        double t0 = now();
        int rc = plan_build(&in, &p, &pe);
        double t1 = now();
        if (rc) {
            fprintf(stderr, "%s plan: %s\n", what, pe.message);
            return 1;
        }
        plan = t1 - t0 < plan ? t1 - t0 : plan;
        bytes = p.total_bytes;
        ops = p.writers[0].n_ops + p.writers[1].n_ops;
        plan_done(&p);
    }
    printf("%-34s %4u pools, JSON %7zu B: parse %8.1f us, decode+validate %8.1f us (%.2fx "
           "parse), validate %7.1f us; plan %" PRIu64 " MiB in %" PRIu64 " ops: %8.1f us\n",
           what, gen->n_pools, len, parse * 1e6, decode * 1e6, decode / parse, validate * 1e6,
           bytes >> 20, ops, plan * 1e6);
    free(ids);
    free(gen);
    free(ctx);
    free(gen_t);
    free(ctx_t[0]);
    free(ctx_t[1]);
    return 0;
}

int main(void)
{
    int rc = measure("llama-3-70b, one pool per view (v1)", 80, 2, 1);
    rc |= measure("llama-3-70b per-layer k/v (SGLang)", 80, 2, 0);
    rc |= measure("128 x 8 views, one pool per view", 128, 8, 1);
    rc |= measure("128 x 8 views per-layer (the limit)", 128, 8, 0);
    return rc;
}
