/* arena_share.c: the per-owner byte counts behind arena.peer_share (arena_share.h). A small
 * array: owners are the peer daemons holding slots now (at most link's max_peers), and an
 * owner leaves it when its count returns to 0. */
#include "arena_share.h"

#include <errno.h>
#include <stdlib.h>

struct arena_shares {
    struct arena_owner *v; /* owned */
    uint32_t n, cap;
};

struct arena_shares *shares_new(void)
{
    return calloc(1, sizeof(struct arena_shares));
}

void shares_free(struct arena_shares *s)
{
    if (s)
        free(s->v);
    free(s);
}

static struct arena_owner *find(const struct arena_shares *s, uint64_t owner)
{
    for (uint32_t i = 0; i < s->n; i++)
        if (s->v[i].owner == owner)
            return &s->v[i];
    return NULL;
}

int shares_add(struct arena_shares *s, uint64_t owner, uint64_t bytes)
{
    if (!owner)
        return 0;
    struct arena_owner *o = find(s, owner);
    if (!o) {
        if (s->n == s->cap) {
            uint32_t cap = s->cap ? 2 * s->cap : 8;
            struct arena_owner *v = realloc(s->v, cap * sizeof *v);
            if (!v)
                return -ENOMEM;
            s->v = v;
            s->cap = cap;
        }
        o = &s->v[s->n++];
        *o = (struct arena_owner){.owner = owner};
    }
    o->bytes += bytes;
    return 0;
}

void shares_sub(struct arena_shares *s, uint64_t owner, uint64_t bytes)
{
    struct arena_owner *o = owner ? find(s, owner) : NULL;
    if (!o)
        return;
    o->bytes = o->bytes > bytes ? o->bytes - bytes : 0;
    if (!o->bytes)
        *o = s->v[--s->n];
}

uint64_t shares_bytes(const struct arena_shares *s, uint64_t owner)
{
    const struct arena_owner *o = owner ? find(s, owner) : NULL;
    return o ? o->bytes : 0;
}

uint32_t shares_list(const struct arena_shares *s, struct arena_owner *out, uint32_t max)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < s->n; i++) { /* insertion into out, largest first */
        struct arena_owner o = s->v[i];
        uint32_t j = n < max ? n++ : max;
        if (j == max && (max == 0 || out[max - 1].bytes >= o.bytes))
            continue;
        if (j == max)
            j = max - 1;
        while (j > 0 && out[j - 1].bytes < o.bytes) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = o;
    }
    return n;
}
