/* xfer_gpu.c: the `local` path with GPU pools (docs/DESIGN.md §5, see transfers.h): one peer-copy
 * program per writer (kvk_program_new on the destination's device), launched with kvk_direct
 * on a daemon stream of the destination's device, so a context rank on GPU 0 and a generation
 * rank on GPU 1 move a request over NVLink with no arena and no UCX; the same code serves two
 * ranks on one GPU. The completion comes back on the loop through gpu_notify; the loop never
 * waits for the GPU.
 * Host <-> GPU mixes (one side memfd pools, the other GPU pools) are refused when the RECV is
 * planned, with KVF_E_NO_ROUTE and what to change: the local path copies host to host (CPU) or
 * GPU to GPU (kernels); a pinned mapping of memfd pools is not done.
 * A job owns its programs and one reference to each rank's GPU pools (registry_gpu.h), so a
 * rank that goes away mid-copy has its mappings closed only after the copy's stream work ended.
 * Finished jobs are freed when no copy is outstanding (retire()): cudaFree of their programs
 * would otherwise wait on the loop for other requests' kernels.
 * Loop thread only. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "gpu.h"
#include "gpu_retire.h"
#include "kvf_kernels.h"
#include "plan.h"
#include "registry.h"
#include "registry_gpu.h"
#include "transfers.h"
#include "workers.h"

struct xgpu_job {
    struct transfers *t;        /* borrowed */
    struct gpu *g;              /* borrowed */
    struct gpu_retired retired; /* in t->gpu_retired once finished */
    struct xfer *x;             /* borrowed; NULL once detached */
    struct reg_gpu *dst;        /* reference */
    struct reg_gpu **src;       /* n references (NULL where a writer has no bytes) */
    struct kvk_program **progs; /* n owned */
    uint32_t n;
    int device;
    uint64_t bytes, t0, t_launched; /* t0: before the first upload; t_launched: back to the loop */
    kvf_error_t launch_err;     /* a launch failed after others were queued */
    char launch_msg[256];
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

/* Checks sides and bounds, enables peer access. KVF_OK or the typed error with message. */
static kvf_error_t check(struct gpu *g, const struct xfer *r, const struct plan *p,
                         const struct reg_instance *in, int *device, char *msg, size_t msglen)
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
        if (copy_check(pw->ops, pw->n_ops, &src->gpu->mem, 's') ||
            copy_check(pw->ops, pw->n_ops, &gen->gpu->mem, 'd')) {
            snprintf(msg, msglen, "plan of writer rank %u leaves the mapped GPU pools", pw->ctx_rank);
            return KVF_E_BOUND_VIOLATION;
        }
        if (dev < 0)
            dev = src->gpu->device;
    }
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

#ifdef KVF_HAVE_CUDA

static void job_free(struct xgpu_job *j)
{
    for (uint32_t w = 0; w < j->n; w++) {
        j->progs[w] = kvk_program_free(j->progs[w]);
        j->src[w] = reg_gpu_unref(j->src[w]);
    }
    j->dst = reg_gpu_unref(j->dst);
    free(j->progs);
    free(j->src);
    free(j);
}

static void job_retired_free(struct gpu_retired *r)
{
    job_free((struct xgpu_job *)((char *)r - offsetof(struct xgpu_job, retired)));
}

/* A finished job's programs are freed by the GPU retire list (gpu_retire.h): only while no GPU
 * copy is outstanding. Jobs retire from their completion, so the last completion (gpu_free
 * cancels what is left at teardown) frees what waited. */
static void retire(struct xgpu_job *j)
{
    j->retired.free_fn = job_retired_free;
    gpu_retire(&j->t->gpu_retired, j->g, &j->retired);
}

static void on_done(void *arg, int status)
{
    struct xgpu_job *j = arg;
    struct xfer *x = j->x;
    if (x) {
        xfer_gpu_detach(j);
        char msg[320] = "";
        kvf_error_t e = KVF_OK;
        if (status) {
            e = KVF_E_INTERNAL;
            snprintf(msg, sizeof msg, "GPU copy on device %d failed: %s", j->device,
                     strerror(-status));
        } else if (j->launch_err != KVF_OK) {
            e = j->launch_err;
            snprintf(msg, sizeof msg, "%s", j->launch_msg);
        }
        uint64_t now = uv_hrtime();
        j->t->counters.local_memcpy_ns += now - j->t0; /* upload, launch, GPU, back on the loop */
        j->t->counters.local_copy_ns += now - j->t_launched; /* try_run counted the rest */
        if (e == KVF_OK) {
            j->t->counters.local_gpu++;
            j->t->counters.bytes_local_gpu += j->bytes;
        }
        transfers_copy_done(j->t, x, e, e == KVF_OK ? j->bytes : 0, msg);
    }
    retire(j);
}

static void to_kvk(const struct copy_mem *m, struct kvk_mem *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->n = m->n;
    for (uint32_t i = 0; i < m->n && i < LAYOUT_MAX_POOLS; i++) {
        ret->base[i] = (uint64_t)(uintptr_t)m->base[i];
        ret->size[i] = m->size[i];
    }
}

kvf_error_t xfer_gpu_start(struct transfers *t, struct xfer *r, const struct plan *p,
                           struct reg_instance *in, struct xfer **sends, char *msg,
                           size_t msglen)
{
    struct gpu *g = t->w->d->gpu;
    int dev = -1;
    kvf_error_t e = check(g, r, p, in, &dev, msg, msglen);
    if (e != KVF_OK)
        return e;
    struct xgpu_job *j = calloc(1, sizeof *j);
    if (!j || !(j->src = calloc(p->n_writers ? p->n_writers : 1, sizeof *j->src)) ||
        !(j->progs = calloc(p->n_writers ? p->n_writers : 1, sizeof *j->progs))) {
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
    struct kvk_mem dmem;
    const struct copy_mem *m = NULL;
    char why[160];
    if (reg_gpu_mem_on(r->rank->gpu, dev, &m, why, sizeof why) < 0) {
        snprintf(msg, msglen, "generation rank %u: %s", layout_rank(&r->rank->layout), why);
        job_free(j);
        return KVF_E_INTERNAL;
    }
    to_kvk(m, &dmem);
    uint32_t launched = 0;
    for (uint32_t w = 0; w < p->n_writers && e == KVF_OK; w++) {
        const struct plan_writer *pw = &p->writers[w];
        const struct reg_rank *src = in->ranks[pw->ctx_rank];
        if (sends && sends[pw->ctx_rank])
            sends[pw->ctx_rank]->bytes += pw->bytes;
        if (pw->n_ops == 0 || pw->bytes == 0)
            continue;
        j->src[w] = reg_gpu_ref(src->gpu);
        /* the context's pools as mapped on the launch device: a mapping opened on the
         * context's own GPU faults when a kernel of another GPU touches it */
        if (reg_gpu_mem_on(src->gpu, dev, &m, why, sizeof why) < 0) {
            e = KVF_E_NO_ROUTE;
            snprintf(j->launch_msg, sizeof j->launch_msg, "context rank %u on GPU %d for a copy "
                     "on GPU %d: %s", pw->ctx_rank, src->gpu->device, dev, why);
            break;
        }
        struct kvk_mem smem;
        to_kvk(m, &smem);
        int rc = kvk_program_new(pw->ops, pw->n_ops, dev, &j->progs[w]);
        if (rc == 0)
            rc = kvk_direct(j->progs[w], &smem, &dmem, stream);
        if (rc) {
            e = rc == -ERANGE ? KVF_E_BOUND_VIOLATION : KVF_E_INTERNAL;
            snprintf(j->launch_msg, sizeof j->launch_msg, "GPU copy of writer rank %u on device "
                     "%d: %s", pw->ctx_rank, dev, kvk_last_error());
            break;
        }
        launched++;
    }
    if (launched == 0 && e != KVF_OK) {
        snprintf(msg, msglen, "%s", j->launch_msg);
        job_free(j); /* nothing was queued */
        return e;
    }
    if (!launched) { /* a plan of zero bytes: done now */
        job_free(j);
        return KVF_OK;
    }
    j->launch_err = e;
    j->x = r;
    r->gpu_job = j;
    char err[GPU_REASON_MAX + 64];
    int rc = gpu_notify(g, dev, stream, on_done, j, err, sizeof err);
    if (rc) {
        /* queued work whose end cannot be learned: keep its programs and mappings (leaked,
         * never freed under a running kernel) and fail the request */
        xfer_gpu_detach(j);
        log_error("xfer %llu: GPU completion on device %d: %s: its programs and mappings are "
                  "kept", (unsigned long long)r->id, dev, err);
        snprintf(msg, msglen, "GPU completion on device %d: %s", dev, err);
        return KVF_E_INTERNAL;
    }
    j->t_launched = uv_hrtime();
    return KVF_OK;
}

#else /* !KVF_HAVE_CUDA: GPU ranks are refused at REGISTER; this is the refusal of last resort */

kvf_error_t xfer_gpu_start(struct transfers *t, struct xfer *r, const struct plan *p,
                           struct reg_instance *in, struct xfer **sends, char *msg,
                           size_t msglen)
{
    int dev = -1;
    (void)sends;
    kvf_error_t e = check(t->w->d->gpu, r, p, in, &dev, msg, msglen);
    if (e == KVF_OK) {
        snprintf(msg, msglen, "this kvferryd was built without CUDA: GPU pools cannot be copied");
        e = KVF_E_NO_ROUTE;
    }
    return e;
}

#endif
