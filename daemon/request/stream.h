/* stream.h: a SEND that streams layer by layer, the request table's side (issue 28,
 * docs/DESIGN.md §7 "Streaming").
 *
 * A context rank declares the request's items with a streaming SEND (kvf_send_begin), then
 * says with READY frames that every global layer id below `upto` is final, in order. The
 * canonical order of a plan puts layers first (lib/plan_build.c), so the layers below upto
 * are a prefix of every writer's extent, whose length the plan's marks give
 * (lib/plan.h plan_marks): every path moves that prefix and waits for the next READY.
 *  - stream_send.c: the SEND's side: its readiness (x->stream, daemon/xfer/xstream.h), READY
 *    frames checked (a SEND that does not stream, decreasing, past the model's layers: the SEND
 *    fails BAD_REQUEST naming it), its idle deadline (deadlines.stream_idle: no READY raising
 *    upto for that long fails it TIMEOUT), and its end, which its readers share: the same
 *    daemon's streamed RECVs fail with its reason (a dead worker: PEER_LOST); the engine's flows
 *    are failed by engine_send_end.
 *  - stream_local.c: a RECV of the same daemon reading a streaming SEND (x->scopy): planned
 *    once (with marks), copied pool to pool prefix by prefix on the copy threads (x->cpu_job)
 *    or, GPU pools, by kernels on a daemon stream (x->gpu_job) that wait on the GPU for the
 *    mark of the READY that made their range final (xstream.h marks); DONE once every
 *    writer's extent is in.
 *  - the engine's side between daemons: daemon/engine/stream_gate.h.
 * Ownership: x->stream and x->scopy are owned by their xfer and freed with it. Loop thread
 * only. */
#ifndef KVF_STREAM_H
#define KVF_STREAM_H

#include <stdbool.h>
#include <stdint.h>

#include "kvferry.h"
#include "plan.h"
#include "proto.h"

struct transfers;
struct xfer;
struct xclient;
struct req;
struct xgpu_job;

/* A RECV's copy of streaming SENDs on this daemon (stream_local.c). */
struct stream_copy {
    struct xgpu_job *gjob;  /* owned: GPU pools' programs, bound once (xfer_gpu.c); NULL: host */
    struct plan plan;       /* owned: planned once, with its marks */
    struct plan_marks marks;
    struct xfer **sends;    /* borrowed, n_ctx entries: its writers' SENDs (NULL once ended) */
    uint32_t n_ctx;
    uint64_t *done, *want;  /* per plan writer: extent bytes copied, being copied (GPU:
                             * launched) */
};

/* stream_send.c */
/* The SEND x streams (proto SEND's flag): its readiness, its idle deadline. false: x failed. */
bool stream_send_begin(struct transfers *t, struct xfer *x);
/* A READY frame from connection c. */
void stream_send_ready(struct transfers *t, struct xclient *c, const struct proto_ready *m);
/* The tick found SEND x due: true when it was the stream's idle deadline (x failed TIMEOUT;
 * no sweep), false when its own deadline rules apply. */
bool stream_send_due(struct transfers *t, struct xfer *x, uint64_t now);
/* SEND x of entry q ended with err (no sweep): the streamed RECVs reading it fail with it. */
void stream_send_ended(struct transfers *t, struct xfer *x, struct req *q, kvf_error_t err,
                       const char *msg);
/* Frees x's streaming parts (either side); accepts x without them. */
void stream_send_free(struct xfer *x);

/* stream_local.c */
/* Whether any SEND of sends (n entries, NULL allowed) streams and is not final yet. */
bool stream_local_pending(struct xfer *const *sends, uint32_t n);
/* Starts RECV r of the local path whose writers stream: planned once, its final prefixes
 * copied as they come. KVF_OK with r->scopy set (DONE follows through transfers_copy_done),
 * or the failure with msg. */
kvf_error_t stream_local_start(struct transfers *t, struct xfer *r, struct xfer **sends,
                               uint32_t n_ctx, uint64_t *bytes, char *msg, size_t msglen);
/* SEND s made more layers final: its streamed same-daemon RECVs copy them. */
void stream_local_kick(struct transfers *t, struct xfer *s);
/* Frees a RECV's copy; accepts NULL; returns NULL. */
struct stream_copy *stream_local_free(struct stream_copy *sc);

#endif
