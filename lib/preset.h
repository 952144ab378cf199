/* preset.h: the geometry presets of docs/DESIGN.md §9 (tiny, kimi-linear-48b, kimi-k3) and of the
 * models people run (qwen3-next-80b, nemotron-h, llama-3-70b, deepseek-v3), instantiated
 * into every rank's layout of an instance from a spec string. Shared by tests, kvferry-sim,
 * kvferryctl plan and the benches. Pure. */
#ifndef KVF_PRESET_H
#define KVF_PRESET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "layout.h"

#define PRESET_SPEC_MAX 512

typedef enum { PRESET_POOLS_VIEW = 0, PRESET_POOLS_LAYER, PRESET_POOLS_LAYER_JOINT } preset_pools_t;

/* Parsed spec string: "MODEL[:key=value,...]". Keys (all optional):
 *   tp=N pp=N adp=0|1 tpb=N            parallelism and tokens per block (default 1,1,0,64)
 *   pp_layers=A+B+...                  uneven PP split (layers per stage, sums to the model's)
 *   arr=layer|block                    pool arrangement: layer-major (default) or block-major
 *   pools=view|layer|layer_joint       one pool per view (default); per-layer views with one
 *                                      pool per (view, layer) (SGLang k_buffer / v_buffer lists);
 *                                      or one pool per layer holding the group's views side by
 *                                      side (vLLM v1 [2, num_blocks, ...] per layer); arr is
 *                                      then moot (items are contiguous in each layer's tensor)
 *   state=joint|split                  conv and ssm in one view (default) or in two views
 *   kv=joint|split                     MLA latent in one view (default) or kv_c / k_pe apart
 *   blocks=N slots=N                   capacity (default 512 blocks, 8 slots)
 *   state_shard=sharded|replicated     how state is held when adp=0 (default sharded;
 *                                      replicated models the "full slots" misconfiguration)
 *   hd=N dtype=bf16|fp32|...           override head dim / state dtype (refusal tests)
 *   fp=STRING                          override the model fingerprint
 *   conv=w|w-1                         conv state width: W as TensorRT-LLM keeps it (default)
 *                                      or W-1 as vLLM and SGLang do
 *   order=nhd|hnd                      attention KV rows token-major (default) or head-major
 *   omit=GROUP                         leave the group out (the misconfiguration that must be
 *                                      refused, never moved partly) */
struct preset_spec {
    char model[32];
    uint32_t tp, pp, tpb;
    bool adp;
    uint32_t n_pp_layers;               /* 0: even split */
    uint32_t pp_layers[LAYOUT_MAX_PP];
    bool block_major, state_split, kv_split;
    uint32_t n_blocks, n_slots;
    bool state_replicated;
    uint32_t head_dim;                  /* 0: the model's */
    int32_t ssm_dtype;                  /* -1: the model's */
    char fingerprint[LAYOUT_FP_MAX];    /* "": the model's */
    preset_pools_t pools;
    bool conv_wm1, hnd;
    char omit[LAYOUT_SHORT_MAX];        /* "": nothing left out */
};

/* Returns 0, or -EINVAL with a message naming the bad key or value. */
int preset_parse(const char *spec, struct preset_spec *ret, char *err, size_t errlen);

static inline uint32_t preset_n_ranks(const struct preset_spec *s) { return s->tp * s->pp; }

/* Builds every rank's layout (ranks[pp_rank * tp + tp_rank], preset_n_ranks() entries) with
 * every rank's pools starting at offset 0 of their own pool indices. Returns 0 or -EINVAL. */
int preset_build(const struct preset_spec *s, const char *instance, layout_role_t role,
                 int32_t device, struct layout *ranks, char *err, size_t errlen);

/* Names of the known models, NULL-terminated. */
extern const char *const preset_models[];

#endif
