/* stream_kick.c: a streaming SEND made more layers final (stream_gate.h): the flows reading it
 * take what they waited for, a waiting grant's gather (bstage_pump) or a path that starts once
 * every layer is final. Called from the request table's READY; no engine file calls it. */
#include "engine_ctx.h"
#include "engine_ix.h"
#include "path.h"
#include "stream_gate.h"
#include "xstream.h"

static void kick(struct tx *tx, struct xfer *s)
{
    if (tx_ended(tx) || tx->send != s)
        return;
    struct stream_flow *f = stream_gate_flow(s->stream, tx);
    if (f && f->serve_pending) {
        if (!xstream_final(s))
            return;
        f->serve_pending = false;
        path_of_wire(tx->rr.u.recv_req.path)->serve(tx);
        return;
    }
    if (tx->state == TX_MOVING)
        bstage_pump(tx);
}

void stream_kick(struct engine *e, struct xfer *s)
{
    if (!s->stream || !s->stream->n_flows)
        return;
    struct tx *mine[64];
    uint32_t n = ix_send_flows(e, s, mine, 64);
    if (n <= 64) {
        for (uint32_t i = 0; i < n; i++)
            kick(mine[i], s);
    } else {
        for (struct tx *tx = e->txs; tx; tx = tx->next)
            kick(tx, s);
    }
    ctx_sweep(e);
}
