/* dheap.c: a binary min-heap of deadlines (dheap.h). */
#include "dheap.h"

#include <errno.h>
#include <stdlib.h>

void dheap_init(struct dheap *h)
{
    h->a = NULL;
    h->n = h->cap = 0;
}

void dheap_free(struct dheap *h)
{
    for (uint32_t i = 0; i < h->n; i++)
        h->a[i]->ix = DHEAP_NONE;
    free(h->a);
    dheap_init(h);
}

static void place(struct dheap *h, uint32_t i, struct dheap_node *nd)
{
    h->a[i] = nd;
    nd->ix = i;
}

static void up(struct dheap *h, uint32_t i)
{
    struct dheap_node *nd = h->a[i];
    while (i > 0) {
        uint32_t p = (i - 1) / 2;
        if (h->a[p]->at <= nd->at)
            break;
        place(h, i, h->a[p]);
        i = p;
    }
    place(h, i, nd);
}

static void down(struct dheap *h, uint32_t i)
{
    struct dheap_node *nd = h->a[i];
    for (;;) {
        uint32_t c = 2 * i + 1;
        if (c >= h->n)
            break;
        if (c + 1 < h->n && h->a[c + 1]->at < h->a[c]->at)
            c++;
        if (nd->at <= h->a[c]->at)
            break;
        place(h, i, h->a[c]);
        i = c;
    }
    place(h, i, nd);
}

int dheap_update(struct dheap *h, struct dheap_node *nd, uint64_t at)
{
    if (dheap_queued(nd)) {
        uint64_t was = nd->at;
        nd->at = at;
        if (at < was)
            up(h, nd->ix);
        else
            down(h, nd->ix);
        return 0;
    }
    if (h->n == h->cap) {
        uint32_t cap = h->cap ? h->cap * 2 : 64;
        struct dheap_node **a = realloc(h->a, (size_t)cap * sizeof *a);
        if (!a)
            return -ENOMEM;
        h->a = a;
        h->cap = cap;
    }
    nd->at = at;
    place(h, h->n++, nd);
    up(h, nd->ix);
    return 0;
}

void dheap_remove(struct dheap *h, struct dheap_node *nd)
{
    if (!dheap_queued(nd))
        return;
    uint32_t i = nd->ix;
    nd->ix = DHEAP_NONE;
    struct dheap_node *last = h->a[--h->n];
    if (i == h->n)
        return;
    place(h, i, last);
    if (i > 0 && h->a[(i - 1) / 2]->at > last->at)
        up(h, i);
    else
        down(h, i);
}

struct dheap_node *dheap_pop_due(struct dheap *h, uint64_t now)
{
    if (h->n == 0 || h->a[0]->at > now)
        return NULL;
    struct dheap_node *nd = h->a[0];
    dheap_remove(h, nd);
    return nd;
}
