/* dheap.h: deadlines in a min-heap, so a periodic sweep touches only what expired (docs/DESIGN.md
 * §5b). An item embeds a struct dheap_node (its deadline and its place in the heap) and is
 * found again from it with container_of-style arithmetic by its owner; the heap owns only its
 * array of node pointers. push, remove and update are O(log n); pop_due returns the earliest
 * node whose deadline is at or before now (removed), or NULL. A node is in at most one heap;
 * removing a node that is not in one is a no-op. Single-threaded. */
#ifndef KVF_DHEAP_H
#define KVF_DHEAP_H

#include <stdbool.h>
#include <stdint.h>

#define DHEAP_NONE UINT32_MAX

struct dheap_node {
    uint64_t at; /* the deadline (ms) */
    uint32_t ix; /* its place in the heap; DHEAP_NONE: not in one */
};

struct dheap {
    struct dheap_node **a;
    uint32_t n, cap;
};

static inline void dheap_node_init(struct dheap_node *nd) { nd->ix = DHEAP_NONE; }
static inline bool dheap_queued(const struct dheap_node *nd) { return nd->ix != DHEAP_NONE; }

void dheap_init(struct dheap *h);
/* Frees the array (the nodes are their owners'). */
void dheap_free(struct dheap *h);
/* Queues nd at deadline at, or moves it there when queued. 0 or -ENOMEM (nd unchanged). */
int dheap_update(struct dheap *h, struct dheap_node *nd, uint64_t at);
void dheap_remove(struct dheap *h, struct dheap_node *nd);
struct dheap_node *dheap_pop_due(struct dheap *h, uint64_t now);
static inline uint32_t dheap_count(const struct dheap *h) { return h->n; }

#endif
