/* engine_quar.h: quarantined landing slots and drain acks (engine_quar.c). Loop thread only. */
#ifndef KVF_ENGINE_QUAR_H
#define KVF_ENGINE_QUAR_H

#include "engine_int.h"

/* Generation side: a flow whose landing slots are quarantined until its drain is acked; for a
 * fragment flow, the rank's pools (its puts may still land): rx's failure is held until then. */
struct qflow {
    uint64_t flow;
    struct epeer *peer; /* NULL once lost */
    uint64_t at_ms;     /* 0: waiting for the ack; else reclaim at (peer lost, or the backstop) */
    uint64_t hold_key;  /* not 0: held until that daemon fences its writes or exits (quar_peer_frozen) */
    struct rx *rx;      /* fragment flow: the request whose report waits (rx->frag_wait) */
    uint8_t **pins;     /* fragment flow: the rank's pool mappings it pins (mempin.h), so a
                           put that still lands never finds them unmapped; n_pins of them */
    uint32_t n_pins;
    struct qflow *next;
};

/* Context side: a failed flow's chunks still in flight; CANCEL(flow) when they completed. */
struct dack {
    struct epeer *peer;
    uint64_t key; /* the peer daemon's share key: kept when the peer goes (engine_fence.c) */
    uint64_t flow, req_id;
    uint32_t writer, n;
    struct dack *next;
};

void quar_init_flows(struct engine *e);
bool quar_own_flow(const struct engine *e, uint64_t flow);
void quar_add(struct engine *e, uint64_t flow, struct epeer *peer);
/* Fragment writer w's RECV_REQ went out: it is moving, and from now its request's failure is
 * held until its puts drained. */
void quar_frag_moving(struct rxw *w);
/* Writer w of a request that ended with code, being released: when it is a fragment flow whose
 * puts may still land in the rank's pools (sent, code a failure), its rx's report waits
 * (rx->frag_wait) until the context daemon acks the drain, the peer is lost (endpoint closed),
 * or, as a backstop against a peer that never acks, deadlines.transfer. */
void quar_hold_pools(struct engine *e, const struct rxw *w, kvf_error_t code);
/* The engine stops: the link closed every endpoint, no put can land; the waits end. */
void quar_pools_stop(struct engine *e);
void quar_acked(struct engine *e, struct epeer *p, uint64_t flow);
void quar_peer_down(struct engine *e, struct epeer *p);
/* The peer went silent (keepalive) while it could put straight into our memory (shared
 * memory, cma writes): a write it was inside when it froze would finish when it runs again,
 * whatever we closed. Its flows' slots stay held (counted in its share) until the same daemon
 * proves on a new link that its writes from before ended (engine_fence.c), or its process
 * exits (engine_lost.c): then quar_peer_back. Not ENGINE_RECLAIM_MS after the loss. Call before
 * quar_peer_down. */
void quar_peer_frozen(struct engine *e, struct epeer *p, uint64_t key);
void quar_peer_back(struct engine *e, uint64_t key);
/* Whether flows of the daemon of key are held until it fences its writes (quar_peer_frozen). */
bool quar_held_for(const struct engine *e, uint64_t key);
uint64_t quar_tick(struct engine *e, uint64_t now);
void quar_flow_ended(struct engine *e, struct epeer *p, uint64_t flow, uint64_t req_id,
                     uint32_t writer, uint32_t in_flight, struct dack **ret);
void quar_stage_done(struct engine *e, struct dack *d);
void quar_ack_unknown(struct epeer *p, uint64_t flow, const struct wire_msg *m);
void quar_free_all(struct engine *e);

#endif
