/* wprefault.c: a registered rank's host pools mapped in ahead of its copies (docs/DESIGN.md
 * §3). REGISTER maps the pools without MAP_POPULATE (on the loop it stalled whole seconds), so
 * without this every copy thread would take a minor fault per 4 KiB page on a rank's first
 * requests. Right after REGISTER one background job on the copy threads (copyeng.h,
 * COPYENG_PREFAULT) populates the pages the worker holds: writable for a generation rank (its
 * pools are copy destinations), readable for a context rank.
 * Ownership: the job pins the mappings while it runs (mempin.h); the connection holds the job
 * handle (c->prefault) until its callback; a worker that goes away first has the job cancelled
 * (wprefault_cancel, before its rank is removed), so no callback can reach a freed connection
 * and its pools are unmapped when the last running piece ended. The rank is usable meanwhile:
 * copies of it run ahead of the prefault, and fault in on demand what it has not reached. */
#include <jansson.h>
#include <string.h>

#include "copyeng.h"
#include "daemon.h"
#include "workers.h"

static void on_prefaulted(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j;
    struct wconn *c = user;
    c->prefault = NULL;
    c->w->counters.prefaults_done++;
    c->w->counters.prefault_bytes += d->bytes;
    c->w->counters.prefault_ns += d->wall_ns;
}

void wprefault_start(struct wconn *c)
{
    const struct copy_mem *m = &c->xc.rank->mem;
    struct copy_op ops[LAYOUT_MAX_POOLS];
    uint32_t n = 0;
    uint64_t ext = 0;
    if (!c->w->d->copy || c->w->d->cfg.copy_prefault == 0 /* off */ || c->prefault)
        return;
    for (uint32_t i = 0; i < m->n && i < LAYOUT_MAX_POOLS; i++) {
        if (!m->base[i] || !m->size[i])
            continue; /* GPU pools, empty pools */
        ops[n++] = (struct copy_op){.src_pool = i, .len = m->size[i], .count = 1, .ext_off = ext};
        ext += m->size[i];
    }
    if (n == 0)
        return;
    struct copyeng_part part = {.kind = COPYENG_PREFAULT, .ops = ops, .n_ops = n, .src = m,
                                .write = c->xc.rank->layout.role == ROLE_GENERATION};
    if (copyeng_submit(c->w->d->copy, &part, 1, on_prefaulted, c, &c->prefault) == 0)
        c->w->counters.prefaults++;
    else /* out of memory: the copies fault in on demand */
        c->prefault = NULL;
}

void wprefault_cancel(struct wconn *c)
{
    if (!c->prefault)
        return;
    copyeng_cancel(c->prefault);
    c->prefault = NULL;
    c->w->counters.prefaults_cancelled++;
}

void wprefault_stats(const struct workers *w, json_t *ret)
{
    const struct workers_counters *k = &w->counters;
    json_object_set_new(ret, "prefaults", json_integer((json_int_t)k->prefaults));
    json_object_set_new(ret, "prefaults_done", json_integer((json_int_t)k->prefaults_done));
    json_object_set_new(ret, "prefaults_cancelled",
                        json_integer((json_int_t)k->prefaults_cancelled));
    json_object_set_new(ret, "prefaulting", json_integer((json_int_t)(k->prefaults -
                        k->prefaults_done - k->prefaults_cancelled)));
    json_object_set_new(ret, "prefault_bytes", json_integer((json_int_t)k->prefault_bytes));
    json_object_set_new(ret, "prefault_seconds", json_real(k->prefault_ns / 1e9));
}
