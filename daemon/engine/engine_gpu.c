/* engine_gpu.c: the bounce path for ranks with pools on GPUs (docs/DESIGN.md §3, §5; issue 6):
 * GPU pools -> the peer's pinned landing slot, or our pinned staging slot -> UCX -> arena -> GPU pools.
 *  - At start, with a GPU, the engine's UCX-allocated arena is page-locked for CUDA
 *    (gpu_host_register: cudaHostRegister portable|mapped) and its device alias kept; the
 *    `arena` status says where the arena is and why.
 *  - Context side: a flow whose writer rank has GPU pools binds the writer's copy program once
 *    (the daemon's cache, or kvk_program_new_async on the flow's stream: no host wait);
 *    chunk k is gathered by kvk_gather on a daemon stream of that GPU straight into the peer's
 *    landing slot through its arena mapped and page-locked here (egpu_peer.h: shared memory,
 *    arena.shm_write copy), else into its staging slot's device alias; the completion comes
 *    back on the loop (gpu_notify) and bstage_gathered goes on exactly as the CPU path does
 *    after copy_gather (CHUNK, or put + flush + CHUNK, or the CHUNK active message). A chunk
 *    of a streamed SEND whose READYs named CUDA events waits for them on the GPU first
 *    (exec_gpu_after on the gather's stream: never a host wait).
 *    With gpu.bounce_copy engines (the default) the kernel gathers into the stream's device
 *    scratch and cudaMemcpyAsync writes the slot's host address (bounce_ce.h: two daemons on
 *    one GPU overlap that way); the scatter likewise, copy first.
 *  - Generation side: a request whose generation rank has GPU pools binds one program per
 *    writer (the same way); a landed chunk is scattered by kvk_scatter from its landing
 *    slot's device alias and bland_landed then returns the credit as the CPU path does.
 * Either side may be host pools while the other is GPU pools: each daemon copies its own side.
 * Lifetimes. A job (one program + one reference to the rank's GPU mappings) is held by its owner
 * (the flow, or the request for one writer) and by every kernel in flight; the last drop retires
 * it. Retired jobs are freed only while no GPU completion is outstanding (cudaFree waits for the
 * whole device: the loop must not wait for another request's kernel), or every GPU_RETIRE_MAX.
 * While a kernel runs its arena slot stays: a staging stage is finished only after its gather's
 * completion; a landing slot stays held (quarantined when its request fails, and not reclaimed
 * while a scatter of its flow runs: egpu_flow_busy); a request that fails meanwhile tells its
 * worker only when its scatters ended (engine_gen.c). A launch whose completion cannot be
 * learned (gpu_notify failed) is waited for on the spot, so nothing is freed under it.
 * engine_stop waits for the engine's kernels (egpu_stop_kernels) before the arena is unpinned
 * (egpu_free) and unmapped. Loop thread only. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_drive.h"
#include "bounce_ce.h"
#include "bounce_dev.h"
#include "bounce_host.h"
#include "bounce_tl.h"
#include "daemon.h"
#include "egpu_peer.h"
#include "engine_ctx.h"
#include "engine_gen.h"
#include "engine_gpu.h"
#include "engine_tab.h"
#include "exec_gpu.h"
#include "gpu.h"
#include "gpu_retire.h"
#include "registry.h"
#include "registry_gpu.h"
#include "stream_gate.h"
#include "xfer.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

struct egpu_job {
    struct engine *e;
    struct exec_gpu x;          /* the writer's program (cached) on the pools' GPU, its stream */
    struct reg_gpu *pools;      /* one reference */
    uint32_t refs;              /* the owner + kernels in flight */
    struct gpu_retired retired; /* in e->gpu_retired once unreferenced */
};

/* One kernel in flight: gather (st) or scatter (rx). */
struct egpu_op {
    struct engine *e;
    struct egpu_job *job; /* one reference until delivered */
    bool delivered;       /* completed by egpu_stop_kernels: the GPU callback only frees it */
    uint64_t flow;
    struct stage *st;     /* gather: its stage (finished only after this op) */
    struct rx *rx;        /* scatter: its request (kept while scatters_running counts it) */
    uint32_t widx, serial; /* scatter: its writer, and the request's scatter_serial then */
    struct arena_grant g;
    struct egpu_op *next;
};

/* The config's placement values are the GPU module's (cfg.h, gpu.h). */
_Static_assert(GPU_PLACE_AUTO == (int)CFG_PLACEMENT_AUTO &&
                   GPU_PLACE_HOST == (int)CFG_PLACEMENT_HOST &&
                   GPU_PLACE_DEVICE == (int)CFG_PLACEMENT_DEVICE,
               "arena.placement values differ from gpu_place_t");

/* ---- arena ---- */

void egpu_arena_init(struct engine *e)
{
    struct gpu *g = e->d->gpu;
    const char *base = "host (UCX-allocated, so a same-host peer puts straight into it)";
    e->tl = btl_new((uint32_t)e->d->cfg.arena_timeline); /* arena.timeline: for profiling */
    if (!g || gpu_cpu_mode(g)) {
        snprintf(e->arena_why, sizeof e->arena_why, "%s; not page-locked: no GPU (%s)", base,
                 g ? gpu_cpu_reason(g) : "no GPU module");
        return;
    }
    e->gpu = g;
    char why[GPU_REASON_MAX], err[GPU_REASON_MAX + 64];
    gpu_place_t p = GPU_PLACE_HOST;
    /* arena.placement device was refused in engine_new; auto with a CUDA-aware UCX decides
     * device: the host arena is page-locked all the same (host ranks, host-only peers) and a
     * device arena beside it takes the GPU chunks of gpu_direct peers (bdev_init, below) */
    if (gpu_arena_placement(g, (gpu_place_t)e->d->cfg.arena_placement, link_cuda(e->link), &p,
                            why, sizeof why) < 0) {
        snprintf(e->arena_why, sizeof e->arena_why, "%s; not page-locked: %s", base, why);
        log_warn("engine: arena: %s: requests of GPU ranks through other daemons are refused",
                 why);
        return;
    }
    int rc = gpu_host_register(g, e->arena_base, e->arena_len, &e->arena_dev, err, sizeof err);
    if (rc < 0) {
        e->arena_dev = NULL;
        snprintf(e->arena_why, sizeof e->arena_why, "%s; not page-locked: %s", base, err);
        log_warn("engine: page-locking the arena for CUDA: %s: requests of GPU ranks through "
                 "other daemons are refused (host ranks are not affected)",
                 err);
        return;
    }
    e->bounce_ce = e->d->cfg.gpu_bounce_copy == CFG_BOUNCE_COPY_ENGINES;
    bdev_init(e); /* the device arena, where UCX handles CUDA memory */
    snprintf(e->arena_why, sizeof e->arena_why,
             "%s, page-locked for CUDA (cudaHostRegister portable|mapped): GPU pools gather "
             "into it and scatter from it (%s)%s",
             base, why,
             e->bounce_ce ? "; chunks cross PCIe by copy engines through a device scratch "
                            "(gpu.bounce_copy engines)"
                          : "; chunks cross PCIe by the kernels (gpu.bounce_copy kernels)");
    log_info("engine: arena of %zu bytes page-locked for CUDA (device alias %p)", e->arena_len,
             e->arena_dev);
}

void egpu_arena_json(const struct engine *e, json_t *o)
{
    json_object_set_new(o, "placement", json_string("host"));
    json_object_set_new(o, "pinned_for_gpu", json_boolean(e->arena_dev != NULL));
    json_object_set_new(o, "why", json_string(e->arena_why));
    bdev_json(e, o);
    if (e->tl)
        json_object_set_new(o, "bounce_timeline", btl_json(e->tl));
}

/* ---- jobs ---- */

static void job_retired_free(struct gpu_retired *r)
{
    struct egpu_job *j = (struct egpu_job *)((char *)r - offsetof(struct egpu_job, retired));
    exec_gpu_unbind(&j->x); /* back to the program cache: its kernels ended */
    j->pools = reg_gpu_unref(j->pools);
    free(j);
}

static void job_put(struct egpu_job *j)
{
    if (!j || --j->refs > 0)
        return;
    struct engine *e = j->e;
    j->retired.free_fn = job_retired_free;
    if (gpu_retire(&e->gpu_retired, e->gpu, &j->retired))
        engine_due(e, EPART_GPU, ENGINE_DUE_NEXT); /* egpu_tick frees them once the GPUs are idle */
}

uint64_t egpu_tick(struct engine *e, uint64_t now)
{
    (void)now;
    if (e->gpu)
        gpu_retire_idle(&e->gpu_retired, e->gpu);
    return gpu_retire_pending(&e->gpu_retired) ? ENGINE_DUE_NEXT : 0;
}

/* A job for writer pw's program over rk's GPU pools; *ret NULL when the writer has no bytes. */
static int job_new(struct engine *e, const struct reg_rank *rk, const struct plan_writer *pw,
                   unsigned stream_idx, struct egpu_job **ret, char *msg, size_t len)
{
    const struct reg_gpu *rg = rk->gpu;
    *ret = NULL;
    if (!e->arena_dev) {
        snprintf(msg, len, "%s rank %u has GPU pools, but this daemon's arena is not page-locked "
                 "for CUDA (%s)", rk->layout.instance, layout_rank(&rk->layout), e->arena_why);
        return -ENODEV;
    }
    const struct gpu_device *gd = gpu_device(e->gpu, rg->device);
    struct CUstream_st *stream = gpu_stream(e->gpu, rg->device, stream_idx);
    if (!gd || gd->failed || !stream) {
        snprintf(msg, len, "GPU %d of %s rank %u cannot take work: %s", rg->device,
                 rk->layout.instance, layout_rank(&rk->layout),
                 gd && gd->failed ? gd->failed_reason : "no such device or stream");
        return -ENODEV;
    }
    if (pw->bytes == 0 || pw->n_ops == 0)
        return 0;
    struct egpu_job *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    char why[WIRE_TEXT_MAX];
    /* one side is this rank's pools: a gather reads them (src), a scatter writes them (dst) */
    int rc = exec_gpu_bind(&j->x, e->gpu, pw->ops, pw->n_ops, rg->device, stream, &rg->mem,
                           &rg->mem, why, sizeof why);
    if (rc < 0) {
        snprintf(msg, len, "writer rank %u: %s", pw->ctx_rank, why);
        free(j);
        return rc;
    }
    j->e = e;
    j->refs = 1;
    j->pools = reg_gpu_ref(rk->gpu);
    *ret = j;
    return 0;
}

int egpu_tx_device(const struct tx *tx)
{
    return tx->gpu ? tx->gpu->x.device : -1;
}

int egpu_rx_device(const struct rx *rx, uint32_t widx)
{
    return rx->gpu && widx < rx->n_w && rx->gpu[widx] ? rx->gpu[widx]->x.device : -1;
}

bool egpu_tx_on_gpu(const struct tx *tx)
{
    return tx->gpu || (tx->send && tx->send->rank->gpu);
}

static kvf_error_t code_of(int rc)
{
    return rc == -ENOMEM || rc == -EIO ? KVF_E_INTERNAL : KVF_E_NO_ROUTE;
}

kvf_error_t egpu_tx_plan(struct tx *tx, char *msg, size_t len)
{
    if (tx->rr.u.recv_req.path == WIRE_PATH_FRAGMENT) {
        snprintf(msg, len, "writer rank %u has GPU pools, which the fragment path cannot read "
                 "(UCX here reaches host memory only): the bounce path is needed",
                 tx->rr.u.recv_req.writer);
        return KVF_E_NO_ROUTE;
    }
    int rc = job_new(tx->e, tx->send->rank, tx->pw, (unsigned)tx->flow, &tx->gpu, msg, len);
    return rc < 0 ? code_of(rc) : KVF_OK;
}

void egpu_tx_gone(struct tx *tx)
{
    job_put(tx->gpu);
    tx->gpu = NULL;
}

kvf_error_t egpu_rx_start(struct rx *rx, char *msg, size_t len)
{
    rx->gpu = calloc(rx->n_w ? rx->n_w : 1, sizeof *rx->gpu);
    if (!rx->gpu) {
        snprintf(msg, len, "out of memory");
        return KVF_E_INTERNAL;
    }
    for (uint32_t i = 0; i < rx->n_w; i++) {
        if (rxw_local(&rx->w[i]))
            continue; /* a writer of this daemon: path_local.c (host pools only) */
        int rc = job_new(rx->e, rx->x->rank, &rx->plan.writers[i], (unsigned)(rx->req_id + i),
                         &rx->gpu[i], msg, len);
        if (rc < 0)
            return code_of(rc); /* egpu_rx_gone drops what was made */
    }
    return KVF_OK;
}

void egpu_rx_gone(struct rx *rx)
{
    for (uint32_t i = 0; rx->gpu && i < rx->n_w; i++)
        job_put(rx->gpu[i]);
    free(rx->gpu);
    rx->gpu = NULL;
}

/* ---- kernels ---- */

/* A scatter of rx's writer widx ended: the credit goes back (or the request fails); a failure
 * held while scatters ran reaches the worker when the last one ended. */
static void scattered(struct egpu_op *op, int status)
{
    bh_scatter_ended(op->rx, op->widx, op->serial, &op->g, status, "GPU"); /* bounce_host.c */
}

static void deliver(struct egpu_op *op, int status)
{
    struct engine *e = op->e;
    struct egpu_job *j = op->job;
    op->job = NULL;
    if (status < 0)
        e->c.gpu_failures++;
    if (op->st) {
        if (status == 0) {
            e->c.gpu_gathers++;
            e->c.bytes_gpu_gathered += op->st->g.length;
        }
        bstage_gathered(op->st, status);
    } else {
        if (status == 0) {
            e->c.gpu_scatters++;
            e->c.bytes_gpu_scattered += op->g.length;
        }
        scattered(op, status);
    }
    job_put(j);
}

static void unlink_op(struct engine *e, struct egpu_op *op)
{
    for (struct egpu_op **pp = &e->gpu_ops; *pp; pp = &(*pp)->next)
        if (*pp == op) {
            *pp = op->next;
            return;
        }
}

static void on_done(void *arg, int status)
{
    struct egpu_op *op = arg;
    if (op->delivered) { /* egpu_stop_kernels completed it */
        free(op);
        return;
    }
    struct engine *e = op->e;
    unlink_op(e, op);
    deliver(op, status);
    free(op);
    e->drive->rx_sweep(e);
    e->drive->tx_sweep(e);
    egpu_tick(e, 0);
}

/* The GPU executor queued op's kernel and its completion (MOVE_STARTED), or failed with
 * nothing running (it waits for the stream when the completion could not be queued). */
static int launched(struct egpu_op *op, int rc)
{
    if (rc < 0) {
        free(op);
        return rc;
    }
    op->job->refs++;
    op->next = op->e->gpu_ops;
    op->e->gpu_ops = op;
    return 0;
}

int egpu_gather(struct stage *st, char *msg, size_t len)
{
    struct engine *e = st->e;
    struct egpu_job *j = st->tx->gpu;
    if (!j || st->own_buf || !e->arena_dev || (st->to_peer && !st->ppin)) {
        snprintf(msg, len, "GPU gather without a program or a page-locked slot to write");
        return -EINVAL;
    }
    /* a streamed SEND whose READYs named CUDA events: the gather waits on the GPU for the mark
     * of the READY that made its range final */
    int rc = exec_gpu_after(&j->x, stream_gate_mark(st->tx, st->g.ext_off + st->g.length), msg,
                            len);
    if (rc < 0)
        return rc;
    struct egpu_op *op = calloc(1, sizeof *op);
    if (!op) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    *op = (struct egpu_op){.e = e, .job = j, .flow = st->tx->flow, .st = st};
    if (st->dev) /* the staging slot's device twin (bounce_dev.h): the kernel alone */
        return launched(op, move_exec_of(MOVE_EXEC_GPU)->gather(&j->x.mp, st->g.ext_off,
                                                               st->g.ext_off + st->g.length,
                                                               st->buf, on_done, op, msg, len));
    if (e->bounce_ce) /* a kernel into device scratch, a copy engine into the host slot */
        return launched(op, bce_gather(&e->ce_scratch, &j->x, st->g.ext_off,
                                       st->g.ext_off + st->g.length, st->buf, on_done, op, msg,
                                       len));
    /* the peer's landing slot through its page-locked mapping, or our staging slot */
    uint8_t *out = st->ppin ? egpu_peer_dev(st->ppin, st->buf)
                            : (uint8_t *)e->arena_dev + (st->buf - e->arena_base);
    return launched(op, move_exec_of(MOVE_EXEC_GPU)->gather(&j->x.mp, st->g.ext_off,
                                                           st->g.ext_off + st->g.length, out,
                                                           on_done, op, msg, len));
}

int egpu_scatter(struct rx *rx, uint32_t widx, const struct arena_grant *g, char *msg,
                 size_t len)
{
    struct engine *e = rx->e;
    struct egpu_job *j = rx->gpu && widx < rx->n_w ? rx->gpu[widx] : NULL;
    if (!j || !e->arena_dev) {
        snprintf(msg, len, "GPU scatter without a program or a page-locked landing slot");
        return -EINVAL;
    }
    struct egpu_op *op = calloc(1, sizeof *op);
    if (!op) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    *op = (struct egpu_op){.e = e, .job = j, .flow = rx->w[widx].flow, .rx = rx, .widx = widx,
                           .serial = rx->scatter_serial, .g = *g};
    const uint8_t *in = rx->scatter_dev ? bdev_at(e, g->offset) /* its device twin */
                                        : (const uint8_t *)e->arena_dev + g->offset;
    int rc = e->bounce_ce && !rx->scatter_dev /* a copy engine into device scratch, the kernel */
                 ? launched(op, bce_scatter(&e->ce_scratch, &j->x, e->arena_base + g->offset,
                                            g->ext_off, g->ext_off + g->length, on_done, op, msg,
                                            len))
                 : launched(op, move_exec_of(MOVE_EXEC_GPU)->scatter(&j->x.mp, in, g->ext_off,
                                                                    g->ext_off + g->length,
                                                                    on_done, op, msg, len));
    if (rc < 0)
        return rc;
    rx->scatters_running++; /* the request holds a failure until the scatters ended */
    return 0;
}

/* Waits for every stream an engine kernel runs on (teardown only: the loop may block). */
static void sync_ops(struct engine *e)
{
#ifdef KVF_HAVE_CUDA
    for (struct egpu_op *op = e->gpu_ops; op; op = op->next)
        cudaStreamSynchronize((cudaStream_t)op->job->x.stream);
    (void)cudaGetLastError();
#else /* GPU ranks are refused at REGISTER: no kernel ever ran */
    (void)e;
#endif
}

bool egpu_flow_busy(const struct engine *e, uint64_t flow)
{
    for (const struct egpu_op *op = e->gpu_ops; op; op = op->next)
        if (op->rx && op->flow == flow)
            return true;
    return false;
}

void egpu_stop_kernels(struct engine *e)
{
    if (!e->gpu_ops)
        return;
    sync_ops(e);
    while (e->gpu_ops) { /* their memory goes with the GPU callback (gpu_free delivers it) */
        struct egpu_op *op = e->gpu_ops;
        e->gpu_ops = op->next;
        op->delivered = true;
        deliver(op, -ECANCELED);
    }
}

void egpu_free(struct engine *e)
{
    for (struct tx *tx = e->txs; tx; tx = tx->next)
        egpu_tx_gone(tx);
    for (struct rx *rx = e->rxs; rx; rx = rx->next)
        egpu_rx_gone(rx);
    gpu_retire_flush(&e->gpu_retired);
    egpu_peer_free_all(e); /* every kernel was waited for: nothing writes the peers' arenas */
    bce_free(&e->ce_scratch, e->gpu); /* and nothing uses the scratch */
    e->tl = btl_free(e->tl);
    if (e->arena_dev) {
        char err[GPU_REASON_MAX + 64];
        if (gpu_host_unregister(e->gpu, e->arena_base, err, sizeof err) < 0)
            log_warn("engine: unpinning the arena: %s", err);
        e->arena_dev = NULL;
    }
}
