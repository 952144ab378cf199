/* stream_ctx.h: the context side of a streaming SEND between daemons (stream_ctx.c, issue 28):
 * each flow reading it is planned once with its writer's marks (kept on the SEND's xstream.h);
 * a bounce chunk is gathered once its whole range is final (its grant waits in the flow's
 * queue); a path without landing slots (fragment) starts once every layer is final. Loop
 * thread only. */
#ifndef KVF_STREAM_CTX_H
#define KVF_STREAM_CTX_H

#include <stdbool.h>
#include <stddef.h>

#include "kvferry.h"

struct engine;
struct plan;
struct plan_input;
struct tx;
struct xfer;

/* Plans flow tx of a streaming SEND with its marks (plan_request's contract). */
kvf_error_t stream_ctx_plan(struct tx *tx, const struct plan_input *pin, struct plan *ret,
                            char *msg, size_t msglen);
/* Whether flow tx may take its next granted chunk: its range is final (a plain SEND: yes). */
bool stream_ctx_may(const struct tx *tx);
/* Whether flow tx's path may start now; false: it starts when every layer is final. */
bool stream_ctx_serve_now(struct tx *tx);
/* SEND s made more layers final: the flows reading it take what they waited for. */
void stream_ctx_kick(struct engine *e, struct xfer *s);

#endif
