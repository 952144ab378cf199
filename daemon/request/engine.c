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
#include "daemon.h"
#include "engine_ctx.h"
#include "engine_frag.h"
#include "engine_gen.h"
#include "engine_gone.h"
#include "engine_fence.h"
#include "engine_lost.h"
#include "engine_gpu.h"
#include "engine_nack.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "engine_share.h"
#include "engine_tab.h"
#include "memroom.h"
#include "shmstale.h"
#include "transfers.h"
#include "workers.h"

uint64_t engine_now(const struct engine *e)
{
    uv_update_time(&e->d->loop); /* fresh: deadlines from the cached time came early */
    return uv_now(&e->d->loop);
}

static bool busy(const struct engine *e)
{
    return e->rxs || e->txs || e->stages || e->host_ops || e->frags || quar_timed(e) ||
           fence_pending(e) || lost_redialing(e) || e->fwds || tab_fetching(e) ||
           gpu_retire_pending(&e->gpu_retired);
}

static void tick_cb(uv_timer_t *h)
{
    struct engine *e = h->data;
    uint64_t now = engine_now(e);
    if (e->arena)
        arena_tick(e->arena, now);
    if (e->stage_arena)
        arena_tick(e->stage_arena, now);
    tab_tick(e, now);
    gen_tick(e, now);
    ctx_tick(e, now);
    quar_tick(e, now);
    fence_tick(e);
    lost_redial(e, now);
    home_tick(e);
    gen_sweep(e);
    ctx_sweep(e);
    egpu_tick(e);
    if (!busy(e))
        uv_timer_stop(&e->tick);
}

uint32_t engine_window(const struct engine *e)
{
    int64_t w = e->d->cfg.arena_window;
    return w < 1 ? 1 : w > (int64_t)ENGINE_MAX_CREDITS ? ENGINE_MAX_CREDITS : (uint32_t)w;
}

void engine_kick_tick(struct engine *e)
{
    if (e->tick_inited && !e->stopping && !uv_is_active((uv_handle_t *)&e->tick))
        uv_timer_start(&e->tick, tick_cb, ENGINE_TICK_MS, ENGINE_TICK_MS);
}

/* ---- link callbacks ---- */

static void on_peer_up(void *arg, struct link_peer *lp)
{
    epeer_up(arg, lp);
}

static void on_peer_down(void *arg, struct link_peer *lp, int err)
{
    epeer_down(arg, lp, err);
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
    int rc = gen_on_rndv(e, epeer_of(e, lp), flow, &m.u.chunk, len, dest);
    wire_msg_done(&m);
    return rc;
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
        gen_on_chunk(e, p, flow, &m.u.chunk, data, len);
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
    switch (m.type) {
    case WIRE_TABLE_REQ:
        tab_on_table_req(e, p, flow, &m);
        break;
    case WIRE_LAYOUT_FORWARD:
        home_on_forward(e, p, &m);
        break;
    case WIRE_TABLE:
        tab_on_table(e, p, &m);
        break;
    case WIRE_TABLE_NACK:
        tab_on_table_nack(e, p, &m);
        break;
    case WIRE_RECV_REQ:
        ctx_on_recv_req(e, p, flow, &m); /* takes m */
        goto out;
    case WIRE_GRANT:
        ctx_on_grant(e, p, flow, &m);
        break;
    case WIRE_WRITER_DONE:
        laycache_answered(&p->lc, flow);
        gen_on_writer_done(e, p, flow, &m);
        break;
    case WIRE_NACK: /* our flow: we are its generation side; else its context side */
        e->c.nacks_recv++;
        if (quar_own_flow(e, flow)) /* not an answer for laycache: it may have refused it */
            gen_on_nack(e, p, flow, &m);
        else
            ctx_on_nack(e, p, flow, &m);
        break;
    case WIRE_READER_NACK: /* a reader of a SEND of ours failed */
        nack_on_reader_nack(e, p, &m);
        break;
    case WIRE_CANCEL: /* our flow: its context side drained it; else: stop the flow */
        if (quar_own_flow(e, flow))
            quar_acked(e, p, flow);
        else
            ctx_on_cancel(e, p, flow, &m);
        break;
    case WIRE_FENCE: /* a returned peer: our writes into it from before must end */
        fence_on_fence(e, p, &m);
        break;
    case WIRE_FENCE_DONE: /* they ended: what we held for it comes back */
        fence_on_done(e, p, &m);
        break;
    default:
        break;
    }
    wire_msg_done(&m);
out:
    gen_sweep(e);
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
        ctx_stage_granted(r->data, g);
}

static void arena_timeout(struct arena_resv *r, void *user)
{
    (void)user;
    enum resv_kind *k = r->data;
    if (*k == RESV_LANDING)
        gen_on_timeout(r->data);
    else
        ctx_stage_timeout(r->data);
}

/* ---- life ---- */

int engine_new(struct daemon *d, struct engine **ret, char *err, size_t errlen)
{
    const struct kvf_config *cfg = &d->cfg;
    struct engine *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->d = d;
    int rc = uv_timer_init(&d->loop, &e->tick);
    if (rc < 0) {
        free(e);
        return rc;
    }
    e->tick.data = e;
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
        uv_close((uv_handle_t *)&e->tick, NULL);
        e->tick_inited = false;
        *ret = e;
        return -ENOTSUP;
    }
    /* the arena is memory asked for: checked before UCX allocates it, and what dead daemons
     * left in /dev/shm goes first (memroom.h, shmstale.h) */
    shmstale_clean(NULL, NULL);
    if ((rc = memroom_check(cfg->arena_size, "arena.size", err, errlen)) < 0) {
        uv_close((uv_handle_t *)&e->tick, NULL);
        e->tick_inited = false;
        *ret = e;
        return rc;
    }
    bool listen = cfg->listen_port > 0;
    struct link_config lc = {
        .listen_host = listen ? cfg->listen_address : NULL,
        .listen_port = (uint16_t)cfg->listen_port,
        .secret_path = cfg->cluster_secret_file,
        .tls = cfg->transport_ucx_tls && cfg->transport_ucx_tls[0] ? cfg->transport_ucx_tls : NULL,
        .tcp_put = cfg->transport_tcp_put == 1, /* "true" */
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
    rc = link_new(&d->loop, &lc, &ops, &e->link);
    if (rc < 0) {
        snprintf(err, errlen, "link (listen %s:%lld, secret %s): %s", cfg->listen_address,
                 (long long)cfg->listen_port, cfg->cluster_secret_file,
                 rc == -EPERM ? "the secret file must be mode 0600 (no group/other bits)"
                              : strerror(-rc));
        e->link = NULL; /* closing itself: the loop runs its close callbacks */
        uv_close((uv_handle_t *)&e->tick, NULL);
        e->tick_inited = false;
        *ret = e;
        return rc;
    }
    if (listen)
        snprintf(e->self_addr, sizeof e->self_addr, "%s:%u", cfg->listen_address,
                 link_listen_port(e->link));
    e->arena_base = link_arena(e->link, &e->arena_len);
    /* A quarter of the slots (at least one) stage outgoing chunks, the rest land incoming ones:
     * a daemon that both sends and receives never waits for a staging slot behind its own
     * landing credits (which wait for the peer, whose staging could wait the same way). */
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
    rc = e->arena_base ? arena_new(&ap, &e->arena) : -ENOMEM;
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
        *ret = e;
        return rc;
    }
    uint64_t soff;
    if ((rc = hold_new(engine_stage_arena(e, &soff), &e->shold)) < 0) {
        snprintf(err, errlen, "staging holds: %s", strerror(-rc));
        *ret = e;
        return rc;
    }
    egpu_arena_init(e);
    log_info("engine: daemon %s, %s, arena %zu bytes (host, UCX-allocated%s): %u landing and %u "
             "staging slots of %llu",
             link_self_id(e->link), e->self_addr[0] ? e->self_addr : "no listener (outbound only)",
             e->arena_len, e->arena_dev ? ", page-locked for CUDA" : "", arena_slots_total(e->arena),
             e->stage_arena ? arena_slots_total(e->stage_arena) : 0, (unsigned long long)slot);
    *ret = e;
    return 0;
}

void engine_stop(struct engine *e)
{
    if (!e || e->stopping)
        return;
    gen_fail_all(e, KVF_E_CANCELLED, "the daemon is stopping");
    ctx_fail_all(e, KVF_E_CANCELLED, "the daemon is stopping");
    egpu_stop_kernels(e); /* waits for the engine's kernels: nothing runs under what follows */
    bh_stop(e);           /* and for its host copies, which read and write arena slots */
    frag_stop(e);         /* and for the copy threads' writes into generation pools */
    gen_sweep(e);
    ctx_sweep(e);
    egpu_free(e); /* programs freed, the arena unpinned before the link unmaps it */
    e->stopping = true;
    frag_free_all(e);
    bput_free_all(e);
    e->link = link_free(e->link); /* force-closes endpoints; memory freed by its close callbacks */
    quar_pools_stop(e);           /* so no fragment put can land: held requests end */
    gen_sweep(e);
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
    frag_jobs_free(e);
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
    gen_sweep(e);
}

void engine_send(struct engine *e, struct transfers *t, struct xfer *s)
{
    (void)t;
    if (e && e->link) {
        ctx_send_arrived(e, s);
        local_send_arrived(e, s);
        gen_sweep(e);
    }
}

int engine_is_self(const struct engine *e, const char *addr)
{
    return e && e->self_addr[0] && strcmp(e->self_addr, addr) == 0;
}

void engine_send_end(struct engine *e, struct xfer *s, kvf_error_t err)
{
    if (e)
        ctx_xfer_end(e, s, err);
}

/* ---- status ---- */

json_t *engine_peers_json(struct daemon *d)
{
    struct engine *e = d->engine;
    json_t *a = json_array();
    for (const struct epeer *p = e ? e->peers : NULL; p; p = p->next)
        json_array_append_new(a, epeer_json(p));
    json_t *o = json_pack("{s:b,s:s,s:s,s:o}", "enabled", e && e->link, "self",
                          e && e->link ? link_self_id(e->link) : "", "listen",
                          e ? e->self_addr : "", "peers", a);
    if (o && e)
        lost_json(e, o); /* "lost": peers lost a moment ago */
    return o;
}

json_t *engine_arena_json(struct daemon *d)
{
    struct engine *e = d->engine;
    if (!e || !e->arena)
        return json_pack("{s:b,s:s}", "enabled", 0, "why",
                         "no arena: cluster.secret_file is unset (single-node use)");
    json_t *o = arena_stats_json(e->arena); /* the landing slots */
    share_json(e, o);
    json_t *so = e->stage_arena ? arena_stats_json(e->stage_arena) : NULL;
    if (so && e->shold) /* what failed peers may still read (arena_hold.h) */
        json_object_set_new(so, "held", hold_stats_json(e->shold));
    if (so)
        json_object_set_new(o, "staging", so);
    json_object_set_new(o, "enabled", json_true());
    egpu_arena_json(e, o); /* placement, pinned_for_gpu, why */
    return o;
}

int engine_peers_status(struct daemon *d, json_t *ret)
{
    json_t *o = engine_peers_json(d);
    if (!o)
        return -ENOMEM;
    json_object_update(ret, o);
    json_decref(o);
    if (d->engine && d->engine->link) {
        json_t *l = json_object();
        link_status(d->engine->link, l);
        json_object_set_new(ret, "link", l);
    }
    return 0;
}

/* A uint64_t field of struct engine_counters by offset; a field of another size fails the build. */
#define COUNTER_OFF(field)                                                                         \
    (offsetof(struct engine_counters, field) +                                                     \
     0 * sizeof(char[sizeof(((struct engine_counters *)0)->field) == 8 ? 1 : -1]))

/* The engine's counters in `stats` (peers section), one row each: name = field. */
#define COUNTER(name) {#name, COUNTER_OFF(name)}
static const struct {
    const char *name;
    size_t off;
} counter_rows[] = {
    COUNTER(remote_recvs),
    COUNTER(layouts_sent),
    COUNTER(layouts_referenced),
    COUNTER(layouts_decoded),
    COUNTER(layouts_missed),
    COUNTER(remote_done),
    COUNTER(remote_failed),
    COUNTER(flows),
    COUNTER(flows_done),
    COUNTER(flows_failed),
    COUNTER(chunks_put),
    COUNTER(chunks_am),
    COUNTER(bytes_put),
    COUNTER(bytes_am),
    COUNTER(chunks_landed),
    COUNTER(bytes_landed),
    COUNTER(staging_fallbacks),
    COUNTER(staging_held),
    COUNTER(msgs_held),
    COUNTER(bound_violations),
    COUNTER(stale_epochs),
    COUNTER(tables_served),
    COUNTER(tables_fetched),
    COUNTER(table_nacks),
    COUNTER(table_retries),
    COUNTER(layouts_forwarded),
    COUNTER(forwards_refused),
    COUNTER(peers_lost),
    COUNTER(nacks_sent),
    COUNTER(nacks_recv),
    COUNTER(slots_reclaimed),
    COUNTER(peers_exited_reclaimed),
    COUNTER(replans),
    COUNTER(bytes_local_writers),
    COUNTER(fragment_puts),
    COUNTER(fragment_cma_writes),
    COUNTER(fragment_copy_jobs),
    COUNTER(bytes_fragment),
    COUNTER(gpu_gathers),
    COUNTER(gpu_scatters),
    COUNTER(bytes_gpu_gathered),
    COUNTER(bytes_gpu_scattered),
    COUNTER(gpu_failures),
    COUNTER(host_gathers),
    COUNTER(host_scatters),
    COUNTER(bytes_host_gathered),
    COUNTER(bytes_host_scattered),
    COUNTER(direct_puts),
    COUNTER(chunk_gpu_to_peer),
    COUNTER(peer_arenas_pinned),
    COUNTER(peer_arenas_unpinned),
    COUNTER(peer_arena_pin_failures),
    COUNTER(reader_nacks_sent),
    COUNTER(reader_nacks_recv),
    COUNTER(reader_nacks_queued),
    COUNTER(reader_nacks_unsent),
    COUNTER(frag_holds),
};
#undef COUNTER

/* Path decisions by reason (stats.peers.paths): the generation side per request, the context
 * side per flow, and per chunk (copied into the peer's slot, put from the pools, or gathered). */
static const struct {
    const char *name;
    size_t off;
} path_counter_rows[] = {
    {"fragment_state_below_min_bytes", COUNTER_OFF(path_fragment_state)},
    {"fragment_kv_below_min_blocks", COUNTER_OFF(path_fragment_kv)},
    {"bounce_state_at_min_bytes", COUNTER_OFF(path_bounce_gate_bytes)},
    {"bounce_kv_at_min_blocks", COUNTER_OFF(path_bounce_gate_blocks)},
    {"bounce_fallback_no_rkeys", COUNTER_OFF(path_bounce_no_rkeys)},
    {"flow_bounce_shm_put", COUNTER_OFF(path_bounce_shm_put)},
    {"flow_bounce_am", COUNTER_OFF(path_bounce_am)},
    {"flow_bounce_cma_write", COUNTER_OFF(path_bounce_cma)},
    {"bounce_gpu_pools", COUNTER_OFF(path_bounce_gpu_pools)},
    {"chunk_copied_to_peer", COUNTER_OFF(chunk_copied_to_peer)},
    {"chunk_cma_to_peer", COUNTER_OFF(chunk_cma_to_peer)},
    {"chunk_put_from_pools", COUNTER_OFF(chunk_put_from_pools)},
    {"chunk_gather_small_runs", COUNTER_OFF(chunk_gather_small_runs)},
    {"chunk_gather_am", COUNTER_OFF(chunk_gather_am)},
    {"chunk_gather_direct_off", COUNTER_OFF(chunk_gather_direct_off)},
    {"chunk_gather_no_registration", COUNTER_OFF(chunk_gather_no_registration)},
};

static json_int_t counter_at(const struct engine_counters *c, size_t off)
{
    return (json_int_t) * (const uint64_t *)((const char *)c + off);
}

int engine_peers_stats(struct daemon *d, json_t *ret)
{
    struct engine *e = d->engine;
    if (!e)
        return 0;
    const struct engine_counters *c = &e->c;
    for (size_t i = 0; i < sizeof counter_rows / sizeof counter_rows[0]; i++)
        json_object_set_new(ret, counter_rows[i].name,
                            json_integer(counter_at(c, counter_rows[i].off)));
    json_object_set_new(ret, "frag_jobs_in_flight", json_integer((json_int_t)frag_jobs_count(e)));
    if (e->link) { /* who the link refused before any handshake (link_admit.c) */
        struct link_stats ls;
        link_get_stats(e->link, &ls);
        json_object_set_new(ret, "link",
                            json_pack("{s:I,s:I,s:I,s:I,s:I,s:I}", "conns_refused_unproven",
                                      (json_int_t)ls.conns_refused_unauth, "conns_refused_address",
                                      (json_int_t)ls.conns_refused_addr, "conns_refused_table",
                                      (json_int_t)ls.conns_refused_table, "handshake_timeouts",
                                      (json_int_t)ls.handshake_timeouts, "unproven_endpoints",
                                      (json_int_t)ls.unproven_endpoints,
                                      "ucx_stale_events_dropped",
                                      (json_int_t)ls.ucx_stale_events_dropped));
    }
    json_object_set_new(ret, "last_remote_wall_us", json_integer((json_int_t)(c->last_wall_ns / 1000)));
    json_object_set_new(ret, "last_remote_bytes", json_integer((json_int_t)c->last_bytes));
    json_t *paths = json_object();
    for (size_t i = 0; i < sizeof path_counter_rows / sizeof path_counter_rows[0]; i++)
        json_object_set_new(paths, path_counter_rows[i].name,
                            json_integer(counter_at(c, path_counter_rows[i].off)));
    json_object_set_new(ret, "paths", paths);
    return 0;
}

void engine_reloaded(struct daemon *d)
{
    struct engine *e = d->engine;
    if (!e)
        return;
    arena_set_reserve_timeout(e->arena, d->cfg.arena_reserve_timeout_ms);
    arena_set_reserve_timeout(e->stage_arena, d->cfg.arena_reserve_timeout_ms);
}

int engine_live(struct daemon *d, json_t *ret)
{
    struct engine *e = d->engine;
    if (!e)
        return 0;
    static const char *const at_use[] = {
        "peers.max_inflight", "arena.window",    "arena.direct_run", "arena.shm_write",
        "arena.cma_write",    "gates.min_bytes", "gates.min_blocks", "deadlines.lookup",
        "deadlines.send_wait", "deadlines.transfer", NULL};
    int r = cfg_values_json(&d->cfg, at_use, ret);
    if (!e->arena) {
        json_object_set_new(ret, "arena.reserve_timeout", json_string("unused: no arena (no link)"));
        return r;
    }
    /* held by the arenas themselves: what they use, landing and staging alike */
    uint64_t land = arena_reserve_timeout(e->arena);
    uint64_t stage = e->stage_arena ? arena_reserve_timeout(e->stage_arena) : land;
    json_object_set_new(ret, "arena.reserve_timeout",
                        land == stage ? json_integer((json_int_t)land)
                                      : json_string("landing and staging arenas differ"));
    return r;
}

int engine_arena_status(struct daemon *d, json_t *ret)
{
    json_t *o = engine_arena_json(d);
    if (!o)
        return -ENOMEM;
    json_object_update(ret, o);
    json_decref(o);
    return 0;
}

int engine_arena_stats(struct daemon *d, json_t *ret)
{
    return engine_arena_status(d, ret);
}

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
