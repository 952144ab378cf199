/* link.c: the link's UCP context and worker, progressed from libuv, the listener, deferred work,
 * teardown and the status section. See link.h for the contract. Loop thread only.
 *
 * Progress (docs/UCX.md traps 3 and 10): on a worker event, progress until idle, run the work
 * that callbacks deferred, then arm; UCS_ERR_BUSY means progress again. What the callbacks sent
 * or deferred in a pass is progressed by the same pass (a kick inside it starts no timer, so one
 * message in and one out cost one pass and one arm); a pass whose callbacks keep sending yields
 * to the loop after LINK_MAX_ROUNDS rounds and goes on at once. After LINK_ROUNDS busy arms the
 * uv_poll is stopped and the next pass comes from a timer: at once for LINK_BUSY_QUICK passes,
 * then every 1 ms until arm succeeds, so a wedged shared-memory peer can never freeze the loop.
 * UCX callbacks only record work; it runs here, outside progress. */
#include "link_int.h"

#include "log.h"

#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <ucs/memory/memory_type.h>

#define LINK_ROUNDS 8      /* arms that say busy before a pass gives the loop its turn */
#define LINK_MAX_ROUNDS 64 /* progress rounds in one pass, busy or sending */
#define LINK_SPINS 1024
#define LINK_TICK_MS 100

static void link_run_pending(struct link *l)
{
    struct link_pending *w;
    while ((w = l->pending_head)) {
        l->pending_head = w->next;
        if (!l->pending_head)
            l->pending_tail = NULL;
        if (w->kind == PEND_DONE) {
            w->cb(w->arg, w->status);
        } else if (w->kind == PEND_CONN) {
            /* refused (over a cap of link_admit.c, out of memory): rejected, which UCX 1.13
             * survives only with link_ucsfix.c (docs/UCX.md trap 18) */
            if (link_peer_accept(l, w->conn) < 0 && l->listener)
                ucp_listener_reject(l->listener, w->conn);
        } else {
            if (l->freeing || w->peer->state != LINK_PEER_READY) {
                ucp_am_data_release(l->worker, w->desc);
                link_order_landed(w->peer, w->ord, NULL, 0); /* counted dropped there */
            } else {
                link_msg_start_rndv(l, w->peer, w->type, w->hdr, w->hdr_len, w->desc, w->len,
                                    w->ord);
            }
            link_peer_unref(w->peer);
        }
        free(w);
    }
}

/* A peer is freed: its early messages and its reorder queue go (link_peer.c calls this through
 * l->peer_freed, being below the message layer). */
static void peer_freed(struct link_peer *p)
{
    link_msg_drop_early(p);
    link_order_free(p);
}

static void link_busy_cb(uv_timer_t *t);
static void link_progress(struct link *l);
static void link_poll_cb(uv_poll_t *h, int status, int events);

static void link_progress(struct link *l)
{
    l->st.progress_passes++;
    l->in_pass = 1;
    int busy = 0;
    for (int round = 0; round < LINK_MAX_ROUNDS && busy < LINK_ROUNDS; round++) {
        l->kicked = 0;
        l->in_progress = 1;
        for (unsigned n = 0; n < LINK_SPINS && ucp_worker_progress(l->worker); n++)
            l->st.progress_busy++;
        l->st.progress_calls++;
        l->in_progress = 0;
        link_run_pending(l);
        link_peer_reap(l);
        if (l->pending_head || l->kicked) /* what a callback sent is progressed in this pass */
            continue;
        ucs_status_t s = ucp_worker_arm(l->worker);
        l->st.arms++;
        if (s == UCS_OK) {
            l->in_pass = 0;
            l->busy_passes = 0;
            if (l->busy_mode) {
                l->busy_mode = 0;
                uv_timer_stop(&l->busy_timer);
                uv_poll_start(&l->poll, UV_READABLE, link_poll_cb);
            }
            return;
        }
        if (s != UCS_ERR_BUSY)
            log_warn("link: ucp_worker_arm: %s", ucs_status_string(s));
        busy++;
    }
    l->in_pass = 0;
    if (busy < LINK_ROUNDS) { /* out of rounds while callbacks kept sending: the loop's turn */
        if (!uv_is_active((uv_handle_t *)&l->busy_timer))
            uv_timer_start(&l->busy_timer, link_busy_cb, 0, 0);
        return;
    }
    if (!l->busy_mode) {
        l->busy_mode = 1;
        l->st.progress_busy_fallbacks++;
        uv_poll_stop(&l->poll);
    }
    /* A busy spell is usually over within a loop turn: the next pass comes at once, after the
     * loop ran what else was due. Only a peer that keeps arm busy (a killed shared-memory one:
     * trap 3) is progressed every 1 ms, so it never spins the loop. */
    uv_timer_start(&l->busy_timer, link_busy_cb, ++l->busy_passes <= LINK_BUSY_QUICK ? 0 : 1, 0);
}

static void link_busy_cb(uv_timer_t *t)
{
    link_progress(t->data);
}

static void link_poll_cb(uv_poll_t *h, int status, int events)
{
    (void)events;
    struct link *l = h->data;
    l->st.wakeups++;
    if (status < 0)
        log_warn("link: poll on the UCX event fd: %s", uv_strerror(status));
    link_progress(l);
}

static void link_tick_cb(uv_timer_t *t)
{
    struct link *l = t->data;
    link_peers_check_deadlines(l, uv_now(l->loop));
    link_alive_check(l, uv_now(l->loop));
    link_kick(l);
}

static void link_conn_cb(ucp_conn_request_h req, void *arg)
{
    link_defer_conn(arg, req);
}

static int link_listen(struct link *l)
{
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV}, *ai = NULL;
    char port[8];
    snprintf(port, sizeof(port), "%u", l->cfg.listen_port);
    int rc = getaddrinfo(l->cfg.listen_host, port, &hints, &ai);
    if (rc != 0) {
        log_error("link: listen address %s: %s", l->cfg.listen_host, gai_strerror(rc));
        return -EINVAL;
    }
    ucp_listener_params_t lp = {
        .field_mask = UCP_LISTENER_PARAM_FIELD_SOCK_ADDR | UCP_LISTENER_PARAM_FIELD_CONN_HANDLER,
        .sockaddr = {.addr = ai->ai_addr, .addrlen = ai->ai_addrlen},
        .conn_handler = {.cb = link_conn_cb, .arg = l},
    };
    ucs_status_t s = ucp_listener_create(l->worker, &lp, &l->listener);
    freeaddrinfo(ai);
    if (s != UCS_OK) {
        log_error("link: listen on %s:%u: %s", l->cfg.listen_host, l->cfg.listen_port,
                  ucs_status_string(s));
        return link_err_from_ucs(s);
    }
    ucp_listener_attr_t la = {.field_mask = UCP_LISTENER_ATTR_FIELD_SOCKADDR};
    s = ucp_listener_query(l->listener, &la);
    if (s != UCS_OK)
        return link_err_from_ucs(s);
    const struct sockaddr *sa = (const struct sockaddr *)&la.sockaddr;
    l->port = sa->sa_family == AF_INET6 ? ntohs(((const struct sockaddr_in6 *)sa)->sin6_port)
                                        : ntohs(((const struct sockaddr_in *)sa)->sin_port);
    log_info("link: listening on %s:%u", l->cfg.listen_host, l->port);
    return 0;
}

/* Whether a UCX_TLS value (NULL: UCX's choice) can leave cma in ("sm"/"shm" include it). */
static int tls_may_have_cma(const char *tls)
{
    if (!tls)
        return 1;
    if (tls[0] == '^')
        return !strstr(tls, "cma");
    return strstr(tls, "cma") || strstr(tls, "sm") || strstr(tls, "all");
}

static int link_ucx_init(struct link *l)
{
    /* Trap 4: only honoured from the environment, before ucp_init. */
    setenv("UCX_TCP_CM_REUSEADDR", "y", 0);
    ucp_config_t *uc;
    ucs_status_t s = ucp_config_read(NULL, NULL, &uc);
    if (s != UCS_OK)
        return link_err_from_ucs(s);
    const char *tls = l->cfg.tls ? l->cfg.tls : (l->cfg.no_shm ? "^sysv,posix" : NULL);
    /* trap 1: PEER error handling drops sysv/posix unless MM_ERROR_HANDLING (UCX warns about
     * the key when no mm transport is left, so set it only when one can be) */
    if (!tls || (!l->cfg.no_shm && (tls[0] == '^' || strstr(tls, "sysv") || strstr(tls, "posix") ||
                                    strstr(tls, "sm") || strstr(tls, "all"))))
        ucp_config_modify(uc, "MM_ERROR_HANDLING", "y");
    /* trap 12: under PEER error handling UCX 1.13 selects cma for rendezvous only when the cma
     * transport claims memory invalidation. UCX does not really invalidate anything: the engine
     * keeps a failed chunk's memory until the peer cannot read it (daemon/arena/arena_hold.h,
     * docs/UCX.md "cma under peer error handling"). It is a key of cma's memory domain, which
     * ucp_config_modify matches without the component's prefix: "CMA_MEMORY_INVALIDATE" is
     * ignored ("invalid configuration" at worker creation), "MEMORY_INVALIDATE" takes. An
     * explicit UCX_CMA_MEMORY_INVALIDATE in the environment wins (the A/B benchmark sets n). */
    if (!getenv("UCX_CMA_MEMORY_INVALIDATE") && tls_may_have_cma(tls ? tls : getenv("UCX_TLS")) &&
        ucp_config_modify(uc, "MEMORY_INVALIDATE", "y") == UCS_OK)
        l->cma_invalidate = 1;
    /* trap 16: UCX 1.13.1's tcp aborts the process (tcp_ep.c:939) when a put's ACK is parsed
     * after a failed send marked the endpoint disconnected in the same receive batch: a peer
     * that drops us while we are frozen, or dies, can kill us. Without tcp put zcopy the
     * rendezvous over tcp moves the data as active messages and no rendezvous put waits for an
     * ACK (proven in docs/UCX.md). transport.tcp_put: true trades that for speed; an explicit
     * UCX_TCP_PUT_ENABLE wins (the A/B benchmark). */
    const char *put_env = getenv("UCX_TCP_PUT_ENABLE");
    if (put_env) /* what UCX reads as yes */
        l->tcp_put_off = !(strchr("yY1", put_env[0]) && put_env[0]) &&
                         strcasecmp(put_env, "on") && strcasecmp(put_env, "true");
    else if (!l->cfg.tcp_put && ucp_config_modify(uc, "PUT_ENABLE", "n") == UCS_OK)
        l->tcp_put_off = 1;
    snprintf(l->tls_desc, sizeof(l->tls_desc), "%s", tls ? tls : "all");
    if (tls && (s = ucp_config_modify(uc, "TLS", tls)) != UCS_OK) {
        log_error("link: transports \"%s\": %s", tls, ucs_status_string(s));
        ucp_config_release(uc);
        return -EINVAL;
    }
    ucp_params_t pp = {
        .field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED,
        .features = UCP_FEATURE_AM | UCP_FEATURE_RMA | UCP_FEATURE_WAKEUP,
        .mt_workers_shared = 0,
    };
    s = ucp_init(&pp, uc, &l->ctx);
    ucp_config_release(uc);
    if (s != UCS_OK) {
        log_error("link: ucp_init: %s", ucs_status_string(s));
        return link_err_from_ucs(s);
    }
    link_cuda_init(l);
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    if ((s = ucp_worker_create(l->ctx, &wp, &l->worker)) != UCS_OK ||
        (s = ucp_worker_get_efd(l->worker, &l->efd)) != UCS_OK) {
        log_error("link: ucp worker: %s", ucs_status_string(s));
        return link_err_from_ucs(s);
    }
    ucp_am_handler_param_t hp = {
        .field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID | UCP_AM_HANDLER_PARAM_FIELD_CB |
                      UCP_AM_HANDLER_PARAM_FIELD_ARG | UCP_AM_HANDLER_PARAM_FIELD_FLAGS,
        .id = LINK_AM_HS, .cb = link_hs_am_cb, .arg = l, .flags = UCP_AM_FLAG_WHOLE_MSG,
    };
    if ((s = ucp_worker_set_am_recv_handler(l->worker, &hp)) != UCS_OK)
        return link_err_from_ucs(s);
    hp.id = LINK_AM_USER;
    hp.cb = link_msg_am_cb;
    if ((s = ucp_worker_set_am_recv_handler(l->worker, &hp)) != UCS_OK)
        return link_err_from_ucs(s);
    hp.id = LINK_AM_ALIVE;
    hp.cb = link_alive_am_cb;
    if ((s = ucp_worker_set_am_recv_handler(l->worker, &hp)) != UCS_OK)
        return link_err_from_ucs(s);
    return 0;
}

static void link_handle_closed(uv_handle_t *h)
{
    struct link *l = h->data;
    if (--l->handles_open == 0) {
        sodium_memzero(l->secret, sizeof(l->secret));
        free(l);
    }
}

int link_new(uv_loop_t *loop, const struct link_config *cfg, const struct link_ops *ops,
             struct link **ret)
{
    if (!loop || !cfg || !ops || !cfg->secret_path)
        return -EINVAL;
    if (sodium_init() < 0)
        return -EIO;
    struct link *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->loop = loop;
    l->cfg = *cfg;
    l->ops = *ops;
    l->efd = -1;
    if (!l->cfg.max_payload)
        l->cfg.max_payload = (size_t)1 << 30;
    if (!l->cfg.max_behind)
        l->cfg.max_behind = LINK_MAX_BEHIND;
    if (!l->cfg.max_peers)
        l->cfg.max_peers = 256;
    if (!l->cfg.handshake_timeout_ms)
        l->cfg.handshake_timeout_ms = 5000;
    if (!l->cfg.max_unauth)
        l->cfg.max_unauth = 32;
    if (!l->cfg.max_unauth_per_addr)
        l->cfg.max_unauth_per_addr = 4;
    if (!l->cfg.unauth_timeout_ms)
        l->cfg.unauth_timeout_ms = 2000;
    if (!l->cfg.keepalive_interval_ms)
        l->cfg.keepalive_interval_ms = 1000;
    if (!l->cfg.keepalive_misses)
        l->cfg.keepalive_misses = 5;
    if (l->cfg.keepalive_misses < 3)
        l->cfg.keepalive_misses = 3; /* suspect (2 intervals) comes before lost */
    if (!l->cfg.proto_version)
        l->cfg.proto_version = LINK_PROTO_VERSION;
    uv_timer_init(loop, &l->busy_timer);
    l->busy_cb = link_busy_cb;
    l->hs_start = link_hs_start;
    l->peer_freed = peer_freed;
    uv_timer_init(loop, &l->tick);
    l->busy_timer.data = l->tick.data = l->poll.data = l;
    l->handles_open = 2;
    int rc = link_secret_load(l, cfg->secret_path);
    if (rc < 0)
        goto err_free;
    link_id_init(l);
    link_proc_init(l);
    if ((rc = link_ucx_init(l)) < 0 || (rc = link_arena_init(l)) < 0)
        goto err_free;
    if ((rc = uv_poll_init(loop, &l->poll, l->efd)) < 0)
        goto err_free;
    l->handles_open++;
    if (cfg->listen_host && (rc = link_listen(l)) < 0)
        goto err_free;
    if (cfg->listen_host && !link_ucsfix_active()) /* a UCX built another way: say so */
        log_warn("link: UCX's stale async events are not filtered (its handlers did not register "
                 "through link_ucsfix.c): a flood at the listen port may abort the daemon "
                 "(docs/UCX.md trap 18)");
    uv_poll_start(&l->poll, UV_READABLE, link_poll_cb);
    /* at least two checks per keepalive interval */
    uint64_t tick = l->cfg.keepalive_interval_ms / 2 < LINK_TICK_MS ? l->cfg.keepalive_interval_ms / 2
                                                                    : LINK_TICK_MS;
    tick = tick ? tick : 1;
    l->alive_tick_ms = tick;
    uv_timer_start(&l->tick, link_tick_cb, tick, tick);
    uv_unref((uv_handle_t *)&l->tick);
    link_kick(l);
    log_info("link: %s up, UCX %s, transports %s, arena %zu bytes", l->self_id,
             ucp_get_version_string(), l->tls_desc, l->arena_len);
    *ret = l;
    return 0;
err_free:
    link_free(l);
    return rc;
}

struct link *link_free(struct link *l)
{
    if (!l)
        return NULL;
    l->freeing = 1;
    if (l->listener)
        ucp_listener_destroy(l->listener);
    l->listener = NULL;
    if (l->worker) {
        /* Force-close every endpoint and progress until the closes complete (bounded). */
        for (struct link_peer *p = l->peers; p; p = p->next) {
            p->down_reported = 1; /* no callbacks into a user that is tearing down */
            if (p->state != LINK_PEER_FAILED && p->state != LINK_PEER_CLOSED)
                link_peer_set_state(p, LINK_PEER_FAILED);
        }
        for (unsigned i = 0; i < 100000 && (l->peers || l->pending_head); i++) {
            link_run_pending(l);
            link_peer_reap(l);
            ucp_worker_progress(l->worker);
        }
        if (l->peers)
            log_warn("link: %u endpoints did not finish closing", l->npeers);
    }
    link_arena_done(l);
    link_cuda_done(l);
    if (l->worker)
        ucp_worker_destroy(l->worker);
    if (l->ctx)
        ucp_cleanup(l->ctx);
    l->worker = NULL;
    l->ctx = NULL;
    uv_handle_t *hs[] = {(uv_handle_t *)&l->busy_timer, (uv_handle_t *)&l->tick,
                         (uv_handle_t *)&l->poll};
    int n = l->handles_open;
    for (int i = 0; i < n; i++)
        uv_close(hs[i], link_handle_closed);
    return NULL;
}

uint16_t link_listen_port(const struct link *l)
{
    return l->port;
}

const char *link_self_id(const struct link *l)
{
    return l->self_id;
}

void link_get_stats(const struct link *l, struct link_stats *ret)
{
    *ret = l->st;
    ret->unproven_endpoints = l->n_unauth;
    ret->ucx_stale_events_dropped = link_ucsfix_dropped();
}

/* Transports the context offers, from ucp_context_print_info ("... flags -- tcp/lo"). */
static json_t *link_transports_json(const struct link *l)
{
    json_t *a = json_array();
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return a;
    ucp_context_print_info(l->ctx, f);
    fclose(f);
    for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strstr(line, "resource"))
            continue;
        char *last = strrchr(line, ' ');
        if (!last || !strchr(last, '/'))
            continue;
        const char *tl = last + 1;
        size_t i, n = json_array_size(a);
        for (i = 0; i < n; i++)
            if (!strcmp(json_string_value(json_array_get(a, i)), tl))
                break;
        if (i == n)
            json_array_append_new(a, json_string(tl));
    }
    free(buf);
    return a;
}

int link_status(const struct link *l, json_t *out)
{
    json_t *o = json_object(), *peers = json_array(), *mt = json_array();
    if (!o || !peers || !mt) {
        json_decref(o);
        json_decref(peers);
        json_decref(mt);
        return -ENOMEM;
    }
    ucp_context_attr_t ca = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    if (ucp_context_query(l->ctx, &ca) == UCS_OK)
        for (int t = 0; t < UCS_MEMORY_TYPE_LAST; t++)
            if (ca.memory_types & UCS_BIT(t))
                json_array_append_new(mt, json_string(ucs_memory_type_names[t]));
    for (const struct link_peer *p = l->peers; p; p = p->next) {
        json_array_append_new(
            peers, json_pack("{s:I,s:s,s:s,s:s,s:b,s:b,s:s,s:I,s:I,s:I,s:I,s:I,s:I}", "serial",
                             (json_int_t)p->serial, "address", p->addr, "id", p->remote_id,
                             "state", link_peer_state_to_string(p->state), "outbound",
                             p->outbound, "put_fast", p->put_fast, "put_lanes", p->lanes,
                             "arena_bytes", (json_int_t)p->arena_len, "msgs_sent",
                             (json_int_t)p->msgs_sent, "msgs_recv", (json_int_t)p->msgs_recv,
                             "bytes_sent", (json_int_t)p->bytes_sent, "bytes_recv",
                             (json_int_t)p->bytes_recv, "bytes_put", (json_int_t)p->bytes_put));
        json_t *last = json_array_get(peers, json_array_size(peers) - 1);
        json_object_set_new(last, "lanes", json_string(p->tl_all));
        json_object_set_new(last, "rndv_lanes", json_string(p->rma_bw));
        json_object_set_new(last, "direct_mem", json_boolean(p->direct_mem));
        json_object_set_new(last, "cma_write", json_boolean(p->cma_write > 0));
        json_object_set_new(last, "suspect", json_boolean(link_peer_suspect(p)));
        json_object_set_new(last, "silent_ms", json_integer((json_int_t)link_peer_silent_ms(p)));
        link_cuda_peer_status(p, last);
    }
    const struct link_stats *s = &l->st;
    json_object_set_new(o, "ucx_version", json_string(ucp_get_version_string()));
    json_object_set_new(o, "id", json_string(l->self_id));
    json_object_set_new(o, "transports_setting", json_string(l->tls_desc));
    json_object_set_new(o, "transports", link_transports_json(l));
    json_object_set_new(o, "cma_memory_invalidate", json_boolean(l->cma_invalidate));
    json_object_set_new(o, "tcp_put", json_boolean(!l->tcp_put_off));
    json_object_set_new(o, "memory_types", mt);
    link_cuda_status(l, o);
    json_object_set_new(o, "listen_host", l->cfg.listen_host ? json_string(l->cfg.listen_host)
                                                             : json_null());
    json_object_set_new(o, "listen_port", json_integer(l->port));
    json_object_set_new(o, "arena_bytes", json_integer((json_int_t)l->arena_len));
    json_object_set_new(o, "ops_in_flight", json_integer(l->inflight));
    json_object_set_new(o, "peers", peers);
    link_admit_status(l, o);
    json_object_set_new(
        o, "counters",
        json_pack("{s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}",
                  "msgs_sent",
                  (json_int_t)s->msgs_sent, "msgs_recv", (json_int_t)s->msgs_recv, "bytes_sent",
                  (json_int_t)s->bytes_sent, "bytes_recv", (json_int_t)s->bytes_recv, "puts",
                  (json_int_t)s->puts, "bytes_put", (json_int_t)s->bytes_put,
                  "handshakes_refused", (json_int_t)s->refused, "msgs_dropped",
                  (json_int_t)s->dropped, "peers_failed", (json_int_t)s->peers_failed,
                  "progress_busy_fallbacks", (json_int_t)s->progress_busy_fallbacks,
                  "peers_lost_keepalive", (json_int_t)s->peers_lost_keepalive, "cma_writes",
                  (json_int_t)s->cma_writes, "wakeups", (json_int_t)s->wakeups,
                  "progress_passes", (json_int_t)s->progress_passes, "progress_calls",
                  (json_int_t)s->progress_calls, "progress_busy", (json_int_t)s->progress_busy,
                  "arms", (json_int_t)s->arms));
    json_t *admit = json_pack("{s:I,s:I,s:I,s:I}", /* link_admit.c */
                              "conns_refused_unproven", (json_int_t)s->conns_refused_unauth,
                              "conns_refused_address", (json_int_t)s->conns_refused_addr,
                              "conns_refused_table", (json_int_t)s->conns_refused_table,
                              "handshake_timeouts", (json_int_t)s->handshake_timeouts);
    json_object_update(json_object_get(o, "counters"), admit);
    json_decref(admit);
    json_t *gd = json_pack("{s:I,s:I,s:I,s:I}", /* link_cuda.c */
                           "peers_gpu_direct", (json_int_t)s->peers_gpu_direct,
                           "peers_host_staged_local_ucx", (json_int_t)s->peers_host_staged_local,
                           "peers_host_staged_peer_ucx", (json_int_t)s->peers_host_staged_peer,
                           "peers_host_staged_off", (json_int_t)s->peers_host_staged_off);
    json_object_update(json_object_get(o, "counters"), gd);
    json_decref(gd);
    return json_object_set_new(out, "link", o) == 0 ? 0 : -ENOMEM;
}
