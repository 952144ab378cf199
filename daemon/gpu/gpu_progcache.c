/* gpu_progcache.c: see gpu_progcache.h. The entries are a doubly linked list, most recently
 * used first; lookups compare a hash of the ops, then the ops themselves (a hit is exact). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "gpu_priv.h"
#include "gpu_progcache.h"
#include "log.h"

struct gpu_prog {
    struct gpu_prog *prev, *next; /* g's list while cached */
    struct gpu_retired retired;   /* in g->prog_retired once it left the cache unreferenced */
    uint64_t hash;
    int device;
    uint32_t n_ops;
    struct copy_op *ops; /* owned: the key */
    void *obj;           /* owned: make's program */
    gpu_prog_free_fn free_fn;
    uint32_t refs;
    bool cached;
};

static uint64_t ops_hash(const struct copy_op *ops, uint32_t n_ops, int device)
{
    const unsigned char *b = (const unsigned char *)ops;
    size_t n = (size_t)n_ops * sizeof *ops;
    uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)(unsigned)device ^ ((uint64_t)n_ops << 32);
    uint64_t lane[4] = {h, h + 1, h + 2, h + 3}; /* four independent chains: a miss hashes every
                                                   * request's ops (about 100 KB for kimi-k3 8k) */
    size_t i = 0;
    for (; i + 32 <= n; i += 32)
        for (int k = 0; k < 4; k++) {
            uint64_t w;
            memcpy(&w, b + i + 8 * k, 8);
            lane[k] = (lane[k] ^ w) * 0x100000001b3ull;
            lane[k] ^= lane[k] >> 29;
        }
    for (int k = 0; k < 4; k++)
        h = (h ^ lane[k]) * 0x100000001b3ull;
    for (; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static void entry_free(struct gpu_retired *r)
{
    struct gpu_prog *p = (struct gpu_prog *)((char *)r - offsetof(struct gpu_prog, retired));
    p->free_fn(p->obj);
    free(p->ops);
    free(p);
}

static void unlink_entry(struct gpu *g, struct gpu_prog *p)
{
    if (p->prev)
        p->prev->next = p->next;
    else
        g->prog_head = p->next;
    if (p->next)
        p->next->prev = p->prev;
    else
        g->prog_tail = p->prev;
    p->prev = p->next = NULL;
    p->cached = false;
    g->n_progs--;
}

static void push_front(struct gpu *g, struct gpu_prog *p)
{
    p->prev = NULL;
    p->next = g->prog_head;
    if (g->prog_head)
        g->prog_head->prev = p;
    else
        g->prog_tail = p;
    g->prog_head = p;
    p->cached = true;
    g->n_progs++;
}

/* An entry out of the cache with no reference left: freed when the GPUs are idle. */
static void retire(struct gpu *g, struct gpu_prog *p)
{
    p->retired.free_fn = entry_free;
    gpu_retire(&g->prog_retired, g, &p->retired);
}

/* Evicts unreferenced entries, least recently used first, until fewer than `room` remain. */
static void evict_to(struct gpu *g, uint32_t room)
{
    for (struct gpu_prog *p = g->prog_tail, *prev; p && g->n_progs >= room; p = prev) {
        prev = p->prev;
        if (p->refs > 0)
            continue;
        unlink_entry(g, p);
        g->prog_evicted++;
        retire(g, p);
    }
}

int gpu_prog_get(struct gpu *g, const struct copy_op *ops, uint32_t n_ops, int device,
                 gpu_prog_make_fn make, void *make_arg, gpu_prog_free_fn free_fn,
                 struct gpu_prog **ret, char *msg, size_t len)
{
    uint64_t t0 = uv_hrtime(); /* the miss's time split: lookup (hash, scan, copy), make, evict */
    uint64_t h = ops_hash(ops, n_ops, device);
    size_t bytes = (size_t)n_ops * sizeof *ops;
    for (struct gpu_prog *p = g->prog_head; p; p = p->next)
        if (p->hash == h && p->device == device && p->n_ops == n_ops &&
            memcmp(p->ops, ops, bytes) == 0) {
            if (p != g->prog_head) { /* most recently used first */
                unlink_entry(g, p);
                push_front(g, p);
            }
            p->refs++;
            g->prog_hits++;
            g->prog_lookup_ns += uv_hrtime() - t0;
            *ret = p;
            return 0;
        }
    struct gpu_prog *p = calloc(1, sizeof *p);
    if (!p || !(p->ops = malloc(bytes ? bytes : 1))) {
        free(p);
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    uint64_t t1 = uv_hrtime();
    int rc = make(ops, n_ops, device, make_arg, &p->obj, msg, len);
    uint64_t t2 = uv_hrtime();
    g->prog_make_ns += t2 - t1;
    if (rc < 0) {
        free(p->ops);
        free(p);
        return rc;
    }
    if (rc > 0)
        g->prog_waited++;
    memcpy(p->ops, ops, bytes);
    p->hash = h;
    p->device = device;
    p->n_ops = n_ops;
    p->free_fn = free_fn;
    p->refs = 1;
    g->prog_misses++;
    uint64_t t3 = uv_hrtime();
    g->prog_lookup_ns += (t1 - t0) + (t3 - t2);
    evict_to(g, g->max_progs);
    g->prog_evict_ns += uv_hrtime() - t3;
    if (g->n_progs < g->max_progs)
        push_front(g, p);
    else
        g->prog_uncached++; /* every entry is held (or the limit is 0): freed after its use */
    *ret = p;
    return 0;
}

struct gpu_prog *gpu_prog_wrap(struct gpu *g, void *obj, int device, gpu_prog_free_fn free_fn)
{
    (void)g;
    struct gpu_prog *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->obj = obj;
    p->device = device;
    p->free_fn = free_fn;
    p->refs = 1;
    return p;
}

struct gpu_prog *gpu_prog_ref(struct gpu_prog *p)
{
    p->refs++;
    return p;
}

void *gpu_prog_obj(const struct gpu_prog *p)
{
    return p->obj;
}

const struct copy_op *gpu_prog_ops(const struct gpu_prog *p)
{
    return p->ops;
}

struct gpu_prog *gpu_prog_put(struct gpu *g, struct gpu_prog *p)
{
    if (!p)
        return NULL;
    if (p->refs == 0) {
        log_error("gpu: a copy program released more often than taken");
        return NULL;
    }
    if (--p->refs == 0 && !p->cached)
        retire(g, p);
    return NULL;
}

int gpu_progcache_set_max(struct gpu *g, uint32_t max)
{
    if (max > GPU_PROGCACHE_MAX)
        return -EINVAL;
    g->max_progs = max;
    evict_to(g, max + 1);
    return 0;
}

void gpu_progcache_stats(const struct gpu *g, struct gpu_progcache_stats *ret)
{
    *ret = (struct gpu_progcache_stats){.count = g->n_progs, .max = g->max_progs,
                                        .hits = g->prog_hits, .misses = g->prog_misses,
                                        .evicted = g->prog_evicted,
                                        .uncached = g->prog_uncached,
                                        .waited = g->prog_waited,
                                        .tmpl_live = g->n_tprogs, .tmpl_made = g->tprog_made,
                                        .tmpl_refused = g->tprog_refused,
                                        .req_template = g->req_template, .req_ops = g->req_ops,
                                        .lookup_ns = g->prog_lookup_ns,
                                        .make_ns = g->prog_make_ns,
                                        .evict_ns = g->prog_evict_ns};
}

void gpu_progcache_flush(struct gpu *g)
{
    while (g->prog_head) {
        struct gpu_prog *p = g->prog_head;
        if (p->refs > 0)
            log_warn("gpu: a copy program still held at teardown (%u references): freed",
                     p->refs);
        unlink_entry(g, p);
        p->retired.free_fn = entry_free;
        p->retired.next = g->prog_retired.head;
        g->prog_retired.head = &p->retired;
    }
    gpu_retire_flush(&g->prog_retired);
}
