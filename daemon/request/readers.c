/* readers.c: the reader count of a SEND with n_readers 0 (readers.h). */
#include <stdlib.h>
#include <string.h>

#include "plan_request.h"
#include "readers.h"

uint32_t readers_local(const struct layout *gen)
{
    return gen->attention_dp ? gen->pp_size : gen->tp_size * gen->pp_size;
}

/* Does generation TP rank r (the reader's layout with tp_rank r) need bytes from `writer`? */
static int reads(const struct plan_input *in, struct layout *g, uint32_t r, uint32_t writer)
{
    g->tp_rank = r;
    struct plan_input pin = *in;
    pin.gen = g;
    struct plan p;
    char msg[sizeof(((struct plan_error *)0)->message)];
    if (plan_request(&pin, &p, msg, sizeof msg) != KVF_OK)
        return -1;
    int hit = 0;
    for (uint32_t w = 0; w < p.n_writers; w++)
        if (p.writers[w].ctx_rank == writer && p.writers[w].bytes > 0)
            hit = 1;
    plan_done(&p);
    return hit;
}

uint32_t readers_remote(const struct plan_input *in, uint32_t writer)
{
    const struct layout *gen = in->gen;
    if (gen->pp_size > 1)
        return 0;
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
