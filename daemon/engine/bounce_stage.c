/* bounce_stage.c: the context side's chunks of the bounce path (docs/DESIGN.md §5, §7): for
 * every granted landing slot, in extent order and up to arena.window at once, the first way of
 * chunk_ways[] (bounce_way.h) that chooses the chunk and can run it moves it: device_am,
 * gpu_to_peer, copy_to_peer (the copy threads or a kernel gather straight into the peer's
 * landing slot mapped here, then CHUNK: docs/UCX.md "Copies into the peer's arena"),
 * cma_to_peer (the same over process_vm_writev: "... over cma"), put_from_pools
 * (bounce_put.c), gather_put and gather_am (a staging slot of this arena, or a heap buffer when
 * the landing chunk is larger than our slots, gathered on the copy threads or by a GPU kernel,
 * engine_gpu.c; then put + flush + CHUNK where the lanes do real puts, else one CHUNK active
 * message whose payload the receiver takes into the slot). Every answer is counted by way and
 * reason (engine_counters.ways).
 * A stage is finished (its slot, buffer or registration let go) only after its copies and its
 * sends completed; a copy into the peer's slot holds the peer's mapping (link_peer_hold) until
 * it ended. Loop thread only. */
#include <endian.h>
#include <errno.h>
#include <stdio.h>
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
#include "require.h"
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
 * looks up, bstage_hold_peer_down sets the real time. */
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

bool bstage_hold_peer_down(struct engine *e, struct epeer *p, int err)
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

void bstage_hold_peer_back(struct engine *e, uint64_t key)
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
        bstage_pump(tx);
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

/* Its way's send (chunk_ways[] below). */
static void way_send(struct stage *st, struct link_peer *lp);

/* Moves a gathered chunk into its landing slot, by its way's send. st may be freed when this
 * returns. */
static void stage_move(struct stage *st)
{
    struct tx *tx = st->tx;
    if (!tx || tx_ended(tx) || !tx->send || !tx->peer || !tx->peer->lp) {
        stage_finish(st, -ECANCELED);
        return;
    }
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
    way_send(st, tx->peer->lp);
}

/* ---- sends: how a chunk whose bytes are ready reaches its landing slot ---- */

/* The bytes are in the peer's slot already (a copy into it ended): CHUNK alone. */
static void send_chunk(struct stage *st, struct link_peer *lp)
{
    st->e->c.chunks_put++;
    st->e->c.bytes_put += st->g.length;
    int rc = link_send(lp, WIRE_CHUNK, st->hdr, st->hdr_len, NULL, 0, chunk_sent, st);
    if (rc < 0)
        stage_finish(st, rc);
}

/* One put per source run from the pools (bounce_put.c); a failed one is reported after the
 * flush. */
static void send_puts(struct stage *st, struct link_peer *lp)
{
    st->e->c.chunks_put++;
    st->e->c.bytes_put += st->g.length;
    int rc = bput_start(st, put_done);
    if (rc < 0)
        st->err = rc;
    if ((rc = link_flush(lp, flushed, st)) < 0)
        stage_finish(st, rc);
}

/* The gathered buffer put into the slot, flushed, then CHUNK. */
static void send_put(struct stage *st, struct link_peer *lp)
{
    st->e->c.chunks_put++;
    st->e->c.bytes_put += st->g.length;
    int rc = link_put(lp, st->buf, st->g.length, st->g.offset, put_done, st);
    if (rc < 0) {
        stage_finish(st, rc);
        return;
    }
    if ((rc = link_flush(lp, flushed, st)) < 0)
        stage_finish(st, rc);
}

/* The gathered buffer as the payload of one CHUNK active message (a rendezvous the receiver
 * takes into the slot; from device memory for the device twin, bounce_dev.h). */
static void send_am(struct stage *st, struct link_peer *lp)
{
    struct engine *e = st->e;
    e->c.chunks_am++;
    e->c.bytes_am += st->g.length;
    e->c.chunks_device += st->dev;
    st->sent_am = true;
    int rc = link_send(lp, WIRE_CHUNK, st->hdr, st->hdr_len, st->buf, st->g.length, chunk_sent, st);
    if (rc < 0) { /* never went out */
        st->sent_am = false;
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
    stage_mark(st, BTL_GATHER_LAUNCH);
    int rc = tx->bx->gather(st, msg, sizeof msg); /* bounce_exec.h: copy threads, kernels */
    if (rc < 0) {
        drive_tx_fail(tx, KVF_E_INTERNAL, true, "%s", msg);
        stage_finish(st, rc);
    } else if (rc == MOVE_DONE) {
        stage_move(st);
    } /* MOVE_STARTED: bstage_gathered goes on */
}

void bstage_gathered(struct stage *st, int status)
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

void bstage_granted(struct stage *st, const struct arena_grant *g)
{
    st->have_slot = true;
    st->slot = *g;
    uint64_t off;
    engine_stage_arena(st->e, &off);
    st->buf = (st->dev ? bdev_at(st->e, 0) : st->e->arena_base) + off + g->offset;
    stage_run(st);
}

void bstage_timeout(struct stage *st)
{
    st->resv_open = false;
    if (st->tx && !tx_ended(st->tx))
        drive_tx_fail(st->tx, KVF_E_TIMEOUT, true, "no staging slot within arena.reserve_timeout");
    stage_finish(st, -ETIMEDOUT);
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

/* ---- runs: how a way that took a chunk starts it ---- */

enum { RUN_STOPPED = -1, RUN_STARTED = 0 }; /* or > 0: the way's reason it could not after all */

/* A copy into the peer's landing slot (its choose found it: st->buf), on the copy threads or a
 * kernel: the peer held (its mapping) until the gather ended; no staging slot, no put. */
static int run_to_peer(struct stage *st)
{
    st->to_peer = true;
    st->held = st->tx->peer->lp;
    link_peer_hold(st->held);
    stage_run(st);
    return RUN_STARTED;
}

/* Puts straight from the pools: nothing to gather. */
static int run_direct(struct stage *st)
{
    stage_move(st);
    return RUN_STARTED;
}

/* A staging slot (now, or when one frees: bstage_granted); false: none to wait for (the
 * chunk is larger than our slots, every free one is held for a failed peer, or the wait queue
 * is full). */
static bool staging_slot(struct stage *st)
{
    struct tx *tx = st->tx;
    uint64_t soff;
    struct arena *sa = engine_stage_arena(tx->e, &soff);
    if (st->g.length > arena_slot_bytes(sa) || held_full(tx->e, sa, tx))
        return false;
    arena_resv_init(&st->resv, tx->flow, st->hold_key, st->g.length);
    st->resv.data = st;
    st->resv_open = true;
    if (arena_want(sa, &st->resv, 1, engine_now(tx->e)) >= 0)
        return true;
    st->resv_open = false;
    return false;
}

/* The staging slot's device twin, gathered into by the kernel (bounce_dev.h). */
static int run_device(struct stage *st)
{
    st->dev = true;
    st->dev = staging_slot(st);
    return st->dev ? RUN_STARTED : BDEV_NO_SLOT;
}

/* A staging slot, else a heap buffer; pools a kernel gathers from (page-locked staging slots
 * only) have none: the flow fails. */
static int run_gather(struct stage *st)
{
    struct tx *tx = st->tx;
    if (staging_slot(st))
        return RUN_STARTED;
    if (tx->bx->staging_only) { /* e.g. a GPU gather: page-locked staging slots only */
        uint64_t soff;
        drive_tx_fail(tx, KVF_E_NO_ROUTE, true,
                    "a %llu-byte chunk of GPU pools needs a staging slot of this daemon's "
                    "page-locked arena (slots of %llu bytes, or the wait queue is full): give "
                    "both daemons the same arena.chunk",
                    (unsigned long long)st->g.length,
                    (unsigned long long)arena_slot_bytes(engine_stage_arena(tx->e, &soff)));
        stage_finish(st, -ENOSPC);
        return RUN_STOPPED;
    }
    tx->e->c.staging_fallbacks++;
    st->buf = malloc(st->g.length);
    st->own_buf = true;
    if (!st->buf) {
        drive_tx_fail(tx, KVF_E_INTERNAL, true, "out of memory for a %llu-byte chunk",
                    (unsigned long long)st->g.length);
        stage_finish(st, -ENOMEM);
        return RUN_STOPPED;
    }
    stage_run(st);
    return RUN_STARTED;
}

static int choose_device(struct stage *st)
{
    return bdev_choose(st);
}

/* The ways (bounce_way.h), in the order they are tried: the fewest copies first. */
struct chunk_way {
    const char *name;
    /* 0: this way takes st's chunk; else the 1-based index of its reason in refused[] */
    int (*choose)(struct stage *st);
    const char *refused[BWAY_REASONS]; /* choose's reasons, then run's */
    /* RUN_STARTED (moving, or waiting for its slot), RUN_STOPPED (the flow failed, st
     * finished), or a reason > 0: it cannot take the chunk after all (the next way tries) */
    int (*run)(struct stage *st);
    void (*send)(struct stage *st, struct link_peer *lp); /* the chunk's bytes are ready */
};

static const struct chunk_way chunk_ways[BWAY__COUNT] = {
    [BWAY_DEVICE_AM] = {"device_am", choose_device,
                        {"no_device_arena", "not_on_its_gpu", "peer_host_only", "no_device_slot"},
                        run_device, send_am},
    [BWAY_GPU_TO_PEER] = {"gpu_to_peer", bway_gpu_to_peer,
                          {"host_pools", "shm_write_put", "arena_not_mapped", "outside_arena",
                           "pin_failed"},
                          run_to_peer, send_chunk},
    [BWAY_COPY_TO_PEER] = {"copy_to_peer", bway_copy_to_peer,
                           {"gpu_pools", "shm_write_put", "arena_not_mapped", "outside_arena"},
                           run_to_peer, send_chunk},
    [BWAY_CMA_TO_PEER] = {"cma_to_peer", bway_cma_to_peer,
                          {"gpu_pools", "no_copy_threads", "cma_write_am", "no_cma_lane",
                           "outside_arena"},
                          run_to_peer, send_chunk},
    [BWAY_PUT_FROM_POOLS] = {"put_from_pools", bput_choose,
                             {"gpu_pools", "no_put_lanes", "direct_off", "no_registration",
                              "small_runs"},
                             run_direct, send_puts},
    [BWAY_GATHER_PUT] = {"gather_put", bway_gather_put, {"no_put_lanes", "outside_arena"},
                         run_gather, send_put},
    [BWAY_GATHER_AM] = {"gather_am", bway_gather_am, {NULL}, run_gather, send_am},
};

static void way_send(struct stage *st, struct link_peer *lp)
{
    chunk_ways[st->way].send(st, lp);
}

/* st's chunk takes the first way that chooses it and can run it; each answer counted. False:
 * the flow failed (pump no more). */
static bool take_way(struct stage *st)
{
    struct engine *e = st->e;
    for (unsigned k = 0; k < BWAY__COUNT; k++) {
        const struct chunk_way *w = &chunk_ways[k];
        int why = w->choose(st);
        if (why == 0) {
            st->way = (bway_kind_t)k;
            why = w->run(st); /* st may be finished when it returns */
        }
        if (!KVF_REQUIRE(why <= BWAY_REASONS && (why <= 0 || w->refused[why - 1]),
                         "chunk way %s: reason %d unnamed", w->name, why))
            why = 0; /* counted as taken: a way that answers so is a bug, logged */
        e->c.ways[k][why > 0 ? why : 0]++;
        if (why <= 0)
            return why == RUN_STARTED;
    }
    return true; /* gather_am always takes it */
}

void bstage_ways_json(const struct engine *e, json_t *o)
{
    char key[64];
    for (unsigned k = 0; k < BWAY__COUNT; k++) {
        const struct chunk_way *w = &chunk_ways[k];
        json_object_set_new(o, w->name, json_integer((json_int_t)e->c.ways[k][0]));
        for (unsigned r = 0; r < BWAY_REASONS && w->refused[r]; r++) {
            snprintf(key, sizeof key, "%s:%s", w->name, w->refused[r]);
            json_object_set_new(o, key, json_integer((json_int_t)e->c.ways[k][r + 1]));
        }
    }
}

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

void bstage_pump(struct tx *tx)
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
        if (!take_way(st))
            return;
    }
}
