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

#define XSTREAM_MARKS (LAYOUT_MAX_LAYERS + 1)
/* One READY of a streaming SEND whose READYs name CUDA events. */
struct xstream_mark {
    bool raised;           /* a READY raised upto to this value */
    struct CUevent_st *ev; /* owned: its GPU mark; NULL: it named no event (the host's word) */
};

struct xstream {
    uint32_t upto;  /* every global layer id below it is final */
    uint32_t full;  /* upto at which every layer this rank holds is final */
    uint32_t bound; /* the model's layer count: a READY past it is refused */
    struct stream_flow *flows; /* owned: the marks of the engine's flows reading it */
    struct xstream_mark *marks; /* owned, XSTREAM_MARKS entries once a READY named a CUDA
                                 * event (NULL before): marks[u], the READY that raised upto to
                                 * u and its GPU mark (recorded after the rank's event when it
                                 * named one, gpu_event_capture), which the GPU copies of the
                                 * layers it made final wait for (gpu_event_wait) */
    uint32_t n_flows, cap_flows;
};

/* Whether every layer of SEND s is final (a plain SEND: always). */
static inline bool xstream_final(const struct xfer *s)
{
    return !s->stream || s->stream->upto >= s->stream->full;
}

/* The GPU mark a copy of SEND s's layers below `layers` waits for: that of the first READY
 * that made them final (NULL: none to wait for: a plain SEND, or that READY named no event). */
static inline struct CUevent_st *xstream_gpu_mark(const struct xfer *s, uint32_t layers)
{
    const struct xstream *st = s ? s->stream : NULL;
    for (uint32_t u = layers; st && st->marks && u <= st->upto && u < XSTREAM_MARKS; u++)
        if (st->marks[u].raised)
            return st->marks[u].ev;
    return NULL;
}

/* The GPU mark a copy of a writer's extent bytes from lo waits for, its marks row `below`
 * (XSTREAM_MARKS entries: its extent bytes below each layer id): that of the first READY that
 * made byte lo final, and *end, where that READY's final bytes end. NULL: none to wait for (no
 * READY named an event before; *end untouched). */
static inline struct CUevent_st *xstream_gpu_mark_at(const struct xfer *s, const uint64_t *below,
                                                     uint64_t lo, uint64_t *end)
{
    const struct xstream *st = s ? s->stream : NULL;
    for (uint32_t u = 0; st && st->marks && below && u <= st->upto && u < XSTREAM_MARKS; u++)
        if (st->marks[u].raised && below[u] > lo) {
            *end = below[u];
            return st->marks[u].ev;
        }
    return NULL;
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
