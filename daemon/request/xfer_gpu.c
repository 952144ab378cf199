/* xfer_gpu.c: the `local` path with GPU pools (docs/DESIGN.md §5, see transfers.h): one
 * peer-copy program per writer, launched through the GPU executor (daemon/move/exec_gpu.h:
 * kvk_direct on a daemon stream of the destination's device; the program is the plan
 * template's, daemon/gpu/gpu_tprog.h, with only the request's ids uploaded, when the plan came
 * from a kept template, else taken from the daemon's program cache or uploaded once), so a
 * context rank on GPU 0 and a generation rank on GPU 1 move a request over NVLink with no
 * arena and no UCX; the same code serves two ranks on one GPU. A template hit's plan comes
 * without ops (xfer_gpu_lazy_ops): a writer its template's programs do not serve gets them
 * substituted here (xfer_local_ops). Each writer's completion comes back on the loop through gpu_notify; the last one
 * ends the request; the loop never waits for the GPU. The phases (programs bound, kernels
 * queued, completions back, and of that the kernels' own GPU time) are summed in the transfers
 * counters (local_gpu_*_ns).
 * Host <-> GPU mixes (one side memfd pools, the other GPU pools) are refused when the RECV is
 * planned, with KVF_E_NO_ROUTE and what to change: the local path copies host to host (CPU) or
 * GPU to GPU (kernels); a pinned mapping of memfd pools is not done.
 * A job holds its programs and one reference to each rank's GPU pools (registry_gpu.h), so a
 * rank that goes away mid-copy has its mappings closed only after the copy's stream work ended.
 * Finished jobs are freed when no copy is outstanding (retire()).
 * A streaming SEND's readers (stream_local.c) bind a job once and launch it range by range
 * (xfer_gpu_stream_run: one kernel for [lo, hi) of a writer's extent, as READYs come, not
 * waiting for the kernels before); every kernel of a SEND whose READYs named CUDA events first
 * waits on the GPU for the mark of the READY that made its range final (xstream.h).
 * Loop thread only. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "exec_gpu.h"
#include "gpu.h"
#include "gpu_retire.h"
#include "gpu_tprog.h"
#include "plan.h"
#include "plan_request.h"
#include "registry.h"
#include "registry_gpu.h"
#include "transfers.h"
#include "xclient.h"
#include "xstream.h"

struct xgpu_job {
    struct transfers *t;        /* borrowed */
    struct gpu *g;              /* borrowed */
    struct gpu_retired retired; /* in t->gpu_retired once finished */
    struct xfer *x;             /* borrowed; NULL once detached */
    struct reg_gpu *dst;        /* reference */
    struct reg_gpu **src;       /* n references (NULL where a writer has no bytes) */
    struct exec_gpu *xs;        /* n bindings: each writer's program (unbound: no bytes) */
    uint32_t n, inflight;       /* inflight: kernels whose completion has not come back */
    int device, status;         /* status: the first failed completion */
    uint64_t bytes, t0, t_bound, t_launched; /* t0: before the programs; t_bound: programs
                                                ready; t_launched: kernels queued */
    kvf_error_t launch_err;     /* a launch failed after others were queued */
    char launch_msg[256];
    xfer_gpu_batch_cb batch;    /* streamed (xfer_gpu_stream_new): each batch's end; NULL: whole */
    struct CUstream_st *own;    /* owned: the launches' stream when they wait for a worker's
                                 * events (gpu_event_stream_new); NULL: a daemon stream */
    bool orphan;                /* streamed: its owner let go (retired once idle) */
};

bool xfer_gpu_wanted(const struct reg_rank *gen, const struct reg_instance *ctx)
{
    if (gen->gpu)
        return true;
    for (uint32_t c = 0; ctx && c < ctx->n_ranks; c++)
        if (ctx->ranks[c] && ctx->ranks[c]->gpu)
            return true;
    return false;
}

void xfer_gpu_detach(struct xgpu_job *j)
{
    if (!j)
        return;
    if (j->x)
        j->x->gpu_job = NULL;
    j->x = NULL;
}

/* Checks sides and bounds (xfer_check_bounds: nothing per request once tmpl fits), enables
 * peer access. KVF_OK or the typed error with message. */
static kvf_error_t check(struct gpu *g, const struct xfer *r, const struct plan *p,
                         const struct reg_instance *in, struct plan_tcache_entry *tmpl,
                         int *device, char *msg, size_t msglen)
{
    const struct reg_rank *gen = r->rank;
    int dev = gen->gpu ? gen->gpu->device : -1;
    for (uint32_t w = 0; w < p->n_writers; w++) {
        const struct plan_writer *pw = &p->writers[w];
        const struct reg_rank *src = in->ranks[pw->ctx_rank];
        if (!src->gpu || !gen->gpu) {
            snprintf(msg, msglen, "context rank %u has its pools in %s memory and generation "
                     "rank %u in %s memory: the local path copies host to host or GPU to GPU; "
                     "register both instances' pools the same way", pw->ctx_rank,
                     src->gpu ? "GPU" : "host", layout_rank(&gen->layout),
                     gen->gpu ? "GPU" : "host");
            return KVF_E_NO_ROUTE;
        }
        if (dev < 0)
            dev = src->gpu->device;
    }
    kvf_error_t e = xfer_check_bounds(tmpl, p, in, gen, true, msg, msglen);
    if (e != KVF_OK)
        return e;
    if (dev < 0)
        dev = 0; /* no bytes at all: nothing will be launched */
    const struct gpu_device *gd = gpu_device(g, dev);
    if (!gd || gd->failed || !gpu_stream(g, dev, 0)) {
        snprintf(msg, msglen, "GPU %d of generation rank %u cannot take work: %s", dev,
                 layout_rank(&gen->layout), gd && gd->failed ? gd->failed_reason
                 : gpu_cpu_mode(g) ? gpu_cpu_reason(g) : "no such device or stream");
        return KVF_E_NO_ROUTE;
    }
    for (uint32_t w = 0; w < p->n_writers; w++) {
        int sdev = in->ranks[p->writers[w].ctx_rank]->gpu->device;
        char err[GPU_REASON_MAX + 64];
        if (sdev >= 0 && sdev != dev && !gpu_peer_enabled(g, sdev, dev) &&
            gpu_peer_enable(g, sdev, dev, err, sizeof err) < 0) {
            snprintf(msg, msglen, "context rank %u on GPU %d, generation rank %u on GPU %d: %s",
                     p->writers[w].ctx_rank, sdev, layout_rank(&gen->layout), dev, err);
            return KVF_E_NO_ROUTE;
        }
    }
    *device = dev;
    return KVF_OK;
}

bool xfer_gpu_lazy_ops(void)
{
    return true; /* bind_all binds the templates' programs, or substitutes (xfer_local_ops) */
}

static void job_free(struct xgpu_job *j)
{
    for (uint32_t w = 0; w < j->n; w++) {
        exec_gpu_unbind(&j->xs[w]); /* back to the program cache */
        j->src[w] = reg_gpu_unref(j->src[w]);
    }
    j->dst = reg_gpu_unref(j->dst);
    j->own = gpu_event_stream_free(j->own); /* its completions came back: retired */
    free(j->xs);
    free(j->src);
    free(j);
}

static void job_retired_free(struct gpu_retired *r)
{
    job_free((struct xgpu_job *)((char *)r - offsetof(struct xgpu_job, retired)));
}

/* A finished job is freed by the GPU retire list (gpu_retire.h): only while no GPU copy is
 * outstanding (a program the cache evicts meanwhile is a cudaFree, which would wait on the
 * loop for other requests' kernels). Jobs retire from their last completion, so the last
 * completion (gpu_free cancels what is left at teardown) frees what waited. */
static void retire(struct xgpu_job *j)
{
    j->retired.free_fn = job_retired_free;
    gpu_retire(&j->t->gpu_retired, j->g, &j->retired);
}

/* What j's kernels in flight came to: the first failed completion, else a launch that failed
 * after others were queued, else KVF_OK with msg "". */
static kvf_error_t outcome(const struct xgpu_job *j, char *msg, size_t len)
{
    msg[0] = 0;
    if (j->status) {
        snprintf(msg, len, "GPU copy on device %d failed: %s", j->device, strerror(-j->status));
        return KVF_E_INTERNAL;
    }
    if (j->launch_err != KVF_OK)
        snprintf(msg, len, "%s", j->launch_msg);
    return j->launch_err;
}

/* A streamed job's batch ended: its owner hears (r alive), or the job goes (owner gone). */
static void batch_done(struct xgpu_job *j)
{
    struct xfer *x = j->x;
    if (j->orphan) {
        retire(j);
        return;
    }
    if (!x)
        return; /* detached: xfer_gpu_stream_free retires it */
    x->gpu_job = NULL;
    char msg[320];
    kvf_error_t e = outcome(j, msg, sizeof msg);
    j->status = 0;
    j->launch_err = KVF_OK;
    j->batch(j->t, x, e, msg);
}

/* One writer's copy ended; the last one ends the request (or the streamed batch). */
static void on_done(void *arg, int status)
{
    struct xgpu_job *j = arg;
    if (status < 0 && j->status == 0)
        j->status = status;
    if (--j->inflight > 0)
        return;
    if (j->batch) {
        batch_done(j);
        return;
    }
    struct xfer *x = j->x;
    if (x) {
        xfer_gpu_detach(j);
        char msg[320];
        kvf_error_t e = outcome(j, msg, sizeof msg);
        uint64_t now = x->ls.copied = uv_hrtime();
        struct transfers_counters *c = &j->t->counters;
        c->local_memcpy_ns += now - j->t0;   /* programs, launch, GPU, back on the loop */
        c->local_copy_ns += now - j->t_launched; /* try_run counted the rest */
        c->local_gpu_bind_ns += j->t_bound - j->t0;
        c->local_gpu_launch_ns += j->t_launched - j->t_bound;
        c->local_gpu_run_ns += now - j->t_launched;
        for (uint32_t w = 0; w < j->n; w++) /* of run: the kernels on the GPU */
            c->local_gpu_kernel_ns += exec_gpu_direct_ns(&j->xs[w]);
        if (e == KVF_OK) {
            c->local_gpu++;
            c->bytes_local_gpu += j->bytes;
        }
        transfers_copy_done(j->t, x, e, e == KVF_OK ? j->bytes : 0, msg);
    }
    retire(j);
}

static kvf_error_t code_of(int rc)
{
    return rc == -ERANGE ? KVF_E_BOUND_VIOLATION
           : rc == -ENOTSUP || rc == -ENODEV ? KVF_E_NO_ROUTE : KVF_E_INTERNAL;
}

/* Writer w from its template's program on the job's device (made on the template's first
 * request there): only the request's ids are uploaded. 0 bound, 1 when the template does not
 * serve this writer (the caller binds a program of the request's ops), or -errno with msg. */
static int bind_tmpl(struct xgpu_job *j, struct exec_gpu *x, struct plan_tcache_entry *tmpl,
                     uint32_t w, const struct xfer *r, struct xfer *const *sends,
                     struct CUstream_st *stream, const struct copy_mem *sm,
                     const struct copy_mem *dm, char *msg, size_t len)
{
    if (w >= tmpl->t.plan.n_writers || !sends || !sends[tmpl->t.plan.writers[w].ctx_rank])
        return 1;
    const struct xfer *s = sends[tmpl->t.plan.writers[w].ctx_rank];
    struct plan_ids gen, ctx;
    plan_ids_of(r->items.n_groups, r->items.counts, r->items.ids, &gen);
    plan_ids_of(s->items.n_groups, s->items.counts, s->items.ids, &ctx);
    struct exec_gpu_tsrc src = {&tmpl->t, w, &gen, &ctx, sm, dm, j->device, stream};
    struct gpu_prog *tp;
    int rc = gpu_tprog_get(j->g, &tmpl->t, w, j->device, exec_gpu_tmpl_make, &src,
                           exec_gpu_tmpl_free, &tp, msg, len);
    if (rc != 0)
        return rc;
    uint32_t buf[512], *ids = buf, n = plan_tslot_ids(&gen, &ctx, buf, 512);
    if (n > 512 && (!(ids = malloc(n * sizeof *ids)) || plan_tslot_ids(&gen, &ctx, ids, n) != n)) {
        free(ids);
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    rc = exec_gpu_bind_ids(x, j->g, tp, ids, n, j->device, stream, sm, dm, msg, len);
    if (ids != buf)
        free(ids);
    return rc;
}

/* Binds every writer's program (its template's with the request's ids; else cached, or
 * uploaded now) over the pools as the launch device maps them: a mapping opened on the
 * context's own GPU faults when a kernel of another GPU touches it. Nothing is launched yet.
 * KVF_OK or the error with its message. */
static kvf_error_t bind_all(struct xgpu_job *j, struct xfer *r, const struct plan *p,
                            struct reg_instance *in, struct xfer **sends,
                            struct plan_tcache_entry *tmpl, struct CUstream_st *stream,
                            char *msg, size_t msglen)
{
    bool all_tmpl = true, have_full = false;
    struct plan full; /* a hit's substituted plan, for a writer bound from ops after all */
    kvf_error_t e = KVF_OK;
    const struct copy_mem *dm = NULL, *sm = NULL;
    char why[200];
    if (reg_gpu_mem_on(r->rank->gpu, j->device, &dm, why, sizeof why) < 0) {
        snprintf(msg, msglen, "generation rank %u: %s", layout_rank(&r->rank->layout), why);
        return KVF_E_INTERNAL;
    }
    for (uint32_t w = 0; w < p->n_writers; w++) {
        const struct plan_writer *pw = &p->writers[w];
        const struct reg_rank *src = in->ranks[pw->ctx_rank];
        if (sends && sends[pw->ctx_rank])
            sends[pw->ctx_rank]->bytes += pw->bytes;
        if (pw->n_ops == 0 || pw->bytes == 0)
            continue;
        j->src[w] = reg_gpu_ref(src->gpu);
        if (reg_gpu_mem_on(src->gpu, j->device, &sm, why, sizeof why) < 0) {
            snprintf(msg, msglen, "context rank %u on GPU %d for a copy on GPU %d: %s",
                     pw->ctx_rank, src->gpu->device, j->device, why);
            e = KVF_E_NO_ROUTE;
            break;
        }
        int rc = tmpl ? bind_tmpl(j, &j->xs[w], tmpl, w, r, sends, stream, sm, dm, why,
                                  sizeof why) : 1;
        if (rc > 0) {
            all_tmpl = false;
            const struct plan_writer *ow = pw; /* a lazy hit's writer has no ops: substitute */
            if (!pw->ops && !tmpl) {
                snprintf(msg, msglen, "writer rank %u: a plan without ops and no template",
                         pw->ctx_rank);
                e = KVF_E_INTERNAL;
                break;
            }
            if (!pw->ops && !have_full &&
                (e = xfer_local_ops(r, sends, tmpl, &full, msg, msglen)) != KVF_OK)
                break;
            have_full |= !pw->ops;
            if (!pw->ops)
                ow = &full.writers[w];
            rc = exec_gpu_bind(&j->xs[w], j->g, ow->ops, ow->n_ops, j->device, stream, sm, dm,
                               why, sizeof why); /* the cache keeps its own copy of the ops */
        }
        if (rc < 0) {
            snprintf(msg, msglen, "writer rank %u: %s", pw->ctx_rank, why);
            e = code_of(rc);
            break;
        }
    }
    if (have_full)
        plan_done(&full);
    if (e == KVF_OK)
        gpu_tprog_count(j->g, all_tmpl);
    return e;
}

/* A job of RECV r over plan p: checked (check()), every writer's program bound on a daemon
 * stream of the launch device (own: launched on a stream of the job's own, for copies that
 * wait for a worker's events), nothing launched. KVF_OK and *ret, or the error with msg. */
static kvf_error_t job_new(struct transfers *t, struct xfer *r, const struct plan *p,
                           struct reg_instance *in, struct xfer **sends,
                           struct plan_tcache_entry *tmpl, bool own, struct xgpu_job **ret,
                           char *msg, size_t msglen)
{
    struct gpu *g = t->d->gpu;
    int dev = -1;
    kvf_error_t e = check(g, r, p, in, tmpl, &dev, msg, msglen);
    if (e != KVF_OK)
        return e;
    uint32_t nw = p->n_writers ? p->n_writers : 1;
    struct xgpu_job *j = calloc(1, sizeof *j);
    if (!j || !(j->src = calloc(nw, sizeof *j->src)) || !(j->xs = calloc(nw, sizeof *j->xs))) {
        if (j) {
            free(j->src);
            free(j);
        }
        snprintf(msg, msglen, "out of memory");
        return KVF_E_INTERNAL;
    }
    j->t = t;
    j->g = g;
    j->n = p->n_writers;
    j->device = dev;
    j->bytes = p->total_bytes;
    j->dst = reg_gpu_ref(r->rank->gpu);
    j->t0 = uv_hrtime();
    struct CUstream_st *stream = gpu_stream(g, dev, (unsigned)r->id);
    if ((e = bind_all(j, r, p, in, sends, tmpl, stream, msg, msglen)) != KVF_OK) {
        job_free(j); /* nothing was launched */
        return e;
    }
    char why[GPU_REASON_MAX + 64];
    if (own && gpu_event_stream_new(g, dev, &j->own, why, sizeof why) < 0) {
        snprintf(msg, msglen, "a stream for copies that wait for CUDA events: %s", why);
        job_free(j);
        return KVF_E_INTERNAL;
    }
    for (uint32_t w = 0; own && w < j->n; w++) /* uploaded on the daemon's stream: it stays */
        if (j->xs[w].prog)
            exec_gpu_set_stream(&j->xs[w], j->own);
    j->t_bound = uv_hrtime();
    *ret = j;
    return KVF_OK;
}

kvf_error_t xfer_gpu_start(struct transfers *t, struct xfer *r, const struct plan *p,
                           struct reg_instance *in, struct xfer **sends,
                           struct plan_tcache_entry *tmpl, char *msg, size_t msglen)
{
    bool own = false; /* a writer's copy waits for a mark: not on a shared stream */
    for (uint32_t w = 0; sends && w < p->n_writers; w++) {
        const struct xfer *s = sends[p->writers[w].ctx_rank];
        own |= xstream_gpu_mark(s, s && s->stream ? s->stream->upto : 0) != NULL;
    }
    struct xgpu_job *j;
    kvf_error_t e = job_new(t, r, p, in, sends, tmpl, own, &j, msg, msglen);
    if (e != KVF_OK)
        return e;
    r->ls.checked = j->t0;
    /* one kernel per writer on one stream; each completion counts down (on_done). A streamed
     * SEND's writer's kernel waits on the GPU for its last READY's CUDA event (xstream.h). */
    const struct move_exec *ex = move_exec_of(MOVE_EXEC_GPU);
    for (uint32_t w = 0; w < p->n_writers && e == KVF_OK; w++) {
        if (!j->xs[w].prog)
            continue; /* a writer without bytes */
        const struct xfer *s = sends ? sends[p->writers[w].ctx_rank] : NULL;
        struct CUevent_st *mark = xstream_gpu_mark(s, s && s->stream ? s->stream->upto : 0);
        int rc = exec_gpu_after(&j->xs[w], mark, j->launch_msg, sizeof j->launch_msg);
        if (rc == 0)
            rc = ex->direct(&j->xs[w].mp, on_done, j, j->launch_msg, sizeof j->launch_msg);
        if (rc < 0)
            e = code_of(rc); /* nothing runs for this one; those queued before it do */
        else
            j->inflight++;
    }
    if (j->inflight == 0) { /* nothing queued: a plan of zero bytes, or the first launch failed */
        if (e != KVF_OK)
            snprintf(msg, msglen, "%s", j->launch_msg);
        job_free(j);
        return e;
    }
    j->launch_err = e;
    j->x = r;
    r->gpu_job = j;
    j->t_launched = uv_hrtime();
    return KVF_OK;
}

kvf_error_t xfer_gpu_stream_new(struct transfers *t, struct xfer *r, const struct plan *p,
                                struct reg_instance *in, xfer_gpu_batch_cb cb,
                                struct xgpu_job **ret, char *msg, size_t msglen)
{
    kvf_error_t e = job_new(t, r, p, in, NULL, NULL, true, ret, msg, msglen);
    if (e == KVF_OK) {
        (*ret)->batch = cb;
        (*ret)->x = r;
    }
    return e;
}

kvf_error_t xfer_gpu_stream_run(struct xgpu_job *j, uint32_t w, uint64_t lo, uint64_t hi,
                                struct CUevent_st *mark, char *msg, size_t msglen)
{
    if (w >= j->n || !j->xs[w].prog || hi <= lo)
        return KVF_OK; /* a writer without bytes, or nothing new of it */
    int rc = exec_gpu_after(&j->xs[w], mark, msg, msglen);
    if (rc == 0)
        rc = exec_gpu_direct_range(&j->xs[w], lo, hi, on_done, j, msg, msglen);
    if (rc < 0)
        return code_of(rc); /* nothing runs for this one; those queued before it do */
    j->inflight++;
    j->x->gpu_job = j; /* a failure meanwhile is held until they ended (batch_done) */
    return KVF_OK;
}

struct xgpu_job *xfer_gpu_stream_free(struct xgpu_job *j)
{
    if (!j)
        return NULL;
    if (j->x && j->x->gpu_job == j)
        j->x->gpu_job = NULL;
    j->x = NULL;
    j->orphan = true;
    if (j->inflight > 0)
        return NULL; /* the last completion retires it */
    /* retired from a completion, as every job is: the retire list is flushed by completions
     * (gpu_retire.h), and nothing else of this file would flush it */
    char err[GPU_REASON_MAX + 64];
    if (j->own && gpu_notify(j->g, j->device, j->own, on_done, j, err, sizeof err) == 0)
        j->inflight = 1;
    else
        retire(j);
    return NULL;
}
