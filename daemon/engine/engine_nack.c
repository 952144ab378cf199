/* engine_nack.c: the context side always learns the end (docs/DESIGN.md §7). A reader that fails
 * (refused, incompatible, its worker dead, cancelled, timed out) is told to the daemon of every
 * writer it would have read, so that writer's SEND ends as soon as no reader can come
 * (transfers.h) instead of at its deadline. The flow NACK (engine_gen.c's release) stops a
 * flow's data; READER_NACK counts the reader against the SEND, once per (reader, writer), for
 * writers whose RECV_REQ went out and for those it never reached. A writer that finished
 * (WRITER_DONE) was counted served already and is not told; call before the writers are
 * released (closed). A reader whose request its plan refuses (not as incompatible: its ids,
 * tokens or aliasing) tells the writers its shape reads (plan_writers_of_shape), as one whose
 * plan cannot run tells its plan's writers. Loop thread only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_drive.h"
#include "daemon.h"
#include "engine_ctx.h"
#include "engine_gen.h"
#include "engine_nack.h"
#include "engine_peer.h"
#include "engine_pnack.h"
#include "engine_tab.h"
#include "registry.h"
#include "xfer.h"

/* The epoch rx's reader is known to have been for: its table's, when that was fetched after the
 * RECV came (a RECV that came after a re-registration but planned with a table cached before it
 * is the new epoch's reader: its cancel must end the new SEND), or when a chunk of it landed
 * (the context daemon took its RECV_REQ: no stale table); else 0, unknown. */
static uint64_t known_epoch(const struct rx *rx, uint64_t epoch)
{
    return !rx->tab_cached || rx->moving_ns ? epoch : 0;
}

static void send_one(struct engine *e, struct epeer *p, const char *addr, const struct rx *rx,
                     uint32_t writer, kvf_error_t code, const char *msg)
{
    struct wire_reader_nack n = {.req_id = rx->req_id, .writer = writer, .code = code,
                                 .epoch = known_epoch(rx, rx->epoch)};
    snprintf(n.ctx_instance, sizeof n.ctx_instance, "%s", rx->ctx_instance);
    snprintf(n.message, sizeof n.message, "%s", msg);
    pnack_send(e, p, addr, &n); /* now, or once that daemon is connected */
}

/* Whether rx's table came (plan_rx ran with it): the table of (instance, home) is ready. */
static bool table_came(const struct rx *rx)
{
    for (const struct itable *t = rx->e->tables; t; t = t->next)
        if (t->state == TAB_READY && !strcmp(t->instance, rx->ctx_instance) &&
            !strcmp(t->home, rx->home))
            return true;
    return false;
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
    if (code == KVF_OK)
        return;
    char why[WIRE_TEXT_MAX];
    reason(rx, code, msg, why, sizeof why);
    if (!rx->planned) { /* no writer known yet: told when the table comes (engine_pnack.c) */
        if (!table_came(rx))
            pnack_unplanned(rx, code, why);
        return; /* else planning failed: an incompatible verdict told them (nack_refused) */
    }
    for (uint32_t i = 0; i < rx->n_w; i++) {
        const struct rxw *w = &rx->w[i];
        if (w->state == RXW_DONE || w->state == RXW_CLOSED) /* served, or released before */
            continue;
        if (w->state == RXW_NACKED && w->not_reader)
            continue; /* its daemon refused the flow as no reader of its SEND (its NACK said so) */
        if (rxw_local(w))
            rx->e->req.ops->reader_failed(rx->e->req.t, rx->ctx_instance, rx->req_id,
                                    w->ctx_rank, code, why);
        else if (w->peer) /* not connected (yet): queued; lost: its daemon counts its flows */
            send_one(rx->e, w->peer, w->peer->addr, rx, w->ctx_rank, code, why);
    }
}

uint32_t nack_tell_all(struct engine *e, const struct itable *t, const struct wire_reader_nack *n0)
{
    struct wire_reader_nack n = *n0;
    n.writer = WIRE_ALL_WRITERS;
    uint32_t told = 0;
    for (uint32_t i = 0; i < t->n; i++) {
        bool seen = false; /* one message per daemon */
        for (uint32_t j = 0; j < i && !seen; j++)
            seen = strcmp(t->addrs[j], t->addrs[i]) == 0;
        if (seen)
            continue;
        if (engine_is_self(e, t->addrs[i]))
            e->req.ops->reader_failed(e->req.t, n.ctx_instance, n.req_id, XFER_NACK_ALL,
                                    n.code, n.message);
        else
            pnack_send(e, NULL, t->addrs[i], &n); /* now, or once that daemon is connected */
        told++;
    }
    return told;
}

/* The READER_NACK that rx failed (code, msg), its writer still to name. */
static struct wire_reader_nack nack_of(const struct rx *rx, kvf_error_t code, const char *msg)
{
    struct wire_reader_nack n = {.req_id = rx->req_id, .code = code};
    snprintf(n.ctx_instance, sizeof n.ctx_instance, "%s", rx->ctx_instance);
    reason(rx, code, msg, n.message, sizeof n.message);
    return n;
}

void nack_refused(struct rx *rx, const struct itable *tab, kvf_error_t code, const char *msg)
{
    struct wire_reader_nack n = nack_of(rx, code, msg);
    n.epoch = known_epoch(rx, tab->epoch);
    nack_tell_all(rx->e, tab, &n);
}

uint32_t nack_tell_writers(struct engine *e, const struct itable *t,
                           const struct wire_reader_nack *n0, const uint8_t *writers)
{
    struct wire_reader_nack n = *n0;
    uint32_t told = 0;
    for (uint32_t r = 0; r < t->n; r++) {
        if (!writers[r])
            continue;
        n.writer = r;
        if (engine_is_self(e, t->addrs[r]))
            e->req.ops->reader_failed(e->req.t, n.ctx_instance, n.req_id, r, n.code,
                                    n.message);
        else
            pnack_send(e, NULL, t->addrs[r], &n); /* now, or once that daemon is connected */
        told++;
    }
    return told;
}

void nack_unplanned(struct rx *rx, const struct itable *tab, const struct plan_input *pin,
                    kvf_error_t code, const char *msg)
{
    struct engine *e = rx->e;
    uint8_t *writers = calloc(tab->n ? tab->n : 1, 1);
    struct plan_error pe = {.message = "out of memory"};
    int rc = writers ? 0 : -ENOMEM;
    if (writers && rx->planned)
        for (uint32_t i = 0; i < rx->plan.n_writers; i++)
            writers[rx->plan.writers[i].ctx_rank] = 1;
    else if (writers)
        rc = plan_writers_of_shape(pin, writers, &pe);
    if (rc < 0) { /* an attention-DP request without its DP rank: no writer is known */
        e->c.reader_nacks_unsent++;
        log_req(LOG_LVL_INFO, rx->req_id, tab->home, rx->ctx_instance,
                "engine: request %llu of %s: a reader refused by its plan (%s) cannot be told: "
                "its writers: %s", (unsigned long long)rx->req_id, rx->ctx_instance,
                kvf_error_to_string(code), pe.message);
        free(writers);
        return;
    }
    struct wire_reader_nack n = nack_of(rx, code, msg);
    n.epoch = known_epoch(rx, tab->epoch);
    nack_tell_writers(e, tab, &n, writers);
    free(writers);
}

/* Whether n was planned at another epoch of its instance than the one this daemon, its home,
 * holds now: its reader read an older incarnation, whose SENDs ended with it; a SEND here now
 * may reuse the id (a restart in another shape) and must not be ended by it. */
static bool stale_epoch(struct engine *e, const struct wire_reader_nack *n)
{
    struct itable *t;
    char msg[WIRE_TEXT_MAX];
    const struct reg_instance *in = e->req.reg ? registry_find(e->req.reg, n->ctx_instance) : NULL;
    for (uint32_t i = 0; in && i < in->n_ranks; i++) /* its ranks here name another home */
        if (in->ranks[i] && in->ranks[i]->home[0] &&
            !(e->self_addr[0] && strcmp(in->ranks[i]->home, e->self_addr) == 0))
            return false;
    if (!n->epoch || home_table(e, n->ctx_instance, &t, msg, sizeof msg) < 0 ||
        t->epoch == n->epoch)
        return false; /* not known, not held here (or not complete), or the same epoch */
    e->c.reader_nacks_stale++;
    log_req(LOG_LVL_INFO, n->req_id, "", n->ctx_instance,
            "engine: request %llu of %s: a failed reader's NACK (%s) of epoch %llu, the "
            "instance is at %llu here: dropped, not told to the new epoch's SEND",
            (unsigned long long)n->req_id, n->ctx_instance, kvf_error_to_string(n->code),
            (unsigned long long)n->epoch, (unsigned long long)t->epoch);
    return true;
}

void nack_on_reader_nack(struct engine *e, struct epeer *p, const struct wire_msg *m)
{
    const struct wire_reader_nack *n = &m->u.reader_nack;
    (void)p;
    e->c.reader_nacks_recv++;
    if (stale_epoch(e, n))
        return;
    if (e->req.t)
        e->req.ops->reader_failed(e->req.t, n->ctx_instance, n->req_id,
                                n->writer == WIRE_ALL_WRITERS ? XFER_NACK_ALL : n->writer, n->code,
                                n->message);
}

void nack_flow_ended(struct tx *tx)
{
    if (tx->send && tx->e->req.t)
        tx->e->req.ops->reread(tx->e->req.t, tx->send);
}

static void reader_lost(struct tx *tx, struct xfer *s, const char *how, int err)
{
    struct engine *e = tx->e;
    if (!s || !e->req.t)
        return; /* the flow was not reading */
    char why[WIRE_TEXT_MAX];
    snprintf(why, sizeof why, "reader %s rank %u: PEER_LOST: %s (%s)", tx->gen->instance,
             layout_rank(tx->gen), how, strerror(-err));
    e->req.ops->reader_failed(e->req.t, s->ctx_instance, s->req_id,
                            layout_rank(&s->rank->layout), KVF_E_PEER_LOST, why);
}

void nack_flow_lost(struct tx *tx, struct xfer *s, int err)
{
    reader_lost(tx, s, "its daemon was lost", err);
}

void nack_wait_lost(struct tx *tx, int err)
{
    struct engine *e = tx->e;
    const struct wire_recv_req *q = &tx->rr.u.recv_req;
    if (!e->req.t)
        return;
    char why[WIRE_TEXT_MAX];
    snprintf(why, sizeof why, "reader %s rank %u: PEER_LOST: its daemon was lost before the SEND "
             "came (%s)", tx->gen->instance, layout_rank(tx->gen), strerror(-err));
    e->req.ops->reader_failed(e->req.t, q->ctx_instance, q->req_id, q->writer,
                            KVF_E_PEER_LOST, why);
}

void nack_put_failed(struct tx *tx, int err)
{
    reader_lost(tx, tx->send, "a put to its daemon failed", err);
}

const char *nack_why_ended(kvf_error_t code)
{
    return code == KVF_E_PEER_LOST   ? "its worker went away"
           : code == KVF_E_CANCELLED ? "cancelled by its worker"
                                     : "the generation rank's request ended";
}

bool nack_beyond_readers(struct tx *tx, struct xfer *s)
{
    uint32_t need = tx->e->req.ops->need(s);
    uint32_t reading = need ? ix_send_readers(tx->e, s) : 0;
    if (!need || s->served + reading < need)
        return false;
    const struct wire_recv_req *q = &tx->rr.u.recv_req;
    tx->err.why = WIRE_NACK_NOT_READER; /* its NACK says so: the generation side does not count it */
    drive_tx_fail(tx, KVF_E_BAD_REQUEST, true,
                "request %llu of context instance %s already has its %u reader(s) of context "
                "rank %u (%u served, %u reading%s): a RECV beyond them is refused (a request id "
                "may be reused only after its request ended)",
                (unsigned long long)q->req_id, q->ctx_instance, need, q->writer, s->served,
                reading, s->n_readers ? "" : "; the count derived by the daemon");
    return true;
}

bool engine_send_reading(const struct engine *e, const struct xfer *s)
{
    return e && ix_send_readers(e, s) > 0; /* the request's flows, not every flow */
}
