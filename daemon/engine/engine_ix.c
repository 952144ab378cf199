/* engine_ix.c: the engine's hash lookups (see engine_ix.h). */
#include <string.h>

#include "engine_ctx.h"
#include "engine_gen.h"
#include "engine_ix.h"
#include "xfer.h"

static uint64_t key_of(const char *instance, uint64_t id) { return hmap_str(instance, id); }

void engine_ix_free(struct engine_ix *ix)
{
    hmap_free(&ix->tx_flow);
    hmap_free(&ix->tx_wait);
    hmap_free(&ix->tx_key);
    hmap_free(&ix->w_flow);
    hmap_free(&ix->rx_key);
}

int ix_tx_add(struct engine *e, struct tx *tx)
{
    const struct wire_recv_req *q = &tx->rr.u.recv_req;
    if (hmap_put(&e->ix.tx_flow, hmap_mix(tx->flow), tx) < 0)
        return -1;
    if (hmap_put(&e->ix.tx_key, key_of(q->ctx_instance, q->req_id), tx) < 0) {
        hmap_del(&e->ix.tx_flow, hmap_mix(tx->flow), tx);
        return -1;
    }
    return 0;
}

int ix_tx_wait(struct engine *e, struct tx *tx)
{
    const struct wire_recv_req *q = &tx->rr.u.recv_req;
    return hmap_put(&e->ix.tx_wait, key_of(q->ctx_instance, q->req_id), tx);
}

void ix_tx_del(struct engine *e, struct tx *tx)
{
    const struct wire_recv_req *q = &tx->rr.u.recv_req;
    hmap_del(&e->ix.tx_flow, hmap_mix(tx->flow), tx);
    hmap_del(&e->ix.tx_wait, key_of(q->ctx_instance, q->req_id), tx);
    hmap_del(&e->ix.tx_key, key_of(q->ctx_instance, q->req_id), tx);
}

uint32_t ix_send_readers(const struct engine *e, const struct xfer *s)
{
    uint32_t pos = 0, n = 0;
    for (struct tx *t; (t = hmap_next(&e->ix.tx_key, key_of(s->ctx_instance, s->req_id), &pos));)
        n += t->send == s && !tx_ended(t);
    return n;
}

uint32_t ix_send_flows(const struct engine *e, const struct xfer *s, struct tx **out, uint32_t max)
{
    uint32_t pos = 0, n = 0;
    for (struct tx *t; (t = hmap_next(&e->ix.tx_key, key_of(s->ctx_instance, s->req_id), &pos));)
        if (t->send == s && n++ < max)
            out[n - 1] = t;
    return n;
}

struct tx *ix_tx_find(struct engine *e, const struct epeer *p, uint64_t flow)
{
    uint32_t pos = 0;
    for (struct tx *t; (t = hmap_next(&e->ix.tx_flow, hmap_mix(flow), &pos));)
        if (!tx_ended(t) && t->peer == p && t->flow == flow)
            return t;
    return NULL;
}

struct tx *ix_tx_take_waiting(struct engine *e, const char *instance, uint64_t id, uint32_t writer)
{
    uint64_t h = key_of(instance, id);
    uint32_t pos = 0;
    for (struct tx *t; (t = hmap_next(&e->ix.tx_wait, h, &pos));) {
        const struct wire_recv_req *q = &t->rr.u.recv_req;
        if (t->state == TX_SEND_WAIT && !t->send && q->req_id == id && q->writer == writer &&
            strcmp(q->ctx_instance, instance) == 0) {
            hmap_del(&e->ix.tx_wait, h, t);
            return t;
        }
    }
    return NULL;
}

int ix_rx_add(struct engine *e, struct rx *rx)
{
    return hmap_put(&e->ix.rx_key, key_of(rx->ctx_instance, rx->req_id), rx);
}

void ix_rx_del(struct engine *e, struct rx *rx)
{
    hmap_del(&e->ix.rx_key, key_of(rx->ctx_instance, rx->req_id), rx);
}

struct rx *ix_rx_next(struct engine *e, const char *instance, uint64_t id, uint32_t *pos)
{
    for (struct rx *rx; (rx = hmap_next(&e->ix.rx_key, key_of(instance, id), pos));)
        if (rx->req_id == id && strcmp(rx->ctx_instance, instance) == 0)
            return rx;
    return NULL;
}

int ix_w_add(struct engine *e, struct rx *rx)
{
    for (uint32_t i = 0; i < rx->n_w; i++)
        if (hmap_put(&e->ix.w_flow, hmap_mix(rx->w[i].flow), &rx->w[i]) < 0) {
            while (i-- > 0)
                hmap_del(&e->ix.w_flow, hmap_mix(rx->w[i].flow), &rx->w[i]);
            return -1;
        }
    return 0;
}

void ix_w_del(struct engine *e, struct rx *rx)
{
    for (uint32_t i = 0; i < rx->n_w; i++)
        hmap_del(&e->ix.w_flow, hmap_mix(rx->w[i].flow), &rx->w[i]);
}

struct rxw *ix_w_find(struct engine *e, const struct epeer *p, uint64_t flow, bool moving_only)
{
    uint32_t pos = 0;
    for (struct rxw *w; (w = hmap_next(&e->ix.w_flow, hmap_mix(flow), &pos));)
        if (w->flow == flow && w->peer == p &&
            (moving_only ? w->rx->state == RX_MOVING : w->rx->state != RX_ENDED))
            return w;
    return NULL;
}
