/* hmap.c: see hmap.h. */
#include <errno.h>
#include <stdlib.h>

#include "hmap.h"

#define HMAP_MIN_CAP 16u

uint64_t hmap_mix(uint64_t x) /* splitmix64's finalizer */
{
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t hmap_str(const char *s, uint64_t seed)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return hmap_mix(h ^ hmap_mix(seed));
}

void hmap_init(struct hmap *m)
{
    m->slots = NULL;
    m->cap = m->n = 0;
}

void hmap_free(struct hmap *m)
{
    free(m->slots);
    hmap_init(m);
}

static uint32_t home_of(const struct hmap *m, uint64_t h) { return (uint32_t)(hmap_mix(h) & (m->cap - 1)); }

static void place(struct hmap *m, uint64_t h, void *v)
{
    uint32_t i = home_of(m, h);
    while (m->slots[i].v)
        i = (i + 1) & (m->cap - 1);
    m->slots[i] = (struct hmap_slot){h, v};
    m->n++;
}

static int grow(struct hmap *m)
{
    uint32_t cap = m->cap ? m->cap * 2 : HMAP_MIN_CAP;
    if (cap < m->cap)
        return -ENOMEM;
    struct hmap_slot *s = calloc(cap, sizeof *s), *old = m->slots;
    if (!s)
        return -ENOMEM;
    uint32_t ocap = m->cap;
    m->slots = s;
    m->cap = cap;
    m->n = 0;
    for (uint32_t i = 0; i < ocap; i++)
        if (old[i].v)
            place(m, old[i].h, old[i].v);
    free(old);
    return 0;
}

int hmap_put(struct hmap *m, uint64_t h, void *v)
{
    if (!v)
        return -EINVAL;
    if ((m->n + 1) * 2 > m->cap) {
        int rc = grow(m);
        if (rc < 0)
            return rc;
    }
    place(m, h, v);
    return 0;
}

void *hmap_next(const struct hmap *m, uint64_t h, uint32_t *pos)
{
    if (!m->cap)
        return NULL;
    /* *pos counts the slots already walked from h's home */
    for (uint32_t k = *pos; k < m->cap; k++) {
        const struct hmap_slot *s = &m->slots[(home_of(m, h) + k) & (m->cap - 1)];
        if (!s->v)
            return NULL;
        if (s->h == h) {
            *pos = k + 1;
            return s->v;
        }
    }
    return NULL;
}

bool hmap_del(struct hmap *m, uint64_t h, const void *v)
{
    if (!m->cap)
        return false;
    uint32_t mask = m->cap - 1, i = home_of(m, h);
    while (m->slots[i].v && !(m->slots[i].h == h && m->slots[i].v == v))
        i = (i + 1) & mask;
    if (!m->slots[i].v)
        return false;
    /* backward shift: pull later members of the probe run into the hole, so no tombstones */
    for (uint32_t j = (i + 1) & mask; m->slots[j].v; j = (j + 1) & mask) {
        uint32_t k = home_of(m, m->slots[j].h);
        bool stays = i <= j ? (i < k && k <= j) : (i < k || k <= j);
        if (!stays) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i] = (struct hmap_slot){0, NULL};
    m->n--;
    return true;
}
