/* gpu_spin.c: the completion spin (gpu.h, gpu_set_completion_spin). A kernel's completion
 * reaches the loop through CUDA's host function and uv_async_send: on the one-H200 host that
 * took 0.09 ms for the host function and 0.03-0.10 ms for the loop's wake-up after a 0.4 ms
 * kernel (bench_gpu, bench-gpu-local). So gpu_notify also records an event after the work, and
 * while a completion younger than the budget is due, an idle handle keeps the loop from
 * sleeping and asks those events (cudaEventQuery) on every turn: a completion is fired on the
 * loop the moment its event is done. Past the budget the node waits for its host function as
 * before, which always stays queued (errors, and completions the spin missed), so the spin only
 * makes completions earlier, never later or lost. Events come from a small pool. Loop thread
 * only; CUDA is never called with done_mu held (a host function may be waiting for it). */
#include <stdbool.h>
#include <stdlib.h>

#include "gpu_priv.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

#define SPIN_BATCH 64 /* events asked per loop turn */

void gpu_set_completion_spin(struct gpu *g, uint64_t us)
{
    g->spin_ns = (us > GPU_SPIN_US_MAX ? GPU_SPIN_US_MAX : us) * 1000;
}

#ifdef KVF_HAVE_CUDA

void gpu_spin_record(struct gpu *g, struct gpu_done_node *n)
{
    n->queued_ns = uv_hrtime();
    if (!g->spin_ns)
        return;
    cudaEvent_t ev = g->n_ev_pool ? (cudaEvent_t)g->ev_pool[--g->n_ev_pool] : NULL;
    if (!ev && cudaEventCreateWithFlags(&ev, cudaEventDisableTiming) != cudaSuccess) {
        (void)cudaGetLastError();
        return; /* no event: this one waits for its host function */
    }
    if (cudaEventRecord(ev, (cudaStream_t)n->stream) != cudaSuccess) {
        (void)cudaGetLastError();
        cudaEventDestroy(ev);
        return;
    }
    n->ev = (struct CUevent_st *)ev;
}

void gpu_spin_put_event(struct gpu *g, struct gpu_done_node *n)
{
    if (!n->ev)
        return;
    if (g->n_ev_pool < GPU_EV_POOL) /* its stream passed it: the host function ran after it */
        g->ev_pool[g->n_ev_pool++] = n->ev;
    else
        cudaEventDestroy((cudaEvent_t)n->ev);
    n->ev = NULL;
}

/* Whether s is among the n streams of blocked. */
static bool blocked_in(struct CUstream_st *const *blocked, int n, const struct CUstream_st *s)
{
    for (int i = 0; i < n; i++)
        if (blocked[i] == s)
            return true;
    return false;
}

static void on_spin(uv_idle_t *h)
{
    struct gpu *g = h->data;
    struct gpu_done_node *due[SPIN_BATCH];
    bool young[SPIN_BATCH];
    int n = 0, n_young = 0;
    uint64_t now = uv_hrtime();
    /* nodes are freed only on this thread: the pointers stay valid after the unlock */
    pthread_mutex_lock(&g->done_mu);
    for (struct gpu_done_node *p = g->pending.next; p != &g->pending && n < SPIN_BATCH;
         p = p->next) {
        young[n] = p->ev && now - p->queued_ns < g->spin_ns;
        n_young += young[n];
        due[n++] = p;
    }
    pthread_mutex_unlock(&g->done_mu);
    if (n_young == 0) { /* nothing young enough: sleep until the host functions wake us */
        uv_idle_stop(h);
        return;
    }
    /* In stream order: a stream's later node is never fired before an earlier one that is not
     * done (or not polled: its host function fires it), so callbacks keep their order. */
    struct CUstream_st *blocked[SPIN_BATCH];
    int n_blocked = 0, fired = 0;
    for (int i = 0; i < n; i++) {
        if (blocked_in(blocked, n_blocked, due[i]->stream))
            continue;
        cudaError_t st = cudaErrorNotReady;
        if (young[i]) {
            g->spin_polls++;
            st = cudaEventQuery((cudaEvent_t)due[i]->ev);
        }
        if (st == cudaSuccess) {
            if (gpu_done_fire(g, due[i], 0, uv_hrtime())) {
                g->spin_fired++;
                fired++;
            }
            continue;
        }
        if (st != cudaErrorNotReady)
            (void)cudaGetLastError(); /* errors are the watch's (gpu_done.c on_watch) */
        blocked[n_blocked++] = due[i]->stream;
    }
    if (fired)
        gpu_done_deliver(g);
}

void gpu_spin_arm(struct gpu *g)
{
    if (g->spin_ns && !uv_is_active((uv_handle_t *)&g->spin_idle) &&
        !uv_is_closing((uv_handle_t *)&g->spin_idle))
        uv_idle_start(&g->spin_idle, on_spin);
}

void gpu_spin_stop(struct gpu *g)
{
    uv_idle_stop(&g->spin_idle);
    while (g->n_ev_pool > 0)
        cudaEventDestroy((cudaEvent_t)g->ev_pool[--g->n_ev_pool]);
}

#else /* !KVF_HAVE_CUDA: always CPU mode, no completion is ever queued */

void gpu_spin_record(struct gpu *g, struct gpu_done_node *n)
{
    (void)g, (void)n;
}

void gpu_spin_put_event(struct gpu *g, struct gpu_done_node *n)
{
    (void)g, (void)n;
}

void gpu_spin_arm(struct gpu *g)
{
    (void)g;
}

void gpu_spin_stop(struct gpu *g)
{
    uv_idle_stop(&g->spin_idle);
}

#endif

int gpu_spin_init(struct gpu *g)
{
    int rc = uv_idle_init(g->loop, &g->spin_idle);
    if (rc < 0)
        return rc;
    g->spin_idle.data = g;
    g->handles_open = 3;
    return 0;
}
