/* engine_ix.h: the engine's per-request lookups by hash (hmap.h), so no message, grant or
 * SEND walks every flow in flight: context-side flows by flow id (and by context instance and
 * request id while they wait for their SEND), generation-side writers by flow id, and RECVs by
 * context instance and request id (a local writer's SEND finds them). Entries are added when a
 * flow or request is created and removed before it is freed; a lookup checks the full key and
 * the state the caller asks for. Loop thread only. */
#ifndef KVF_ENGINE_IX_H
#define KVF_ENGINE_IX_H

#include <stdbool.h>
#include <stdint.h>

#include "hmap.h"

struct engine;
struct epeer;
struct tx;
struct rx;
struct rxw;
struct xfer;

struct engine_ix {
    struct hmap tx_flow; /* struct tx by flow */
    struct hmap tx_wait; /* struct tx that met no SEND yet, by (instance, request id) */
    struct hmap tx_key;  /* every struct tx, by (instance, request id): the flows of a SEND */
    struct hmap w_flow;  /* struct rxw by flow (flow ids are this daemon's, unique) */
    struct hmap rx_key;  /* struct rx by (context instance, request id) */
};

void engine_ix_free(struct engine_ix *ix);

/* Context side. */
int ix_tx_add(struct engine *e, struct tx *tx);
int ix_tx_wait(struct engine *e, struct tx *tx);
void ix_tx_del(struct engine *e, struct tx *tx);
/* The flow of peer p not ended, or NULL. */
struct tx *ix_tx_find(struct engine *e, const struct epeer *p, uint64_t flow);
/* The flows not ended that read SEND s (tx->send == s): counted over its request's flows
 * only, so a burst of failed readers does not walk every flow in flight. */
uint32_t ix_send_readers(const struct engine *e, const struct xfer *s);
/* Every flow that reads SEND s (tx->send == s), ended or not, from its request's flows: up to
 * max of them into out; returns how many there are (more than max: out holds the first max). */
uint32_t ix_send_flows(const struct engine *e, const struct xfer *s, struct tx **out, uint32_t max);
/* A flow waiting for the SEND of (instance, id) from context rank `writer`, taken off the
 * waiting index; NULL when none is left. */
struct tx *ix_tx_take_waiting(struct engine *e, const char *instance, uint64_t id, uint32_t writer);

/* Generation side. */
int ix_rx_add(struct engine *e, struct rx *rx);
void ix_rx_del(struct engine *e, struct rx *rx);
int ix_w_add(struct engine *e, struct rx *rx); /* every writer of rx (after planning) */
void ix_w_del(struct engine *e, struct rx *rx); /* before rx->w is freed */
/* The writer of flow from peer p; moving_only: of a request in RX_MOVING, else not ended. */
struct rxw *ix_w_find(struct engine *e, const struct epeer *p, uint64_t flow, bool moving_only);
/* The next RECV of (instance, id) after *pos (start with 0), or NULL. */
struct rx *ix_rx_next(struct engine *e, const char *instance, uint64_t id, uint32_t *pos);

#endif
