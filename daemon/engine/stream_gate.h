/* stream_gate.h: the context side of a streaming SEND between daemons (issue 28): each flow
 * reading it is planned once with its writer's marks (kept on the SEND's xstream.h); a bounce
 * chunk is gathered once its whole range is final (its grant waits in the flow's queue); a path
 * without landing slots (fragment) starts once every layer is final (stream_gate.c, called by
 * the drivers); a READY moves the flows on (stream_kick.c, called from the request table).
 * Loop thread only. */
#ifndef KVF_STREAM_CTX_H
#define KVF_STREAM_CTX_H

#include <stdbool.h>
#include <stddef.h>

#include "kvferry.h"
#include "layout.h"

struct CUevent_st;
struct engine;
struct plan;
struct xstream;
struct plan_input;
struct tx;
struct xfer;

/* Plans flow tx of a streaming SEND with its marks (plan_request's contract). */
kvf_error_t stream_gate_plan(struct tx *tx, const struct plan_input *pin, struct plan *ret,
                            char *msg, size_t msglen);
/* Whether flow tx may take its next granted chunk: its range is final (a plain SEND: yes). */
bool stream_gate_may(const struct tx *tx);
/* The GPU mark flow tx's gather of its extent bytes below end waits for: the READY's that made
 * byte end - 1 final (xstream.h; NULL: none to wait for). */
struct CUevent_st *stream_gate_mark(const struct tx *tx, uint64_t end);
/* Whether flow tx's path may start now (landing: its path's row has landing slots, whose chunks
 * wait one by one); false: it starts when every layer is final. */
bool stream_gate_serve_now(struct tx *tx, bool landing);

#define STREAM_ROW (LAYOUT_MAX_LAYERS + 1)
/* One flow of a streaming SEND: its writer's marks. Keyed by the flow's struct and id (a flow
 * is never reused; a later one at the same address has another id or replaces the row). */
struct stream_flow {
    const struct tx *tx;
    uint64_t flow;
    bool serve_pending; /* its path starts once every layer is final */
    uint64_t below[STREAM_ROW];
};
/* Flow tx's row on SEND state st, or NULL. */
struct stream_flow *stream_gate_flow(const struct xstream *st, const struct tx *tx);
/* stream_kick.c: SEND s made more layers final: the flows reading it take what they waited for. */
void stream_kick(struct engine *e, struct xfer *s);

#endif
