/* readers.c: the reader count of a SEND with n_readers 0 (readers.h). */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "plan_request.h"
#include "readers.h"

_Static_assert(LAYOUT_MAX_PP <= 64, "readers_tally.stages is a 64-bit mask");

uint32_t readers_local(const struct layout *gen)
{
    return gen->attention_dp ? gen->pp_size : gen->tp_size * gen->pp_size;
}

/* Does generation TP rank r (the reader's layout with tp_rank r) need bytes from `writer`? Who
 * writes is all it asks: plan_writers, no copy program. */
static int reads(const struct plan_input *in, struct layout *g, uint32_t r, uint32_t writer)
{
    g->tp_rank = r;
    struct plan_input pin = *in;
    pin.gen = g;
    uint8_t *set = calloc(in->n_ctx, 1);
    char msg[sizeof(((struct plan_error *)0)->message)];
    int hit = !set || plan_request_writers(&pin, set, msg, sizeof msg) != KVF_OK ? -1
                                                                                 : set[writer];
    free(set);
    return hit;
}

/* The readers of `writer` in the reader's own PP stage: its TP peers that plan bytes from it. */
static uint32_t stage_readers(const struct plan_input *in, uint32_t writer)
{
    const struct layout *gen = in->gen;
    if (gen->attention_dp)
        return 1; /* the request's DP rank alone reads it */
    struct layout *g = malloc(sizeof *g);
    if (!g)
        return 0;
    *g = *gen;
    uint32_t n = 0;
    for (uint32_t r = 0; r < gen->tp_size; r++) {
        int hit = reads(in, g, r, writer);
        if (hit < 0) {
            n = 0;
            break;
        }
        n += (uint32_t)hit;
    }
    free(g);
    return n;
}

static bool has(const uint8_t *set, uint32_t id) { return set[id / 8] & (1u << (id % 8)); }

uint32_t readers_remote(struct readers_tally *t, const struct plan_input *in, uint32_t writer)
{
    const struct layout *gen = in->gen;
    if (gen->pp_size == 1)
        return stage_readers(in, writer);
    uint64_t bit = 1ull << gen->pp_rank;
    if (!(t->stages & bit)) {
        uint32_t n = stage_readers(in, writer);
        if (!n)
            return 0;
        t->stages |= bit;
        t->count += n;
        for (uint32_t g = 0; g < gen->n_groups; g++)
            for (uint32_t i = 0; i < gen->groups[g].n_layers; i++) {
                uint32_t id = gen->groups[g].layers[i];
                t->layers[id / 8] |= (uint8_t)(1u << (id % 8));
            }
    }
    /* PP stages hold disjoint layers: once the stages seen hold every layer the writer holds,
     * the other stages read nothing from it and the count is complete */
    const struct layout *w = &in->ctx[writer];
    for (uint32_t g = 0; g < w->n_groups; g++)
        for (uint32_t i = 0; i < w->groups[g].n_layers; i++)
            if (!has(t->layers, w->groups[g].layers[i]))
                return 0;
    return t->count;
}
