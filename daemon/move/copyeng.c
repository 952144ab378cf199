/* copyeng.c: copy threads, their node queues, and completions to the loop (copyeng.h).
 * One mutex guards the queues, the done list, `stopping` and the counters the threads bump;
 * a job's `left` (pieces not yet ended) is atomic so the thread that ends the last piece,
 * and only it, hands the job to the loop. The running list and the rest are the loop's. */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "copy_remote.h"
#include "copyeng.h"
#include "hostnuma.h"
#include "mempin.h"
#include "prefault.h"

struct piece {
    struct copyeng_job *job;
    uint32_t part;
    uint64_t lo, hi;
    struct piece *next;
};

struct jpart {
    copyeng_kind_t kind;
    struct copy_op *ops; /* owned copy */
    uint32_t n_ops;
    struct copy_mem src, dst;
    uint8_t *buf;        /* borrowed */
    uint32_t buf_pid;    /* gather: buf is in that process (copy_remote.h); 0: ours */
    uint32_t dst_pid;    /* direct: dst's pools are in that process; 0: ours */
    uint64_t lo;         /* buf[0] is extent byte lo */
    bool write;          /* prefault */
};

struct copyeng_job {
    struct copyeng *e;
    copyeng_done_cb cb;
    void *user;
    struct jpart *parts;   /* owned */
    uint32_t n_parts;
    struct piece *pieces;  /* owned */
    uint32_t n_pieces;
    void **pins;           /* bases pinned (mempin), owned array */
    uint32_t n_pins;
    uint64_t bytes, t_submit;
    atomic_uint left;      /* pieces not ended */
    atomic_bool cancelled; /* the owner let go: skip, no callback */
    atomic_bool halted;    /* the owner stopped it: skip, callback with -ECANCELED */
    atomic_bool skipped;   /* a piece was skipped at engine free: -ECANCELED */
    atomic_int err;        /* the first remote gather's error, 0: none */
    atomic_uint_fast64_t busy_ns;
    struct copyeng_job *next_done;       /* under mu */
    struct copyeng_job *r_prev, *r_next; /* running list, loop only */
};

struct nodeq {
    struct piece *head, *tail;
    int sys_id;     /* sysfs node id; -1 when the nodes are forced */
    cpu_set_t cpus;
    bool bind;
};

struct thr {
    struct copyeng *e;
    uint32_t node;
    pthread_t tid;
};

struct copyeng {
    uv_loop_t *loop;        /* borrowed */
    uv_async_t async;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct nodeq *q;        /* owned, `nodes` queues */
    uint32_t nodes;
    struct nodeq bg;        /* under mu: prefault pieces, taken when the queues are empty */
    struct thr *thr;        /* owned */
    uint32_t threads, started;
    bool stopping;                 /* under mu */
    struct copyeng_job *done;      /* under mu */
    uint32_t queued;               /* under mu */
    uint32_t active;               /* under mu: pieces a thread runs now */
    pthread_cond_t idle;           /* under mu: queued and active reached 0 */
    uint64_t busy_ns, stolen;      /* under mu */
    struct copyeng_job *running;   /* loop */
    uint32_t running_n, rr;        /* loop */
    uint64_t jobs, pieces, bytes, cancelled; /* loop */
};

uint32_t copyeng_default_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    return n > (long)COPYENG_MAX_THREADS ? COPYENG_MAX_THREADS : (uint32_t)n;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* 0, or a remote gather's -errno. */
static int run_piece(const struct piece *p)
{
    const struct jpart *jp = &p->job->parts[p->part];
    switch (jp->kind) {
    case COPYENG_DIRECT:
        if (jp->dst_pid)
            return copy_direct_remote(jp->ops, jp->n_ops, &jp->src, p->lo, p->hi, jp->dst_pid,
                                      &jp->dst);
        copy_direct_range(jp->ops, jp->n_ops, &jp->src, p->lo, p->hi, &jp->dst);
        break;
    case COPYENG_GATHER:
        if (jp->buf_pid)
            return copy_gather_remote(jp->ops, jp->n_ops, &jp->src, p->lo, p->hi, jp->buf_pid,
                                      (uint64_t)(uintptr_t)jp->buf + (p->lo - jp->lo));
        copy_gather(jp->ops, jp->n_ops, &jp->src, p->lo, p->hi, jp->buf + (p->lo - jp->lo));
        break;
    case COPYENG_SCATTER:
        copy_scatter(jp->ops, jp->n_ops, jp->buf + (p->lo - jp->lo), p->lo, p->hi, &jp->dst);
        break;
    case COPYENG_PREFAULT:
        prefault_range(jp->ops, jp->n_ops, &jp->src, p->lo, p->hi, jp->write);
        break;
    }
    return 0;
}

static bool has_src(copyeng_kind_t k) { return k != COPYENG_SCATTER; }
static bool has_dst(copyeng_kind_t k) { return k == COPYENG_DIRECT || k == COPYENG_SCATTER; }
static bool has_buf(copyeng_kind_t k) { return k == COPYENG_GATHER || k == COPYENG_SCATTER; }

static struct piece *take(struct nodeq *q)
{
    struct piece *p = q->head;
    if (p) {
        q->head = p->next;
        if (!q->head)
            q->tail = NULL;
    }
    return p;
}

/* Under mu: the next piece for a thread of `node`, its own queue first, the background last. */
static struct piece *pop(struct copyeng *e, uint32_t node)
{
    for (uint32_t k = 0; k < e->nodes; k++) {
        struct piece *p = take(&e->q[(node + k) % e->nodes]);
        if (!p)
            continue;
        e->queued--;
        e->stolen += k > 0;
        return p;
    }
    struct piece *p = take(&e->bg);
    e->queued -= p != NULL;
    return p;
}

static void *thread_main(void *arg)
{
    struct thr *t = arg;
    struct copyeng *e = t->e;
    if (e->q[t->node].bind)
        pthread_setaffinity_np(pthread_self(), sizeof e->q[t->node].cpus, &e->q[t->node].cpus);
    pthread_mutex_lock(&e->mu);
    for (;;) {
        struct piece *p = pop(e, t->node);
        if (!p) {
            if (e->stopping)
                break;
            pthread_cond_wait(&e->cv, &e->mu);
            continue;
        }
        bool stopping = e->stopping;
        e->active++;
        pthread_mutex_unlock(&e->mu);
        struct copyeng_job *j = p->job;
        uint64_t busy = 0;
        if (stopping || atomic_load(&j->halted))
            atomic_store(&j->skipped, true);
        else if (!atomic_load(&j->cancelled)) {
            uint64_t t0 = now_ns();
            int rc = run_piece(p), none = 0;
            if (rc < 0)
                atomic_compare_exchange_strong(&j->err, &none, rc);
            busy = now_ns() - t0;
            atomic_fetch_add(&j->busy_ns, busy);
        }
        bool last = atomic_fetch_sub(&j->left, 1) == 1;
        pthread_mutex_lock(&e->mu);
        e->busy_ns += busy;
        if (--e->active == 0 && e->queued == 0)
            pthread_cond_broadcast(&e->idle);
        if (last) {
            j->next_done = e->done;
            e->done = j;
            pthread_mutex_unlock(&e->mu);
            uv_async_send(&e->async);
            pthread_mutex_lock(&e->mu);
        }
    }
    pthread_mutex_unlock(&e->mu);
    return NULL;
}

static void job_free(struct copyeng_job *j)
{
    for (uint32_t i = 0; i < j->n_pins; i++)
        mempin_unref(j->pins[i]);
    for (uint32_t i = 0; i < j->n_parts; i++)
        free(j->parts[i].ops);
    free(j->pins);
    free(j->parts);
    free(j->pieces);
    free(j);
}

static void running_unlink(struct copyeng *e, struct copyeng_job *j)
{
    if (j->r_prev)
        j->r_prev->r_next = j->r_next;
    else
        e->running = j->r_next;
    if (j->r_next)
        j->r_next->r_prev = j->r_prev;
    e->running_n--;
}

/* On the loop: jobs whose pieces all ended. */
static void drain_done(struct copyeng *e)
{
    pthread_mutex_lock(&e->mu);
    struct copyeng_job *list = e->done;
    e->done = NULL;
    pthread_mutex_unlock(&e->mu);
    while (list) {
        struct copyeng_job *j = list;
        list = j->next_done;
        running_unlink(e, j);
        if (!atomic_load(&j->cancelled) && j->cb) {
            int err = atomic_load(&j->err);
            struct copyeng_done d = {.status = err ? err : atomic_load(&j->skipped) ? -ECANCELED : 0,
                                     .bytes = j->bytes,
                                     .busy_ns = (uint64_t)atomic_load(&j->busy_ns),
                                     .wall_ns = now_ns() - j->t_submit};
            j->cb(j, &d, j->user);
        }
        job_free(j);
    }
}

static void on_async(uv_async_t *h) { drain_done(h->data); }

static void on_close(uv_handle_t *h) { free(h->data); }

/* Queues for the machine's nodes (or `forced` of them), threads spread over them. */
static int setup_nodes(struct copyeng *e, uint32_t forced)
{
    struct hostnuma_node sys[HOSTNUMA_MAX_NODES];
    uint32_t n = forced ? forced : hostnuma_nodes(sys, HOSTNUMA_MAX_NODES);
    if (n == 0)
        n = 1;
    if (!(e->q = calloc(n, sizeof *e->q)))
        return -ENOMEM;
    e->nodes = n;
    for (uint32_t i = 0; i < n; i++) {
        e->q[i].sys_id = -1;
        if (!forced && n > 1) {
            e->q[i].sys_id = sys[i].id;
            e->q[i].cpus = sys[i].cpus;
            e->q[i].bind = true;
        }
    }
    return 0;
}

int copyeng_new(const struct copyeng_params *p, struct copyeng **ret)
{
    if (!p || !p->loop || p->threads > COPYENG_MAX_THREADS || p->nodes > HOSTNUMA_MAX_NODES)
        return -EINVAL;
    struct copyeng *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->loop = p->loop;
    e->threads = p->threads ? p->threads : copyeng_default_threads();
    int rc = setup_nodes(e, p->nodes);
    if (rc < 0 || !(e->thr = calloc(e->threads, sizeof *e->thr))) {
        free(e->q);
        free(e);
        return rc < 0 ? rc : -ENOMEM;
    }
    if ((rc = uv_async_init(p->loop, &e->async, on_async)) < 0) {
        free(e->thr);
        free(e->q);
        free(e);
        return rc;
    }
    e->async.data = e;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    pthread_cond_init(&e->idle, NULL);
    for (; e->started < e->threads; e->started++) {
        struct thr *t = &e->thr[e->started];
        t->e = e;
        t->node = e->started % e->nodes;
        if ((rc = pthread_create(&t->tid, NULL, thread_main, t)) != 0) {
            copyeng_free(e); /* joins those started, closes the handle */
            return -rc;
        }
    }
    *ret = e;
    return 0;
}

struct copyeng *copyeng_free(struct copyeng *e)
{
    if (!e)
        return NULL;
    pthread_mutex_lock(&e->mu);
    e->stopping = true;
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&e->mu);
    for (uint32_t i = 0; i < e->started; i++)
        pthread_join(e->thr[i].tid, NULL);
    drain_done(e); /* every piece ended: every job is on the done list */
    pthread_cond_destroy(&e->cv);
    pthread_cond_destroy(&e->idle);
    pthread_mutex_destroy(&e->mu);
    free(e->thr);
    free(e->q);
    e->thr = NULL;
    e->q = NULL;
    uv_close((uv_handle_t *)&e->async, on_close);
    return NULL;
}

void copyeng_quiesce(struct copyeng *e)
{
    if (!e)
        return;
    pthread_mutex_lock(&e->mu);
    while (e->queued > 0 || e->active > 0)
        pthread_cond_wait(&e->idle, &e->mu);
    pthread_mutex_unlock(&e->mu);
    drain_done(e); /* every piece ended: every job is on the done list */
}

static uint64_t extent_of(const struct copyeng_part *p)
{
    if (p->n_ops == 0)
        return 0;
    const struct copy_op *o = &p->ops[p->n_ops - 1];
    return o->ext_off + o->len * o->count;
}

/* Pieces for [lo, hi): one per thread, PIECE_MIN..PIECE_MAX bytes each (4 KiB multiples). */
static uint64_t piece_bytes(const struct copyeng *e, uint64_t bytes)
{
    uint64_t s = (bytes / e->threads + 4095) & ~(uint64_t)4095;
    return s < COPYENG_PIECE_MIN ? COPYENG_PIECE_MIN : s > COPYENG_PIECE_MAX ? COPYENG_PIECE_MAX : s;
}

static int pin_mem(struct copyeng_job *j, const struct copy_mem *m)
{
    for (uint32_t i = 0; i < m->n && i < LAYOUT_MAX_POOLS; i++) {
        if (!m->base[i])
            continue;
        if (mempin_ref(m->base[i], m->size[i]) < 0)
            return -ENOMEM;
        j->pins[j->n_pins++] = m->base[i];
    }
    return 0;
}

/* The queue of the node holding a part's destination (its first op's first byte). */
static uint32_t node_for(struct copyeng *e, const struct jpart *jp)
{
    if (e->nodes == 1)
        return 0;
    if (e->q[0].sys_id >= 0 && jp->n_ops) {
        const struct copy_op *o = &jp->ops[0];
        bool remote = (jp->kind == COPYENG_GATHER && jp->buf_pid) || jp->dst_pid;
        const void *d = remote ? jp->src.base[o->src_pool]
                        : jp->kind == COPYENG_GATHER ? (const void *)jp->buf
                                                  : jp->dst.base[o->dst_pool] + o->dst_off;
        int id = hostnuma_node_of(d);
        for (uint32_t i = 0; id >= 0 && i < e->nodes; i++)
            if (e->q[i].sys_id == id)
                return i;
    }
    return e->rr++ % e->nodes;
}

static int check_part(const struct copyeng_part *p)
{
    uint64_t ext = extent_of(p), hi = p->hi ? p->hi : ext;
    if ((unsigned)p->kind > COPYENG_PREFAULT || (p->n_ops && !p->ops) || p->lo > hi || hi > ext)
        return -EINVAL;
    if ((has_src(p->kind) && !p->src) || (has_dst(p->kind) && !p->dst) ||
        (has_buf(p->kind) && !p->buf && hi > p->lo))
        return -EINVAL;
    return 0;
}

int copyeng_submit(struct copyeng *e, const struct copyeng_part *parts, uint32_t n,
                   copyeng_done_cb cb, void *user, struct copyeng_job **ret)
{
    if (!e || !parts || n == 0 || n > COPYENG_MAX_PARTS || e->stopping)
        return -EINVAL;
    uint32_t n_pieces = 0, n_pins = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (check_part(&parts[i]) < 0)
            return -EINVAL;
        uint64_t hi = parts[i].hi ? parts[i].hi : extent_of(&parts[i]), b = hi - parts[i].lo;
        uint64_t ps = piece_bytes(e, b);
        n_pieces += (uint32_t)((b + ps - 1) / ps);
        n_pins += (parts[i].src ? parts[i].src->n : 0) + (parts[i].dst ? parts[i].dst->n : 0);
    }
    struct copyeng_job *j = calloc(1, sizeof *j);
    if (!j)
        return -ENOMEM;
    j->parts = calloc(n, sizeof *j->parts);
    j->pieces = calloc(n_pieces ? n_pieces : 1, sizeof *j->pieces);
    j->pins = calloc(n_pins ? n_pins : 1, sizeof *j->pins);
    if (!j->parts || !j->pieces || !j->pins)
        goto err_free;
    j->e = e;
    j->n_parts = n;
    for (uint32_t i = 0; i < n; i++) {
        const struct copyeng_part *p = &parts[i];
        struct jpart *jp = &j->parts[i];
        jp->kind = p->kind;
        jp->n_ops = p->n_ops;
        jp->buf = p->buf;
        jp->buf_pid = p->kind == COPYENG_GATHER ? p->buf_pid : 0;
        jp->dst_pid = p->kind == COPYENG_DIRECT ? p->dst_pid : 0;
        jp->lo = p->lo;
        jp->write = p->write;
        if (p->n_ops && !(jp->ops = malloc(p->n_ops * sizeof *jp->ops)))
            goto err_free;
        if (p->n_ops)
            memcpy(jp->ops, p->ops, p->n_ops * sizeof *jp->ops);
        if (has_src(p->kind))
            jp->src = *p->src;
        if (has_dst(p->kind))
            jp->dst = *p->dst;
        if ((has_src(p->kind) && pin_mem(j, &jp->src) < 0) ||
            (has_dst(p->kind) && !jp->dst_pid && pin_mem(j, &jp->dst) < 0))
            goto err_free;
        uint64_t hi = p->hi ? p->hi : extent_of(p), ps = piece_bytes(e, hi - p->lo);
        for (uint64_t lo = p->lo; lo < hi; lo += ps) {
            struct piece *pc = &j->pieces[j->n_pieces++];
            *pc = (struct piece){.job = j, .part = i, .lo = lo, .hi = lo + ps < hi ? lo + ps : hi};
        }
        j->bytes += hi - p->lo;
    }
    atomic_init(&j->left, j->n_pieces);
    atomic_init(&j->cancelled, false);
    atomic_init(&j->halted, false);
    atomic_init(&j->skipped, false);
    atomic_init(&j->err, 0);
    atomic_init(&j->busy_ns, 0);
    j->cb = cb;
    j->user = user;
    j->t_submit = now_ns();
    j->r_next = e->running;
    if (e->running)
        e->running->r_prev = j;
    e->running = j;
    e->running_n++;
    e->jobs++;
    e->pieces += j->n_pieces;
    e->bytes += j->bytes;
    pthread_mutex_lock(&e->mu);
    if (j->n_pieces == 0) { /* nothing to copy: complete on the next loop turn, never inline */
        j->next_done = e->done;
        e->done = j;
        pthread_mutex_unlock(&e->mu);
        uv_async_send(&e->async);
    } else {
        for (uint32_t i = 0; i < j->n_pieces; i++) {
            const struct jpart *jp = &j->parts[j->pieces[i].part];
            struct nodeq *q = jp->kind == COPYENG_PREFAULT ? &e->bg : &e->q[node_for(e, jp)];
            if (q->tail)
                q->tail->next = &j->pieces[i];
            else
                q->head = &j->pieces[i];
            q->tail = &j->pieces[i];
        }
        e->queued += j->n_pieces;
        pthread_cond_broadcast(&e->cv);
        pthread_mutex_unlock(&e->mu);
    }
    if (ret)
        *ret = j;
    return 0;
err_free:
    job_free(j);
    return -ENOMEM;
}

void copyeng_cancel(struct copyeng_job *j)
{
    if (!j || atomic_load(&j->cancelled))
        return;
    atomic_store(&j->cancelled, true);
    j->e->cancelled++;
}

void copyeng_halt(struct copyeng_job *j)
{
    if (j)
        atomic_store(&j->halted, true);
}

void copyeng_get_stats(const struct copyeng *e, struct copyeng_stats *ret)
{
    struct copyeng *m = (struct copyeng *)e; /* the mutex, not the engine, changes */
    memset(ret, 0, sizeof *ret);
    ret->threads = e->threads;
    ret->nodes = e->nodes;
    ret->jobs = e->jobs;
    ret->pieces = e->pieces;
    ret->bytes = e->bytes;
    ret->cancelled = e->cancelled;
    ret->running_jobs = e->running_n;
    pthread_mutex_lock(&m->mu);
    ret->busy_ns = e->busy_ns;
    ret->stolen = e->stolen;
    ret->queued_pieces = e->queued;
    pthread_mutex_unlock(&m->mu);
}

json_t *copyeng_stats_json(const struct copyeng *e)
{
    struct copyeng_stats s;
    copyeng_get_stats(e, &s);
    return json_pack("{s:i,s:i,s:I,s:I,s:I,s:f,s:I,s:I,s:i,s:i}", "threads", (int)s.threads,
                     "nodes", (int)s.nodes, "jobs_total", (json_int_t)s.jobs, "pieces_total",
                     (json_int_t)s.pieces, "bytes_total", (json_int_t)s.bytes,
                     "busy_seconds_total",
                     s.busy_ns / 1e9, "cancelled_total", (json_int_t)s.cancelled,
                     "stolen_total", (json_int_t)s.stolen, "queued_pieces",
                     (int)s.queued_pieces, "running_jobs", (int)s.running_jobs);
}
