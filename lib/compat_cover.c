/* compat_cover.c: the rules of compatibility that guard against silent under-transfer
 * (docs/DESIGN.md §4 rules 7 and 8), run by compat_check after the per-group checks.
 *
 * - The model's layer map (layout.h): where both sides declare one, the maps are equal (same
 *   group name for every global layer, same n_layers_total); every context rank's map equals
 *   context rank 0's; and the context table holds every layer its map declares, in the mapped
 *   group. A side without a map is accepted: the context table's own layers (complete over its
 *   PP stages) then serve as the map.
 * - Omissions: the layers a generation rank holds are its PP stage's span: stage_layers when
 *   the layout declares it (presets do under PP); else every layer of the model for pp_size 1;
 *   else from its lowest to its highest declared layer, stretched to layer 0 on the first
 *   stage and to the model's last layer on the last stage (PP stages are contiguous layer
 *   ranges in every engine; without stage_layers, layers at a stage's inner edge that no group
 *   of the rank declares are the one omission this cannot see). For every layer of the span that
 *   the context holds in group X, the generation rank must hold it in its group X; else
 *   COMPAT_OMITTED naming the group (and the layer when the group is there). Tensors a group
 *   omits are refused in compat.c's group check.
 * Pure; thread-safe. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plan_internal.h"

__attribute__((format(printf, 5, 6))) static int
refuse(compat_reason_t *reason, char *msg, size_t msglen, compat_reason_t r, const char *fmt, ...)
{
    if (reason)
        *reason = r;
    if (msg && msglen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, msglen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

#define N LAYOUT_SHORT_MAX

/* Group name of layer id in l's map, or NULL (unmapped, or no map). */
static const char *mapped(const struct layout *l, uint32_t id)
{
    uint8_t e = id < LAYOUT_MAX_LAYERS ? l->layer_map[id] : 0;
    return e && e <= l->n_map_groups && e <= LAYOUT_MAX_GROUPS ? l->map_groups[e - 1] : NULL;
}

static bool same_name(const char *a, const char *b)
{
    return (!a && !b) || (a && b && strncmp(a, b, N) == 0);
}

static bool holds(const struct layout_group *g, uint32_t layer)
{
    for (uint32_t i = 0; i < g->n_layers; i++)
        if (g->layers[i] == layer)
            return true;
    return false;
}

/* The context group holding layer id (any stage), its stage in *stage; NULL if none. */
static const struct layout_group *ctx_holder(const struct layout *ctx, uint32_t id, uint32_t *stage)
{
    uint32_t tp = ctx[0].tp_size;
    for (uint32_t p = 0; p < ctx[0].pp_size; p++)
        for (uint32_t g = 0; g < ctx[p * tp].n_groups; g++)
            if (holds(&ctx[p * tp].groups[g], id)) {
                *stage = p;
                return &ctx[p * tp].groups[g];
            }
    return NULL;
}

static int check_maps(const struct layout *gen, const struct layout *ctx, uint32_t n_ctx,
                      compat_reason_t *reason, char *msg, size_t msglen)
{
    char a[96], b[96];
    const struct layout *c0 = &ctx[0];
    if (gen->n_layers_total != c0->n_layers_total) {
        return refuse(reason, msg, msglen, COMPAT_LAYER_MAP,
                      "n_layers_total differs: %s has %" PRIu32 ", %s has %" PRIu32,
                      compat_rank_desc(c0, "context", a, sizeof(a)), c0->n_layers_total,
                      compat_rank_desc(gen, "generation", b, sizeof(b)), gen->n_layers_total);
    }
    for (uint32_t i = 1; i < n_ctx; i++)
        for (uint32_t id = 0; id < LAYOUT_MAX_LAYERS; id++)
            if (!same_name(mapped(&ctx[i], id), mapped(c0, id))) {
                return refuse(reason, msg, msglen, COMPAT_LAYER_MAP,
                              "layer_map: layer %" PRIu32 " is %.*s on %s, %.*s on %s", id, N,
                              mapped(&ctx[i], id) ? mapped(&ctx[i], id) : "no group",
                              compat_rank_desc(&ctx[i], "context", a, sizeof(a)), N,
                              mapped(c0, id) ? mapped(c0, id) : "no group",
                              compat_rank_desc(c0, "context", b, sizeof(b)));
            }
    if (gen->n_map_groups && c0->n_map_groups)
        for (uint32_t id = 0; id < LAYOUT_MAX_LAYERS; id++)
            if (!same_name(mapped(gen, id), mapped(c0, id))) {
                return refuse(reason, msg, msglen, COMPAT_LAYER_MAP,
                              "layer_map: layer %" PRIu32 " is %.*s on %s, %.*s on %s", id, N,
                              mapped(c0, id) ? mapped(c0, id) : "no group",
                              compat_rank_desc(c0, "context", a, sizeof(a)), N,
                              mapped(gen, id) ? mapped(gen, id) : "no group",
                              compat_rank_desc(gen, "generation", b, sizeof(b)));
            }
    for (uint32_t id = 0; c0->n_map_groups && id < c0->n_layers_total; id++) {
        const char *want = mapped(c0, id);
        uint32_t stage = 0;
        const struct layout_group *g = ctx_holder(ctx, id, &stage);
        if (want && (!g || strncmp(g->name, want, N) != 0)) {
            return refuse(reason, msg, msglen, COMPAT_LAYER_MAP,
                          "layer_map: layer %" PRIu32 " is in group %.*s, but %s", id, N, want,
                          g ? "the context holds it in another group"
                            : "no context stage holds it");
        }
    }
    return 0;
}

/* The generation rank's PP span [*lo, *hi]; false when it holds nothing and is interior. */
static bool gen_span(const struct layout *gen, uint32_t *lo, uint32_t *hi)
{
    if (gen->stage_count) {
        *lo = gen->stage_first;
        *hi = gen->stage_first + gen->stage_count - 1;
        return true;
    }
    uint32_t mn = UINT32_MAX, mx = 0;
    for (uint32_t g = 0; g < gen->n_groups; g++)
        for (uint32_t i = 0; i < gen->groups[g].n_layers; i++) {
            uint32_t id = gen->groups[g].layers[i];
            mn = id < mn ? id : mn;
            mx = id > mx ? id : mx;
        }
    if (gen->pp_rank == 0)
        mn = 0;
    if (gen->pp_rank + 1 == gen->pp_size)
        mx = gen->n_layers_total - 1;
    if (mn == UINT32_MAX)
        return false;
    *lo = mn;
    *hi = mx;
    return mn <= mx;
}

int compat_cover_rules(const struct layout *gen, const struct layout *ctx, uint32_t n_ctx,
                       compat_reason_t *reason, char *msg, size_t msglen)
{
    char a[96], b[96];
    if (check_maps(gen, ctx, n_ctx, reason, msg, msglen))
        return -EINVAL;
    uint32_t lo, hi;
    if (!gen_span(gen, &lo, &hi))
        return 0;
    for (uint32_t id = lo; id <= hi && id < LAYOUT_MAX_LAYERS; id++) {
        uint32_t stage = 0;
        const struct layout_group *cg = ctx_holder(ctx, id, &stage);
        if (!cg)
            continue;
        const struct layout_group *gg = compat_find_group(gen, cg->name, NULL);
        if (!gg) {
            uint32_t n_in = 0;
            for (uint32_t i = 0; i < cg->n_layers; i++)
                n_in += cg->layers[i] >= lo && cg->layers[i] <= hi;
            return refuse(reason, msg, msglen, COMPAT_OMITTED,
                          "groups.%.*s: omitted by %s, which holds layers %" PRIu32 "..%" PRIu32
                          "; %s holds the group for layer %" PRIu32 " and %" PRIu32
                          " more of them: its bytes would never move",
                          N, cg->name, compat_rank_desc(gen, "generation", b, sizeof(b)), lo, hi,
                          compat_rank_desc(&ctx[stage * ctx[0].tp_size], "context", a, sizeof(a)),
                          id, n_in ? n_in - 1 : 0);
        }
        if (!holds(gg, id))
            return refuse(
                reason, msg, msglen, COMPAT_OMITTED,
                "groups.%.*s layer %" PRIu32 ": omitted by %s, which holds layers %" PRIu32
                "..%" PRIu32 " (%s holds it)",
                N, cg->name, id, compat_rank_desc(gen, "generation", b, sizeof(b)), lo, hi,
                compat_rank_desc(&ctx[stage * ctx[0].tp_size], "context", a, sizeof(a)));
    }
    return 0;
}
