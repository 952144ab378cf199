/* stream_gate.c: what a streaming SEND lets its flows between daemons take (stream_gate.h).
 * Each flow reading it is planned once, with the marks of its writer's layers, kept on the
 * SEND (one row per flow: they may read different generation layouts). A bounce chunk's
 * gather waits until its whole range is final (its grant waits in the flow's queue, bstage_pump);
 * a path without landing slots (fragment: one put per region) starts once every layer is
 * final. Calls nothing of the engine: its drivers call it (no file cycle). */
#include <stdlib.h>
#include <string.h>

#include "engine_ctx.h"
#include "plan_request.h"
#include "stream_gate.h"
#include "xstream.h"

#define ROW STREAM_ROW

struct stream_flow *stream_gate_flow(const struct xstream *st, const struct tx *tx)
{
    for (uint32_t i = 0; st && i < st->n_flows; i++)
        if (st->flows[i].tx == tx && st->flows[i].flow == tx->flow)
            return &st->flows[i];
    return NULL;
}

kvf_error_t stream_gate_plan(struct tx *tx, const struct plan_input *pin, struct plan *ret,
                            char *msg, size_t msglen)
{
    struct xstream *st = tx->send->stream;
    struct plan_marks m;
    kvf_error_t e = plan_request_marked(pin, ret, &m, msg, msglen);
    if (e != KVF_OK)
        return e;
    struct stream_flow *f = stream_gate_flow(st, tx);
    if (!f && st->n_flows == st->cap_flows) {
        uint32_t cap = st->cap_flows ? 2 * st->cap_flows : 4;
        struct stream_flow *nf = realloc(st->flows, cap * sizeof *nf);
        if (nf) {
            st->flows = nf;
            st->cap_flows = cap;
        }
    }
    if (!f && st->n_flows < st->cap_flows)
        f = &st->flows[st->n_flows++];
    if (!f) {
        plan_marks_done(&m);
        plan_done(ret);
        snprintf(msg, msglen, "out of memory");
        return KVF_E_INTERNAL;
    }
    *f = (struct stream_flow){.tx = tx, .flow = tx->flow};
    uint32_t w = tx->rr.u.recv_req.writer;
    if (w < m.n_ctx)
        memcpy(f->below, m.below + (size_t)w * ROW, sizeof f->below);
    plan_marks_done(&m);
    return KVF_OK;
}

bool stream_gate_may(const struct tx *tx)
{
    const struct xfer *s = tx->send;
    if (!s || xstream_final(s))
        return true;
    const struct stream_flow *f = stream_gate_flow(s->stream, tx);
    if (!f || !tx->pw)
        return false; /* not planned as a stream: its deadline ends it */
    const struct wire_grant *g = &tx->q[tx->q_head];
    uint64_t left = tx->pw->bytes - tx->sent;
    uint64_t end = tx->sent + (g->length < left ? g->length : left);
    uint32_t upto = s->stream->upto < ROW ? s->stream->upto : ROW - 1;
    return end <= f->below[upto];
}

struct CUevent_st *stream_gate_mark(const struct tx *tx, uint64_t end)
{
    const struct xfer *s = tx->send;
    const struct stream_flow *f = s ? stream_gate_flow(s->stream, tx) : NULL;
    uint64_t made = end;
    if (!f) /* not planned as a stream (planned once final): the READY that made all final */
        return xstream_gpu_mark(s, s && s->stream ? s->stream->upto : 0);
    return end ? xstream_gpu_mark_at(s, f->below, end - 1, &made) : NULL;
}

bool stream_gate_serve_now(struct tx *tx, bool landing)
{
    const struct xfer *s = tx->send;
    if (!s || xstream_final(s) || landing)
        return true; /* bounce: each chunk waits for its range (stream_gate_may) */
    struct stream_flow *f = stream_gate_flow(s->stream, tx);
    if (f)
        f->serve_pending = true;
    return !f;
}
