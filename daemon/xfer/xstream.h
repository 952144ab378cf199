/* xstream.h: a streaming SEND's readiness (issue 28, docs/DESIGN.md §7 "Streaming"): which of
 * its layers are final, and the marks of the engine's flows reading it. Below the request table
 * (daemon/request/stream_send.c sets it from READY frames) and the engine
 * (daemon/engine/stream_gate.c reads it), which both see it here. Owned by its xfer (x->stream),
 * freed with it. Loop thread only. */
#ifndef KVF_XSTREAM_H
#define KVF_XSTREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "plan.h"
#include "xfer.h"

struct stream_flow; /* the engine's (stream_gate.h): one flow's marks */
struct CUevent_st;  /* cudaEvent_t */

struct xstream {
    uint32_t upto;  /* every global layer id below it is final */
    uint32_t full;  /* upto at which every layer this rank holds is final */
    uint32_t bound; /* the model's layer count: a READY past it is refused */
    struct stream_flow *flows; /* owned: the marks of the engine's flows reading it */
    struct CUevent_st *gpu_mark; /* owned: recorded on the GPU after the rank's CUDA event of
                                  * each READY naming one (gpu_event_capture); the GPU copies of
                                  * its final layers wait for it (gpu_event_wait). NULL: none */
    uint32_t n_flows, cap_flows;
};

/* Whether every layer of SEND s is final (a plain SEND: always). */
static inline bool xstream_final(const struct xfer *s)
{
    return !s->stream || s->stream->upto >= s->stream->full;
}

/* The GPU mark copies of SEND s's final layers wait for (NULL: none, or not a stream). */
static inline struct CUevent_st *xstream_gpu_mark(const struct xfer *s)
{
    return s && s->stream ? s->stream->gpu_mark : NULL;
}

/* Extent bytes of writer rank c final for SEND s under marks m, at most extent (a plain SEND or
 * a final one: all of it). */
static inline uint64_t xstream_final_bytes(const struct xfer *s, const struct plan_marks *m,
                                           uint32_t c, uint64_t extent)
{
    if (xstream_final(s))
        return extent;
    uint64_t b = plan_marks_below(m, c, s->stream->upto);
    return b < extent ? b : extent;
}

#endif
