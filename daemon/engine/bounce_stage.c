/* bounce_stage.c: the context side's chunks of the bounce path (docs/DESIGN.md §5, §7): for
 * every granted landing slot, in extent order and up to arena.window at once, one of:
 * - over shared memory (the peer's arena mapped here, arena.shm_write copy): a gather by the
 *   copy threads (bounce_host.c), or by a GPU kernel through the mapping page-locked here
 *   (egpu_peer.h), straight into the landing slot, then CHUNK: one copy, off the loop, and no
 *   put (docs/UCX.md "Copies into the peer's arena"); where only cma reaches the peer's
 *   process (another network namespace, arena.cma_write copy, host pools) the copy threads'
 *   gather writes the slot with process_vm_writev (docs/UCX.md "Copies into the peer's arena
 *   over cma");
 * - a put of each source run straight from the rank's pools (bounce_put.c);
 * - a staging slot of this arena (a heap buffer when the landing chunk is larger than our
 *   slots), gathered on the copy threads or by a GPU kernel (engine_gpu.c); then put + flush +
 *   CHUNK where the lanes do real puts, else one CHUNK active message whose payload the
 *   receiver takes into the slot.
 * A stage is finished (its slot, buffer or registration let go) only after its copies and its
 * sends completed; a copy into the peer's slot holds the peer's mapping (link_peer_hold) until
 * it ended. Loop thread only. */
#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bounce_dev.h"
#include "engine_drive.h"
#include "bounce_host.h"
#include "bounce_put.h"
#include "bounce_tl.h"
#include "daemon.h"
#include "egpu_peer.h"
#include "engine_ctx.h"
#include "engine_gpu.h"
#include "engine_nack.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "engine_share.h"
#include "move_exec.h"
#include "stream_gate.h"
#include "xfer.h"

/* A copy into the peer's mapped slot ended (or never ran): its hold on the mapping drops. */
static void unhold(struct stage *st)
{
    if (st->ppin)
        egpu_peer_unuse(st->e, st->ppin);
    st->ppin = NULL;
    if (st->held)
        link_peer_release(st->held);
    st->held = NULL;
}

/* A chunk whose active message failed after it went out: the peer may still read its buffer
 * (cma rendezvous: process_vm_readv by the receiver, docs/UCX.md trap 12). Its staging slot
 * stays quarantined under the peer's key and a heap buffer is handed to the hold, until the
 * peer cannot read them (arena_hold.h); a backstop of deadlines.transfer while the peer still
 * looks up, ctx_hold_peer_down sets the real time. */
static void stage_hold(struct stage *st)
{
    struct engine *e = st->e;
    uint64_t now = engine_now(e), off;
    uint64_t end = now + (uint64_t)e->d->cfg.deadlines_transfer_ms;
    if (st->resv_open) {
        arena_resv_close(engine_stage_arena(e, &off), &st->resv, true);
        st->resv_open = false;
    }
    void *buf = st->own_buf ? st->buf : NULL;
    if (!st->have_slot && !buf)
        return;
    if (hold_add(e->shold, st->hold_key, buf, st->g.length, end, now) < 0) {
        /* a slot stays quarantined; a buffer is left allocated: never freed under a reader */
        log_error("engine: out of memory holding a failed chunk's buffer (%llu bytes) of a "
                  "lost peer: it stays unused until the daemon exits",
                  (unsigned long long)st->g.length);
    }
    st->own_buf = false;
    e->c.staging_held++;
    engine_due(e, EPART_HOLD, ENGINE_DUE_NEXT);
}

bool ctx_hold_peer_down(struct engine *e, struct epeer *p, int err)
{
    uint64_t key = share_key(p);
    bool in_flight = false;
    for (const struct stage *st = e->stages; st && !in_flight; st = st->next)
        in_flight = st->sent_am && st->hold_key == key;
    in_flight = in_flight || engine_msgs_in_flight(e, key); /* control messages: the same */
    if (!e->shold || (!in_flight && !hold_has(e->shold, key)))
        return false;
    /* frozen (or cut off) on this host with a lane that reads our memory by itself: a read it
     * was about to make happens when it runs again, whatever we closed */
    bool frozen = err == -ETIMEDOUT && p->up && p->lp && link_peer_same_host(p->lp) &&
                  link_peer_direct_mem(p->lp);
    hold_set(e->shold, key, frozen ? HOLD_UNTIL_TOLD : engine_now(e) + ENGINE_RECLAIM_MS, true);
    engine_due(e, EPART_HOLD, ENGINE_DUE_NEXT);
    return frozen;
}

void ctx_hold_peer_back(struct engine *e, uint64_t key)
{
    if (e->shold) {
        hold_set(e->shold, key, engine_now(e), false);
        engine_due(e, EPART_HOLD, ENGINE_DUE_NEXT); /* its holds end at the next tick */
    }
}

static void stage_finish(struct stage *st, int status)
{
    struct engine *e = st->e;
    unhold(st);
    if (status < 0 && st->sent_am)
        stage_hold(st);
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
    if (st->breg) /* a put from the pools: its registration */
        bput_release(st);
    free(st);
    if (d) /* a failed flow's drain ack waits for its chunks */
        quar_stage_done(e, d);
    if (!tx || tx_ended(tx))
        return;
    tx->n_ops--;
    if (status < 0) {
        drive_tx_fail(tx, KVF_E_PEER_LOST, false, "moving a chunk to the generation daemon failed: %s",
                strerror(-status));
        tx->e->drive->tx_put_failed(tx, status);
        return;
    }
    tx->completed += len;
    if (tx->peer) {
        tx->peer->chunks_sent++;
        tx->peer->bytes_sent += len;
    }
    if (tx->completed == tx->pw->bytes)
        tx->e->drive->tx_done(tx);
    else
        ctx_pump(tx);
}

/* A timeline event of st's chunk (bounce_tl.h). */
static void stage_mark(const struct stage *st, btl_kind_t kind)
{
    if (st->e->tl && st->tx)
        btl_mark(st->e->tl, kind, st->tx->rr.u.recv_req.req_id, st->tx->rr.u.recv_req.writer,
                 st->g.ext_off);
}

static void chunk_sent(void *arg, int status)
{
    if (status == 0)
        stage_mark(arg, BTL_CHUNK_SENT);
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

/* Whether grant g lies inside the peer's arena (the grant is the peer's word: never trusted). */
static bool in_peer_arena(struct link_peer *lp, const struct wire_grant *g)
{
    uint64_t n = link_peer_arena_bytes(lp);
    return g->offset <= n && g->length <= n - g->offset;
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
    int rc;
    /* the lanes are looked at (link_peer_put_fast) only for a chunk that may be put */
    if (st->to_peer) { /* the bytes are in the slot: a message sent after the copy ended */
        e->c.chunks_put++;
        e->c.bytes_put += g->length;
        rc = link_send(lp, WIRE_CHUNK, st->hdr, st->hdr_len, NULL, 0, chunk_sent, st);
        if (rc < 0)
            stage_finish(st, rc);
    } else if (!st->dev && (st->direct || (link_peer_put_fast(lp) && in_peer_arena(lp, g)))) {
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
        e->c.chunks_device += st->dev; /* from device memory, a rendezvous (bounce_dev.h) */
        st->sent_am = true;
        rc = link_send(lp, WIRE_CHUNK, st->hdr, st->hdr_len, st->buf, g->length, chunk_sent, st);
        if (rc < 0) { /* never went out */
            st->sent_am = false;
            stage_finish(st, rc);
        }
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
    stage_mark(st, BTL_GATHER_LAUNCH);
    int rc = tx->bx->gather(st, msg, sizeof msg); /* bounce_exec.h: copy threads, kernels */
    if (rc < 0) {
        drive_tx_fail(tx, KVF_E_INTERNAL, true, "%s", msg);
        stage_finish(st, rc);
    } else if (rc == MOVE_DONE) {
        stage_move(st);
    } /* MOVE_STARTED: ctx_stage_gathered goes on */
}

void ctx_stage_gathered(struct stage *st, int status)
{
    unhold(st); /* nothing writes the peer's slot any more */
    if (status == 0)
        stage_mark(st, BTL_GATHER_DONE);
    if (status < 0 && st->buf_pid && status != -ECANCELED) {
        /* the peer's process refused the write (exited: -ESRCH, its arena gone: -EFAULT): the
         * generation daemon is lost, as a failed put says (PEER_LOST, its readers counted) */
        stage_finish(st, status);
        return;
    }
    if (status < 0) {
        struct tx *tx = st->tx;
        if (tx && !tx_ended(tx))
            drive_tx_fail(tx, KVF_E_INTERNAL, true, "gather of extent [%llu, +%llu) failed: %s",
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
    st->buf = (st->dev ? bdev_at(st->e, 0) : st->e->arena_base) + off + g->offset;
    stage_run(st);
}

void ctx_stage_timeout(struct stage *st)
{
    st->resv_open = false;
    if (st->tx && !tx_ended(st->tx))
        drive_tx_fail(st->tx, KVF_E_TIMEOUT, true, "no staging slot within arena.reserve_timeout");
    stage_finish(st, -ETIMEDOUT);
}

/* The landing slot of g in the peer's arena mapped here, when this side is to write it itself
 * (shared-memory lanes, arena.shm_write copy): the copy threads for host pools; for GPU pools
 * (staging_only: kernels write page-locked memory only) a kernel, with the mapping page-locked
 * here (*pin, one use). Else NULL. The grant comes from the peer: a slot outside its arena is
 * never written here (its put fails -ERANGE). */
static uint8_t *peer_slot(struct tx *tx, const struct wire_grant *g, struct egpu_ppin **pin)
{
    struct link_peer *lp = tx->peer ? tx->peer->lp : NULL;
    uint8_t *base;
    *pin = NULL;
    if (!lp || tx->e->d->cfg.arena_shm_write != CFG_SHM_WRITE_COPY ||
        link_peer_arena_map(lp, &base) < 0)
        return NULL;
    if (!in_peer_arena(lp, g))
        return NULL;
    if (tx->bx->staging_only &&
        !(*pin = egpu_peer_use(tx->e, lp, base, link_peer_arena_bytes(lp))))
        return NULL;
    return base + g->offset;
}

/* The landing slot of g at its address in the peer daemon's process, when the copy threads are
 * to write it there with process_vm_writev (host pools, the peer reachable over cma but its
 * arena not mapped here, arena.cma_write copy; copy threads: the inline gather cannot write
 * another process); *pid its pid. Else NULL. Bounded by the peer's arena as peer_slot is. */
static uint8_t *peer_cma_slot(struct tx *tx, const struct wire_grant *g, uint32_t *pid)
{
    struct link_peer *lp = tx->peer ? tx->peer->lp : NULL;
    uint64_t base;
    if (!lp || tx->bx->staging_only || !tx->e->d->copy ||
        tx->e->d->cfg.arena_cma_write != CFG_CMA_WRITE_COPY ||
        link_peer_arena_cma(lp, pid, &base) < 0)
        return NULL;
    return in_peer_arena(lp, g) ? (uint8_t *)(uintptr_t)(base + g->offset) : NULL;
}

/* Every staging slot is in use and some are held for failed peers (stage_hold): a host chunk
 * takes a heap buffer instead of waiting, so a frozen peer's holds never stall the others (a
 * GPU gather needs the page-locked slots: it waits). */
static bool held_full(const struct engine *e, const struct arena *sa, const struct tx *tx)
{
    if (egpu_tx_on_gpu(tx))
        return false;
    struct arena_stats st;
    arena_get_stats(sa, &st);
    return st.slots_free == 0 && st.slots_quarantined > 0 && e->shold;
}

/* ---- the chunk's way: rows tried in order, the first that takes the chunk moves it ---- */

typedef enum {
    WAY_PASS,  /* not this row's chunk: try the next */
    WAY_TAKEN, /* moving (or queued for a slot) */
    WAY_STOP,  /* the flow failed: pump no more */
} way_t;

/* One copy into the peer's landing slot mapped here (shared memory), on the copy threads or a
 * kernel: no staging slot, no put. */
static way_t way_copy_to_peer(struct stage *st)
{
    struct tx *tx = st->tx;
    struct egpu_ppin *pin;
    uint8_t *dst = peer_slot(tx, &st->g, &pin);
    if (!dst)
        return WAY_PASS;
    tx->e->c.chunk_copied_to_peer++;
    tx->e->c.chunk_gpu_to_peer += pin != NULL;
    st->ppin = pin;
    st->buf = dst;
    return WAY_TAKEN;
}

/* One copy into the peer's landing slot in its process (cma), on the copy threads. */
static way_t way_cma_to_peer(struct stage *st)
{
    uint32_t pid = 0;
    uint8_t *dst = peer_cma_slot(st->tx, &st->g, &pid);
    if (!dst)
        return WAY_PASS;
    st->tx->e->c.chunk_cma_to_peer++;
    st->buf = dst;
    st->buf_pid = pid;
    return WAY_TAKEN;
}

/* Runs long enough put straight from the pools (bounce_put.c): no staging slot, no gather. */
static way_t way_put_from_pools(struct stage *st)
{
    if (st->tx->bx->staging_only || !bput_choose(st->tx, &st->g))
        return WAY_PASS;
    st->direct = true;
    stage_move(st);
    return WAY_TAKEN;
}

static way_t way_staging_slot(struct stage *st);

/* A GPU writer's chunk to a gpu_direct peer: a staging slot's device twin, gathered into by the
 * kernel, sent from there as a rendezvous message (bounce_dev.h). */
static way_t way_device_slot(struct stage *st)
{
    if (!bdev_tx(st->tx))
        return WAY_PASS;
    st->dev = true;
    way_t w = way_staging_slot(st);
    st->dev = w == WAY_TAKEN;
    return w;
}

/* A staging slot (now, or when one frees: ctx_stage_granted), gathered into, then put. */
static way_t way_staging_slot(struct stage *st)
{
    struct tx *tx = st->tx;
    uint64_t soff;
    struct arena *sa = engine_stage_arena(tx->e, &soff);
    if (st->g.length > arena_slot_bytes(sa) || held_full(tx->e, sa, tx))
        return WAY_PASS;
    arena_resv_init(&st->resv, tx->flow, st->hold_key, st->g.length);
    st->resv.data = st;
    st->resv_open = true;
    if (arena_want(sa, &st->resv, 1, engine_now(tx->e)) >= 0)
        return WAY_TAKEN;
    st->resv_open = false;
    return WAY_PASS;
}

/* A chunk larger than our slots, our wait queue full, or every free slot held for a failed peer:
 * a heap buffer; pools a kernel gathers from (page-locked staging slots only) have none. */
static way_t way_heap_buffer(struct stage *st)
{
    struct tx *tx = st->tx;
    if (tx->bx->staging_only) { /* e.g. a GPU gather: page-locked staging slots only */
        uint64_t soff;
        drive_tx_fail(tx, KVF_E_NO_ROUTE, true,
                    "a %llu-byte chunk of GPU pools needs a staging slot of this daemon's "
                    "page-locked arena (slots of %llu bytes, or the wait queue is full): give "
                    "both daemons the same arena.chunk",
                    (unsigned long long)st->g.length,
                    (unsigned long long)arena_slot_bytes(engine_stage_arena(tx->e, &soff)));
        stage_finish(st, -ENOSPC);
        return WAY_STOP;
    }
    tx->e->c.staging_fallbacks++;
    st->buf = malloc(st->g.length);
    st->own_buf = true;
    if (!st->buf) {
        drive_tx_fail(tx, KVF_E_INTERNAL, true, "out of memory for a %llu-byte chunk",
                    (unsigned long long)st->g.length);
        stage_finish(st, -ENOMEM);
        return WAY_STOP;
    }
    stage_run(st);
    return WAY_TAKEN;
}

/* The rows, in the order they are tried: the fewest copies first. A copy into the peer's slot
 * (either row) runs here once taken; each row counts its own reason. */
static const struct {
    const char *name;
    way_t (*take)(struct stage *st);
    bool to_peer; /* writes the peer's landing slot: hold the link peer, stage_run */
} chunk_ways[] = {
    {"device_slot", way_device_slot, false},
    {"copy_to_peer", way_copy_to_peer, true},
    {"cma_to_peer", way_cma_to_peer, true},
    {"put_from_pools", way_put_from_pools, false},
    {"staging_slot", way_staging_slot, false},
    {"heap_buffer", way_heap_buffer, false},
};

/* The next granted slot of tx, checked to follow what was sent. False: tx failed. */
static bool next_grant(struct tx *tx, struct wire_grant *ret)
{
    struct wire_grant g = tx->q[tx->q_head];
    tx->q_head = (tx->q_head + 1) % ENGINE_MAX_CREDITS;
    tx->q_len--;
    uint64_t left = tx->pw->bytes - tx->sent;
    if (wire_grant_check(&g, tx->sent, g.length < left ? g.length : left) < 0 || g.length > left) {
        drive_tx_fail(tx, KVF_E_BOUND_VIOLATION, true,
                    "grant of slot %u for extent [%llu, +%llu) does not follow: %llu of %llu "
                    "bytes sent",
                    g.slot, (unsigned long long)g.ext_off, (unsigned long long)g.length,
                    (unsigned long long)tx->sent, (unsigned long long)tx->pw->bytes);
        return false;
    }
    if (tx->sent == 0) { /* the flow's path: its chunks are counted by way below */
        uint32_t pid;
        uint64_t base;
        if (link_peer_put_fast(tx->peer->lp))
            tx->e->c.path_bounce_shm_put++;
        else if (link_peer_arena_cma(tx->peer->lp, &pid, &base) == 0)
            tx->e->c.path_bounce_cma++;
        else
            tx->e->c.path_bounce_am++;
    }
    *ret = g;
    return true;
}

void ctx_pump(struct tx *tx)
{
    struct engine *e = tx->e;
    uint32_t win = engine_window(e);
    /* a streaming SEND's chunk waits until its range is final */
    while (tx->state == TX_MOVING && tx->q_len > 0 && tx->n_ops < win &&
           (!tx->send || !tx->send->stream || stream_gate_may(tx))) {
        struct wire_grant g;
        if (!next_grant(tx, &g))
            return;
        struct stage *st = calloc(1, sizeof *st);
        if (!st) {
            drive_tx_fail(tx, KVF_E_INTERNAL, true, "out of memory");
            return;
        }
        st->kind = RESV_STAGING;
        st->e = e;
        st->tx = tx;
        st->g = g;
        st->hold_key = share_key(tx->peer);
        st->next = e->stages;
        e->stages = st;
        tx->sent += g.length;
        tx->n_ops++;
        for (size_t i = 0; i < sizeof chunk_ways / sizeof chunk_ways[0]; i++) {
            way_t w = chunk_ways[i].take(st);
            if (w == WAY_STOP)
                return;
            if (w == WAY_PASS)
                continue;
            if (chunk_ways[i].to_peer) {
                st->to_peer = true;
                st->held = tx->peer->lp;
                link_peer_hold(st->held);
                stage_run(st);
            }
            break;
        }
    }
}
