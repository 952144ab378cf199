/* gpu_event.c: workers' CUDA interprocess events (issue 28, gpu.h "events"). A GPU rank passes
 * the handles of a ring of events once; they are opened here on its device, with a stream of
 * their own (the set's), and closed when the rank goes. A READY naming event i is captured at
 * once: the set's stream waits for event i's record of that moment (cudaStreamWaitEvent takes
 * the record current when it is called) and records that READY's mark, a daemon event, after
 * it. Copies of the layers that READY made final wait for its mark on their own stream
 * (gpu_event_wait), so they wait on the GPU, never on the host, and a later re-record of event
 * i by the worker changes nothing for the READYs already handled. The copies that wait go on a
 * stream of their own (gpu_event_stream_new), so a worker's event that is late, or never comes
 * (a worker killed between its record and the end of its work), holds its own copies and not
 * the daemon's shared streams.
 * Loop thread only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_priv.h"

struct gpu_events {
    int device;
    uint32_t n;
    struct CUstream_st *stream; /* owned: where captures wait and marks are recorded */
    struct CUevent_st *ev[];    /* owned: the opened handles */
};

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

_Static_assert(sizeof(cudaIpcEventHandle_t) == GPU_IPC_HANDLE_BYTES, "IPC handle size changed");

/* The loop thread's current device is left as found: other code may rely on it. */
static int enter(int dev, int *prev, char *err, size_t errlen)
{
    if (cudaGetDevice(prev) != cudaSuccess)
        *prev = -1;
    return GPU_TRY(cudaSetDevice(dev));
}

static void leave(int prev)
{
    if (prev >= 0)
        cudaSetDevice(prev);
}

int gpu_event_open(struct gpu *g, int device, const uint8_t *handles, uint32_t n,
                   struct gpu_events **ret, char *err, size_t errlen)
{
    int dev = device, rc;
    if (!g || g->cpu_mode || device < 0 || device >= g->n_devices) {
        snprintf(err, errlen, "no GPU %d here%s%s", device, g && g->cpu_mode ? ": " : "",
                 g && g->cpu_mode ? g->cpu_reason : "");
        return -ENODEV;
    }
    if (n == 0 || n > GPU_EVENTS_MAX) {
        snprintf(err, errlen, "%u events: 1 to %d per rank", n, GPU_EVENTS_MAX);
        return -EINVAL;
    }
    struct gpu_events *s = calloc(1, sizeof *s + n * sizeof s->ev[0]);
    if (!s) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    s->device = device;
    int prev;
    if ((rc = enter(dev, &prev, err, errlen)) < 0 ||
        (rc = GPU_TRY(cudaStreamCreateWithFlags((cudaStream_t *)&s->stream,
                                                cudaStreamNonBlocking))) < 0) {
        leave(prev);
        free(s);
        return rc;
    }
    for (uint32_t i = 0; i < n; i++) {
        cudaIpcEventHandle_t h;
        memcpy(&h, handles + (size_t)i * GPU_IPC_HANDLE_BYTES, sizeof h);
        char why[GPU_REASON_MAX];
        if ((rc = cuda_err_check((int)cudaIpcOpenEventHandle((cudaEvent_t *)&s->ev[i], h),
                                 "cudaIpcOpenEventHandle", dev, why, sizeof why)) < 0) {
            (void)cudaGetLastError();
            snprintf(err, errlen, "event %u of %u: %s (made with cudaEventInterprocess | "
                     "cudaEventDisableTiming on GPU %d?)", i, n, why, device);
            leave(prev);
            gpu_event_close(s);
            return rc;
        }
        s->n = i + 1;
    }
    leave(prev);
    *ret = s;
    return 0;
}

struct gpu_events *gpu_event_close(struct gpu_events *s)
{
    if (!s)
        return NULL;
    int prev;
    char err[8];
    size_t errlen = sizeof err;
    (void)enter(s->device, &prev, err, errlen);
    for (uint32_t i = 0; i < s->n; i++) /* a wait already queued keeps what it needs */
        cudaEventDestroy((cudaEvent_t)s->ev[i]);
    if (s->stream)
        cudaStreamDestroy((cudaStream_t)s->stream); /* released once its work ended */
    (void)cudaGetLastError();
    leave(prev);
    free(s);
    return NULL;
}

int gpu_event_capture(struct gpu_events *s, uint32_t idx, struct CUevent_st **mark, char *err,
                      size_t errlen)
{
    int dev = s->device, rc;
    if (idx >= s->n) {
        snprintf(err, errlen, "event %u of %u", idx, s->n);
        return -EINVAL;
    }
    int prev;
    if ((rc = enter(dev, &prev, err, errlen)) < 0) {
        leave(prev);
        return rc;
    }
    if (!*mark && (rc = GPU_TRY(cudaEventCreateWithFlags((cudaEvent_t *)mark,
                                                         cudaEventDisableTiming))) < 0)
        *mark = NULL;
    if (rc == 0)
        rc = GPU_TRY(cudaStreamWaitEvent((cudaStream_t)s->stream, (cudaEvent_t)s->ev[idx], 0));
    if (rc == 0)
        rc = GPU_TRY(cudaEventRecord((cudaEvent_t)*mark, (cudaStream_t)s->stream));
    leave(prev);
    return rc;
}

int gpu_event_wait(struct CUstream_st *stream, struct CUevent_st *mark, char *err, size_t errlen)
{
    int dev = -1;
    return mark ? GPU_TRY(cudaStreamWaitEvent((cudaStream_t)stream, (cudaEvent_t)mark, 0)) : 0;
}

struct CUevent_st *gpu_event_mark_free(struct CUevent_st *mark)
{
    if (mark && cudaEventDestroy((cudaEvent_t)mark) != cudaSuccess)
        (void)cudaGetLastError(); /* a wait already queued keeps what it needs */
    return NULL;
}

int gpu_event_stream_new(struct gpu *g, int device, struct CUstream_st **ret, char *err,
                         size_t errlen)
{
    int dev = device, prev, rc;
    if (!g || g->cpu_mode || device < 0 || device >= g->n_devices) {
        snprintf(err, errlen, "no GPU %d here", device);
        return -ENODEV;
    }
    if ((rc = enter(dev, &prev, err, errlen)) == 0)
        rc = GPU_TRY(cudaStreamCreateWithFlags((cudaStream_t *)ret, cudaStreamNonBlocking));
    leave(prev);
    return rc;
}

struct CUstream_st *gpu_event_stream_free(struct CUstream_st *stream)
{
    if (stream && cudaStreamDestroy((cudaStream_t)stream) != cudaSuccess)
        (void)cudaGetLastError(); /* released by CUDA once its work ended */
    return NULL;
}

#else /* !KVF_HAVE_CUDA: GPU ranks are refused at REGISTER; this is the refusal of last resort */

int gpu_event_open(struct gpu *g, int device, const uint8_t *handles, uint32_t n,
                   struct gpu_events **ret, char *err, size_t errlen)
{
    (void)g, (void)device, (void)handles, (void)n, (void)ret;
    snprintf(err, errlen, "this kvferryd was built without CUDA: no CUDA events");
    return -ENOTSUP;
}

struct gpu_events *gpu_event_close(struct gpu_events *s)
{
    free(s);
    return NULL;
}

int gpu_event_capture(struct gpu_events *s, uint32_t idx, struct CUevent_st **mark, char *err,
                      size_t errlen)
{
    (void)s, (void)idx, (void)mark;
    snprintf(err, errlen, "this kvferryd was built without CUDA");
    return -ENOTSUP;
}

int gpu_event_wait(struct CUstream_st *stream, struct CUevent_st *mark, char *err, size_t errlen)
{
    (void)stream;
    if (mark)
        snprintf(err, errlen, "this kvferryd was built without CUDA");
    return mark ? -ENOTSUP : 0;
}

struct CUevent_st *gpu_event_mark_free(struct CUevent_st *mark)
{
    (void)mark;
    return NULL;
}

int gpu_event_stream_new(struct gpu *g, int device, struct CUstream_st **ret, char *err,
                         size_t errlen)
{
    (void)g, (void)device, (void)ret;
    snprintf(err, errlen, "this kvferryd was built without CUDA");
    return -ENOTSUP;
}

struct CUstream_st *gpu_event_stream_free(struct CUstream_st *stream)
{
    (void)stream;
    return NULL;
}

#endif

uint32_t gpu_event_count(const struct gpu_events *s)
{
    return s ? s->n : 0;
}
