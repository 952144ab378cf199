/* pattern.c: the global parity pattern (pattern.h). Each row (one head's inner bytes at one
 * logical coordinate) gets a 64-bit key from a strong mix (splitmix64 finalizer, chained) of
 * (seed, group name, global layer, tensor name, logical item, outer, global head); the row's
 * word j (bytes 8j..8j+7, little-endian) is the finalizer of key + (j + 1) * golden-ratio, a
 * cheap counter-based stream. So a byte's value depends only on its logical coordinates, never
 * on the rank, view arrangement or pool that holds it. Pure; thread-safe. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "pattern.h"

#define GOLDEN 0x9e3779b97f4a7c15ull

static inline uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t name_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < LAYOUT_SHORT_MAX && s[i]; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

static inline uint64_t row_key(uint64_t gt_key, uint64_t item, uint64_t outer, uint64_t head)
{
    uint64_t k = mix64(gt_key + item * GOLDEN);
    k = mix64(k ^ (outer + 0x632be59bd9b4e019ull));
    return mix64(k ^ (head + 0x8cb92ba72f3d8dd7ull));
}

static inline uint64_t row_word(uint64_t key, uint64_t j) { return mix64(key + (j + 1) * GOLDEN); }

static void fill_row(uint8_t *p, uint64_t len, uint64_t key)
{
    uint64_t j = 0;
    for (; (j + 1) * 8 <= len; j++) {
        uint64_t w = row_word(key, j);
        memcpy(p + j * 8, &w, 8); /* little-endian hosts only (x86-64, aarch64) */
    }
    if (j * 8 < len) {
        uint64_t w = row_word(key, j);
        memcpy(p + j * 8, &w, len - j * 8);
    }
}

/* Index of the first differing byte of the row, or len when it matches. */
static uint64_t check_row(const uint8_t *p, uint64_t len, uint64_t key, uint8_t *got, uint8_t *want)
{
    for (uint64_t j = 0; j * 8 < len; j++) {
        uint64_t w = row_word(key, j), n = len - j * 8 < 8 ? len - j * 8 : 8, g = 0;
        memcpy(&g, p + j * 8, n);
        if (n < 8)
            w &= (1ull << (n * 8)) - 1;
        if (g != w)
            for (uint64_t b = 0; b < n; b++)
                if (((g >> (8 * b)) & 0xff) != ((w >> (8 * b)) & 0xff)) {
                    *got = (uint8_t)(g >> (8 * b));
                    *want = (uint8_t)(w >> (8 * b));
                    return j * 8 + b;
                }
    }
    return len;
}

struct walk {
    const struct layout *l;
    const struct copy_mem *mem;
    uint64_t seed;
    uint64_t tokens; /* paged rows of request token >= tokens are skipped; 0: none */
    int past;        /* instead: only paged rows of token >= tokens, state groups skipped */
    /* verify only */
    int verify;
    uint32_t *bad_pool;
    uint64_t *bad_off;
    char *where;
    size_t wherelen;
};

static int walk_rank(struct walk *w, const struct plan_ids *ids, uint32_t first_block)
{
    const struct layout *l = w->l;
    for (uint32_t g = 0; g < l->n_groups && g < LAYOUT_MAX_GROUPS; g++) {
        const struct layout_group *gr = &l->groups[g];
        if (!ids->ids[g] || (w->past && gr->kind != GROUP_PAGED))
            continue;
        uint64_t gh = name_hash(gr->name) ^ w->seed * GOLDEN;
        for (uint32_t li = 0; li < gr->n_layers; li++)
            for (uint32_t v = 0; v < gr->n_views; v++) {
                const struct layout_view *vw = &gr->views[v];
                for (uint32_t t = 0; t < vw->n_tensors; t++) {
                    const struct layout_tensor *ts = &vw->tensors[t];
                    uint64_t gt_key = mix64(mix64(gh ^ (gr->layers[li] + 1ull)) ^ name_hash(ts->name));
                    uint32_t h_off = layout_first_head(l, ts);
                    for (uint32_t k = 0; k < ids->n[g]; k++) {
                        uint64_t item = gr->kind == GROUP_PAGED ? (uint64_t)first_block + k : 0;
                        struct layout_loc at = layout_region_at(l, vw, li, ids->ids[g][k]);
                        for (uint32_t o = 0; o < ts->outer; o++)
                            for (uint32_t h = 0; h < ts->heads; h++) {
                                if (w->tokens && gr->kind == GROUP_PAGED &&
                                    (item * ts->outer + o >= w->tokens) != w->past)
                                    break; /* past the prompt's last token (or before it) */
                                /* paged rows by request token: block sizes may differ */
                                uint64_t key = gr->kind == GROUP_PAGED
                                                   ? row_key(gt_key, 0, item * ts->outer + o, h + h_off)
                                                   : row_key(gt_key, item, o, h + h_off);
                                uint64_t ro = at.off + layout_row_off(ts, o, h);
                                uint8_t *p = w->mem->base[at.pool] + ro;
                                if (!w->verify) {
                                    fill_row(p, ts->inner, key);
                                    continue;
                                }
                                uint8_t got, want;
                                uint64_t b = check_row(p, ts->inner, key, &got, &want);
                                if (b == ts->inner)
                                    continue;
                                if (w->bad_pool)
                                    *w->bad_pool = at.pool;
                                if (w->bad_off)
                                    *w->bad_off = ro + b;
                                if (w->where && w->wherelen)
                                    snprintf(w->where, w->wherelen,
                                             "group %s layer %u tensor %s item %" PRIu64
                                             " outer %u head %u byte %" PRIu64
                                             ": got 0x%02x want 0x%02x",
                                             gr->name, gr->layers[li], ts->name, item, o,
                                             h + h_off, b, got, want);
                                return -1;
                            }
                    }
                }
            }
    }
    return 0;
}

void pattern_fill(const struct layout *l, const struct copy_mem *mem, const struct plan_ids *ids,
                  uint32_t first_block, uint64_t seed)
{
    pattern_fill_tokens(l, mem, ids, first_block, seed, 0);
}

void pattern_fill_tokens(const struct layout *l, const struct copy_mem *mem,
                         const struct plan_ids *ids, uint32_t first_block, uint64_t seed,
                         uint64_t tokens)
{
    struct walk w = {.l = l, .mem = mem, .seed = seed, .tokens = tokens};
    walk_rank(&w, ids, first_block);
}

int pattern_verify(const struct layout *l, const struct copy_mem *mem, const struct plan_ids *ids,
                   uint32_t first_block, uint64_t seed, uint32_t *bad_pool, uint64_t *bad_off,
                   char *where, size_t wherelen)
{
    return pattern_verify_tokens(l, mem, ids, first_block, seed, 0, bad_pool, bad_off, where,
                                 wherelen);
}

int pattern_verify_tokens(const struct layout *l, const struct copy_mem *mem,
                          const struct plan_ids *ids, uint32_t first_block, uint64_t seed,
                          uint64_t tokens, uint32_t *bad_pool, uint64_t *bad_off, char *where,
                          size_t wherelen)
{
    struct walk w = {l, mem, seed, tokens, 0, 1, bad_pool, bad_off, where, wherelen};
    return walk_rank(&w, ids, first_block);
}

int pattern_verify_past(const struct layout *l, const struct copy_mem *mem,
                        const struct plan_ids *ids, uint32_t first_block, uint64_t seed,
                        uint64_t tokens, uint32_t *bad_pool, uint64_t *bad_off, char *where,
                        size_t wherelen)
{
    struct walk w = {l, mem, seed, tokens, 1, 1, bad_pool, bad_off, where, wherelen};
    return walk_rank(&w, ids, first_block);
}
