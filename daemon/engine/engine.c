/* engine.c: the transfer engine's start and stop, message dispatch, the deadline tick and the
 * status sections (see engine.h). */
#include <endian.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounce_host.h"
#include "bounce_put.h"
#include "egpu_peer.h"
#include "daemon.h"
#include "engine_ctx.h"
#include "engine_drive.h"
#include "frag_ctx.h"
#include "frag_gen.h"
#include "engine_gen.h"
#include "path.h"
#include "engine_gone.h"
#include "engine_fence.h"
#include "engine_linkwait.h"
#include "engine_lost.h"
#include "engine_gpu.h"
#include "engine_nack.h"
#include "engine_peer.h"
#include "engine_pnack.h"
#include "engine_quar.h"
#include "engine_share.h"
#include "engine_tab.h"
#include "memroom.h"
#include "registry.h"
#include "shmstale.h"
#include "xfer.h"

/* Staging and messages a failed peer may still read (e->shold): freed when their time came. */
static uint64_t hold_part_tick(struct engine *e, uint64_t now)
{
    hold_tick(e->shold, now);
    return hold_timed(e->shold) ? ENGINE_DUE_NEXT : 0;
}

/* The parts behind engine_due, each asked only once its registration is due. */
static const engine_part_tick_fn part_ticks[EPART__COUNT] = {
    [EPART_TAB] = tab_tick,       [EPART_PNACK] = pnack_tick, [EPART_QUAR] = quar_tick,
    [EPART_HOLD] = hold_part_tick, [EPART_FENCE] = fence_tick, [EPART_LOST] = lost_redial,
    [EPART_HOME] = home_tick,     [EPART_GPU] = egpu_tick,
};

static void part_tick(struct engine *e, engine_part_t part, uint64_t now)
{
    if (!e->due[part] || now < e->due[part])
        return;
    e->due[part] = 0; /* what the part registers meanwhile stays (engine_due keeps the earlier) */
    uint64_t next = part_ticks[part](e, now);
    if (next && (!e->due[part] || next < e->due[part]))
        e->due[part] = next;
}

static void tick_cb(uv_timer_t *h);

/* Every ENGINE_TICK_MS while flows live; else armed for the earliest part due, or stopped. */
static void rearm(struct engine *e, uint64_t now)
{
    uint64_t next = engine_next_due(e);
    if (e->rxs || e->txs || e->stages || e->host_ops || e->frags ||
        (next && next <= now + ENGINE_TICK_MS))
        return; /* the timer repeats */
    if (next && !e->stopping)
        uv_timer_start(&e->tick, tick_cb, next - now, ENGINE_TICK_MS);
    else
        uv_timer_stop(&e->tick);
}

static void tick_cb(uv_timer_t *h)
{
    struct engine *e = h->data;
    uint64_t now = engine_now(e);
    arena_tick(e->arena, now);
    arena_tick(e->stage_arena, now);
    part_tick(e, EPART_TAB, now);
    part_tick(e, EPART_PNACK, now);
    gen_tick(e, now);
    ctx_tick(e, now);
    part_tick(e, EPART_HOLD, now);
    part_tick(e, EPART_QUAR, now);
    part_tick(e, EPART_FENCE, now);
    part_tick(e, EPART_LOST, now);
    part_tick(e, EPART_HOME, now);
    engine_recv_sweep(e);
    ctx_sweep(e);
    part_tick(e, EPART_GPU, now);
    rearm(e, now);
}

/* ---- link callbacks ---- */

/* The link's peer callbacks: every part hears that a peer came up or went, in this order. */
static void peer_up(struct engine *e, struct link_peer *lp)
{
    struct epeer *p = epeer_of(e, lp);
    if (!p)
        return;
    p->up = true;
    p->since_ms = engine_now(e);
    log_info("engine: peer %s%s%s up (%s)", link_peer_id(lp), p->addr[0] ? " at " : "", p->addr,
             p->outbound ? "outbound" : "inbound");
    /* it ran again: reads of our staging from before ended */
    bstage_hold_peer_back(e, share_key(p));
    fence_peer_up(e, p); /* held landing slots and pools: when it proves its writes ended */
    tab_peer_up(e, p);
    home_tick(e, p->since_ms);
    gen_peer_up(e, p);
    engine_recv_sweep(e);
    ctx_sweep(e);
}

static void peer_down(struct engine *e, struct link_peer *lp, int err)
{
    struct epeer *p = link_peer_data(lp);
    if (!p)
        return;
    if (p->up) {
        e->c.peers_lost++;
        log_warn("engine: peer %s%s%s lost: %s", link_peer_id(lp), p->addr[0] ? " at " : "",
                 p->addr, strerror(-err));
    } else {
        log_warn("engine: peer %s unreachable: %s", p->addr[0] ? p->addr : link_peer_id(lp),
                 strerror(-err));
    }
    fence_peer_down(e, p);
    tab_peer_down(e, p);
    home_peer_down(e, p);
    gen_peer_down(e, p, err);
    ctx_peer_down(e, p, err);
    engine_recv_sweep(e);
    ctx_sweep(e);
    bool hold = alive_hold(p, err); /* frozen, lanes into our memory: held until it is back */
    if (hold)
        quar_peer_frozen(e, p, share_key(p));
    hold |= bstage_hold_peer_down(e, p, err); /* staging it may still read (cma): the same */
    if (p->up) /* or until its process exits (engine_lost.c) */
        lost_add(e, p, lp, err, hold, share_key(p));
    quar_peer_down(e, p); /* its quarantined flows come back ENGINE_RECLAIM_MS from now */
    egpu_peer_down(e, lp); /* its arena unpinned here once no kernel writes it */
    engine_kick_tick(e);
    link_peer_set_data(lp, NULL);
    epeer_forget(e, p);
}

static void on_peer_up(void *arg, struct link_peer *lp)
{
    peer_up(arg, lp);
}

static void on_peer_down(void *arg, struct link_peer *lp, int err)
{
    peer_down(arg, lp, err);
}

static int read_flow(const void *hdr, size_t hdr_len, uint64_t *ret)
{
    if (hdr_len < ENGINE_ENV_BYTES)
        return -EBADMSG;
    uint64_t le;
    memcpy(&le, hdr, sizeof le);
    *ret = le64toh(le);
    return 0;
}

static int decode_chunk(const void *hdr, size_t hdr_len, uint64_t *flow, struct wire_msg *m)
{
    if (read_flow(hdr, hdr_len, flow) < 0)
        return -EBADMSG;
    int rc = wire_decode((const uint8_t *)hdr + ENGINE_ENV_BYTES, hdr_len - ENGINE_ENV_BYTES, m);
    if (rc == 0 && m->type != WIRE_CHUNK) {
        wire_msg_done(m);
        return -EBADMSG;
    }
    return rc;
}

static int on_rndv(void *arg, struct link_peer *lp, uint16_t type, const void *hdr, size_t hdr_len,
                   size_t len, void **dest)
{
    struct engine *e = arg;
    if (type != WIRE_CHUNK)
        return -ENOBUFS; /* control message: the link allocates */
    uint64_t flow;
    struct wire_msg m;
    if (decode_chunk(hdr, hdr_len, &flow, &m) < 0)
        return -EBADMSG;
    int rc = bland_on_rndv(e, epeer_of(e, lp), flow, &m.u.chunk, len, dest);
    wire_msg_done(&m);
    return rc;
}

/* A decoded control message to its side's handler. True: the handler took m. */
static bool dispatch(struct engine *e, struct epeer *p, uint64_t flow, struct wire_msg *m)
{
    switch (m->type) {
    case WIRE_TABLE_REQ:
        tab_on_table_req(e, p, flow, m);
        break;
    case WIRE_LAYOUT_FORWARD:
        home_on_forward(e, p, m);
        break;
    case WIRE_TABLE:
        tab_on_table(e, p, m);
        break;
    case WIRE_TABLE_NACK:
        tab_on_table_nack(e, p, m);
        break;
    case WIRE_RECV_REQ:
        ctx_on_recv_req(e, p, flow, m); /* takes m */
        return true;
    case WIRE_GRANT:
        ctx_on_grant(e, p, flow, m);
        break;
    case WIRE_WRITER_DONE:
        laycache_answered(&p->lc, flow);
        gen_on_writer_done(e, p, flow, m);
        break;
    case WIRE_NACK: /* our flow: we are its generation side; else its context side */
        e->c.nacks_recv++;
        if (quar_own_flow(e, flow)) /* not an answer for laycache: it may have refused it */
            gen_on_nack(e, p, flow, m);
        else
            ctx_on_nack(e, p, flow, m);
        break;
    case WIRE_READER_NACK: /* a reader of a SEND of ours failed */
        nack_on_reader_nack(e, p, m);
        break;
    case WIRE_CANCEL: /* our flow: its context side drained it; else: stop the flow */
        if (quar_own_flow(e, flow))
            quar_acked(e, p, flow);
        else
            ctx_on_cancel(e, p, flow, m);
        break;
    case WIRE_FENCE: /* a returned peer: our writes into it from before must end */
        fence_on_fence(e, p, m);
        break;
    case WIRE_FENCE_DONE: /* they ended: what we held for it comes back */
        fence_on_done(e, p, m);
        break;
    default:
        break;
    }
    return false;
}

static void on_msg(void *arg, struct link_peer *lp, uint16_t type, const void *hdr, size_t hdr_len,
                   const void *data, size_t len)
{
    struct engine *e = arg;
    struct epeer *p = epeer_of(e, lp);
    uint64_t flow;
    struct wire_msg m;
    if (!p)
        return;
    if (type == WIRE_CHUNK) {
        if (decode_chunk(hdr, hdr_len, &flow, &m) < 0) {
            log_warn("engine: peer %s: malformed CHUNK dropped", link_peer_id(lp));
            return;
        }
        laycache_answered(&p->lc, flow); /* the layout our RECV_REQ carried is held */
        bland_on_chunk(e, p, flow, &m.u.chunk, data, len);
        wire_msg_done(&m);
        goto out;
    }
    if (read_flow(hdr, hdr_len, &flow) < 0 || wire_decode(data, len, &m) < 0) {
        log_warn("engine: peer %s: malformed message (type %u, %zu bytes) dropped",
                 link_peer_id(lp), type, len);
        return;
    }
    if (m.type != type) {
        log_warn("engine: peer %s: message type %u carries a %s: dropped", link_peer_id(lp), type,
                 wire_type_to_string(m.type));
        wire_msg_done(&m);
        return;
    }
    if (!dispatch(e, p, flow, &m))
        wire_msg_done(&m);
out:
    engine_recv_sweep(e);
    ctx_sweep(e);
}

/* ---- arena callbacks: the reservation's data names its owner ---- */

static void arena_grant(struct arena_resv *r, const struct arena_grant *g, uint32_t n, void *user)
{
    (void)user;
    enum resv_kind *k = r->data;
    if (*k == RESV_LANDING)
        gen_on_grant(r->data, g, n);
    else
        bstage_granted(r->data, g);
}

static void arena_timeout(struct arena_resv *r, void *user)
{
    (void)user;
    enum resv_kind *k = r->data;
    if (*k == RESV_LANDING)
        gen_on_timeout(r->data);
    else
        bstage_timeout(r->data);
}

/* ---- life ---- */

/* The link: UCX with the cluster secret, listening when listen.port is set. 0 or -errno with
 * a message; on error e->link is NULL (it closes itself: the loop runs its callbacks). */
static int link_start(struct engine *e, char *err, size_t errlen)
{
    const struct kvf_config *cfg = &e->d->cfg;
    bool listen = cfg->listen_port > 0;
    struct link_config lc = {
        .listen_host = listen ? cfg->listen_address : NULL,
        .listen_port = (uint16_t)cfg->listen_port,
        .secret_path = cfg->cluster_secret_file,
        .tls = cfg->transport_ucx_tls && cfg->transport_ucx_tls[0] ? cfg->transport_ucx_tls : NULL,
        .tcp_put = cfg->transport_tcp_put == 1, /* "true" */
        .gpu_direct_off = cfg->transport_gpu_direct == 0, /* "false" */
        .arena_bytes = cfg->arena_size,
        .arena_prefault = cfg->arena_prefault == 1, /* "thread" */
        .max_payload = WIRE_MSG_MAX > cfg->arena_chunk ? WIRE_MSG_MAX : cfg->arena_chunk,
        .keepalive_interval_ms = (unsigned)cfg->peers_keepalive_interval_ms,
        .keepalive_misses = (unsigned)cfg->peers_keepalive_misses,
        .max_unauth = (unsigned)cfg->peers_unproven_max,
        .max_unauth_per_addr = (unsigned)cfg->peers_unproven_per_address,
        .unauth_timeout_ms = (unsigned)cfg->peers_unproven_timeout_ms,
    };
    struct link_ops ops = {.on_peer_up = on_peer_up,
                           .on_peer_down = on_peer_down,
                           .on_msg = on_msg,
                           .on_rndv = on_rndv,
                           .arg = e};
    int rc = link_new(&e->d->loop, &lc, &ops, &e->link);
    if (rc < 0) {
        snprintf(err, errlen, "link (listen %s:%lld, secret %s): %s", cfg->listen_address,
                 (long long)cfg->listen_port, cfg->cluster_secret_file,
                 rc == -EPERM ? "the secret file must be mode 0600 (no group/other bits)"
                              : strerror(-rc));
        e->link = NULL;
        return rc;
    }
    if (listen)
        snprintf(e->self_addr, sizeof e->self_addr, "%s:%u", cfg->listen_address,
                 link_listen_port(e->link));
    return 0;
}

/* The landing and staging arenas over the link's memory, and the staging holds. A quarter of the
 * slots (at least one) stage outgoing chunks, the rest land incoming ones: a daemon that both
 * sends and receives never waits for a staging slot behind its own landing credits (which wait
 * for the peer, whose staging could wait the same way). 0 or -errno with a message. */
static int arenas_new(struct engine *e, uint64_t *slot_ret, char *err, size_t errlen)
{
    const struct kvf_config *cfg = &e->d->cfg;
    e->arena_base = link_arena(e->link, &e->arena_len);
    uint64_t slot = (cfg->arena_chunk + ARENA_MIN_ALIGN - 1) / ARENA_MIN_ALIGN * ARENA_MIN_ALIGN;
    uint64_t slots = slot ? e->arena_len / slot : 0;
    uint64_t n_stage = slots >= 2 ? (slots / 4 ? slots / 4 : 1) : 0;
    e->stage_off = e->arena_len - n_stage * slot;
    struct arena_params ap = {.size = e->stage_off,
                              .chunk = cfg->arena_chunk,
                              .reserve_timeout_ms = cfg->arena_reserve_timeout_ms,
                              .max_waiters = 65536,
                              .max_credits = ENGINE_MAX_CREDITS,
                              .size_classes = true, /* small requests: small slots */
                              .peer_share_pct = (uint32_t)cfg->arena_peer_share,
                              .on_grant = arena_grant,
                              .on_timeout = arena_timeout,
                              .user = e};
    int rc = e->arena_base ? arena_new(&ap, &e->arena) : -ENOMEM;
    if (rc == 0 && n_stage) {
        ap.size = n_stage * slot;
        rc = arena_new(&ap, &e->stage_arena);
    } else if (rc == 0) { /* one slot in all: landing and staging share it */
        e->stage_arena = NULL;
        e->stage_off = 0;
    }
    if (rc < 0) {
        snprintf(err, errlen, "arena (size %llu, chunk %llu): %s",
                 (unsigned long long)cfg->arena_size, (unsigned long long)cfg->arena_chunk,
                 strerror(-rc));
        return rc;
    }
    uint64_t soff;
    if ((rc = hold_new(engine_stage_arena(e, &soff), &e->shold)) < 0) {
        snprintf(err, errlen, "staging holds: %s", strerror(-rc));
        return rc;
    }
    *slot_ret = slot;
    return 0;
}

/* A failed start before the link: the tick closes here (the caller frees e after the loop ran). */
static int start_failed(struct engine *e, int rc, struct engine **ret)
{
    uv_close((uv_handle_t *)&e->tick, NULL);
    e->tick_inited = false;
    *ret = e;
    return rc;
}

/* The link started late (its interface came up: engine_linkwait.c): the ranks registered while
 * it waited get their pools registered with UCX and their layouts forwarded to their home, as
 * registration does with a link. */
static int link_up_late(struct engine *e, char *err, size_t errlen)
{
    int rc = engine_link_up(e, err, errlen);
    if (rc < 0)
        return rc;
    for (struct reg_instance *in = e->req.reg ? e->req.reg->instances : NULL; in; in = in->next)
        for (uint32_t i = 0; i < in->n_ranks; i++)
            if (in->ranks[i])
                engine_rank_registered(e, in->ranks[i]);
    return 0;
}

const struct engine_drive engine_drivers = {
    .rx_fail = gen_rx_fail,
    .rx_check_done = gen_check_done,
    .rx_ask = gen_ask,
    .rx_sweep = engine_recv_sweep,
    .rx_writes_ended = engine_recv_writes_ended,
    .rx_send_req = gen_send_recv_req,
    .rx_table_ready = gen_table_ready,
    .rxw_set_state = engine_recv_rxw_set_state,
    .tx_fail = ctx_tx_fail,
    .tx_done = ctx_tx_done,
    .tx_sweep = ctx_sweep,
    .tx_table_ready = ctx_table_ready,
    .tx_put_failed = nack_put_failed,
};

int engine_new(struct daemon *d, const struct engine_req *req, struct engine **ret, char *err,
               size_t errlen)
{
    const struct kvf_config *cfg = &d->cfg;
    struct engine *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->d = d;
    e->req = *req;
    e->drive = &engine_drivers;
    int rc = uv_timer_init(&d->loop, &e->tick);
    if (rc < 0) {
        free(e);
        return rc;
    }
    e->tick.data = e;
    e->tick_cb = tick_cb;
    e->tick_inited = true;
    quar_init_flows(e);
    if (!cfg->cluster_secret_file || !cfg->cluster_secret_file[0]) {
        log_warn("engine: cluster.secret_file is unset: inter-daemon traffic is refused "
                 "(single-node use only; RECVs naming a remote home fail NO_ROUTE)");
        e->warned_no_secret = true;
        *ret = e;
        return 0;
    }
    if (cfg->arena_placement == CFG_PLACEMENT_DEVICE) { /* needs a CUDA-aware UCX, device staging */
        snprintf(err, errlen,
                 "arena.placement is device, but this build stages through host "
                 "memory only: set arena.placement to auto or host");
        return start_failed(e, -ENOTSUP, ret);
    }
    /* the arena is memory asked for: checked before UCX allocates it, and what dead daemons
     * left in /dev/shm goes first (memroom.h, shmstale.h) */
    shmstale_clean(NULL, NULL);
    if ((rc = memroom_check(cfg->arena_size, "arena.size", err, errlen)) < 0)
        return start_failed(e, rc, ret);
    *ret = e;
    if (linkwait_start(e, link_up_late)) /* its interface is down: the link starts when it is up */
        return 0;
    rc = engine_link_up(e, err, errlen);
    return rc < 0 && !e->link ? start_failed(e, rc, ret) : rc;
}

int engine_link_up(struct engine *e, char *err, size_t errlen)
{
    int rc = link_start(e, err, errlen);
    if (rc < 0)
        return rc;
    uint64_t slot;
    if ((rc = arenas_new(e, &slot, err, errlen)) < 0)
        return rc;
    egpu_arena_init(e);
    log_info("engine: daemon %s, %s, arena %zu bytes (host, UCX-allocated%s): %u landing and %u "
             "staging slots of %llu",
             link_self_id(e->link), e->self_addr[0] ? e->self_addr : "no listener (outbound only)",
             e->arena_len, e->arena_dev ? ", page-locked for CUDA" : "", arena_slots_total(e->arena),
             e->stage_arena ? arena_slots_total(e->stage_arena) : 0, (unsigned long long)slot);
    return 0;
}

void engine_requests_gone(struct engine *e)
{
    if (e) {
        e->req.t = NULL;
        e->req.reg = NULL;
        e->req.phases = NULL;
    }
}

void engine_stop(struct engine *e)
{
    if (!e || e->stopping)
        return;
    linkwait_stop(e);
    gen_fail_all(e, KVF_E_CANCELLED, "the daemon is stopping");
    ctx_fail_all(e, KVF_E_CANCELLED, "the daemon is stopping");
    egpu_stop_kernels(e); /* waits for the engine's kernels: nothing runs under what follows */
    bh_stop(e);           /* and for its host copies, which read and write arena slots */
    frag_ctx_stop(e);         /* and for the copy threads' writes into generation pools */
    path_local_stop(e);       /* and for the local writers' copies */
    engine_recv_sweep(e);
    ctx_sweep(e);
    egpu_free(e); /* programs freed, the arena unpinned before the link unmaps it */
    e->stopping = true;
    frag_gen_free_all(e);
    bput_free_all(e);
    e->link = link_free(e->link); /* force-closes endpoints; memory freed by its close callbacks */
    quar_pools_stop(e);           /* so no fragment put can land: held requests end */
    engine_recv_sweep(e);
    home_free_all(e);
    tab_free_all(e);
    epeer_free_all(e);
    lost_stop(e);
    if (e->tick_inited && !uv_is_closing((uv_handle_t *)&e->tick))
        uv_close((uv_handle_t *)&e->tick, NULL);
}

struct engine *engine_free(struct engine *e)
{
    if (!e)
        return NULL;
    /* stages whose sends were in flight when the link went: their callbacks ran at link_free */
    while (e->stages) {
        struct stage *st = e->stages;
        e->stages = st->next;
        if (st->own_buf)
            free(st->buf);
        free(st);
    }
    frag_ctx_jobs_free(e);
    quar_free_all(e);
    fence_free_all(e);
    gone_free(e);
    e->arena = arena_free(e->arena);
    e->shold = hold_free(e->shold); /* before its arena */
    e->stage_arena = arena_free(e->stage_arena);
    engine_ix_free(&e->ix);
    dheap_free(&e->rx_due);
    dheap_free(&e->tx_due);
    free(e);
    return NULL;
}

void engine_recv(struct engine *e, struct transfers *t, struct xfer *r, const char *ctx_home)
{
    gen_recv(e, t, r, ctx_home);
    engine_recv_sweep(e);
}

void engine_send(struct engine *e, struct transfers *t, struct xfer *s)
{
    (void)t;
    if (e && e->link) {
        ctx_send_arrived(e, s);
        path_local_send_arrived(e, s);
        engine_recv_sweep(e);
    }
}

void engine_send_end(struct engine *e, struct xfer *s, kvf_error_t err)
{
    if (!e)
        return;
    ctx_xfer_end(e, s, err);
    path_local_send_end(e, s);
}

/* ---- status ---- */

void engine_drain_start(struct daemon *d)
{
    if (d->engine)
        d->engine->draining = true;
}

size_t engine_in_flight(struct daemon *d)
{
    struct engine *e = d->engine;
    size_t n = 0;
    for (struct rx *r = e ? e->rxs : NULL; r; r = r->next)
        n++;
    for (struct tx *t = e ? e->txs : NULL; t; t = t->next)
        n++;
    return n;
}
