/* hmap.h: a small open-addressing hash index from a 64-bit hash to pointers (linear probing,
 * backward-shift deletion, grown at half load). Several values may share a hash: a lookup walks
 * the candidates of one hash and the caller compares its own full key (hmap_next), so the map
 * never needs to know what a key is. Used for every per-request lookup of the request core
 * (reqtab.h: requests by context instance and id; flows by peer and flow id). Not thread-safe. */
#ifndef KVF_HMAP_H
#define KVF_HMAP_H

#include <stdbool.h>
#include <stdint.h>

struct hmap_slot {
    uint64_t h;
    void *v; /* NULL: empty */
};

struct hmap {
    struct hmap_slot *slots; /* owned, cap entries */
    uint32_t cap, n;         /* cap: 0 or a power of two */
};

void hmap_init(struct hmap *m);
void hmap_free(struct hmap *m);
/* Adds v (not NULL) under h; the same h may hold several values. 0 or -ENOMEM. */
int hmap_put(struct hmap *m, uint64_t h, void *v);
/* Removes the value v stored under h; false when it is not there. */
bool hmap_del(struct hmap *m, uint64_t h, const void *v);
/* The values stored under h, one per call: start with *pos = 0; NULL when there are no more.
 * The map must not change during the walk. */
void *hmap_next(const struct hmap *m, uint64_t h, uint32_t *pos);
static inline uint32_t hmap_count(const struct hmap *m) { return m->n; }

/* Hashes for keys: a 64-bit mix, a string with a seed (FNV-1a then mixed), and a pair. */
uint64_t hmap_mix(uint64_t x);
uint64_t hmap_str(const char *s, uint64_t seed);
static inline uint64_t hmap_pair(uint64_t a, uint64_t b) { return hmap_mix(a ^ hmap_mix(b + 0x9e3779b97f4a7c15ull)); }

#endif
