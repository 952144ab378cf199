/* engine_gen.h: the generation side: a RECV's writers and state machine (engine_gen.c), local
 * writers (path_local.c). Loop thread only. */
#ifndef KVF_ENGINE_GEN_H
#define KVF_ENGINE_GEN_H

#include "bounce_exec.h"
#include "engine_int.h"
#include "path.h"

/* The generation side's request (struct rx), engine_recv.c: lookup (the table) -> connect
 * (planned, writers starting) -> moving (RECV_REQs out, chunks landing) -> ended; a stale table
 * sends connect or moving back to lookup once (replan). One deadline for every phase: the RECV's
 * own (or deadlines.send_wait) plus deadlines.transfer, set when the RECV is taken (gen_recv), as
 * the worker's RECV bounds the whole request; a table fetch is bounded by deadlines.lookup too. */
enum rx_state { RX_LOOKUP, RX_CONNECT, RX_MOVING, RX_ENDED, RX__COUNT };

/* One writer of a RECV (struct rxw): idle (planned; its daemon not connected, or a local writer
 * whose SEND has not come) -> credit (bounce: the landing reservation is open, the first grant
 * not yet come, so no RECV_REQ) -> moving (RECV_REQ sent: chunks or fragment puts come) -> done
 * (WRITER_DONE came, or a local writer copied) -> closed (released: holds nothing). nacked: the
 * writer's daemon ended the flow, so no NACK goes back. A reservation that timed out before its
 * first grant goes credit -> closed. Its phases are bounded by the request's deadline and the
 * first credit by arena.reserve_timeout. */
enum rxw_state { RXW_IDLE, RXW_CREDIT, RXW_MOVING, RXW_DONE, RXW_NACKED, RXW_CLOSED, RXW__COUNT };

const char *rx_state_to_string(enum rx_state s);
const char *rxw_state_to_string(enum rxw_state s);
/* Whether from -> to is an edge of the state machine. */
bool rx_state_edge_ok(enum rx_state from, enum rx_state to);
bool rxw_state_edge_ok(enum rxw_state from, enum rxw_state to);

/* Generation side: one writer of one RECV. */
struct rxw {
    enum resv_kind kind; /* RESV_LANDING; first field: arena resv->data points here */
    struct rx *rx;
    uint32_t idx, ctx_rank;
    uint64_t flow;
    struct epeer *peer;
    struct arena_resv resv;
    enum rxw_state state; /* engine_recv_rxw_set_state (engine_recv.c) */
    const struct path_row *path; /* its path (path.h): the request's, or local for a writer
                                    registered here (pool to pool, path_local.c) */
    uint64_t extent, scattered;
    uint32_t n_out; /* grants out (sent or to send), not yet landed */
    struct arena_grant out[ENGINE_MAX_CREDITS];
    bool not_reader; /* nacked as no reader of the writer's SEND (wire.h): not counted there */
};

struct rx {
    struct engine *e;
    struct transfers *t;        /* borrowed */
    struct xfer *x;             /* its request, the owner, until it ended (engine_recv_end);
                                   NULL after: rx then lives only until idle */
    char *gen_json;             /* owned: the generation rank's layout, for RECV_REQ */
    struct layout *ctx_layouts; /* owned copy of the table when a writer is local, n_ctx */
    uint32_t n_ctx;
    uint64_t req_id;
    char home[WIRE_ADDR_MAX];
    char ctx_instance[LAYOUT_NAME_MAX];
    enum rx_state state; /* engine_recv_rx_set_state (engine_recv.c) */
    struct itable *tab; /* borrowed while READY */
    uint64_t epoch;
    struct plan plan;
    struct plan_marks marks; /* owned, with the plan under arena.cut_at_layers (its writers'
                                landing grants end at layer boundaries); else empty */
    bool planned, retried;
    /* planning against a table cached before the RECV (tab_cached), whose refusal asks the
     * home again once (refetched): the instance may have re-registered in another shape; its
     * epoch is then not known to be the reader's (engine_nack.c) */
    bool tab_cached, refetched;
    const struct path_row *path; /* its remote writers' path, chosen once (path_choose) */
    const char *path_why;        /* the rule's reason for it (static) */
    const struct bounce_exec *bx; /* the executor of its bounce chunks (bounce_exec.h) */
    uint32_t n_w;
    struct rxw *w; /* owned, n_w */
    uint64_t deadline_ms;  /* of every phase (enum rx_state) */
    struct dheap_node due; /* deadline_ms in e->rx_due */
    uint64_t started_ms;
    /* GPU pools (engine_gpu.c): one job per writer. Scatters into the rank's pools, GPU kernels
     * or host copies (bounce_host.c), started and not yet ended: the request holds a failure
     * until they ended (the worker must not reuse blocks under a running write). */
    struct egpu_job **gpu;     /* owned references, n_w; NULL: host pools */
    uint32_t scatters_running;
    bool scatter_dev; /* the scatter being launched reads the landing slot's device twin */
    uint32_t scatter_serial; /* bumped by a replan: scatters of an older serial are stale */
    uint32_t frag_wait; /* failed fragment flows whose puts may still land (engine_quar.c):
                           the request holds its failure until they drained */
    uint64_t t0_ns;     /* RECV taken (uv_hrtime) */
    uint64_t moving_ns; /* first chunk landed: the last request's wall time starts here */
    struct rx *prev, *next; /* e->rxs */
};

void gen_recv(struct engine *e, struct transfers *t, struct xfer *r, const char *home);
void gen_table_ready(struct engine *e, struct itable *tab, int err, const char *msg);
void gen_peer_up(struct engine *e, struct epeer *p);
void gen_peer_down(struct engine *e, struct epeer *p, int err);
void gen_on_grant(struct rxw *w, const struct arena_grant *g, uint32_t n);
void gen_on_timeout(struct rxw *w);
int bland_on_rndv(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_chunk *c,
                size_t len, void **dest);
void bland_on_chunk(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_chunk *c,
                  const void *data, size_t len);
void gen_on_writer_done(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void gen_on_nack(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void gen_tick(struct engine *e, uint64_t now);
void gen_fail_all(struct engine *e, kvf_error_t code, const char *why);
void engine_recv_sweep(struct engine *e);
void gen_rx_fail(struct rx *rx, kvf_error_t code, const char *msg);
void gen_check_done(struct rx *rx);
/* Whether w is a writer registered at this daemon (the local path). */
static inline bool rxw_local(const struct rxw *w)
{
    return w->path && w->path->kind == PATH_LOCAL;
}
/* Sends w's RECV_REQ with n grants (none on the fragment path). 0 or -errno. */
int gen_send_recv_req(struct rxw *w, const struct wire_grant *g, uint32_t n);
/* Nothing writes into rx's pools any more (its scatters and fragment flows ended): an ended
 * rx's request hears of its held failure now (transfers_writes_ended). */
void engine_recv_writes_ended(struct rx *rx);
/* The moving writer of flow from peer p, or NULL. */
struct rxw *gen_find_w(struct engine *e, struct epeer *p, uint64_t flow);
/* Asks for w's next landing credits (up to arena.window held). */
void gen_ask(struct rxw *w);
/* Chunk w->out[i] is in the rank's pools: its credit goes back, the next is asked (the request
 * may end: DONE). */
void bland_landed(struct rxw *w, uint32_t i);

/* engine_recv.c: move rx or w along an edge of its state machine (logged at debug). An illegal
 * edge is an invariant failure (require.h: fatal in debug builds and under
 * KVF_FATAL_INVARIANTS=1); otherwise the request fails INTERNAL and false says the caller must
 * stop. */
bool engine_recv_rx_set_state(struct rx *rx, enum rx_state to);
bool engine_recv_rxw_set_state(struct rxw *w, enum rxw_state to);


#endif
