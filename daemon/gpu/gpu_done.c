/* gpu_done.c: completions of stream work delivered to the libuv loop (gpu.h, gpu_notify).
 * A host function queued with cudaLaunchHostFunc moves its node from `pending` to `done` under
 * the mutex and calls uv_async_send; nothing else happens on CUDA's thread. The loop drains `done`
 * and runs the callbacks. With the completion spin on (gpu_spin.c) the loop may see the node's
 * event complete first and fire it itself; the host function still runs later, and the node is
 * freed only after it did (host_ran; until then it waits in `spun`). CUDA never runs host
 * functions behind an error, so while completions are outstanding a timer asks each of their
 * streams (cudaStreamQuery) and fails the nodes of a stream that reports an error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "gpu_priv.h"
#include "log.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

static void list_init(struct gpu_done_node *s)
{
    s->prev = s->next = s;
}
static bool list_empty(const struct gpu_done_node *s)
{
    return s->next == s;
}

static void list_unlink(struct gpu_done_node *n)
{
    n->prev->next = n->next;
    n->next->prev = n->prev;
    n->prev = n->next = n;
}

static void list_append(struct gpu_done_node *s, struct gpu_done_node *n)
{
    n->prev = s->prev;
    n->next = s;
    s->prev->next = n;
    s->prev = n;
}

/* Caller holds done_mu. */
static void fire_locked(struct gpu *g, struct gpu_done_node *n, int status)
{
    if (n->fired)
        return;
    n->fired = true;
    n->status = status;
    list_unlink(n);
    list_append(&g->done, n);
}

static void outstanding_dec(struct gpu *g)
{
    if (--g->outstanding == 0) {
        uv_unref((uv_handle_t *)&g->done_async);
        if (!g->freeing)
            uv_timer_stop(&g->watch_timer);
    }
}

bool gpu_done_fire(struct gpu *g, struct gpu_done_node *n, int status, uint64_t now)
{
    pthread_mutex_lock(&g->done_mu);
    bool first = !n->fired;
    if (first)
        n->fired_ns = now;
    fire_locked(g, n, status);
    pthread_mutex_unlock(&g->done_mu);
    return first;
}

static void node_free(struct gpu *g, struct gpu_done_node *n)
{
    gpu_spin_put_event(g, n);
    free(n);
}

/* Loop thread: frees the spun nodes whose host function has run since. */
static void reap_spun(struct gpu *g)
{
    struct gpu_done_node gone;
    list_init(&gone);
    pthread_mutex_lock(&g->done_mu);
    for (struct gpu_done_node *n = g->spun.next, *next; n != &g->spun; n = next) {
        next = n->next;
        if (n->host_ran) {
            list_unlink(n);
            list_append(&gone, n);
        }
    }
    pthread_mutex_unlock(&g->done_mu);
    while (!list_empty(&gone)) {
        struct gpu_done_node *n = gone.next;
        list_unlink(n);
        node_free(g, n);
    }
}

/* Loop thread: runs the callbacks of every fired node, in firing order. */
void gpu_done_deliver(struct gpu *g)
{
    struct gpu_done_node batch;
    list_init(&batch);
    pthread_mutex_lock(&g->done_mu);
    if (!list_empty(&g->done)) {
        batch.next = g->done.next;
        batch.prev = g->done.prev;
        batch.next->prev = &batch;
        batch.prev->next = &batch;
        list_init(&g->done);
    }
    pthread_mutex_unlock(&g->done_mu);

    while (!list_empty(&batch)) {
        struct gpu_done_node *n = batch.next;
        list_unlink(n);
        if (n->status == 0)
            g->completions_ok++;
        else
            g->completions_failed++;
        if (n->fired_ns) { /* how long the loop took to run it after CUDA signalled */
            uint64_t now = uv_hrtime(), wake = now > n->fired_ns ? now - n->fired_ns : 0;
            g->wake_ns_total += wake;
            g->wake_ns_max = wake > g->wake_ns_max ? wake : g->wake_ns_max;
        }
        outstanding_dec(g);
        n->cb(n->arg, n->status);
        pthread_mutex_lock(&g->done_mu);
        bool keep = n->watch_failed || !n->host_ran;
        if (keep) /* CUDA may still run its host function: never freed under it */
            list_append(n->watch_failed ? &g->zombies : &g->spun, n);
        pthread_mutex_unlock(&g->done_mu);
        if (!keep)
            node_free(g, n);
    }
    reap_spun(g);
    gpu_retire_idle(&g->prog_retired, g); /* programs out of the cache, once the GPUs idle */
}

static void on_async(uv_async_t *a)
{
    gpu_done_deliver(a->data);
}

#ifdef KVF_HAVE_CUDA

/* CUDA's thread: only enqueue and signal. */
static void CUDART_CB host_fn(void *arg)
{
    struct gpu_done_node *n = arg;
    struct gpu *g = n->g;
    uint64_t now = uv_hrtime(); /* before the lock: what the loop's wake-up is measured from */
    pthread_mutex_lock(&g->done_mu);
    if (!n->fired)
        n->fired_ns = now;
    fire_locked(g, n, 0);
    n->host_ran = true; /* the last touch of n here: the loop may free it from now on */
    pthread_mutex_unlock(&g->done_mu);
    uv_async_send(&g->done_async);
}

#define WATCH_MAX 64 /* distinct streams asked per tick; errors are per device, so it suffices */

/* Loop thread, every GPU_WATCH_MS while completions are outstanding. CUDA is never called with
 * the mutex held (a host function may be waiting for it). Nodes are freed only on this thread,
 * so the streams read under the mutex stay meaningful after it is released. */
static void on_watch(uv_timer_t *t)
{
    struct gpu *g = t->data;
    struct CUstream_st *streams[WATCH_MAX];
    int devs[WATCH_MAX], n = 0, failed = 0;

    pthread_mutex_lock(&g->done_mu);
    for (struct gpu_done_node *p = g->pending.next; p != &g->pending && n < WATCH_MAX;
         p = p->next) {
        int k = 0;
        while (k < n && streams[k] != p->stream)
            k++;
        if (k == n) {
            streams[n] = p->stream;
            devs[n++] = p->device;
        }
    }
    pthread_mutex_unlock(&g->done_mu);

    for (int k = 0; k < n; k++) {
        cudaError_t st = cudaStreamQuery((cudaStream_t)streams[k]);
        if (st == cudaSuccess || st == cudaErrorNotReady)
            continue;
        char err[GPU_REASON_MAX];
        int rc = cuda_err_check(st, "cudaStreamQuery", devs[k], err, sizeof(err));
        pthread_mutex_lock(&g->done_mu);
        for (struct gpu_done_node *p = g->pending.next, *next; p != &g->pending; p = next) {
            next = p->next;
            if (p->stream == streams[k] || p->device == devs[k]) {
                fire_locked(g, p, rc);
                p->watch_failed = true;
                failed++;
            }
        }
        pthread_mutex_unlock(&g->done_mu);
        gpu_device_fail(g, devs[k], err);
    }
    if (failed)
        gpu_done_deliver(g);
}

int gpu_notify(struct gpu *g, int device, struct CUstream_st *stream, gpu_done_cb cb, void *arg,
               char *err, size_t errlen)
{
    int dev = device, rc;
    struct gpu_done_node *n;

    if (g->cpu_mode || g->freeing) {
        snprintf(err, errlen, "GPU completion: %s", g->freeing ? "shutting down" : g->cpu_reason);
        return -ENODEV;
    }
    if (device < 0 || device >= g->n_devices || !cb) {
        snprintf(err, errlen, "GPU completion: bad device %d or no callback", device);
        return -EINVAL;
    }
    if (g->dev[device].failed) {
        snprintf(err, errlen, "device %d failed earlier: %s", device, g->dev[device].failed_reason);
        return -ENODEV;
    }
    if (!(n = calloc(1, sizeof(*n)))) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    n->g = g;
    n->stream = stream;
    n->device = device;
    n->cb = cb;
    n->arg = arg;
    gpu_spin_record(g, n); /* before the host function: it completes no later */
    pthread_mutex_lock(&g->done_mu);
    list_append(&g->pending, n);
    pthread_mutex_unlock(&g->done_mu);
    if ((rc = GPU_TRY(cudaLaunchHostFunc((cudaStream_t)stream, host_fn, n))) < 0) {
        pthread_mutex_lock(&g->done_mu);
        list_unlink(n);
        pthread_mutex_unlock(&g->done_mu);
        node_free(g, n);
        return rc;
    }
    if (g->outstanding++ == 0) {
        uv_ref((uv_handle_t *)&g->done_async);
        uv_timer_start(&g->watch_timer, on_watch, GPU_WATCH_MS, GPU_WATCH_MS);
    }
    gpu_spin_arm(g);
    return 0;
}

/* Waits for every stream that can still run one of our host functions: the daemon's, then each
 * foreign stream a pending node names (nodes are freed only on this thread, so they stay valid). */
static void sync_streams(struct gpu *g)
{
    for (int d = 0; d < g->n_devices; d++)
        for (int s = 0; s < GPU_STREAMS_PER_DEVICE; s++)
            if (g->streams[d][s])
                cudaStreamSynchronize(g->streams[d][s]);
    for (;;) {
        struct CUstream_st *st = NULL;
        pthread_mutex_lock(&g->done_mu);
        for (int l = 0; l < 2 && !st; l++) {
            struct gpu_done_node *s = l == 0 ? &g->pending : &g->zombies;
            for (struct gpu_done_node *n = s->next; n != s; n = n->next)
                if (!n->synced) {
                    n->synced = true;
                    st = n->stream;
                    break;
                }
        }
        pthread_mutex_unlock(&g->done_mu);
        if (!st)
            break;
        cudaStreamSynchronize((cudaStream_t)st);
    }
    (void)cudaGetLastError();
}

#else /* !KVF_HAVE_CUDA: always CPU mode */

int gpu_notify(struct gpu *g, int device, struct CUstream_st *stream, gpu_done_cb cb, void *arg,
               char *err, size_t errlen)
{
    (void)device, (void)stream, (void)cb, (void)arg;
    snprintf(err, errlen, "GPU completion: %s", g->cpu_reason);
    return -ENODEV;
}

static void sync_streams(struct gpu *g)
{
    (void)g;
}

#endif

int gpu_done_init(struct gpu *g)
{
    int rc;
    list_init(&g->pending);
    list_init(&g->done);
    list_init(&g->zombies);
    list_init(&g->spun);
    if ((rc = pthread_mutex_init(&g->done_mu, NULL)) != 0)
        return -rc;
    if ((rc = uv_async_init(g->loop, &g->done_async, on_async)) < 0) {
        pthread_mutex_destroy(&g->done_mu);
        return rc;
    }
    g->done_async.data = g;
    g->handles_open = 1;
    uv_unref((uv_handle_t *)&g->done_async); /* referenced only while completions are due */
    if ((rc = uv_timer_init(g->loop, &g->watch_timer)) < 0) {
        /* g now belongs to the loop: the close callback frees it */
        uv_close((uv_handle_t *)&g->done_async, gpu_handle_closed);
        return rc;
    }
    g->watch_timer.data = g;
    g->handles_open = 2;
    uv_unref((uv_handle_t *)&g->watch_timer);
    return gpu_spin_init(g); /* a third handle, closed by gpu_free as the others */
}

void gpu_done_stop(struct gpu *g)
{
    uv_timer_stop(&g->watch_timer);
    sync_streams(g);
    /* what fired runs normally; what can no longer fire is cancelled */
    pthread_mutex_lock(&g->done_mu);
    while (!list_empty(&g->pending))
        fire_locked(g, g->pending.next, -ECANCELED);
    pthread_mutex_unlock(&g->done_mu);
    gpu_done_deliver(g);
    /* every stream is synchronized: no host function can run any more */
    for (int l = 0; l < 2; l++) {
        struct gpu_done_node *s = l ? &g->spun : &g->zombies;
        while (!list_empty(s)) {
            struct gpu_done_node *n = s->next;
            list_unlink(n);
            node_free(g, n);
        }
    }
    gpu_spin_stop(g);
}

size_t gpu_notify_outstanding(const struct gpu *g)
{
    return g->outstanding;
}
