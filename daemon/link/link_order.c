/* link_order.c: a peer's messages are delivered in the order it sent them.
 *
 * A rendezvous payload is fetched after the progress round that announced it, so the eager
 * messages sent behind it would be delivered first: a NACK could reach the engine before the
 * RECV_REQ it ends (the context daemon acked a flow it did not know yet, then served it into
 * landing slots the generation side had already given to another request), or a GRANT before
 * the RECV_REQ it feeds (dropped, the flow stalled until its deadline). So while a rendezvous
 * of a peer is in flight the messages behind it wait here, eager payloads copied (they are
 * valid only inside the AM callback), and leave in order once it landed or failed. With
 * nothing in flight a message is delivered at once, uncopied. Bounded per peer: beyond
 * cfg.max_behind messages or LINK_MAX_BEHIND_BYTES waiting, an eager message is dropped and
 * counted (st.dropped). */
#include "link_int.h"

#include "log.h"

#include <stdlib.h>
#include <string.h>

enum { ORD_WAITING, ORD_READY, ORD_DROPPED };

struct link_ordered {
    struct link_ordered *next;
    int state;
    uint16_t type;
    size_t hdr_len, len;
    void *data;     /* ORD_READY: the payload; freed after delivery when data_owned */
    int data_owned;
    uint8_t hdr[LINK_HDR_MAX];
};

/* Fills o's message fields and queues it last. */
static void append(struct link_peer *p, struct link_ordered *o, int state, uint16_t type,
                   const void *hdr, size_t hdr_len, size_t len)
{
    o->state = state;
    o->type = type;
    o->hdr_len = hdr_len;
    o->len = len;
    memcpy(o->hdr, hdr, hdr_len);
    if (p->ord_tail)
        p->ord_tail->next = o;
    else
        p->ord_head = o;
    p->ord_tail = o;
    p->ord_count++;
}

/* Delivers from the head everything that no longer waits (a callback may close the peer:
 * what is left then is dropped, not delivered). */
static void flush(struct link_peer *p)
{
    if (p->ord_flushing)
        return; /* the outer call goes on in order */
    p->ord_flushing = 1;
    struct link_ordered *o;
    while ((o = p->ord_head) && o->state != ORD_WAITING) {
        p->ord_head = o->next;
        if (!p->ord_head)
            p->ord_tail = NULL;
        p->ord_count--;
        if (o->state == ORD_READY && p->state == LINK_PEER_READY)
            link_deliver(p->link, p, o->type, o->hdr, o->hdr_len, o->data, o->len);
        else
            p->link->st.dropped++;
        if (o->data == (void *)(o + 1)) /* an eager copy */
            p->ord_bytes -= o->len;
        else if (o->data_owned) /* a rendezvous buffer the link made (one on_rndv chose is
                                 * its owner's) */
            free(o->data);
        free(o);
    }
    p->ord_flushing = 0;
}

struct link_ordered *link_order_rndv(struct link_peer *p, uint16_t type, const void *hdr,
                                     size_t hdr_len, size_t len)
{
    struct link_ordered *o = calloc(1, sizeof(*o));
    if (!o)
        return NULL;
    append(p, o, ORD_WAITING, type, hdr, hdr_len, len);
    return o;
}

void link_order_landed(struct link_peer *p, struct link_ordered *o, void *buf, int owned)
{
    o->state = buf ? ORD_READY : ORD_DROPPED;
    o->data = buf;
    o->data_owned = owned;
    flush(p);
}

void link_order_eager(struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                      const void *data, size_t len)
{
    if (!p->ord_head) {
        link_deliver(p->link, p, type, hdr, hdr_len, data, len);
        return;
    }
    struct link_ordered *o = NULL;
    if (p->ord_count < p->link->cfg.max_behind && p->ord_bytes + len <= LINK_MAX_BEHIND_BYTES)
        o = calloc(1, sizeof(*o) + len);
    if (!o) {
        p->link->st.dropped++;
        log_warn("link peer %llu: message %u dropped: %u messages wait behind a rendezvous",
                 (unsigned long long)p->serial, type, p->ord_count);
        return;
    }
    o->data = o + 1;
    if (len)
        memcpy(o->data, data, len);
    p->ord_bytes += len;
    append(p, o, ORD_READY, type, hdr, hdr_len, len);
}

void link_order_free(struct link_peer *p)
{
    struct link_ordered *o;
    while ((o = p->ord_head)) { /* no receive refers to one: the peer's last reference is gone */
        p->ord_head = o->next;
        if (o->data_owned && o->data != (void *)(o + 1))
            free(o->data);
        free(o);
    }
    p->ord_tail = NULL;
    p->ord_count = 0;
    p->ord_bytes = 0;
}
