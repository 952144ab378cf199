/* engine_recv.c: a RECV's engine part (struct rx, engine_gen.h) as a member of its request: the
 * request (struct xfer, transfers.h) owns it (x->rx) and frees it with itself (engine_recv_free,
 * from transfers_reap); the engine says whether it still writes into the rank's pools (a
 * failure is then held by the request, xfer_hold) and when those writes ended
 * (gen_writes_ended). Loop thread only. */
#include <stdlib.h>

#include "daemon.h"
#include "engine.h"
#include "engine_gen.h"
#include "engine_gpu.h"
#include "engine_peer.h"
#include "xfer.h"

void gen_writes_ended(struct rx *rx)
{
    struct xfer *x = rx->x;
    if (rx->state != RX_ENDED || rx->scatters_running > 0 || !x)
        return;
    if (rx->frag_wait > 0) { /* only peers' puts left: a worker that can hear it, now */
        rx->e->req.ops->held_end(rx->t, x);
        return;
    }
    rx->x = NULL;
    rx->e->req.ops->writes_ended(rx->t, x);
}

bool engine_recv_writing(const struct rx *rx)
{
    if (rx->scatters_running > 0 || rx->frag_wait > 0)
        return true;
    if (rx->state == RX_ENDED)
        return false;
    for (uint32_t i = 0; i < rx->n_w; i++) /* e.g. a moving fragment flow's puts may land */
        if (rx->w[i].path && rx->w[i].path->writing && rx->w[i].path->writing(&rx->w[i]))
            return true;
    return false;
}

bool engine_recv_held_remote(const struct rx *rx)
{
    return rx->scatters_running == 0 && engine_recv_writing(rx);
}

void engine_recv_stop(struct rx *rx, kvf_error_t err, const char *msg)
{
    gen_rx_fail(rx, err != KVF_OK ? err : KVF_E_CANCELLED, msg);
}

bool engine_recv_idle(const struct rx *rx)
{
    return rx->state == RX_ENDED && !rx->x && rx->scatters_running == 0 && rx->frag_wait == 0;
}

void gen_sweep(struct engine *e)
{
    if (e->req.t) /* the ended requests whose part went idle, with their parts */
        e->req.ops->reap(e->req.t);
}

void engine_recv_free(struct rx *rx)
{
    struct engine *e = rx->e;
    dheap_remove(&e->rx_due, &rx->due);
    if (rx->prev)
        rx->prev->next = rx->next;
    else
        e->rxs = rx->next;
    if (rx->next)
        rx->next->prev = rx->prev;
    egpu_rx_gone(rx);
    for (uint32_t i = 0; i < rx->n_w; i++)
        if (rx->w[i].peer)
            rx->w[i].peer->users--;
    if (rx->planned)
        plan_done(&rx->plan);
    plan_marks_done(&rx->marks);
    ix_w_del(e, rx);
    ix_rx_del(e, rx);
    free(rx->w);
    free(rx->gen_json);
    free(rx->ctx_layouts);
    free(rx);
}

const char *engine_recv_peer(const struct rx *rx)
{
    for (uint32_t i = 0; rx && i < rx->n_w; i++) {
        const struct epeer *p = rx->w[i].peer;
        if (p && p->lp && p->up)
            return link_peer_id(p->lp);
    }
    return NULL;
}

const char *engine_recv_path(const struct rx *rx)
{
    return rx && rx->path ? rx->path->name : "local";
}
