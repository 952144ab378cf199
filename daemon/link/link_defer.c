/* link_defer.c: the link's bottom: UCX status codes as errno, work deferred out of UCX callbacks
 * to the next progress pass (link_run_pending in link.c runs it), and the kick that asks for that
 * pass. Every file of the link may call these; they call nothing above them (the pass's timer
 * callback is link.c's, given at start: l->busy_cb). Loop thread only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "link_int.h"

int link_err_from_ucs(ucs_status_t s)
{
    switch (s) {
    case UCS_OK: return 0;
    case UCS_ERR_NO_MEMORY: return -ENOMEM;
    case UCS_ERR_INVALID_PARAM: return -EINVAL;
    case UCS_ERR_BUSY: return -EADDRINUSE;
    case UCS_ERR_CANCELED: return -ECANCELED;
    case UCS_ERR_TIMED_OUT: return -ETIMEDOUT;
    case UCS_ERR_UNREACHABLE: return -EHOSTUNREACH;
    case UCS_ERR_REJECTED: return -ECONNREFUSED;
    case UCS_ERR_NOT_CONNECTED: return -ENOTCONN;
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_ENDPOINT_TIMEOUT: return -ECONNRESET;
    case UCS_ERR_MESSAGE_TRUNCATED: return -EMSGSIZE;
    case UCS_ERR_UNSUPPORTED: return -ENOTSUP;
    case UCS_ERR_OUT_OF_RANGE: return -ERANGE;
    case UCS_ERR_IO_ERROR: return -EIO;
    default: return -EIO;
    }
}

void link_kick(struct link *l)
{
    if (l->freeing)
        return;
    if (l->in_pass) { /* the pass runs another round before it arms */
        l->kicked = 1;
        return;
    }
    if (!uv_is_active((uv_handle_t *)&l->busy_timer))
        uv_timer_start(&l->busy_timer, l->busy_cb,
                       l->busy_mode && l->busy_passes > LINK_BUSY_QUICK ? 1 : 0, 0);
}

static void link_queue(struct link *l, struct link_pending *w)
{
    w->next = NULL;
    if (l->pending_tail)
        l->pending_tail->next = w;
    else
        l->pending_head = w;
    l->pending_tail = w;
    link_kick(l);
}

void link_defer_conn(struct link *l, ucp_conn_request_h req)
{
    struct link_pending *w = calloc(1, sizeof(*w));
    if (!w) {
        ucp_listener_reject(l->listener, req);
        return;
    }
    w->kind = PEND_CONN;
    w->conn = req;
    link_queue(l, w);
}

void link_defer_rndv(struct link *l, struct link_peer *p, uint16_t type, const void *hdr,
                     size_t hdr_len, void *desc, size_t len, struct link_ordered *o)
{
    struct link_pending *w = o ? calloc(1, sizeof(*w)) : NULL;
    if (!w) {
        ucp_am_data_release(l->worker, desc);
        if (o)
            link_order_landed(p, o, NULL, 0); /* counted dropped there */
        else
            l->st.dropped++;
        return;
    }
    w->ord = o;
    w->kind = PEND_RNDV;
    w->peer = p;
    p->refs++;
    w->type = type;
    w->desc = desc;
    w->len = len;
    w->hdr_len = hdr_len;
    memcpy(w->hdr, hdr, hdr_len);
    link_queue(l, w);
}

int link_defer_status(struct link *l, link_done_cb cb, void *arg, int status)
{
    if (!cb)
        return 0;
    struct link_pending *w = malloc(sizeof(*w)); /* the fields it uses are set below */
    if (!w)
        return -ENOMEM;
    w->kind = PEND_DONE;
    w->cb = cb;
    w->arg = arg;
    w->status = status;
    link_queue(l, w);
    return 0;
}

int link_defer_done(struct link *l, link_done_cb cb, void *arg)
{
    return link_defer_status(l, cb, arg, 0);
}
