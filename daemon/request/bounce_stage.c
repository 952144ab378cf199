/* bounce_stage.c: the context side's chunks of the bounce path (docs/DESIGN.md §5, §7): for
 * every granted landing slot, in extent order and up to arena.window at once, either a put of
 * each source run straight from the rank's pools (bounce_put.c) or a staging slot of this arena
 * (a heap buffer when the landing chunk is larger than our slots), gathered on the copy threads
 * (bounce_host.c) or by a GPU kernel (engine_gpu.c); then put + flush + CHUNK where the lanes do
 * real puts, else one CHUNK active message whose payload the receiver takes into the slot. A
 * stage is finished (its slot, buffer or registration let go) only after its copies and its
 * sends completed. Loop thread only. */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bounce_host.h"
#include "bounce_put.h"
#include "daemon.h"
#include "engine_ctx.h"
#include "engine_gpu.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "move_exec.h"

static void stage_finish(struct stage *st, int status)
{
    struct engine *e = st->e;
    if (st->resv_open) {
        uint64_t off;
        arena_resv_close(engine_stage_arena(e, &off), &st->resv, false);
        st->resv_open = false;
    }
    for (struct stage **pp = &e->stages; *pp; pp = &(*pp)->next)
        if (*pp == st) {
            *pp = st->next;
            break;
        }
    struct tx *tx = st->tx;
    uint64_t len = st->g.length;
    struct dack *d = st->dack;
    if (st->own_buf)
        free(st->buf);
    bput_release(st);
    free(st);
    quar_stage_done(e, d);
    if (!tx || tx_ended(tx))
        return;
    tx->n_ops--;
    if (status < 0) {
        ctx_tx_fail(tx, KVF_E_PEER_LOST, false, "moving a chunk to the generation daemon failed: %s",
                strerror(-status));
        return;
    }
    tx->completed += len;
    if (tx->peer) {
        tx->peer->chunks_sent++;
        tx->peer->bytes_sent += len;
    }
    if (tx->completed == tx->pw->bytes)
        ctx_tx_done(tx);
    else
        ctx_pump(tx);
}

static void chunk_sent(void *arg, int status)
{
    stage_finish(arg, status);
}

static void flushed(void *arg, int status)
{
    struct stage *st = arg;
    if (status == 0)
        status = st->err;
    if (status == 0 && st->tx && !tx_ended(st->tx) && st->tx->peer && st->tx->peer->lp)
        status =
            link_send(st->tx->peer->lp, WIRE_CHUNK, st->hdr, st->hdr_len, NULL, 0, chunk_sent, st);
    else if (status == 0)
        status = -ECANCELED;
    if (status < 0)
        stage_finish(st, status);
}

static void put_done(void *arg, int status)
{
    struct stage *st = arg;
    if (status < 0)
        st->err = status; /* the flush that follows reports it */
}

/* Moves a gathered chunk into its landing slot. st may be freed when this returns. */
static void stage_move(struct stage *st)
{
    struct tx *tx = st->tx;
    if (!tx || tx_ended(tx) || !tx->send || !tx->peer || !tx->peer->lp) {
        stage_finish(st, -ECANCELED);
        return;
    }
    struct engine *e = st->e;
    const struct wire_grant *g = &st->g;
    struct wire_msg m = {.type = WIRE_CHUNK};
    m.u.chunk = (struct wire_chunk){tx->rr.u.recv_req.req_id,
                                    tx->rr.u.recv_req.writer,
                                    g->slot,
                                    g->generation,
                                    g->ext_off,
                                    g->length};
    uint64_t le = htole64(tx->flow);
    memcpy(st->hdr, &le, ENGINE_ENV_BYTES);
    size_t n;
    if (wire_encode_into(&m, st->hdr + ENGINE_ENV_BYTES, sizeof st->hdr - ENGINE_ENV_BYTES, &n) <
        0) {
        stage_finish(st, -EINVAL);
        return;
    }
    st->hdr_len = ENGINE_ENV_BYTES + n;
    struct link_peer *lp = tx->peer->lp;
    bool put = link_peer_put_fast(lp) && g->offset + g->length <= link_peer_arena_bytes(lp);
    int rc;
    if (put || st->direct) {
        e->c.chunks_put++;
        e->c.bytes_put += g->length;
        if (st->direct) { /* one put per source run; a failed one is reported after the flush */
            if ((rc = bput_start(st, put_done)) < 0)
                st->err = rc;
        } else if ((rc = link_put(lp, st->buf, g->length, g->offset, put_done, st)) < 0) {
            stage_finish(st, rc);
            return;
        }
        if ((rc = link_flush(lp, flushed, st)) < 0)
            stage_finish(st, rc);
    } else {
        e->c.chunks_am++;
        e->c.bytes_am += g->length;
        rc = link_send(lp, WIRE_CHUNK, st->hdr, st->hdr_len, st->buf, g->length, chunk_sent, st);
        if (rc < 0)
            stage_finish(st, rc);
    }
}

/* Gathers the chunk (the host executor, or launches the GPU gather) and starts moving it. st
 * may be freed when this returns. */
static void stage_run(struct stage *st)
{
    struct tx *tx = st->tx;
    if (!tx || tx_ended(tx) || !tx->send || !tx->peer || !tx->peer->lp) {
        stage_finish(st, -ECANCELED);
        return;
    }
    char msg[WIRE_TEXT_MAX];
    int rc = tx->bx->gather(st, msg, sizeof msg); /* bounce_exec.h: copy threads, kernels */
    if (rc < 0) {
        ctx_tx_fail(tx, KVF_E_INTERNAL, true, "%s", msg);
        stage_finish(st, rc);
    } else if (rc == MOVE_DONE) {
        stage_move(st);
    } /* MOVE_STARTED: ctx_stage_gathered goes on */
}

void ctx_stage_gathered(struct stage *st, int status)
{
    if (status < 0) {
        struct tx *tx = st->tx;
        if (tx && !tx_ended(tx))
            ctx_tx_fail(tx, KVF_E_INTERNAL, true, "gather of extent [%llu, +%llu) failed: %s",
                    (unsigned long long)st->g.ext_off, (unsigned long long)st->g.length,
                    strerror(-status));
        stage_finish(st, status);
        return;
    }
    stage_move(st);
}

void ctx_stage_granted(struct stage *st, const struct arena_grant *g)
{
    st->have_slot = true;
    st->slot = *g;
    uint64_t off;
    engine_stage_arena(st->e, &off);
    st->buf = st->e->arena_base + off + g->offset;
    stage_run(st);
}

void ctx_stage_timeout(struct stage *st)
{
    st->resv_open = false;
    if (st->tx && !tx_ended(st->tx))
        ctx_tx_fail(st->tx, KVF_E_TIMEOUT, true, "no staging slot within arena.reserve_timeout");
    stage_finish(st, -ETIMEDOUT);
}

void ctx_pump(struct tx *tx)
{
    struct engine *e = tx->e;
    uint32_t win = engine_window(e);
    while (tx->state == TX_MOVING && tx->q_len > 0 && tx->n_ops < win) {
        struct wire_grant g = tx->q[tx->q_head];
        tx->q_head = (tx->q_head + 1) % ENGINE_MAX_CREDITS;
        tx->q_len--;
        uint64_t left = tx->pw->bytes - tx->sent;
        if (wire_grant_check(&g, tx->sent, g.length < left ? g.length : left) < 0 ||
            g.length > left) {
            ctx_tx_fail(tx, KVF_E_BOUND_VIOLATION, true,
                    "grant of slot %u for extent [%llu, +%llu) "
                    "does not follow: %llu of %llu bytes sent",
                    g.slot, (unsigned long long)g.ext_off, (unsigned long long)g.length,
                    (unsigned long long)tx->sent, (unsigned long long)tx->pw->bytes);
            return;
        }
        if (tx->sent == 0) {
            bool put = link_peer_put_fast(tx->peer->lp);
            if (put)
                e->c.path_bounce_shm_put++;
            else
                e->c.path_bounce_am++;
        }
        struct stage *st = calloc(1, sizeof *st);
        if (!st) {
            ctx_tx_fail(tx, KVF_E_INTERNAL, true, "out of memory");
            return;
        }
        st->kind = RESV_STAGING;
        st->e = e;
        st->tx = tx;
        st->g = g;
        st->next = e->stages;
        e->stages = st;
        tx->sent += g.length;
        tx->n_ops++;
        if (!tx->bx->staging_only && bput_choose(tx, &g)) { /* no staging slot, no gather */
            st->direct = true;
            stage_move(st);
            continue;
        }
        uint64_t soff;
        struct arena *sa = engine_stage_arena(e, &soff);
        if (g.length <= arena_slot_bytes(sa)) {
            arena_resv_init(&st->resv, tx->flow, 0, g.length);
            st->resv.data = st;
            st->resv_open = true;
            if (arena_want(sa, &st->resv, 1, engine_now(e)) >= 0)
                continue; /* ctx_stage_granted runs now or when a slot frees */
            st->resv_open = false;
        }
        if (tx->bx->staging_only) { /* e.g. a GPU gather: page-locked staging slots only */
            ctx_tx_fail(tx, KVF_E_NO_ROUTE, true,
                    "a %llu-byte chunk of GPU pools needs a staging slot of this daemon's "
                    "page-locked arena (slots of %llu bytes, or the wait queue is full): give "
                    "both daemons the same arena.chunk",
                    (unsigned long long)g.length, (unsigned long long)arena_slot_bytes(sa));
            stage_finish(st, -ENOSPC);
            return;
        }
        /* a landing chunk larger than our slots, or our wait queue is full: a heap buffer */
        e->c.staging_fallbacks++;
        st->buf = malloc(g.length);
        st->own_buf = true;
        if (!st->buf) {
            ctx_tx_fail(tx, KVF_E_INTERNAL, true, "out of memory for a %llu-byte chunk",
                    (unsigned long long)g.length);
            stage_finish(st, -ENOMEM);
            return;
        }
        stage_run(st);
    }
}
