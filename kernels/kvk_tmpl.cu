/* kvk_tmpl.cu: copy programs kept per plan template (kvf_kernels.h kvk_tprogram_new, host
 * tables in kvk_subst.h). The template's ops at item 0, their first task indices and their id
 * slots are uploaded once; per request only its ids cross PCIe (page-locked staging, no host
 * wait), into one stream-ordered allocation that also holds the request's task table, and an
 * expand kernel writes that table on the GPU by the host's formulas (kvk_subst_op, kvk_op_task,
 * kvk_ftask_of), so the copy kernel runs unchanged over it. The request's program borrows the
 * template's host index (ops, op_first: extent lookup, pool needs for the largest ids) and owns
 * only its device tables and event, which go back to the template when it is freed (its
 * launches ended) and serve a later request: steady requests allocate and create nothing.
 * Threads: as kvk_program.cu (a mutex over each template's spares). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kvk_cuda.h"

static int tprogram_upload(struct kvk_tprogram *tp, cudaStream_t stream)
{
    struct kvk_program *p = &tp->shape;
    const struct kvk_tasks *t = &tp->h.t;
    uint64_t lens[3] = {(uint64_t)(t->n_ops ? t->n_ops : 1) * sizeof(struct kvk_op),
                        ((uint64_t)t->n_ops + 1) * sizeof(uint32_t),
                        (uint64_t)(t->n_ops ? t->n_ops : 1) * sizeof(struct kvk_subst)};
    const void *parts[3] = {t->ops, t->op_first, tp->h.subst};
    uint64_t total = kvk_stage_off(lens[0]) + kvk_stage_off(lens[1]) + kvk_stage_off(lens[2]);
    p->up_stream = stream;
    KVK_TRY(cudaEventCreateWithFlags(&p->ready, cudaEventDisableTiming));
    kvk_pool_keep(p->device);
    KVK_TRY(cudaMallocAsync(&p->d_mem, total, stream));
    uint8_t *d = (uint8_t *)p->d_mem;
    p->d_ops = (struct kvk_op *)d;
    tp->d_first = (const uint32_t *)(d + kvk_stage_off(lens[0]));
    tp->d_subst = (const struct kvk_subst *)(d + kvk_stage_off(lens[0]) + kvk_stage_off(lens[1]));
    int rc = kvk_stage_copy(d, parts, lens, 3, p->device, stream, &p->staged);
    if (rc < 0)
        return rc;
    KVK_TRY(cudaEventRecord(p->ready, stream));
    return 0;
}

int kvk_tprogram_new(const struct copy_op *ops, const struct kvk_subst *subst, uint32_t n_ops,
                     const uint32_t *limit, uint32_t n_slots, int device,
                     struct CUstream_st *stream, struct kvk_tprogram **ret)
{
    if (!ret)
        return kvk_fail(-EINVAL, "kvk_tprogram_new: NULL ret");
    struct kvk_tprogram *tp = (struct kvk_tprogram *)calloc(1, sizeof(*tp));
    if (!tp)
        return kvk_fail(-ENOMEM, "kvk_tprogram_new: out of memory");
    pthread_mutex_init(&tp->mu, NULL);
    uint32_t tb, pa;
    int rc = kvk_program_config(&tp->shape, device, &tb, &pa);
    if (rc == 0)
        rc = kvk_tmpl_build(ops, subst, n_ops, limit, n_slots, tb, pa, &tp->h);
    int prev;
    if (rc == 0 && (rc = kvk_device_enter(device, &prev)) == 0) {
        rc = kvk_launch_shape(&tp->shape);
        if (rc == 0)
            rc = tprogram_upload(tp, stream ? (cudaStream_t)stream : cudaStreamLegacy);
        kvk_device_leave(prev);
    }
    if (rc < 0) {
        kvk_tprogram_free(tp);
        return rc;
    }
    *ret = tp;
    return 0;
}

struct kvk_tprogram *kvk_tprogram_free(struct kvk_tprogram *tp)
{
    if (!tp)
        return NULL;
    if (tp->shape.d_mem || tp->shape.ready || tp->n_spare) {
        int prev;
        if (kvk_device_enter(tp->shape.device, &prev) == 0) {
            for (uint32_t i = 0; i < tp->n_spare; i++) { /* stream-ordered, waits for nothing */
                cudaFreeAsync(tp->spare[i].d_mem, tp->shape.up_stream);
                cudaEventDestroy(tp->spare[i].ready);
            }
            kvk_upload_free(&tp->shape);
            kvk_device_leave(prev);
        }
    }
    pthread_mutex_destroy(&tp->mu);
    kvk_tmpl_done(&tp->h);
    free(tp);
    return NULL;
}

uint32_t kvk_tprogram_slots(const struct kvk_tprogram *tp) { return tp ? tp->h.n_slots : 0; }
uint32_t kvk_tprogram_tasks(const struct kvk_tprogram *tp) { return tp ? tp->h.t.n_tasks : 0; }

/* One request's device tables: ids | tasks (| substituted ops for the op family). */
static uint64_t inst_layout(const struct kvk_tprogram *tp, uint64_t *ids_bytes,
                            uint64_t *task_bytes)
{
    const struct kvk_program *s = &tp->shape;
    uint32_t n_ops = tp->h.t.n_ops, n_tasks = tp->h.t.n_tasks, n_ids = tp->h.n_slots;
    *ids_bytes = kvk_stage_off((uint64_t)(n_ids ? n_ids : 1) * sizeof(uint32_t));
    *task_bytes = kvk_stage_off((uint64_t)(n_tasks ? n_tasks : 1) *
                                (s->fat ? sizeof(struct kvk_ftask) : sizeof(struct kvk_task)));
    return *ids_bytes + *task_bytes +
           (s->fat ? 0 : (uint64_t)(n_ops ? n_ops : 1) * sizeof(struct kvk_op));
}

void kvk_tmpl_release(struct kvk_program *p)
{
    struct kvk_tprogram *tp = p->from;
    pthread_mutex_lock(&tp->mu);
    if (p->d_mem && p->ready && tp->n_spare < KVK_TMPL_SPARE) {
        tp->spare[tp->n_spare].d_mem = p->d_mem;
        tp->spare[tp->n_spare].ready = p->ready;
        tp->n_spare++;
        p->d_mem = NULL;
        p->ready = NULL;
    }
    pthread_mutex_unlock(&tp->mu);
    p->from = NULL;
}

/* The request's tables (device current): a spare's or new, then its ids and the expansion. */
static int instance_upload(struct kvk_tprogram *tp, struct kvk_program *p, const uint32_t *ids,
                           cudaStream_t stream)
{
    uint32_t n_ops = p->t.n_ops, n_tasks = p->t.n_tasks, n_ids = tp->h.n_slots;
    uint64_t ids_bytes, task_bytes, bytes = inst_layout(tp, &ids_bytes, &task_bytes);
    p->up_stream = stream;
    pthread_mutex_lock(&tp->mu);
    if (tp->n_spare > 0) {
        tp->n_spare--;
        p->d_mem = tp->spare[tp->n_spare].d_mem;
        p->ready = tp->spare[tp->n_spare].ready;
    }
    pthread_mutex_unlock(&tp->mu);
    uint64_t t = kvk_step_now();
    if (!p->ready)
        KVK_TRY(cudaEventCreateWithFlags(&p->ready, cudaEventDisableTiming));
    t = kvk_step(KVK_STEP_EVENT_CREATE, t);
    if (!p->d_mem)
        KVK_TRY(cudaMallocAsync(&p->d_mem, bytes, stream));
    t = kvk_step(KVK_STEP_ALLOC, t);
    uint8_t *d = (uint8_t *)p->d_mem;
    if (p->fat)
        p->d_ftasks = (struct kvk_ftask *)(d + ids_bytes);
    else {
        p->d_tasks = (struct kvk_task *)(d + ids_bytes);
        p->d_ops = (struct kvk_op *)(d + ids_bytes + task_bytes);
    }
    if (!tp->shape.uploaded && stream != tp->shape.up_stream) /* the template's tables first */
        KVK_TRY(cudaStreamWaitEvent(stream, tp->shape.ready, 0));
    kvk_step(KVK_STEP_STREAM_WAIT, t);
    uint64_t len = (uint64_t)n_ids * sizeof(uint32_t);
    const void *parts[1] = {ids};
    int rc = n_ids ? kvk_stage_copy(d, parts, &len, 1, p->device, stream, &p->staged) : 0;
    if (rc < 0)
        return rc;
    rc = kvk_expand(tp->shape.d_ops, tp->d_first, tp->d_subst, (const uint32_t *)d, n_ops,
                    n_tasks, p->d_ftasks, p->d_tasks, p->fat ? NULL : p->d_ops, stream);
    if (rc < 0)
        return rc;
    t = kvk_step_now();
    KVK_TRY(cudaEventRecord(p->ready, stream));
    kvk_step(KVK_STEP_EVENT_RECORD, t);
    return 0;
}

int kvk_program_of_ids(struct kvk_tprogram *tp, const uint32_t *ids, uint32_t n_ids,
                       struct CUstream_st *stream, struct kvk_program **ret)
{
    if (!tp || !ret)
        return kvk_fail(-EINVAL, "kvk_program_of_ids: NULL template or ret");
    uint64_t t = kvk_step_now();
    int rc = kvk_tmpl_check_ids(&tp->h, ids, n_ids);
    if (rc < 0)
        return rc;
    struct kvk_program *p = (struct kvk_program *)calloc(1, sizeof(*p));
    if (!p)
        return kvk_fail(-ENOMEM, "kvk_program_of_ids: out of memory");
    *p = tp->shape; /* device, launch shape; the device tables are the request's own: */
    p->d_mem = NULL;
    p->d_ops = NULL;
    p->d_tasks = NULL;
    p->d_ftasks = NULL;
    p->ready = NULL;
    p->uploaded = 0;
    p->t = tp->h.t; /* borrowed: the template outlives the request's program */
    p->borrowed = 1;
    p->from = tp;
    t = kvk_step(KVK_STEP_HOST, t);
    int prev;
    if ((rc = kvk_device_enter(p->device, &prev)) == 0) {
        kvk_step(KVK_STEP_DEVICE, t);
        rc = instance_upload(tp, p, ids, stream ? (cudaStream_t)stream : cudaStreamLegacy);
        if (rc < 0)
            cudaStreamSynchronize(stream ? (cudaStream_t)stream : cudaStreamLegacy);
        t = kvk_step_now();
        kvk_device_leave(prev);
        kvk_step(KVK_STEP_DEVICE, t);
    }
    kvk_step_upload_done();
    if (rc < 0) {
        kvk_program_free(p);
        return rc;
    }
    *ret = p;
    return 0;
}
