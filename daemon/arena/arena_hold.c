/* arena_hold.c: per-peer holds of memory a failed peer may still read (arena_hold.h). A small
 * array of keys: the peers whose chunks failed a moment ago (at most link's max_peers at once,
 * plus the ones lingering after their hold ended). */
#include "arena_hold.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>

struct hkey {
    uint64_t key;
    uint64_t end_ms;   /* HOLD_UNTIL_TOLD: no end time yet */
    uint64_t since_ms; /* the first hold since it was last empty */
    uint32_t slots;
    uint64_t bytes;
    void **bufs; /* owned, each owned: n_bufs of cap_bufs */
    uint32_t n_bufs, cap_bufs;
};

struct arena_hold {
    struct arena *a; /* borrowed */
    struct hkey *v;  /* owned */
    uint32_t n, cap;
    uint64_t holds_total, reclaimed_total, reclaimed_bytes_total, longest_ms;
};

int hold_new(struct arena *a, struct arena_hold **ret)
{
    struct arena_hold *h = calloc(1, sizeof *h);
    if (!h)
        return -ENOMEM;
    h->a = a;
    *ret = h;
    return 0;
}

static void free_bufs(struct hkey *k)
{
    for (uint32_t i = 0; i < k->n_bufs; i++)
        free(k->bufs[i]);
    k->n_bufs = 0;
}

struct arena_hold *hold_free(struct arena_hold *h)
{
    if (!h)
        return NULL;
    for (uint32_t i = 0; i < h->n; i++) {
        free_bufs(&h->v[i]);
        free(h->v[i].bufs);
    }
    free(h->v);
    free(h);
    return NULL;
}

static bool empty(const struct hkey *k)
{
    return k->slots == 0 && k->n_bufs == 0;
}

static struct hkey *find(const struct arena_hold *h, uint64_t key)
{
    for (uint32_t i = 0; i < h->n; i++)
        if (h->v[i].key == key)
            return &h->v[i];
    return NULL;
}

static struct hkey *get(struct arena_hold *h, uint64_t key, uint64_t end_ms)
{
    struct hkey *k = find(h, key);
    if (k)
        return k;
    if (h->n == h->cap) {
        uint32_t cap = h->cap ? 2 * h->cap : 8;
        struct hkey *v = realloc(h->v, cap * sizeof *v);
        if (!v)
            return NULL;
        h->v = v;
        h->cap = cap;
    }
    k = &h->v[h->n++];
    *k = (struct hkey){.key = key, .end_ms = end_ms};
    return k;
}

int hold_add(struct arena_hold *h, uint64_t key, void *buf, uint64_t bytes, uint64_t end_ms,
             uint64_t now_ms)
{
    if (!key)
        return -EINVAL;
    struct hkey *k = get(h, key, end_ms);
    if (!k)
        return -ENOMEM;
    if (buf && k->n_bufs == k->cap_bufs) {
        uint32_t cap = k->cap_bufs ? 2 * k->cap_bufs : 4;
        void **v = realloc(k->bufs, cap * sizeof *v);
        if (!v)
            return -ENOMEM;
        k->bufs = v;
        k->cap_bufs = cap;
    }
    if (empty(k))
        k->since_ms = now_ms;
    if (buf)
        k->bufs[k->n_bufs++] = buf;
    else
        k->slots++;
    k->bytes += bytes;
    h->holds_total++;
    return 0;
}

int hold_set(struct arena_hold *h, uint64_t key, uint64_t end_ms, bool create)
{
    struct hkey *k = create ? get(h, key, end_ms) : find(h, key);
    if (!k)
        return create ? -ENOMEM : 0;
    k->end_ms = end_ms;
    return 0;
}

bool hold_has(const struct arena_hold *h, uint64_t key)
{
    const struct hkey *k = find(h, key);
    return k && !empty(k);
}

uint32_t hold_tick(struct arena_hold *h, uint64_t now_ms)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < h->n;) {
        struct hkey *k = &h->v[i];
        if (k->end_ms != HOLD_UNTIL_TOLD && now_ms >= k->end_ms && !empty(k)) {
            uint64_t key = k->key, bytes = k->bytes;
            uint32_t bufs = k->n_bufs;
            if (now_ms - k->since_ms > h->longest_ms)
                h->longest_ms = now_ms - k->since_ms;
            free_bufs(k);
            k->slots = 0;
            k->bytes = 0;
            /* last: the arena serves its waiters from here, whose chunks may fail and be held
             * again (hold_add may move the array: k is looked up again) */
            uint32_t slots = h->a ? arena_reclaim_peer(h->a, key) : 0;
            n += slots + bufs;
            h->reclaimed_total += slots + bufs;
            h->reclaimed_bytes_total += bytes;
            k = &h->v[i];
        }
        if (empty(k) && k->end_ms != HOLD_UNTIL_TOLD && now_ms >= k->end_ms &&
            now_ms - k->end_ms >= HOLD_LINGER_MS) {
            free(k->bufs);
            *k = h->v[--h->n];
            continue;
        }
        i++;
    }
    return n;
}

bool hold_timed(const struct arena_hold *h)
{
    for (uint32_t i = 0; h && i < h->n; i++)
        if (!empty(&h->v[i]) && h->v[i].end_ms != HOLD_UNTIL_TOLD)
            return true;
    return false;
}

void hold_get_stats(const struct arena_hold *h, struct hold_stats *ret)
{
    struct hold_stats s = {.holds_total = h->holds_total,
                           .reclaimed_total = h->reclaimed_total,
                           .reclaimed_bytes_total = h->reclaimed_bytes_total,
                           .longest_ms = h->longest_ms};
    for (uint32_t i = 0; i < h->n; i++) {
        const struct hkey *k = &h->v[i];
        bool told = k->end_ms == HOLD_UNTIL_TOLD;
        if (empty(k) && !told)
            continue; /* lingering after its hold ended */
        s.peers++;
        s.peers_until_told += told;
        s.slots += k->slots;
        s.buffers += k->n_bufs;
        s.bytes += k->bytes;
    }
    *ret = s;
}

json_t *hold_stats_json(const struct arena_hold *h)
{
    struct hold_stats s;
    hold_get_stats(h, &s);
    return json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "peers", (json_int_t)s.peers,
                     "slots", (json_int_t)s.slots, "buffers", (json_int_t)s.buffers, "bytes",
                     (json_int_t)s.bytes, "peers_until_told", (json_int_t)s.peers_until_told,
                     "holds_total", (json_int_t)s.holds_total, "reclaimed_total",
                     (json_int_t)s.reclaimed_total, "reclaimed_bytes_total",
                     (json_int_t)s.reclaimed_bytes_total, "longest_ms", (json_int_t)s.longest_ms);
}
