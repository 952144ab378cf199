/* frag_ctx.c: the fragment path's context side (docs/DESIGN.md §5; the generation side, its
 * gates and its row are frag_gen.c): a flow's whole extent in one job, every destination range
 * checked against the generation layout's pools, then each run of the writer's copy program
 * put straight from the context rank's pools into the generation rank's pools (or written
 * there over cma), flushed, and WRITER_DONE. A failed flow's job is counted like a chunk in
 * flight: its drain ack waits for it (engine_quar.c). Context ranks that disconnect while their
 * puts are in flight: the job takes over the rank's pool mappings (the registry then unmaps
 * nothing) and unmaps them when the puts completed. Loop thread only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copyeng.h"
#include "daemon.h"
#include "engine_ctx.h"
#include "engine_drive.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "frag_ctx.h"
#include "registry.h"
#include "xclient.h"
#include "xfer.h"

void frag_ctx_stop(struct engine *e)
{
    for (struct fragjob *j = e->frags; j; j = j->next)
        if (j->copy) { /* its callback runs in here: the job may end */
            copyeng_quiesce(e->d->copy);
            return;
        }
}

/* Every put of tx's flow landed: the whole extent counts as one chunk sent. */
static void done(struct tx *tx)
{
    tx->completed = tx->pw->bytes;
    if (tx->peer) {
        tx->peer->chunks_sent++;
        tx->peer->bytes_sent += tx->pw->bytes;
    }
    tx->e->drive->tx_done(tx);
}

static void failed(struct tx *tx, int err)
{
    drive_tx_fail(tx, KVF_E_PEER_LOST, true, "fragment puts into the generation pools failed: %s",
                  strerror(-err));
}

static void job_end(struct fragjob *j)
{
    struct engine *e = j->e;
    struct tx *tx = j->tx;
    if (tx && !tx_ended(tx)) {
        tx->frag = NULL;
        if (j->err < 0)
            failed(tx, j->err);
        else
            done(tx);
    }
    for (struct fragjob **pp = &e->frags; *pp; pp = &(*pp)->next)
        if (*pp == j) {
            *pp = j->next;
            break;
        }
    if (j->own_mem)
        registry_unmap(e->d->unmapper, &j->mem);
    quar_stage_done(e, j->dack); /* no put of the failed flow is in flight any more */
    free(j);
}

static void job_cb(void *arg, int status)
{
    struct fragjob *j = arg;
    if (status < 0 && j->err == 0)
        j->err = status;
    if (--j->pending == 0 && j->issued)
        job_end(j);
}

/* Over lanes of one host that include cma (link_peer_cma) the context daemon writes the pools
 * itself with process_vm_writev: UCX would emulate puts into memory it did not allocate with
 * active messages (a copy on each side, the generation daemon's loop copying each fragment out
 * and acknowledging it). arena.cma_write: am keeps the UCX puts. *pid: the peer's. */
static bool use_cma(struct engine *e, struct link_peer *lp, const struct wire_recv_req *q,
                    uint32_t *pid)
{
    return e->d->cfg.arena_cma_write == CFG_CMA_WRITE_COPY && q->n_rkeys > 0 &&
           link_peer_cma(lp, q->rkeys[0].remote_base, pid) == 0;
}

static void on_copied(struct copyeng_job *cj, const struct copyeng_done *d, void *user)
{
    (void)cj;
    struct fragjob *j = user;
    j->copy = NULL;
    job_cb(j, d->status);
}

/* The whole program on the copy threads, split across them (copyeng.h), each piece one
 * process_vm_writev per 1024 runs straight into the generation pools in the peer's process, as
 * the bounce writes the peer's landing slots: the loop writes nothing. The destinations were
 * bounded by the generation layout's pools (start). */
static int cma_copy(struct fragjob *j, const struct plan_writer *pw, const struct copy_mem *src,
                    const struct wire_rkey *const *rk, uint32_t pid, uint32_t n_pools)
{
    struct copy_mem dst = {.n = n_pools};
    for (uint32_t p = 0; p < n_pools; p++)
        dst.base[p] = rk[p] ? (uint8_t *)(uintptr_t)rk[p]->remote_base : NULL;
    struct copyeng_part part = {.kind = COPYENG_DIRECT, .ops = pw->ops, .n_ops = pw->n_ops,
                                .src = src, .dst = &dst, .dst_pid = pid};
    j->pending++;
    int rc = copyeng_submit(j->e->d->copy, &part, 1, on_copied, j, &j->copy);
    if (rc < 0)
        j->pending--;
    else
        j->copies++;
    return rc;
}

/* Every run of the writer's program into the pools in batches of LINK_CMA_IOV_MAX runs, one
 * process_vm_writev each; each completes (deferred) through job_cb. */
static int cma_writes(struct fragjob *j, struct link_peer *lp, const struct plan_writer *pw,
                      const struct copy_mem *src, const struct wire_rkey *const *rk)
{
    static struct iovec l[LINK_CMA_IOV_MAX], r[LINK_CMA_IOV_MAX]; /* loop thread only */
    unsigned n = 0;
    int rc = 0;
    for (uint32_t i = 0; i < pw->n_ops && rc == 0; i++) {
        const struct copy_op *o = &pw->ops[i];
        for (uint64_t k = 0; k < o->count && rc == 0; k++) {
            l[n].iov_base = (void *)(src->base[o->src_pool] + o->src_off +
                                     (int64_t)k * o->src_stride);
            r[n].iov_base = (void *)(uintptr_t)(rk[o->dst_pool]->remote_base + o->dst_off +
                                                (uint64_t)((int64_t)k * o->dst_stride));
            l[n].iov_len = r[n].iov_len = o->len;
            bool last = i + 1 == pw->n_ops && k + 1 == o->count;
            if (++n < LINK_CMA_IOV_MAX && !last)
                continue;
            j->pending++;
            if ((rc = link_cma_write(lp, l, r, n, job_cb, j)) < 0)
                j->pending--;
            else
                j->cma++;
            n = 0;
        }
    }
    return rc;
}

/* One UCX put per run, then a flush (a put completes locally; the flush says it landed). */
static int ucx_puts(struct fragjob *j, struct link_peer *lp, const struct plan_writer *pw,
                    const struct copy_mem *src, const struct wire_rkey *const *rk)
{
    int rc = 0;
    for (uint32_t i = 0; i < pw->n_ops && rc == 0; i++) {
        const struct copy_op *o = &pw->ops[i];
        for (uint64_t k = 0; k < o->count && rc == 0; k++) {
            const uint8_t *s = src->base[o->src_pool] + o->src_off + (int64_t)k * o->src_stride;
            uint64_t d =
                rk[o->dst_pool]->remote_base + o->dst_off + (uint64_t)((int64_t)k * o->dst_stride);
            j->pending++;
            rc = link_put_rkey(lp, s, o->len, rk[o->dst_pool]->blob, rk[o->dst_pool]->blob_len, d,
                               job_cb, j);
            if (rc < 0)
                j->pending--;
            else
                j->puts++;
        }
    }
    if (rc == 0) {
        j->pending++;
        rc = link_flush(lp, job_cb, j);
        if (rc < 0)
            j->pending--;
    }
    return rc;
}

/* Checks tx's destinations and issues its puts (or cma writes); 0 or -errno with msg. */
static int start(struct tx *tx, const struct copy_mem *src, char *msg, size_t len)
{
    struct engine *e = tx->e;
    const struct wire_recv_req *q = &tx->rr.u.recv_req;
    const struct plan_writer *pw = tx->pw;
    /* every destination range inside the generation layout's pools, with an rkey for it */
    struct copy_mem bounds = {.n = tx->gen->n_pools};
    const struct wire_rkey *rk[LAYOUT_MAX_POOLS] = {0};
    for (uint32_t i = 0; i < q->n_rkeys; i++)
        if (q->rkeys[i].pool < tx->gen->n_pools)
            rk[q->rkeys[i].pool] = &q->rkeys[i];
    for (uint32_t p = 0; p < tx->gen->n_pools; p++) {
        bounds.base[p] = rk[p] ? (uint8_t *)(uintptr_t)1 : NULL; /* sizes only */
        bounds.size[p] = tx->gen->pools[p].bytes;
    }
    if (copy_check(pw->ops, pw->n_ops, &bounds, 'd') < 0) {
        snprintf(msg, len,
                 "fragment: a destination lies outside the generation pools, or a pool "
                 "has no rkey");
        return -ERANGE;
    }
    struct fragjob *j = calloc(1, sizeof *j);
    if (!j) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    j->e = e;
    j->tx = tx;
    j->next = e->frags;
    e->frags = j;
    tx->frag = j;
    struct link_peer *lp = tx->peer->lp;
    uint32_t pid = 0;
    int rc = !use_cma(e, lp, q, &pid) ? ucx_puts(j, lp, pw, src, rk)
             : e->d->copy             ? cma_copy(j, pw, src, rk, pid, tx->gen->n_pools)
                                      : cma_writes(j, lp, pw, src, rk);
    if (rc < 0 && j->err == 0)
        j->err = rc;
    e->c.fragment_puts += j->puts;
    e->c.fragment_cma_writes += j->cma;
    e->c.fragment_copy_jobs += j->copies;
    e->c.bytes_fragment += pw->bytes;
    j->issued = true;
    if (j->pending == 0)
        job_end(j);
    return 0;
}

void frag_ctx_serve(struct tx *tx)
{
    char msg[WIRE_TEXT_MAX];
    int rc = start(tx, &tx->send->rank->mem, msg, sizeof msg);
    if (rc < 0)
        drive_tx_fail(tx, rc == -ERANGE ? KVF_E_BOUND_VIOLATION : KVF_E_INTERNAL, true, "%s", msg);
}

void frag_ctx_tx_gone(struct engine *e, struct tx *tx, struct dack *d)
{
    for (struct fragjob *j = e->frags; j; j = j->next)
        if (j->tx == tx) {
            j->tx = NULL;
            j->dack = d;
        }
}

void frag_ctx_send_gone(struct engine *e, struct tx *tx, struct xfer *s)
{
    /* a departing context rank: keep its pools mapped until the puts reading them complete */
    for (struct fragjob *j = e->frags; j; j = j->next)
        if (j->tx == tx && s->conn && s->conn->closing && s->rank->mem.n > 0 && !j->own_mem) {
            j->mem = s->rank->mem;
            j->own_mem = true;
            s->rank->mem.n = 0;
        }
}

uint32_t frag_ctx_jobs_count(const struct engine *e)
{
    uint32_t n = 0;
    for (const struct fragjob *j = e->frags; j; j = j->next)
        n++;
    return n;
}

void frag_ctx_jobs_free(struct engine *e)
{
    while (e->frags) {
        struct fragjob *j = e->frags;
        e->frags = j->next;
        if (j->own_mem)
            registry_unmap(e->d->unmapper, &j->mem);
        free(j);
    }
}
