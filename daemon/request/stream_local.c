/* stream_local.c: a RECV of the same daemon reading streaming SENDs (stream.h). Planned once,
 * with the marks of each writer's layers; each READY copies the newly final prefix of every
 * writer's extent pool to pool: host pools one batch at a time on the copy threads
 * (x->cpu_job, so a failure meanwhile is held as for any local copy; inline where the daemon
 * has none); GPU pools at once, one kernel per writer and READY on a daemon stream (x->gpu_job
 * while any runs, xfer_gpu.c), each after the GPU mark of the READY that made its range final
 * when READYs name CUDA events (xstream.h). DONE once every writer's extent is in. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "copyeng.h"
#include "daemon.h"
#include "plan_request.h"
#include "registry.h"
#include "stream.h"
#include "transfers.h"
#include "xclient.h"
#include "xstream.h"

bool stream_local_pending(struct xfer *const *sends, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (sends[i] && !xstream_final(sends[i]))
            return true;
    return false;
}

/* r's plan with marks: its ids and every writer's, against the context instance's table. */
static kvf_error_t plan_marked(struct transfers *t, struct xfer *r, struct reg_instance *in,
                               struct stream_copy *st, char *msg, size_t msglen)
{
    struct plan_ids *ctx_ids = plan_ctx_ids_new(in->table, in->n_ranks);
    if (!ctx_ids) {
        snprintf(msg, msglen, "out of memory");
        return KVF_E_INTERNAL;
    }
    struct plan_input pin = {.gen = &r->rank->layout, .ctx = in->table, .n_ctx = in->n_ranks,
                             .ctx_ids = ctx_ids, .ctx_dp_rank = r->ctx_dp_rank,
                             .tokens = r->tokens,
                             .compat_known = xfer_wcache_compat_known(&t->wcache, r, in)};
    plan_ids_of(r->items.n_groups, r->items.counts, r->items.ids, &pin.gen_ids);
    for (uint32_t c = 0; c < in->n_ranks; c++)
        if (st->sends[c])
            plan_ids_of(st->sends[c]->items.n_groups, st->sends[c]->items.counts,
                        st->sends[c]->items.ids, &ctx_ids[c]);
    kvf_error_t e = plan_request_marked(&pin, &st->plan, &st->marks, msg, msglen);
    free(ctx_ids);
    return e;
}

static void on_copied(struct copyeng_job *j, const struct copyeng_done *d, void *user);

/* GPU pools: what became final is launched at once, one kernel per writer and per READY that
 * made it final, each after that READY's GPU mark (xstream.h), behind the kernels queued
 * before (want: launched; done: completed). 1 once every byte is in and nothing runs. */
static int pump_gpu(struct transfers *t, struct xfer *r)
{
    struct stream_copy *st = r->scopy;
    bool all = true;
    for (uint32_t w = 0; w < st->plan.n_writers; w++) {
        const struct plan_writer *pw = &st->plan.writers[w];
        const struct xfer *s = st->sends[pw->ctx_rank];
        if (!s)
            return 0; /* its SEND ended: stream_send_ended failed r */
        uint64_t f = xstream_final_bytes(s, &st->marks, pw->ctx_rank, pw->bytes);
        const uint64_t *below = st->marks.below && pw->ctx_rank < st->marks.n_ctx
                                    ? st->marks.below + (size_t)pw->ctx_rank * XSTREAM_MARKS
                                    : NULL;
        while (st->want[w] < f) {
            uint64_t end = f;
            struct CUevent_st *ev = xstream_gpu_mark_at(s, below, st->want[w], &end);
            end = end < f ? end : f;
            char msg[PROTO_MSG_MAX + 1] = "";
            kvf_error_t e = xfer_gpu_stream_run(st->gjob, w, st->want[w], end, ev, msg,
                                                sizeof msg);
            if (e != KVF_OK) {
                transfers_fail_now(t, r, e, msg);
                return 0;
            }
            st->want[w] = end;
        }
        all &= st->want[w] == pw->bytes;
    }
    return all && !r->gpu_job;
}

/* Copies what became final and is not copied yet: 1 when every byte is in and nothing runs
 * (the caller ends r), 0 while it moves or waits (or r failed: no sweep). */
static int pump(struct transfers *t, struct xfer *r)
{
    struct stream_copy *st = r->scopy;
    struct reg_instance *in = registry_find(t->reg, r->ctx_instance);
    if (r->cpu_job || r->held.code != KVF_OK || !in || in->n_ranks != st->n_ctx)
        return 0; /* held: it failed while it copied; nothing more is launched */
    if (st->gjob)
        return pump_gpu(t, r);
    struct copyeng_part parts[LAYOUT_MAX_TP * LAYOUT_MAX_PP];
    for (;;) {
        uint32_t n = 0, complete = 1;
        for (uint32_t w = 0; w < st->plan.n_writers; w++) {
            const struct plan_writer *pw = &st->plan.writers[w];
            const struct xfer *s = st->sends[pw->ctx_rank];
            if (!s)
                return 0; /* its SEND ended: stream_send_ended failed r */
            st->want[w] = xstream_final_bytes(s, &st->marks, pw->ctx_rank, pw->bytes);
            complete &= st->done[w] == pw->bytes;
            if (st->want[w] > st->done[w] && n < sizeof parts / sizeof parts[0])
                parts[n++] = (struct copyeng_part){
                    .kind = COPYENG_DIRECT, .ops = pw->ops, .n_ops = pw->n_ops,
                    .src = &in->ranks[pw->ctx_rank]->mem, .dst = &r->rank->mem,
                    .lo = st->done[w], .hi = st->want[w]};
        }
        if (n == 0)
            return (int)complete;
        if (t->d->copy) {
            int rc = copyeng_submit(t->d->copy, parts, n, on_copied, r, &r->cpu_job);
            if (rc < 0)
                transfers_fail_now(t, r, KVF_E_INTERNAL, "copy threads refused the copy");
            return 0;
        }
        for (uint32_t i = 0; i < n; i++)
            copy_direct_range(parts[i].ops, parts[i].n_ops, parts[i].src, parts[i].lo,
                              parts[i].hi, parts[i].dst);
        for (uint32_t w = 0; w < st->plan.n_writers; w++)
            st->done[w] = st->want[w];
    }
}

/* A batch ended well: what it copied is in; the next batch, or DONE once every byte is in. */
static void advance(struct transfers *t, struct xfer *r)
{
    struct stream_copy *st = r->scopy;
    for (uint32_t w = 0; w < st->plan.n_writers; w++)
        st->done[w] = st->want[w];
    if (pump(t, r) == 1) {
        r->ls.copied = uv_hrtime();
        if (st->gjob) { /* counted as the whole GPU copies are (xfer_gpu.c) */
            t->counters.local_gpu++;
            t->counters.bytes_local_gpu += st->plan.total_bytes;
        }
        transfers_copy_done(t, r, KVF_OK, st->plan.total_bytes, "");
    }
}

static void on_copied(struct copyeng_job *j, const struct copyeng_done *d, void *user)
{
    (void)j;
    struct xfer *r = user;
    struct transfers *t = r->owner;
    r->cpu_job = NULL;
    t->counters.local_memcpy_ns += d->busy_ns;
    if (d->status) {
        transfers_copy_done(t, r, KVF_E_CANCELLED, 0, "the daemon is stopping");
        return;
    }
    if (r->held.code != KVF_OK) { /* failed while it copied: told now */
        transfers_copy_done(t, r, KVF_OK, 0, "");
        return;
    }
    advance(t, r);
}

/* A GPU batch ended (xfer_gpu.c): as on_copied. */
static void on_gpu_copied(struct transfers *t, struct xfer *r, kvf_error_t e, const char *msg)
{
    if (e != KVF_OK || r->held.code != KVF_OK) { /* failed, or failed while it copied */
        transfers_copy_done(t, r, e, 0, msg);
        return;
    }
    advance(t, r);
}

kvf_error_t stream_local_start(struct transfers *t, struct xfer *r, struct xfer **sends,
                               uint32_t n_ctx, uint64_t *bytes, char *msg, size_t msglen)
{
    struct reg_instance *in = registry_find(t->reg, r->ctx_instance);
    struct stream_copy *st = calloc(1, sizeof *st);
    if (st)
        st->sends = calloc(n_ctx ? n_ctx : 1, sizeof *st->sends);
    if (!st || !st->sends) {
        stream_local_free(st);
        snprintf(msg, msglen, "out of memory");
        return KVF_E_INTERNAL;
    }
    memcpy(st->sends, sends, n_ctx * sizeof *sends);
    st->n_ctx = n_ctx;
    bool gpu = xfer_gpu_wanted(r->rank, in);
    kvf_error_t e = plan_marked(t, r, in, st, msg, msglen);
    if (e == KVF_OK)
        e = gpu ? xfer_gpu_stream_new(t, r, &st->plan, in, on_gpu_copied, &st->gjob, msg, msglen)
                : xfer_check_bounds(NULL, &st->plan, in, r->rank, false, msg, msglen);
    uint32_t nw = st->plan.n_writers ? st->plan.n_writers : 1;
    if (e == KVF_OK && (!(st->done = calloc(nw, 8)) || !(st->want = calloc(nw, 8)))) {
        snprintf(msg, msglen, "out of memory");
        e = KVF_E_INTERNAL;
    }
    if (e != KVF_OK) {
        stream_local_free(st);
        return e;
    }
    for (uint32_t w = 0; w < st->plan.n_writers; w++)
        sends[st->plan.writers[w].ctx_rank]->bytes += st->plan.writers[w].bytes;
    r->scopy = st;
    dheap_remove(&t->due, &r->due); /* its writers' stream deadlines bound it from here */
    *bytes = st->plan.total_bytes;
    r->ls.planned = r->ls.checked = r->ls.started = uv_hrtime();
    (void)pump(t, r); /* a writer is still streaming: it cannot complete here */
    return KVF_OK;
}

void stream_local_kick(struct transfers *t, struct xfer *s)
{
    struct req *q = s->req;
    if (!q || !q->n_live)
        return;
    uint32_t n = q->n_live, n_end = 0;
    struct xfer **live = malloc(n * sizeof *live);
    uint64_t *ends = malloc(n * sizeof *ends);
    if (!live || !ends) { /* the stream's idle deadline ends them */
        free(live);
        free(ends);
        return;
    }
    memcpy(live, q->live, n * sizeof *live);
    for (uint32_t i = 0; i < n; i++) { /* nothing ends in this loop: no sweep frees live[] */
        struct xfer *r = live[i];
        struct stream_copy *st = r->side == XFER_RECV ? r->scopy : NULL;
        bool reads = false;
        for (uint32_t c = 0; st && c < st->n_ctx; c++)
            reads |= st->sends[c] == s;
        if (reads && pump(t, r) == 1)
            ends[n_end++] = r->id;
    }
    free(live);
    for (uint32_t k = 0; k < n_end; k++) /* each end sweeps: look the next one up again */
        for (uint32_t i = 0; i < q->n_live; i++) {
            struct xfer *r = q->live[i];
            if (r->id != ends[k] || !r->scopy)
                continue;
            transfers_copy_done(t, r, KVF_OK, r->scopy->plan.total_bytes, "");
            break;
        }
    free(ends);
}

struct stream_copy *stream_local_free(struct stream_copy *sc)
{
    if (!sc)
        return NULL;
    sc->gjob = xfer_gpu_stream_free(sc->gjob); /* its kernels in flight end first */
    plan_done(&sc->plan);
    plan_marks_done(&sc->marks);
    free(sc->sends);
    free(sc->done);
    free(sc->want);
    free(sc);
    return NULL;
}
