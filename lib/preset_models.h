/* preset_models.h: internal to preset. The model table of docs/DESIGN.md §9: layer count,
 * KDA head geometry, conv width, MLA latent size. Static data; any thread. */
#ifndef KVF_PRESET_MODELS_H
#define KVF_PRESET_MODELS_H

#include <stdint.h>

#define PRESET_MLA_KV_C 512 /* latent values per token per MLA layer */
#define PRESET_MLA_K_PE 64  /* rope values per token per MLA layer */

struct preset_model {
    const char *name;
    uint32_t n_layers;  /* 0-based ids 0..n_layers-1 */
    uint32_t heads;     /* KDA heads */
    uint32_t head_dim;
    uint32_t conv_w;    /* conv state width W */
};

/* NULL when unknown. */
const struct preset_model *preset_model_find(const char *name);

/* MLA (paged attention) layers: 1-indexed number a multiple of 4, plus the last; the rest KDA. */
static inline int preset_layer_is_mla(const struct preset_model *m, uint32_t layer)
{
    return (layer + 1) % 4 == 0 || layer + 1 == m->n_layers;
}

#endif
