/* plan_tcache.c: see plan_tcache.h. A few dozen entries in practice (one per registration pair
 * and request shape), so lookup is a scan of hashes. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"
#include "plan_tcache.h"

int plan_tcache_init(struct plan_tcache *c, uint32_t max_entries, size_t max_bytes)
{
    memset(c, 0, sizeof *c);
    if (max_entries == 0 || max_entries > PLAN_TCACHE_MAX_ENTRIES || max_bytes == 0)
        return -EINVAL;
    c->e = calloc(max_entries, sizeof *c->e);
    if (!c->e)
        return -ENOMEM;
    c->max_entries = max_entries;
    c->max_bytes = max_bytes;
    return 0;
}

static void drop(struct plan_tcache *c, uint32_t i)
{
    struct plan_tcache_entry *e = &c->e[i];
    c->bytes -= e->t.bytes;
    plan_template_done(&e->t);
    free(e->who);
    c->e[i] = c->e[--c->n];
    memset(&c->e[c->n], 0, sizeof c->e[c->n]);
}

void plan_tcache_done(struct plan_tcache *c)
{
    while (c->n)
        drop(c, c->n - 1);
    free(c->e);
    memset(c, 0, sizeof *c);
}

static uint64_t mix(uint64_t h, uint64_t x)
{
    h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static uint64_t hash_of(const uint64_t *who, uint32_t n_who, const uint64_t *shape,
                        uint32_t n_shape)
{
    uint64_t h = mix(n_who, n_shape);
    for (uint32_t i = 0; i < n_who; i++)
        h = mix(h, who[i]);
    for (uint32_t i = 0; i < n_shape; i++)
        h = mix(h, shape[i]);
    return h;
}

/* The entry of (who, in's shape) or NULL, and the key's hash in *h; -ENOMEM. */
static int find(struct plan_tcache *c, const uint64_t *who, uint32_t n_who,
                const struct plan_input *in, struct plan_tcache_entry **ret, uint64_t *h)
{
    uint64_t *shape;
    uint32_t n_shape;
    *ret = NULL;
    if (plan_template_shape(in, &shape, &n_shape))
        return -ENOMEM;
    *h = hash_of(who, n_who, shape, n_shape);
    for (uint32_t i = 0; i < c->n && !*ret; i++) {
        struct plan_tcache_entry *e = &c->e[i];
        if (e->hash == *h && e->n_who == n_who && e->t.n_shape == n_shape &&
            !memcmp(e->who, who, n_who * sizeof *who) &&
            !memcmp(e->t.shape, shape, n_shape * sizeof *shape))
            *ret = e;
    }
    free(shape);
    return 0;
}

static bool misused(const struct plan_tcache *c, const uint64_t *who, uint32_t n_who,
                    const struct plan_input *in)
{
    return !c->e || !who || n_who == 0 || n_who > PLAN_TCACHE_MAX_WHO || !in;
}

int plan_tcache_lookup(struct plan_tcache *c, const uint64_t *who, uint32_t n_who,
                       const struct plan_input *in, struct plan_tcache_entry **entry_ret,
                       struct plan_error *err)
{
    struct plan_tcache_entry *e;
    uint64_t h;
    *entry_ret = NULL;
    if (misused(c, who, n_who, in))
        return plan_set_err(err, KVF_E_INTERNAL, COMPAT_OK, "plan template cache misused");
    if (!in->gen || !in->ctx || in->n_ctx == 0)
        return 0; /* plan_tcache_plan refuses it, as plan_build does */
    if (find(c, who, n_who, in, &e, &h))
        return plan_set_err(err, KVF_E_INTERNAL, COMPAT_OK, "out of memory while planning"),
               -ENOMEM;
    if (!e)
        return 0;
    struct plan_input pin = *in;
    pin.compat_known = true; /* the template was built on these layouts (the key) */
    int rc = plan_check_request(&pin, err);
    if (rc)
        return rc;
    c->hits++;
    e->last_use = ++c->tick;
    *entry_ret = e;
    return 1;
}

int plan_tcache_plan(struct plan_tcache *c, const uint64_t *who, uint32_t n_who,
                     const struct plan_input *in, struct plan *ret,
                     struct plan_tcache_entry **entry_ret, bool *hit, struct plan_error *err)
{
    if (misused(c, who, n_who, in))
        return plan_set_err(err, KVF_E_INTERNAL, COMPAT_OK, "plan template cache misused");
    if (!in->gen || !in->ctx || in->n_ctx == 0)
        return plan_build(in, ret, err); /* refused there, as always */
    struct plan_tcache_entry *e;
    uint64_t h;
    if (find(c, who, n_who, in, &e, &h))
        return plan_set_err(err, KVF_E_INTERNAL, COMPAT_OK, "out of memory while planning"),
               -ENOMEM;
    if (e) {
        int rc = plan_template_instantiate(&e->t, in, ret, err);
        if (rc == 0) {
            c->hits++;
            e->last_use = ++c->tick;
            *entry_ret = e;
            *hit = true;
        }
        return rc;
    }
    struct plan_template t;
    int rc = plan_template_build(in, &t, ret, err);
    if (rc)
        return rc;
    c->misses++;
    *hit = false;
    *entry_ret = NULL;
    uint64_t *w = malloc(n_who * sizeof *w);
    if (!w || t.bytes > c->max_bytes) {
        c->not_kept++;
        free(w);
        plan_template_done(&t);
        return 0;
    }
    while (c->n && (c->n == c->max_entries || c->bytes + t.bytes > c->max_bytes)) {
        uint32_t old = 0;
        for (uint32_t i = 1; i < c->n; i++)
            if (c->e[i].last_use < c->e[old].last_use)
                old = i;
        drop(c, old);
        c->evicted++;
    }
    memcpy(w, who, n_who * sizeof *w);
    e = &c->e[c->n++];
    *e = (struct plan_tcache_entry){h, ++c->tick, w, n_who, t, false};
    c->bytes += t.bytes;
    *entry_ret = e;
    return 0;
}

void plan_tcache_forget(struct plan_tcache *c, uint64_t id)
{
    for (uint32_t i = 0; i < c->n;) {
        bool named = false;
        for (uint32_t k = 0; k < c->e[i].n_who && !named; k++)
            named = c->e[i].who[k] == id;
        if (named)
            drop(c, i);
        else
            i++;
    }
}
