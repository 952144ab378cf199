/* bounce_tl.c: the bounce path's per-chunk timeline (bounce_tl.h). */
#include <stdlib.h>
#include <time.h>

#include "bounce_tl.h"

#define BTL_MIN 64u
#define BTL_MAX (1u << 20)

struct btl_ev {
    uint64_t t_ns, req, ext_off;
    uint32_t writer, kind;
};

struct btl {
    uint32_t cap, head; /* next slot written */
    uint64_t n;         /* events marked in all */
    struct btl_ev ev[];
};

static const char *const kind_names[BTL_KINDS] = {
    "grant_rx", "gather_launch", "gather_done", "chunk_sent",
    "chunk_rx", "scatter_launch", "scatter_done", "landed",
};

struct btl *btl_new(uint32_t n)
{
    if (!n)
        return NULL;
    n = n < BTL_MIN ? BTL_MIN : n > BTL_MAX ? BTL_MAX : n;
    struct btl *t = calloc(1, sizeof *t + n * sizeof t->ev[0]);
    if (t)
        t->cap = (uint32_t)n;
    return t;
}

struct btl *btl_free(struct btl *t)
{
    free(t);
    return NULL;
}

void btl_mark(struct btl *t, btl_kind_t kind, uint64_t req, uint32_t writer, uint64_t ext_off)
{
    if (!t)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    t->ev[t->head] = (struct btl_ev){(uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
                                     req, ext_off, writer, (uint32_t)kind};
    t->head = (t->head + 1) % t->cap;
    t->n++;
}

json_t *btl_json(const struct btl *t)
{
    if (!t)
        return NULL;
    json_t *kinds = json_array(), *evs = json_array();
    for (unsigned k = 0; k < BTL_KINDS; k++)
        json_array_append_new(kinds, json_string(kind_names[k]));
    uint32_t kept = t->n < t->cap ? (uint32_t)t->n : t->cap;
    uint32_t first = t->n < t->cap ? 0 : t->head;
    for (uint32_t i = 0; i < kept; i++) {
        const struct btl_ev *e = &t->ev[(first + i) % t->cap];
        json_array_append_new(evs, json_pack("[I,i,I,i,I]", (json_int_t)e->t_ns, (int)e->kind,
                                             (json_int_t)e->req, (int)e->writer,
                                             (json_int_t)e->ext_off));
    }
    return json_pack("{s:i,s:I,s:o,s:o}", "capacity", (int)t->cap, "dropped",
                     (json_int_t)(t->n - kept), "kinds", kinds, "events", evs);
}
