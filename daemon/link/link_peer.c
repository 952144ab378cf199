/* link_peer.c: one struct link_peer per UCP endpoint: creation by "host:port" or from the
 * listener, the state machine, failure reporting and close. Loop thread only.
 *
 * Failure inside a UCX callback (the endpoint error handler, a refused handshake) only marks the
 * peer FAILED; link_peer_reap, run after progress, reports on_peer_down and force-closes the
 * endpoint. The peer is freed only when the close has completed and no rendezvous receive holds
 * it (trap 9: request callbacks and the error handler can arrive until then). */
#include "link_int.h"

#include "log.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const state_names[] = {"connecting", "handshaking", "ready", "failed", "closed"};

/* allowed[from] is a bit set of the states `from` may move to */
static const unsigned allowed[] = {
    [LINK_PEER_CONNECTING] = 1u << LINK_PEER_HANDSHAKING | 1u << LINK_PEER_FAILED,
    [LINK_PEER_HANDSHAKING] = 1u << LINK_PEER_READY | 1u << LINK_PEER_FAILED,
    [LINK_PEER_READY] = 1u << LINK_PEER_FAILED,
    [LINK_PEER_FAILED] = 1u << LINK_PEER_CLOSED,
    [LINK_PEER_CLOSED] = 0,
};

const char *link_peer_state_to_string(link_peer_state_t s)
{
    return (unsigned)s < sizeof(state_names) / sizeof(state_names[0]) ? state_names[s] : "?";
}

void link_peer_set_state(struct link_peer *p, link_peer_state_t s)
{
    if (!(allowed[p->state] & (1u << s))) {
        log_warn("link peer %llu (%s): refused edge %s -> %s", (unsigned long long)p->serial,
                 p->addr, state_names[p->state], state_names[s]);
        return;
    }
    log_debug("link peer %llu (%s): %s -> %s", (unsigned long long)p->serial, p->addr,
              state_names[p->state], state_names[s]);
    p->state = s;
}

link_peer_state_t link_peer_state(const struct link_peer *p)
{
    return p->state;
}

const char *link_peer_id(const struct link_peer *p)
{
    return p->remote_id;
}

int link_peer_same_host(const struct link_peer *p)
{
    return p->remote_host[0] && !strcmp(p->remote_host, p->link->host);
}

int link_peer_put_fast(struct link_peer *p)
{
    /* Lanes change when the client-server wireup finishes, after READY: look again until fast. */
    if (!p->put_fast && p->state == LINK_PEER_READY)
        link_peer_detect_lanes(p);
    return p->put_fast;
}

int link_peer_direct_mem(struct link_peer *p)
{
    link_peer_put_fast(p); /* the lanes, looked at again while they may still change */
    return p->direct_mem;
}

size_t link_peer_arena_bytes(const struct link_peer *p)
{
    return p->arena_len;
}

void link_peer_set_data(struct link_peer *p, void *data)
{
    p->user_data = data;
}

void *link_peer_data(const struct link_peer *p)
{
    return p->user_data;
}

void link_peer_fail(struct link_peer *p, int err)
{
    if (p->state == LINK_PEER_FAILED || p->state == LINK_PEER_CLOSED)
        return;
    if (p->refused)
        err = -EPERM; /* the endpoint ends because the handshake refused it, whatever UCX says */
    p->fail_err = err;
    if (err != -ECANCELED)
        p->link->st.peers_failed++;
    /* not yet proven: strangers may come by the hundred, their failures and deadlines are
     * logged once a second (link_admit.c, link_peers_check_deadlines) */
    if (err != -ECANCELED && !p->unauth) {
        log_req(LOG_LVL_WARN, 0, *p->addr ? p->addr : p->remote_id, NULL,
                "link peer %llu (%s %s): failed in state %s: %s", (unsigned long long)p->serial,
                p->addr, p->remote_id, state_names[p->state], strerror(-err));
    }
    link_peer_set_state(p, LINK_PEER_FAILED);
    link_kick(p->link);
}

void link_peer_close(struct link_peer *p)
{
    link_peer_fail(p, -ECANCELED);
}

static void link_ep_err_cb(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    (void)ep;
    link_peer_fail(arg, link_err_from_ucs(status));
}

static void link_ep_closed_cb(void *req, ucs_status_t status, void *arg)
{
    (void)status;
    struct link_peer *p = arg;
    ucp_request_free(req);
    p->ep = NULL;
    link_peer_set_state(p, LINK_PEER_CLOSED);
    link_kick(p->link);
}

static void link_peer_start_close(struct link_peer *p)
{
    p->close_started = 1;
    if (!p->ep) {
        link_peer_set_state(p, LINK_PEER_CLOSED);
        return;
    }
    /* Graceful (flush) close only for a user close of a healthy endpoint; else force. */
    int graceful = p->fail_err == -ECANCELED && !p->link->freeing;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        (graceful ? 0 : UCP_OP_ATTR_FIELD_FLAGS),
        .cb.send = link_ep_closed_cb,
        .user_data = p,
        .flags = graceful ? 0 : UCP_EP_CLOSE_FLAG_FORCE,
    };
    ucs_status_ptr_t r = ucp_ep_close_nbx(p->ep, &rp);
    if (UCS_PTR_IS_PTR(r))
        return;
    p->ep = NULL;
    link_peer_set_state(p, LINK_PEER_CLOSED);
}

static struct link_peer *link_peer_free(struct link_peer *p)
{
    if (!p)
        return NULL;
    link_admit_release(p);
    p->link->peer_freed(p);
    link_proc_close(p);
    if (p->arena_rkey)
        ucp_rkey_destroy(p->arena_rkey);
    sodium_memzero(p, sizeof(*p));
    free(p);
    return NULL;
}

void link_peer_unref(struct link_peer *p)
{
    p->refs--;
    if (!p->refs && p->state == LINK_PEER_CLOSED)
        link_kick(p->link);
}

void link_peer_reap(struct link *l)
{
    /* Pass 1 runs user callbacks, which may add peers (at the head) but never unlink one, so a
     * forward walk stays valid. Pass 2 unlinks and runs no callbacks. */
    for (struct link_peer *p = l->peers; p; p = p->next) {
        if (p->state == LINK_PEER_FAILED && p->announced && !p->down_reported) {
            p->down_reported = 1;
            if (l->ops.on_peer_down)
                l->ops.on_peer_down(l->ops.arg, p, p->fail_err);
        }
        if (p->state == LINK_PEER_FAILED && !p->close_started)
            link_peer_start_close(p);
    }
    struct link_peer **pp = &l->peers;
    while (*pp) {
        struct link_peer *p = *pp;
        if (p->state == LINK_PEER_CLOSED && p->refs == 0) {
            *pp = p->next;
            l->npeers--;
            link_peer_free(p);
            continue;
        }
        pp = &p->next;
    }
}

void link_peers_check_deadlines(struct link *l, uint64_t now_ms)
{
    unsigned unproven = 0;
    const char *unproven_addr = NULL;
    for (struct link_peer *p = l->peers; p; p = p->next)
        if ((p->state == LINK_PEER_CONNECTING || p->state == LINK_PEER_HANDSHAKING) &&
            now_ms > p->deadline_ms) {
            l->st.handshake_timeouts++;
            if (p->unauth) { /* strangers may come by the hundred: one line a tick */
                unproven++;
                unproven_addr = unproven_addr ? unproven_addr : p->addr;
                link_peer_fail(p, -ETIMEDOUT);
                continue;
            }
            log_warn("link peer %llu (%s): handshake not done in %u ms",
                     (unsigned long long)p->serial, p->addr, l->cfg.handshake_timeout_ms);
            link_peer_fail(p, -ETIMEDOUT);
        } else if (p->state == LINK_PEER_READY && !p->put_fast && p->lane_checks < 50) {
            p->lane_checks++; /* wireup may still be moving to shared memory lanes */
            link_peer_detect_lanes(p);
        }
    if (unproven)
        log_warn("link: %u endpoint(s) (first from %s) closed: the cluster secret not proven in "
                 "%u ms", unproven, unproven_addr, l->cfg.unauth_timeout_ms);
}

struct link_peer *link_peer_by_ep(struct link *l, ucp_ep_h ep)
{
    for (struct link_peer *p = l->peers; p; p = p->next)
        if (p->ep == ep && ep)
            return p;
    return NULL;
}

static struct link_peer *link_peer_new(struct link *l, const char *addr, int outbound)
{
    struct link_peer *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->link = l;
    p->serial = ++l->next_serial;
    p->outbound = outbound;
    p->announced = outbound;
    p->pidfd = -1;
    snprintf(p->addr, sizeof(p->addr), "%s", addr);
    p->deadline_ms = uv_now(l->loop) + (outbound ? l->cfg.handshake_timeout_ms
                                                 : l->cfg.unauth_timeout_ms);
    p->state = outbound ? LINK_PEER_CONNECTING : LINK_PEER_HANDSHAKING;
    p->next = l->peers;
    l->peers = p;
    l->npeers++;
    return p;
}

static void link_sockaddr_str(const struct sockaddr *sa, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    unsigned port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
        port = ntohs(in->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
        port = ntohs(in6->sin6_port);
    }
    snprintf(buf, len, "%s:%u", host, port);
}

int link_peer_accept(struct link *l, ucp_conn_request_h req)
{
    char addr[128] = "?";
    ucp_conn_request_attr_t ca = {.field_mask = UCP_CONN_REQUEST_ATTR_FIELD_CLIENT_ADDR};
    if (ucp_conn_request_query(req, &ca) == UCS_OK)
        link_sockaddr_str((const struct sockaddr *)&ca.client_address, addr, sizeof(addr));
    if (l->freeing || link_admit_inbound(l, addr) < 0)
        return -EBUSY; /* rejected: safe with link_ucsfix.c (docs/UCX.md trap 18) */
    struct link_peer *p = link_peer_new(l, addr, 0);
    if (!p)
        return -ENOMEM;
    p->unauth = 1;
    l->n_unauth++;
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_CONN_REQUEST | UCP_EP_PARAM_FIELD_ERR_HANDLER |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .conn_request = req,
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = link_ep_err_cb, .arg = p},
    };
    ucs_status_t s = ucp_ep_create(l->worker, &ep, &p->ep);
    if (s != UCS_OK) {
        /* the request is consumed by ucp_ep_create even on failure */
        char what[96];
        snprintf(what, sizeof what, "not accepted: %s", ucs_status_string(s));
        link_admit_log(l, addr, what);
        p->ep = NULL;
        link_peer_fail(p, link_err_from_ucs(s));
        return 0;
    }
    log_debug("link peer %llu: accepted from %s", (unsigned long long)p->serial, addr);
    return 0;
}

/* "host:port" or "[v6]:port" into a resolved address. */
static int link_resolve(const char *hostport, struct addrinfo **ret)
{
    char host[128];
    const char *colon = strrchr(hostport, ':');
    if (!colon || colon == hostport || !colon[1] || (size_t)(colon - hostport) >= sizeof(host))
        return -EINVAL;
    const char *h = hostport;
    size_t hl = (size_t)(colon - hostport);
    if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') {
        h++;
        hl -= 2;
    }
    memcpy(host, h, hl);
    host[hl] = 0;
    char *end;
    unsigned long port = strtoul(colon + 1, &end, 10);
    if (*end || port == 0 || port > 65535)
        return -EINVAL;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    return getaddrinfo(host, colon + 1, &hints, ret) == 0 ? 0 : -EHOSTUNREACH;
}

int link_connect(struct link *l, const char *hostport, struct link_peer **ret)
{
    if (!hostport || strlen(hostport) >= sizeof(((struct link_peer *)0)->addr))
        return -EINVAL;
    for (struct link_peer *p = l->peers; p; p = p->next)
        if (p->outbound && p->state < LINK_PEER_FAILED && !strcmp(p->addr, hostport)) {
            *ret = p;
            return 0;
        }
    if (link_admit_proven_count(l) >= l->cfg.max_peers)
        return -EBUSY;
    struct addrinfo *ai;
    int rc = link_resolve(hostport, &ai);
    if (rc < 0)
        return rc;
    struct link_peer *p = link_peer_new(l, hostport, 1);
    if (!p) {
        freeaddrinfo(ai);
        return -ENOMEM;
    }
    ucp_ep_params_t ep = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = ai->ai_addr, .addrlen = ai->ai_addrlen},
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
        .err_handler = {.cb = link_ep_err_cb, .arg = p},
    };
    ucs_status_t s = ucp_ep_create(l->worker, &ep, &p->ep);
    freeaddrinfo(ai);
    if (s != UCS_OK) {
        p->ep = NULL;
        p->announced = 0;
        link_peer_fail(p, link_err_from_ucs(s));
        return link_err_from_ucs(s);
    }
    if ((rc = p->link->hs_start(p)) < 0) {
        p->announced = 0;
        link_peer_fail(p, rc);
        return rc;
    }
    *ret = p;
    return 0;
}

/* Which transports carry the endpoint's lanes and its puts, from ucp_ep_print_info:
 *   "lane[1]:  3:sysv/memory.0 md[2] -> md[2]/sysv/sysdev[255] am am_bw#0 keepalive"
 *   "put[1]: 0..<short>..4294967296..<bcopy>..(inf)"   (lane 1 does puts)
 * Measured with UCX 1.13: the lanes settle on shared memory only after the client-server wireup,
 * and cma joins an error-handling endpoint's am lanes (rendezvous) only with
 * CMA_MEMORY_INVALIDATE=y (docs/UCX.md trap 12). */
void link_peer_detect_lanes(struct link_peer *p)
{
    static const char *const fast[] = {"posix", "sysv", "xpmem", "knem", "rc_verbs", "rc_mlx5",
                                       "dc_mlx5", "cuda_ipc"};
    /* the peer's process reads or writes our memory itself (no call of ours in between) */
    static const char *const direct[] = {"cma", "knem", "xpmem"};
    enum { MAX_LANES = 16 };
    char names[MAX_LANES][32] = {{0}};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = p->ep ? open_memstream(&buf, &len) : NULL;
    if (!f)
        return;
    ucp_ep_print_info(p->ep, f);
    fclose(f);
    char lanes[sizeof(p->lanes)] = "", all[sizeof(p->tl_all)] = "", bw[sizeof(p->rma_bw)] = "";
    int put_fast = 0, direct_mem = 0;
    for (char *save, *line = strtok_r(buf, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        unsigned idx;
        char tl[32];
        char *at;
        if ((at = strstr(line, "lane[")) && sscanf(at, "lane[%u]: %*u:%31[^/]", &idx, tl) == 2 &&
            idx < MAX_LANES) {
            memcpy(names[idx], tl, sizeof(tl));
            char probe[40];
            snprintf(probe, sizeof probe, ",%s,", tl);
            char have[sizeof(all) + 2];
            snprintf(have, sizeof have, ",%s,", all);
            size_t used = strlen(all);
            if (!strstr(have, probe))
                snprintf(all + used, sizeof(all) - used, "%s%s", used ? "," : "", tl);
            if (strstr(at, " rma_bw#")) { /* a rendezvous lane: a tcp one would put (trap 16) */
                size_t bused = strlen(bw);
                snprintf(bw + bused, sizeof(bw) - bused, "%s%s", bused ? "," : "", tl);
            }
            for (size_t i = 0; i < sizeof(direct) / sizeof(direct[0]); i++)
                if (!strcmp(tl, direct[i]))
                    direct_mem = 1;
        } else if ((at = strstr(line, "put[")) && sscanf(at, "put[%u]:", &idx) == 1 &&
                   idx < MAX_LANES && names[idx][0]) {
            size_t used = strlen(lanes);
            snprintf(lanes + used, sizeof(lanes) - used, "%s%s", used ? "," : "", names[idx]);
            for (size_t i = 0; i < sizeof(fast) / sizeof(fast[0]); i++)
                if (!strcmp(names[idx], fast[i]))
                    put_fast = 1;
        }
    }
    free(buf);
    memcpy(p->lanes, lanes, sizeof(lanes));
    memcpy(p->tl_all, all, sizeof(all));
    memcpy(p->rma_bw, bw, sizeof(bw));
    p->put_fast = put_fast;
    p->direct_mem = direct_mem || put_fast;
}
