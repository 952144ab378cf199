/* preset_models.h: internal to the preset module. The model table of docs/DESIGN.md §9 and of the
 * public configs of the models people run: layer pattern, recurrent-state geometry, attention
 * KV geometry. Static data; any thread. */
#ifndef KVF_PRESET_MODELS_H
#define KVF_PRESET_MODELS_H

#include <stdint.h>

#define PRESET_MLA_KV_C 512 /* latent values per token per MLA layer */
#define PRESET_MLA_K_PE 64  /* rope values per token per MLA layer */

typedef enum {
    PRESET_STATE_NONE = 0,
    PRESET_STATE_KDA, /* Kimi Delta Attention: conv [3][H][hd*W], ssm [H][hd][hd] */
    PRESET_STATE_GDN, /* Gated DeltaNet: conv q|k [2][Hk][dk*W], v [Hv][dv*W]; ssm [Hv][dk][dv] */
    PRESET_STATE_MAMBA2, /* Mamba2: conv x [H][hd*W], B|C [2][G][N*W]; ssm [H][hd][N] */
} preset_state_t;

struct preset_model {
    const char *name;
    uint32_t n_layers; /* 0-based ids 0..n_layers-1 */
    /* Per layer: 'S' recurrent state group, 'A' attention (paged) group, '-' no cache (an MLP
     * layer); NULL: the Kimi rule (attention at 1-indexed multiples of 4 and the last). */
    const char *pattern;
    const char *state_group, *attn_group; /* group names */
    preset_state_t state;
    uint32_t heads, head_dim; /* KDA heads; GDN value heads; Mamba2 heads; and their dim */
    uint32_t k_heads, k_dim;  /* GDN key heads and dim (dim = head_dim); Mamba2 n_groups, d_state */
    uint32_t conv_w;          /* conv kernel width W as the config gives it */
    uint32_t kv_heads, kv_dim; /* attention: GQA KV heads and head dim; 0: MLA latent */
};

/* NULL when unknown. */
const struct preset_model *preset_model_find(const char *name);

/* 'S', 'A' or '-' for global layer id of model m. */
static inline char preset_layer_kind(const struct preset_model *m, uint32_t layer)
{
    if (m->pattern)
        return m->pattern[layer];
    return (layer + 1) % 4 == 0 || layer + 1 == m->n_layers ? 'A' : 'S';
}

#endif
