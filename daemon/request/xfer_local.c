/* xfer_local.c: the `local` path (docs/DESIGN.md §5): both ranks registered here, so a RECV is
 * planned once, when every writer (xfer_writers.h: no copy program) has SENT, against the context
 * instance's table, from the plan template of its registrations and shape (plan_tcache.h: the
 * request's checks and its ids substituted; built with plan_build's checks on a miss) and
 * executed pool to pool, after copy_check has bounded every op inside the mapped pools (once
 * per template, with plan_template_fits proving it for every id), by the same-daemon path's
 * copy that the engine's local writers share (move_local.h: inline below
 * MOVE_LOCAL_INLINE_MAX bytes, else on the copy threads). When either side has GPU pools the
 * plan goes to xfer_gpu.c instead (kernels on a daemon stream). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "copyeng.h"
#include "move_exec.h"
#include "move_local.h"
#include "daemon.h"
#include "plan.h"
#include "plan_request.h"
#include "registry.h"
#include "registry_gpu.h"
#include "stream.h"
#include "transfers.h"
#include "xclient.h"

/* r's plan input: its ids and every SENT writer's, against the context instance's table;
 * `who`, the registrations (the template cache's key). Owned arrays: input_done. */
struct lin {
    struct plan_input pin;
    struct plan_ids *ctx_ids;
    uint64_t *who;
    uint32_t n_who;
};

static void input_done(struct lin *l)
{
    free(l->who);
    free(l->ctx_ids);
}

static kvf_error_t input_of(struct xfer *r, struct xfer *const *sends, struct lin *l, char *msg,
                            size_t msglen)
{
    struct reg_instance *in = registry_find(r->owner->reg, r->ctx_instance);
    l->ctx_ids = plan_ctx_ids_new(in->table, in->n_ranks);
    l->who = malloc((1 + (size_t)in->n_ranks) * sizeof *l->who);
    l->n_who = 1 + in->n_ranks;
    if (!l->ctx_ids || !l->who) {
        input_done(l);
        snprintf(msg, msglen, "out of memory");
        return KVF_E_INTERNAL;
    }
    l->pin = (struct plan_input){.gen = &r->rank->layout, .ctx = in->table, .n_ctx = in->n_ranks,
                                 .ctx_ids = l->ctx_ids, .ctx_dp_rank = r->ctx_dp_rank,
                                 .tokens = r->tokens,
                                 .compat_known = xfer_wcache_compat_known(&r->owner->wcache,
                                                                          r, in)};
    plan_ids_of(r->items.n_groups, r->items.counts, r->items.ids, &l->pin.gen_ids);
    l->who[0] = r->rank->worker_id;
    for (uint32_t c = 0; c < in->n_ranks; c++) {
        l->who[1 + c] = in->ranks[c]->worker_id;
        if (sends[c])
            plan_ids_of(sends[c]->items.n_groups, sends[c]->items.counts, sends[c]->items.ids,
                        &l->ctx_ids[c]);
    }
    return KVF_OK;
}

/* The template's writers (bytes, ranks, op counts) without their ops: ops NULL. */
static kvf_error_t without_ops(const struct plan_template *t, struct plan *ret, char *msg,
                               size_t msglen)
{
    *ret = t->plan;
    ret->writers = calloc(t->plan.n_writers ? t->plan.n_writers : 1, sizeof *ret->writers);
    if (!ret->writers) {
        snprintf(msg, msglen, "out of memory");
        return KVF_E_INTERNAL;
    }
    for (uint32_t w = 0; w < t->plan.n_writers; w++) {
        ret->writers[w] = t->plan.writers[w];
        ret->writers[w].ops = NULL;
    }
    return KVF_OK;
}

/* r's plan from the template of its registrations and shape: a hit is the request's checks
 * (plan_tcache_lookup), then its ids substituted, or with !ops on a template whose bounds fit
 * no ops at all (without_ops: the caller's GPU programs of the template add the ids); a miss
 * builds and keeps the template. */
static kvf_error_t plan_for(struct xfer *r, struct xfer **sends, bool ops, struct plan *ret,
                            struct plan_tcache_entry **entry, char *msg, size_t msglen)
{
    struct lin l;
    kvf_error_t e = input_of(r, sends, &l, msg, msglen);
    if (e != KVF_OK)
        return e;
    struct plan_tcache *tc = &r->owner->tcache;
    e = plan_request_lookup(tc, l.who, l.n_who, &l.pin, entry, msg, msglen);
    if (e == KVF_OK && *entry && !ops && (*entry)->fits) {
        e = without_ops(&(*entry)->t, ret, msg, msglen);
    } else if (e == KVF_OK && *entry && plan_template_substitute(&(*entry)->t, &l.pin, ret)) {
        snprintf(msg, msglen, "out of memory");
        e = KVF_E_INTERNAL;
    } else if (e == KVF_OK && !*entry) {
        e = plan_request_cached(tc, l.who, l.n_who, &l.pin, ret, entry, msg, msglen);
    }
    input_done(&l);
    return e;
}

kvf_error_t xfer_local_ops(struct xfer *r, struct xfer *const *sends,
                           const struct plan_tcache_entry *tmpl, struct plan *ret, char *msg,
                           size_t msglen)
{
    struct lin l;
    kvf_error_t e = input_of(r, sends, &l, msg, msglen);
    if (e != KVF_OK)
        return e;
    if (plan_template_substitute(&tmpl->t, &l.pin, ret)) {
        snprintf(msg, msglen, "out of memory");
        e = KVF_E_INTERNAL;
    }
    input_done(&l);
    return e;
}

kvf_error_t xfer_check_bounds(struct plan_tcache_entry *tmpl, const struct plan *p,
                              const struct reg_instance *in, const struct reg_rank *gen, bool gpu,
                              char *msg, size_t msglen)
{
    const struct copy_mem *dst = !gpu ? &gen->mem : gen->gpu ? &gen->gpu->mem : NULL;
    for (uint32_t w = 0; w < p->n_writers; w++) {
        const struct plan_writer *pw = &p->writers[w];
        const struct reg_rank *src = pw->ctx_rank < in->n_ranks ? in->ranks[pw->ctx_rank] : NULL;
        if (!src || !dst || (gpu && !src->gpu)) {
            snprintf(msg, msglen, "writer rank %u or generation rank %u is not registered%s",
                     pw->ctx_rank, layout_rank(&gen->layout), gpu ? " with GPU pools" : "");
            return KVF_E_INTERNAL;
        }
        if (tmpl && tmpl->fits)
            continue; /* proved for every id of this template's registrations */
        const struct copy_mem *sm = gpu ? &src->gpu->mem : &src->mem;
        if (copy_check(pw->ops, pw->n_ops, sm, 's') || copy_check(pw->ops, pw->n_ops, dst, 'd')) {
            snprintf(msg, msglen, "plan of writer rank %u leaves the mapped%s pools", pw->ctx_rank,
                     gpu ? " GPU" : "");
            return KVF_E_BOUND_VIOLATION;
        }
    }
    bool fits = tmpl != NULL; /* what no id changes passed copy_check; the rest for any id: */
    for (uint32_t w = 0; fits && !tmpl->fits && w < p->n_writers; w++) {
        const struct reg_rank *src = in->ranks[p->writers[w].ctx_rank];
        fits = !plan_template_fits(&tmpl->t, w, gpu ? &src->gpu->mem : &src->mem, 's') &&
               !plan_template_fits(&tmpl->t, w, dst, 'd');
    }
    if (fits)
        tmpl->fits = true;
    return KVF_OK;
}

/* The copy threads ended a RECV's copy (a cancelled job never gets here: the RECV is gone). */
static void on_copied(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j;
    struct xfer *r = user;
    struct transfers *t = r->owner;
    r->cpu_job = NULL;
    r->ls.copied = uv_hrtime();
    t->counters.local_memcpy_ns += d->busy_ns;
    t->counters.local_copy_ns += d->wall_ns; /* try_run counted plan and checks */
    if (d->status)
        transfers_copy_done(t, r, KVF_E_CANCELLED, 0, "the daemon is stopping");
    else
        transfers_copy_done(t, r, KVF_OK, d->bytes, "");
}

/* Every writer's program pool to pool by the same-daemon path's copy (move_local.h): inline
 * on the loop, or one job on the copy threads (r->cpu_job set; on_copied follows). */
static kvf_error_t run_host(struct transfers *t, struct xfer *r, const struct plan *p,
                            struct reg_instance *in, char *msg, size_t msglen)
{
    struct move_local_part *parts = calloc(p->n_writers ? p->n_writers : 1, sizeof *parts);
    if (!parts) {
        snprintf(msg, msglen, "out of memory");
        return KVF_E_INTERNAL;
    }
    for (uint32_t w = 0; w < p->n_writers; w++)
        parts[w] = (struct move_local_part){p->writers[w].ops, p->writers[w].n_ops,
                                            &in->ranks[p->writers[w].ctx_rank]->mem};
    uint64_t busy = 0;
    r->ls.started = uv_hrtime();
    int rc = move_local_run(t->d->copy, parts, p->n_writers, &r->rank->mem, p->total_bytes,
                            on_copied, r, &r->cpu_job, &busy, msg, msglen);
    free(parts);
    if (rc < 0)
        return KVF_E_INTERNAL;
    if (rc == MOVE_DONE) {
        r->ls.copied = uv_hrtime();
        t->counters.local_memcpy_ns += busy;
    }
    return KVF_OK;
}

kvf_error_t xfer_local_run(struct transfers *t, struct xfer *r, struct xfer **sends,
                           uint32_t n_ctx, uint64_t *bytes, char *msg, size_t msglen)
{
    if (stream_local_pending(sends, n_ctx)) /* a writer streams: its layers as they become final */
        return stream_local_start(t, r, sends, n_ctx, bytes, msg, msglen);
    struct reg_instance *in = registry_find(r->owner->reg, r->ctx_instance);
    struct plan p;
    struct plan_tcache_entry *tmpl;
    bool gpu = xfer_gpu_wanted(r->rank, in);
    kvf_error_t e = plan_for(r, sends, !gpu || !xfer_gpu_lazy_ops(), &p, &tmpl, msg, msglen);
    if (e != KVF_OK)
        return e;
    r->ls.planned = uv_hrtime();
    if (gpu) {
        e = xfer_gpu_start(t, r, &p, in, sends, tmpl, msg, msglen); /* stamps checked */
        r->ls.started = uv_hrtime();
        *bytes = p.total_bytes;
        plan_done(&p);
        return e;
    }
    (void)n_ctx; /* in is complete: n_ctx is in->n_ranks */
    if ((e = xfer_check_bounds(tmpl, &p, in, r->rank, false, msg, msglen)) != KVF_OK) {
        plan_done(&p);
        return e;
    }
    for (uint32_t w = 0; w < p.n_writers; w++)
        sends[p.writers[w].ctx_rank]->bytes += p.writers[w].bytes;
    *bytes = p.total_bytes;
    r->ls.checked = uv_hrtime();
    e = run_host(t, r, &p, in, msg, msglen);
    plan_done(&p);
    return e;
}
