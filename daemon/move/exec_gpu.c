/* exec_gpu.c: the GPU executor (exec_gpu.h, move_exec.h): copy programs run by the CUDA copy
 * kernels (kernels/kvf_kernels.h) on a daemon stream, completion through gpu_notify (a host
 * function, then uv_async to the loop). The program comes from the daemon's cache, keyed by
 * (device, ops): a request repeating an earlier one's ops uploads nothing; a new one is
 * uploaded on the binding's stream, ordered before its kernels, with no host wait. When the
 * completion cannot be queued (the device failed), the stream is waited for here, so no done
 * runs and nothing is freed under a kernel. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exec_gpu.h"
#include "gpu.h"
#include "gpu_progcache.h"
#include "kvk_subst.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

/* Uploaded in order on the binding's stream (arg), with no host wait. */
static int make_prog(const struct copy_op *ops, uint32_t n_ops, int device, void *arg,
                     void **ret, char *msg, size_t len)
{
    struct kvk_program *p = NULL;
    int rc = kvk_program_new_async(ops, n_ops, device, arg, &p);
    if (rc < 0) {
        snprintf(msg, len, "uploading a copy program to GPU %d: %s", device, kvk_last_error());
        return rc;
    }
    *ret = p;
    return kvk_program_staged(p) ? 0 : 1;
}

static void free_prog(void *p)
{
    kvk_program_free(p);
}

static void to_kvk(const struct copy_mem *m, struct kvk_mem *ret)
{
    memset(ret, 0, sizeof *ret);
    ret->n = m ? m->n : 0;
    for (uint32_t i = 0; i < ret->n && i < LAYOUT_MAX_POOLS; i++) {
        ret->base[i] = (uint64_t)(uintptr_t)m->base[i];
        ret->size[i] = m->size[i];
    }
}

/* The rest of a binding once its program is there. */
static void bound_to(struct exec_gpu *x, struct gpu *g, int device, struct CUstream_st *stream,
                     const struct copy_mem *src, const struct copy_mem *dst)
{
    x->tag = EXEC_GPU_TAG;
    x->g = g;
    x->device = device;
    x->stream = stream;
    to_kvk(src, &x->src);
    to_kvk(dst, &x->dst);
}

int exec_gpu_bind(struct exec_gpu *x, struct gpu *g, const struct copy_op *ops, uint32_t n_ops,
                  int device, struct CUstream_st *stream, const struct copy_mem *src,
                  const struct copy_mem *dst, char *msg, size_t len)
{
    memset(x, 0, sizeof *x);
    int rc = gpu_prog_get(g, ops, n_ops, device, make_prog, stream, free_prog, &x->prog, msg,
                          len);
    if (rc < 0)
        return rc;
    /* the ops: the cache's copy, held as long as the binding (the caller's plan may go) */
    x->mp = (struct move_prog){.ops = gpu_prog_ops(x->prog), .n_ops = n_ops, .src = src,
                               .dst = dst};
    bound_to(x, g, device, stream, src, dst);
    return 0;
}

int exec_gpu_tmpl_make(void *arg, void **ret, char *msg, size_t len)
{
    const struct exec_gpu_tsrc *a = arg;
    const struct plan_writer *pw = &a->t->plan.writers[a->w];
    if (plan_template_fits(a->t, a->w, a->src, 's') || plan_template_fits(a->t, a->w, a->dst, 'd')) {
        snprintf(msg, len, "the pools do not hold every id's region of the layouts");
        return -ERANGE;
    }
    uint32_t n_slots = 0, *limit = NULL;
    struct plan_tslot *ts = malloc((pw->n_ops ? pw->n_ops : 1) * sizeof *ts);
    struct kvk_subst *sub = NULL;
    struct kvk_tprogram *tp = NULL;
    int rc = ts ? plan_template_slots(a->t, a->w, a->gen, a->ctx, ts, &n_slots) : -ENOMEM;
    if (rc == -EINVAL)
        snprintf(msg, len, "the template's sources are not resolved");
    else if (rc == 0 && (rc = kvk_subst_tables(ts, pw->n_ops, n_slots, &sub, &limit)) == 0 &&
             (rc = kvk_tprogram_new(pw->ops, sub, pw->n_ops, limit, n_slots, a->device,
                                    a->stream, &tp)) < 0)
        snprintf(msg, len, "uploading a template program to GPU %d: %s", a->device,
                 kvk_last_error());
    if (rc == -ENOMEM && !tp)
        snprintf(msg, len, "out of memory");
    free(ts);
    free(sub);
    free(limit);
    *ret = tp;
    return rc < 0 ? rc : 0;
}

void exec_gpu_tmpl_free(void *obj)
{
    kvk_tprogram_free(obj);
}

int exec_gpu_bind_ids(struct exec_gpu *x, struct gpu *g, struct gpu_prog *tprog,
                      const uint32_t *ids, uint32_t n_ids, int device, struct CUstream_st *stream,
                      const struct copy_mem *src, const struct copy_mem *dst, char *msg,
                      size_t len)
{
    memset(x, 0, sizeof *x);
    int rc = kvk_program_of_ids(gpu_prog_obj(tprog), ids, n_ids, stream, &x->inst);
    if (rc < 0) {
        snprintf(msg, len, "a template program's ids to GPU %d: %s", device, kvk_last_error());
        return rc;
    }
    x->prog = gpu_prog_ref(tprog); /* outlives x->inst, which borrows its tables */
    x->mp = (struct move_prog){.src = src, .dst = dst}; /* no host ops: checked at launch */
    bound_to(x, g, device, stream, src, dst);
    return 0;
}

/* The program a launch runs: the request's own from a template, or the uploaded one. */
static const struct kvk_program *prog_of(const struct exec_gpu *x)
{
    return x->inst ? x->inst : gpu_prog_obj(x->prog);
}

/* The kernel is queued: its completion comes to the loop, or the stream is waited for here. */
static int started(const struct exec_gpu *x, move_done_cb done, void *user, char *msg,
                   size_t len)
{
    char err[GPU_REASON_MAX + 64];
    int rc = gpu_notify(x->g, x->device, x->stream, done, user, err, sizeof err);
    if (rc < 0) {
        cudaStreamSynchronize((cudaStream_t)x->stream);
        (void)cudaGetLastError();
        snprintf(msg, len, "GPU completion on device %d: %s", x->device, err);
        return rc;
    }
    return MOVE_STARTED;
}

static const struct exec_gpu *bound(const struct move_prog *p, char *msg, size_t len)
{
    const struct exec_gpu *x = (const struct exec_gpu *)p; /* p is x->mp, the first member */
    if (!p || x->tag != EXEC_GPU_TAG || !x->prog) {
        snprintf(msg, len, "GPU copy without a bound program (exec_gpu_bind)");
        return NULL;
    }
    return x;
}

static int failed(const struct exec_gpu *x, const char *what, int rc, char *msg, size_t len)
{
    snprintf(msg, len, "GPU %s on device %d: %s", what, x->device, kvk_last_error());
    return rc;
}

static int gpu_gather(const struct move_prog *p, uint64_t lo, uint64_t hi, uint8_t *out,
                      move_done_cb done, void *user, char *msg, size_t len)
{
    const struct exec_gpu *x = bound(p, msg, len);
    if (!x)
        return -EINVAL;
    int rc = kvk_gather(prog_of(x), &x->src, lo, hi, out, x->stream);
    return rc < 0 ? failed(x, "gather", rc, msg, len) : started(x, done, user, msg, len);
}

static int gpu_scatter(const struct move_prog *p, const uint8_t *in, uint64_t lo, uint64_t hi,
                       move_done_cb done, void *user, char *msg, size_t len)
{
    const struct exec_gpu *x = bound(p, msg, len);
    if (!x)
        return -EINVAL;
    int rc = kvk_scatter(prog_of(x), in, lo, hi, &x->dst, x->stream);
    return rc < 0 ? failed(x, "scatter", rc, msg, len) : started(x, done, user, msg, len);
}

static int gpu_direct(const struct move_prog *p, move_done_cb done, void *user, char *msg,
                      size_t len)
{
    const struct exec_gpu *x = bound(p, msg, len);
    if (!x)
        return -EINVAL;
    struct gpu_timer *t = (struct gpu_timer *)&x->direct_time; /* x is the caller's binding */
    gpu_timer_done(t);
    gpu_timer_start(t, x->stream); /* a timer that failed reads 0 */
    int rc = kvk_direct(prog_of(x), &x->src, &x->dst, x->stream);
    gpu_timer_stop(t, x->stream);
    return rc < 0 ? failed(x, "copy", rc, msg, len) : started(x, done, user, msg, len);
}

int exec_gpu_direct_range(struct exec_gpu *x, uint64_t lo, uint64_t hi, move_done_cb done,
                          void *user, char *msg, size_t len)
{
    if (!bound(&x->mp, msg, len))
        return -EINVAL;
    int rc = kvk_direct_range(prog_of(x), &x->src, lo, hi, &x->dst, x->stream);
    return rc < 0 ? failed(x, "copy", rc, msg, len) : started(x, done, user, msg, len);
}

#else /* !KVF_HAVE_CUDA: GPU pools are refused at REGISTER; this is the refusal of last resort */

#define NO_CUDA "this kvferryd was built without CUDA: GPU pools cannot be copied"

int exec_gpu_direct_range(struct exec_gpu *x, uint64_t lo, uint64_t hi, move_done_cb done,
                          void *user, char *msg, size_t len)
{
    (void)x, (void)lo, (void)hi, (void)done, (void)user;
    snprintf(msg, len, NO_CUDA);
    return -ENOTSUP;
}

int exec_gpu_bind(struct exec_gpu *x, struct gpu *g, const struct copy_op *ops, uint32_t n_ops,
                  int device, struct CUstream_st *stream, const struct copy_mem *src,
                  const struct copy_mem *dst, char *msg, size_t len)
{
    (void)g, (void)ops, (void)n_ops, (void)device, (void)stream, (void)src, (void)dst;
    memset(x, 0, sizeof *x);
    snprintf(msg, len, NO_CUDA);
    return -ENOTSUP;
}

int exec_gpu_tmpl_make(void *arg, void **ret, char *msg, size_t len)
{
    (void)arg, (void)ret;
    snprintf(msg, len, NO_CUDA);
    return -ENOTSUP;
}

void exec_gpu_tmpl_free(void *obj)
{
    (void)obj;
}

int exec_gpu_bind_ids(struct exec_gpu *x, struct gpu *g, struct gpu_prog *tprog,
                      const uint32_t *ids, uint32_t n_ids, int device, struct CUstream_st *stream,
                      const struct copy_mem *src, const struct copy_mem *dst, char *msg,
                      size_t len)
{
    (void)g, (void)tprog, (void)ids, (void)n_ids, (void)device, (void)stream, (void)src,
        (void)dst;
    memset(x, 0, sizeof *x);
    snprintf(msg, len, NO_CUDA);
    return -ENOTSUP;
}

static int gpu_gather(const struct move_prog *p, uint64_t lo, uint64_t hi, uint8_t *out,
                      move_done_cb done, void *user, char *msg, size_t len)
{
    (void)p, (void)lo, (void)hi, (void)out, (void)done, (void)user;
    snprintf(msg, len, NO_CUDA);
    return -ENOTSUP;
}

static int gpu_scatter(const struct move_prog *p, const uint8_t *in, uint64_t lo, uint64_t hi,
                       move_done_cb done, void *user, char *msg, size_t len)
{
    (void)p, (void)in, (void)lo, (void)hi, (void)done, (void)user;
    snprintf(msg, len, NO_CUDA);
    return -ENOTSUP;
}

static int gpu_direct(const struct move_prog *p, move_done_cb done, void *user, char *msg,
                      size_t len)
{
    (void)p, (void)done, (void)user;
    snprintf(msg, len, NO_CUDA);
    return -ENOTSUP;
}

#endif

void exec_gpu_unbind(struct exec_gpu *x)
{
#ifdef KVF_HAVE_CUDA
    x->inst = kvk_program_free(x->inst); /* before the template's reference: it borrows it */
#endif
    if (x->prog)
        x->prog = gpu_prog_put(x->g, x->prog);
    gpu_timer_done(&x->direct_time);
    x->tag = 0;
}

void exec_gpu_set_stream(struct exec_gpu *x, struct CUstream_st *stream)
{
    x->stream = stream;
}

int exec_gpu_after(const struct exec_gpu *x, struct CUevent_st *mark, char *msg, size_t len)
{
    char err[GPU_REASON_MAX + 64];
    int rc = gpu_event_wait(x->stream, mark, err, sizeof err);
    if (rc < 0)
        snprintf(msg, len, "GPU %d: waiting for the context rank's CUDA event: %s", x->device,
                 err);
    return rc;
}

uint64_t exec_gpu_direct_ns(const struct exec_gpu *x)
{
    return gpu_timer_ns(&x->direct_time);
}

/* Bounds of each side's pools as the plan addresses them: the host row's check, which reads
 * nothing, over the GPU addresses. */
static int gpu_check(const struct move_prog *p, char side, char *msg, size_t len)
{
    return move_exec_of(MOVE_EXEC_HOST)->check(p, side, msg, len);
}

const struct move_exec move_exec_gpu = {
    .name = "gpu",
    .check = gpu_check,
    .gather = gpu_gather,
    .scatter = gpu_scatter,
    .direct = gpu_direct,
};
