/* link_msg.c: typed active messages between READY peers.
 *
 * Wire: AM id LINK_AM_USER, UCX header = struct msg_wire + the user header, payload = UCX data.
 * Eager payloads are delivered from inside the AM callback (valid only there, trap 6). A
 * rendezvous payload is announced by a descriptor: the callback returns UCS_INPROGRESS and the
 * link, after the progress round, asks on_rndv for a buffer and receives straight into it with
 * ucp_am_recv_data_nbx; every message is delivered in the peer's send order (link_order.c: what
 * came behind a rendezvous waits for it). Sends keep the header in the request (the link copies it) and borrow the
 * payload until completion; a send that completes at once (NULL) reports from the loop (trap 7).
 * Limits enforced on input: header length, payload length (cfg.max_payload). */
#include "link_int.h"

#include "log.h"

#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct msg_wire {
    uint16_t type;
    uint16_t hdr_len;
    uint32_t reserved;
} __attribute__((packed));

#define SEND_HDR_CAP 512
#define EARLY_MAX_MSGS 64
#define EARLY_MAX_BYTES (1u << 20) /* eager payload bytes copied while waiting for ACCEPT */

struct link_early {
    struct link_early *next;
    uint16_t type;
    size_t hdr_len, len;
    void *desc; /* rendezvous descriptor, or NULL: the payload follows */
    uint8_t hdr[LINK_HDR_MAX];
    uint8_t data[];
};

struct send_req {
    struct link *link;
    link_done_cb cb;
    void *arg;
    size_t hdr_len;
    uint8_t hdr[SEND_HDR_CAP];
};

struct recv_req {
    struct link *link;
    struct link_peer *peer; /* reference held */
    struct link_ordered *ord; /* its place in the peer's order (link_order.c) */
    uint16_t type;
    size_t hdr_len, len;
    void *buf;
    int buf_owned;
    uint8_t hdr[LINK_HDR_MAX];
};

static void send_done(void *request, ucs_status_t status, void *user_data)
{
    struct send_req *r = user_data;
    r->link->inflight--;
    if (r->cb)
        r->cb(r->arg, link_err_from_ucs(status));
    free(r);
    if (request)
        ucp_request_free(request);
}

/* The send itself. now: a send done at once returns 1 without calling cb (the payload was
 * copied out); else cb runs from the loop (trap 7). */
static int am_send(struct link_peer *p, unsigned am_id, const void *hdr, size_t hdr_len,
                   const void *data, size_t len, link_done_cb cb, void *arg, bool now)
{
    if (!p->ep)
        return -ENOTCONN;
    if (hdr_len > SEND_HDR_CAP)
        return -EMSGSIZE;
    struct send_req *r = malloc(sizeof(*r));
    if (!r)
        return -ENOMEM;
    r->link = p->link;
    r->cb = cb;
    r->arg = arg;
    r->hdr_len = hdr_len;
    memcpy(r->hdr, hdr, hdr_len);
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA |
                        UCP_OP_ATTR_FIELD_FLAGS,
        .cb.send = send_done,
        .user_data = r,
        .flags = UCP_AM_SEND_FLAG_REPLY,
    };
    ucs_status_ptr_t s = ucp_am_send_nbx(p->ep, am_id, r->hdr, hdr_len, data, len, &rp);
    if (UCS_PTR_IS_ERR(s)) {
        free(r);
        link_kick(p->link); /* the endpoint's failure is reported from progress */
        return link_err_from_ucs(UCS_PTR_STATUS(s));
    }
    if (s == NULL) { /* done at once (trap 7): nothing for progress to push */
        free(r);
        return now ? 1 : link_defer_done(p->link, cb, arg);
    }
    link_kick(p->link); /* in flight: progress pushes it */
    p->link->inflight++;
    return 0;
}

int link_am_send(struct link_peer *p, unsigned am_id, const void *hdr, size_t hdr_len,
                 const void *data, size_t len, link_done_cb cb, void *arg)
{
    return am_send(p, am_id, hdr, hdr_len, data, len, cb, arg, false);
}

static int user_send(struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                     const void *data, size_t len, link_done_cb cb, void *arg, bool now)
{
    if (p->state != LINK_PEER_READY)
        return -ENOTCONN;
    if (hdr_len > LINK_HDR_MAX || (hdr_len && !hdr) || (len && !data))
        return -EMSGSIZE;
    uint8_t buf[sizeof(struct msg_wire) + LINK_HDR_MAX];
    struct msg_wire w = {.type = htole16(type), .hdr_len = htole16((uint16_t)hdr_len)};
    memcpy(buf, &w, sizeof(w));
    if (hdr_len)
        memcpy(buf + sizeof(w), hdr, hdr_len);
    int rc = am_send(p, LINK_AM_USER, buf, sizeof(w) + hdr_len, data, len, cb, arg, now);
    if (rc >= 0) {
        p->msgs_sent++;
        p->bytes_sent += len;
        p->link->st.msgs_sent++;
        p->link->st.bytes_sent += len;
    }
    return rc;
}

int link_send(struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len, const void *data,
              size_t len, link_done_cb cb, void *arg)
{
    return user_send(p, type, hdr, hdr_len, data, len, cb, arg, false);
}

int link_send_now(struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                  const void *data, size_t len, link_done_cb cb, void *arg)
{
    return user_send(p, type, hdr, hdr_len, data, len, cb, arg, true);
}

void link_deliver(struct link *l, struct link_peer *p, uint16_t type, const void *hdr,
                  size_t hdr_len, const void *data, size_t len)
{
    p->msgs_recv++;
    p->bytes_recv += len;
    l->st.msgs_recv++;
    l->st.bytes_recv += len;
    if (l->ops.on_msg)
        l->ops.on_msg(l->ops.arg, p, type, hdr, hdr_len, data, len);
}

/* Keeps a message that overtook ACCEPT (see struct link_peer). */
static ucs_status_t link_msg_early(struct link *l, struct link_peer *p, uint16_t type,
                                   const void *hdr, size_t hdr_len, void *data, size_t len,
                                   int rndv)
{
    size_t copy = rndv ? 0 : len;
    struct link_early *e = NULL;
    if (p->early_count < EARLY_MAX_MSGS && p->early_bytes + copy <= EARLY_MAX_BYTES)
        e = malloc(sizeof(*e) + copy);
    if (!e) {
        l->st.dropped++;
        return UCS_OK;
    }
    e->next = NULL;
    e->type = type;
    e->hdr_len = hdr_len;
    e->len = len;
    e->desc = rndv ? data : NULL;
    memcpy(e->hdr, hdr, hdr_len);
    if (copy)
        memcpy(e->data, data, copy);
    if (p->early_tail)
        p->early_tail->next = e;
    else
        p->early_head = e;
    p->early_tail = e;
    p->early_count++;
    p->early_bytes += copy;
    log_debug("link peer %llu: message %u arrived before ACCEPT, kept", (unsigned long long)p->serial,
              type);
    return rndv ? UCS_INPROGRESS : UCS_OK;
}

void link_msg_replay_early(struct link_peer *p)
{
    struct link_early *e;
    while ((e = p->early_head) && p->state == LINK_PEER_READY) {
        p->early_head = e->next;
        if (e->desc)
            link_defer_rndv(p->link, p, e->type, e->hdr, e->hdr_len, e->desc, e->len,
                            link_order_rndv(p, e->type, e->hdr, e->hdr_len, e->len));
        else
            link_order_eager(p, e->type, e->hdr, e->hdr_len, e->data, e->len);
        free(e);
    }
    if (!p->early_head) {
        p->early_tail = NULL;
        p->early_count = 0;
        p->early_bytes = 0;
    }
}

void link_msg_drop_early(struct link_peer *p)
{
    struct link_early *e;
    while ((e = p->early_head)) {
        p->early_head = e->next;
        if (e->desc && p->link->worker)
            ucp_am_data_release(p->link->worker, e->desc);
        p->link->st.dropped++;
        free(e);
    }
    p->early_tail = NULL;
}

ucs_status_t link_msg_am_cb(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param)
{
    struct link *l = arg;
    struct link_peer *p = NULL;
    int rndv = !!(param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV);
    if (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
        p = link_peer_by_ep(l, param->reply_ep);
    struct msg_wire w;
    int early_ok = p && p->state == LINK_PEER_HANDSHAKING && p->server_proven;
    if (!p || (p->state != LINK_PEER_READY && !early_ok) || header_length < sizeof(w) ||
        length > l->cfg.max_payload) {
        l->st.dropped++;
        log_debug("link: message dropped (peer %s, %zu bytes)",
                  p ? link_peer_state_to_string(p->state) : "unknown", length);
        return UCS_OK; /* releases a rendezvous descriptor */
    }
    memcpy(&w, header, sizeof(w));
    size_t hdr_len = le16toh(w.hdr_len);
    if (hdr_len > LINK_HDR_MAX || hdr_len != header_length - sizeof(w)) {
        l->st.dropped++;
        return UCS_OK;
    }
    const uint8_t *uh = (const uint8_t *)header + sizeof(w);
    if (p->state != LINK_PEER_READY)
        return link_msg_early(l, p, le16toh(w.type), uh, hdr_len, data, length, rndv);
    uint16_t type = le16toh(w.type);
    if (rndv) {
        link_defer_rndv(l, p, type, uh, hdr_len, data, length,
                        link_order_rndv(p, type, uh, hdr_len, length));
        return UCS_INPROGRESS;
    }
    link_order_eager(p, type, uh, hdr_len, data, length);
    return UCS_OK;
}

static void recv_done(void *request, ucs_status_t status, size_t length, void *user_data)
{
    struct recv_req *r = user_data;
    r->link->inflight--;
    int ok = status == UCS_OK && length == r->len && r->peer->state == LINK_PEER_READY;
    if (!ok && r->buf_owned)
        free(r->buf);
    /* delivered in the peer's order: now, with what waited behind it, or after what is ahead */
    link_order_landed(r->peer, r->ord, ok ? r->buf : NULL, r->buf_owned);
    link_peer_unref(r->peer);
    free(r);
    if (request)
        ucp_request_free(request);
}

void link_msg_start_rndv(struct link *l, struct link_peer *p, uint16_t type, const void *hdr,
                         size_t hdr_len, void *desc, size_t len, struct link_ordered *o)
{
    struct recv_req *r = calloc(1, sizeof(*r));
    int rc = r ? -ENOBUFS : -ENOMEM;
    if (r && l->ops.on_rndv)
        rc = l->ops.on_rndv(l->ops.arg, p, type, hdr, hdr_len, len, &r->buf);
    if (r && rc == -ENOBUFS) {
        r->buf = malloc(len ? len : 1);
        r->buf_owned = 1;
        rc = r->buf ? 0 : -ENOMEM;
    }
    if (rc < 0) {
        ucp_am_data_release(l->worker, desc);
        if (r && r->buf_owned)
            free(r->buf);
        free(r);
        link_order_landed(p, o, NULL, 0); /* counted dropped there */
        return;
    }
    r->ord = o;
    r->link = l;
    r->peer = p;
    p->refs++;
    r->type = type;
    r->len = len;
    r->hdr_len = hdr_len;
    memcpy(r->hdr, hdr, hdr_len);
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.recv_am = recv_done,
        .user_data = r,
    };
    l->inflight++;
    ucs_status_ptr_t s = ucp_am_recv_data_nbx(l->worker, desc, r->buf, len, &rp);
    if (s == NULL)
        recv_done(NULL, UCS_OK, len, r);
    else if (UCS_PTR_IS_ERR(s))
        recv_done(NULL, UCS_PTR_STATUS(s), 0, r);
}
