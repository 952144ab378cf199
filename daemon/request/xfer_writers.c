/* xfer_writers.c: see xfer_writers.h. */
#include <stdlib.h>
#include <string.h>

#include "plan_request.h"
#include "registry.h"
#include "transfers.h"
#include "xfer_writers.h"

void xfer_wcache_done(struct xfer_wcache *c)
{
    for (uint32_t i = 0; i < XFER_WCACHE_SLOTS; i++) {
        free(c->e[i].ctx_workers);
        free(c->e[i].writers);
    }
    memset(c, 0, sizeof *c);
}

static uint32_t groups_of(const struct xfer *r)
{
    uint32_t m = 0;
    for (uint32_t g = 0; g < r->items.n_groups && g < 32; g++)
        m |= (r->items.counts[g] != 0) << g;
    return m;
}

static uint32_t slot_of(const struct xfer *r, const struct reg_instance *in, uint32_t groups)
{
    uint64_t h = r->rank->worker_id * 0x9e3779b97f4a7c15ull;
    h ^= (in->ranks[0]->worker_id + (uint64_t)(uint32_t)r->ctx_dp_rank * 31 + groups) *
         0xc2b2ae3d27d4eb4full;
    return (uint32_t)((h ^ (h >> 29)) % XFER_WCACHE_SLOTS);
}

/* The entry of r's key, or NULL. */
static const struct xfer_wcache_entry *find(const struct xfer_wcache *c, const struct xfer *r,
                                            const struct reg_instance *in)
{
    uint32_t groups = groups_of(r);
    const struct xfer_wcache_entry *e = &c->e[slot_of(r, in, groups)];
    if (e->gen_worker != r->rank->worker_id || e->dp_rank != r->ctx_dp_rank ||
        e->groups != groups || e->n_ctx != in->n_ranks)
        return NULL;
    for (uint32_t i = 0; i < in->n_ranks; i++)
        if (e->ctx_workers[i] != in->ranks[i]->worker_id)
            return NULL;
    return e;
}

bool xfer_wcache_compat_known(const struct xfer_wcache *c, const struct xfer *r,
                              const struct reg_instance *in)
{
    return find(c, r, in) != NULL;
}

static void keep(struct xfer_wcache *c, const struct xfer *r, const struct reg_instance *in,
                 const uint8_t *writers)
{
    uint32_t groups = groups_of(r);
    struct xfer_wcache_entry *e = &c->e[slot_of(r, in, groups)];
    uint64_t *w = e->n_ctx == in->n_ranks ? e->ctx_workers : NULL;
    uint8_t *set = e->n_ctx == in->n_ranks ? e->writers : NULL;
    if (!w) {
        w = malloc(in->n_ranks * sizeof *w);
        set = malloc(in->n_ranks);
        if (!w || !set) { /* not kept: the next request asks plan_writers again */
            free(w);
            free(set);
            return;
        }
        free(e->ctx_workers);
        free(e->writers);
    }
    for (uint32_t i = 0; i < in->n_ranks; i++)
        w[i] = in->ranks[i]->worker_id;
    memcpy(set, writers, in->n_ranks);
    *e = (struct xfer_wcache_entry){r->rank->worker_id, r->ctx_dp_rank, groups, in->n_ranks, w,
                                    set};
}

kvf_error_t xfer_writers(struct xfer_wcache *c, const struct xfer *r,
                         const struct reg_instance *in, uint8_t *writers, char *msg,
                         size_t msglen)
{
    struct plan_input pin = {.gen = &r->rank->layout, .ctx = in->table, .n_ctx = in->n_ranks,
                             .ctx_dp_rank = r->ctx_dp_rank, .tokens = r->tokens};
    plan_ids_of(r->items.n_groups, r->items.counts, r->items.ids, &pin.gen_ids);
    const struct xfer_wcache_entry *e = find(c, r, in);
    if (e) {
        c->hits++;
        pin.compat_known = true;
        kvf_error_t code = plan_request_check(&pin, msg, msglen);
        if (code == KVF_OK)
            memcpy(writers, e->writers, in->n_ranks);
        return code;
    }
    c->misses++;
    kvf_error_t code = plan_request_writers(&pin, writers, msg, msglen);
    if (code == KVF_OK)
        keep(c, r, in, writers);
    return code;
}
