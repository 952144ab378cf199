/* engine_nack.c: the context side always learns the end (docs/DESIGN.md §7). A reader that fails
 * (refused, incompatible, its worker dead, cancelled, timed out) is told to the daemon of every
 * writer it would have read, so that writer's SEND ends as soon as no reader can come
 * (transfers.h) instead of at its deadline. The flow NACK (engine_gen.c's release) stops a
 * flow's data; READER_NACK counts the reader against the SEND, once per (reader, writer), for
 * writers whose RECV_REQ went out and for those it never reached. A writer that finished
 * (WRITER_DONE) was counted served already and is not told; call before the writers are
 * released (closed). Loop thread only. */
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "engine_ctx.h"
#include "engine_gen.h"
#include "engine_nack.h"
#include "engine_peer.h"
#include "engine_tab.h"
#include "transfers.h"
#include "workers.h"

static void send_one(struct epeer *p, const struct rx *rx, uint32_t writer, kvf_error_t code,
                     const char *msg)
{
    struct wire_msg m = {.type = WIRE_READER_NACK};
    struct wire_reader_nack *n = &m.u.reader_nack;
    n->req_id = rx->req_id;
    snprintf(n->ctx_instance, sizeof n->ctx_instance, "%s", rx->ctx_instance);
    n->writer = writer;
    n->code = code;
    snprintf(n->message, sizeof n->message, "%s", msg);
    if (engine_send_msg(p, 0, &m) == 0)
        p->e->c.reader_nacks_sent++;
}

/* "reader gen rank 1: PEER_LOST: worker gone" (the reader is the rank whose RECV failed). */
static void reason(const struct rx *rx, kvf_error_t code, const char *msg, char *out, size_t len)
{
    if (rx->x)
        snprintf(out, len, "reader %s rank %u at %s: %s: %s", rx->x->rank->layout.instance,
                 layout_rank(&rx->x->rank->layout),
                 rx->e->self_addr[0] ? rx->e->self_addr : link_self_id(rx->e->link),
                 kvf_error_to_string(code), msg);
    else
        snprintf(out, len, "a reader at %s: %s: %s",
                 rx->e->self_addr[0] ? rx->e->self_addr : link_self_id(rx->e->link),
                 kvf_error_to_string(code), msg);
}

void nack_readers(struct rx *rx, kvf_error_t code, const char *msg)
{
    if (!rx->planned || code == KVF_OK)
        return;
    char why[WIRE_TEXT_MAX];
    reason(rx, code, msg, why, sizeof why);
    for (uint32_t i = 0; i < rx->n_w; i++) {
        const struct rxw *w = &rx->w[i];
        if (w->state == RXW_DONE || w->state == RXW_CLOSED) /* served, or released before */
            continue;
        if (rxw_local(w))
            transfers_reader_failed(&rx->e->d->workers->xt, rx->ctx_instance, rx->req_id,
                                    w->ctx_rank, code, why);
        else if (w->peer && w->peer->up)
            send_one(w->peer, rx, w->ctx_rank, code, why);
    }
}

void nack_refused(struct rx *rx, const struct itable *tab, kvf_error_t code, const char *msg)
{
    struct engine *e = rx->e;
    char why[WIRE_TEXT_MAX];
    reason(rx, code, msg, why, sizeof why);
    for (uint32_t i = 0; i < tab->n; i++) {
        bool seen = false; /* one message per daemon */
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = strcmp(tab->addrs[j], tab->addrs[i]) == 0;
        if (seen)
            continue;
        if (engine_is_self(e, tab->addrs[i])) {
            transfers_reader_failed(&e->d->workers->xt, rx->ctx_instance, rx->req_id,
                                    XFER_NACK_ALL, code, why);
            continue;
        }
        for (struct epeer *p = e->peers; p; p = p->next)
            if (p->up && p->lp && p->outbound && strcmp(p->addr, tab->addrs[i]) == 0) {
                send_one(p, rx, WIRE_ALL_WRITERS, code, why);
                break;
            }
    }
}

void nack_on_reader_nack(struct engine *e, struct epeer *p, const struct wire_msg *m)
{
    const struct wire_reader_nack *n = &m->u.reader_nack;
    (void)p;
    e->c.reader_nacks_recv++;
    if (e->d->workers)
        transfers_reader_failed(&e->d->workers->xt, n->ctx_instance, n->req_id,
                                n->writer == WIRE_ALL_WRITERS ? XFER_NACK_ALL : n->writer, n->code,
                                n->message);
}

void nack_flow_lost(struct tx *tx, struct xfer *s, int err)
{
    struct engine *e = tx->e;
    if (!s)
        return; /* the flow was not reading */
    char why[WIRE_TEXT_MAX];
    snprintf(why, sizeof why, "reader %s rank %u: PEER_LOST: its daemon was lost (%s)",
             tx->gen.instance, layout_rank(&tx->gen), strerror(-err));
    transfers_reader_failed(&e->d->workers->xt, s->ctx_instance, s->req_id,
                            layout_rank(&s->rank->layout), KVF_E_PEER_LOST, why);
}

const char *nack_why_ended(kvf_error_t code)
{
    return code == KVF_E_PEER_LOST   ? "its worker went away"
           : code == KVF_E_CANCELLED ? "cancelled by its worker"
                                     : "the generation rank's request ended";
}

bool engine_send_reading(const struct engine *e, const struct xfer *s)
{
    for (const struct tx *tx = e ? e->txs : NULL; tx; tx = tx->next)
        if (!tx_ended(tx) && tx->send == s)
            return true;
    return false;
}
