/* preset_models.c: the geometry table (preset_models.h). Kimi models per docs/DESIGN.md §9; the
 * others from their public Hugging Face configs:
 *  qwen3-next-80b (Qwen3-Next-80B-A3B): 48 layers, full attention every 4th (1-indexed), the
 *    rest Gated DeltaNet with 16 key heads and 32 value heads of 128, conv kernel 4; gated
 *    attention with 2 KV heads of 256.
 *  nemotron-h (Nemotron-H-8B): 52 layers, hybrid_override_pattern
 *    M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M*-M-M-M-M-M- (M Mamba2, * attention, - MLP with no
 *    cache); Mamba2 128 heads of 64, n_groups 8, d_state 128, conv kernel 4; 8 KV heads of 128.
 *  llama-3-70b: 80 attention layers, 8 KV heads of 128 (GQA).
 *  deepseek-v3: 61 MLA layers (kv_lora_rank 512 + rope 64). */
#include <stddef.h>
#include <string.h>

#include "preset.h"
#include "preset_models.h"

#define QWEN3_NEXT "SSSASSSASSSASSSASSSASSSASSSASSSASSSASSSASSSASSSA"
#define NEMOTRON_H "S-S-S-SA-S-S-S-S-SA-S-S-S-S-SA-S-S-S-S-SA-S-S-S-S-S-"
#define ALL_A_80 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
#define ALL_A_61 "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"

_Static_assert(sizeof(QWEN3_NEXT) == 48 + 1, "qwen3-next pattern");
_Static_assert(sizeof(NEMOTRON_H) == 52 + 1, "nemotron-h pattern");
_Static_assert(sizeof(ALL_A_80) == 80 + 1, "llama pattern");
_Static_assert(sizeof(ALL_A_61) == 61 + 1, "deepseek pattern");

static const struct preset_model models[] = {
    {"tiny", 8, NULL, "kda", "mla", PRESET_STATE_KDA, 4, 32, 0, 0, 3, 0, 0},
    {"kimi-linear-48b", 27, NULL, "kda", "mla", PRESET_STATE_KDA, 32, 128, 0, 0, 4, 0, 0},
    {"kimi-k3", 93, NULL, "kda", "mla", PRESET_STATE_KDA, 96, 128, 0, 0, 4, 0, 0},
    {"qwen3-next-80b", 48, QWEN3_NEXT, "gdn", "attn", PRESET_STATE_GDN, 32, 128, 16, 128, 4, 2,
     256},
    {"nemotron-h", 52, NEMOTRON_H, "mamba", "attn", PRESET_STATE_MAMBA2, 128, 64, 8, 128, 4, 8,
     128},
    {"llama-3-70b", 80, ALL_A_80, NULL, "attn", PRESET_STATE_NONE, 0, 0, 0, 0, 0, 8, 128},
    {"deepseek-v3", 61, ALL_A_61, NULL, "mla", PRESET_STATE_NONE, 0, 0, 0, 0, 0, 0, 0},
};

const char *const preset_models[] = {
    "tiny",       "kimi-linear-48b", "kimi-k3",     "qwen3-next-80b",
    "nemotron-h", "llama-3-70b",     "deepseek-v3", NULL};

const struct preset_model *preset_model_find(const char *name)
{
    for (size_t i = 0; i < sizeof(models) / sizeof(models[0]); i++)
        if (strcmp(models[i].name, name) == 0)
            return &models[i];
    return NULL;
}
