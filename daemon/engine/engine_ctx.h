/* engine_ctx.h: the context side: flows and their chunks in flight (engine_ctx.c). Loop thread
 * only. */
#ifndef KVF_ENGINE_CTX_H
#define KVF_ENGINE_CTX_H

#include "bounce_exec.h"
#include "engine_int.h"

/* One flow of the context side (struct tx), engine_ctx.c: send_wait (the RECV_REQ came, the
 * rank's SEND not yet; deadline deadlines.send_wait) -> [table_wait (met; the instance's table is
 * being fetched from its home) | refetch (the cached table was stale: fetched again, once); both
 * keep the send_wait deadline] -> moving (planned: chunks going out; deadline deadlines.transfer
 * from here) -> done or failed. */
enum tx_state {
    TX_SEND_WAIT,
    TX_TABLE_WAIT,
    TX_REFETCH,
    TX_MOVING,
    TX_DONE,
    TX_FAILED,
    TX__COUNT
};

const char *tx_state_to_string(enum tx_state s);
bool tx_state_edge_ok(enum tx_state from, enum tx_state to);

/* Context side: one flow (a generation rank's RECV_REQ for one writer of ours). */
struct tx {
    struct engine *e;
    struct epeer *peer;
    uint64_t flow;
    struct wire_msg rr; /* the decoded RECV_REQ (owned) */
    const struct layout *gen; /* the RECV_REQ's, a reference on the peer's cache (laycache.h) */
    struct xfer *send;  /* borrowed until engine_send_end; NULL before the meeting */
    enum tx_state state;        /* tx_set_state (engine_ctx.c) */
    struct {
        kvf_error_t code;       /* KVF_OK until it failed; then the first failure, kept */
        wire_nack_reason_t why; /* what its NACK says (set before failing it): not_reader
                                   (nack_beyond_readers: nobody counts it), stale_table
                                   (planned with an older epoch: the generation side replans
                                   once), else plain */
        bool told;              /* the NACK went to its generation daemon: that daemon counts
                                   the reader unless it is lost first (ctx_peer_down) */
    } err;                      /* its one held error */
    struct fragjob *frag;       /* fragment path: its puts in flight */
    char home[WIRE_ADDR_MAX];   /* the writer rank's home when it is not this daemon */
    struct plan plan;
    const struct plan_writer *pw;
    uint64_t sent, completed; /* extent bytes handed to the link, completed */
    uint32_t n_ops;           /* staging operations in flight */
    uint32_t q_head, q_len;   /* granted landing slots not yet filled (ring) */
    struct wire_grant q[ENGINE_MAX_CREDITS];
    uint64_t deadline_ms;  /* of its phase (enum tx_state), set by tx_set_state */
    struct dheap_node due; /* deadline_ms in e->tx_due */
    struct egpu_job *gpu; /* owned reference: the writer's program on its GPU; NULL: host pools */
    const struct bounce_exec *bx; /* the executor of its bounce chunks, once planned */
    struct tx *next;
};

/* Whether tx ended (done or failed): nothing of it moves any more. */
static inline bool tx_ended(const struct tx *tx)
{
    return tx->state == TX_DONE || tx->state == TX_FAILED;
}

/* One chunk in flight on the context side: a staging slot (or a malloc'd buffer). */
struct stage {
    enum resv_kind kind; /* RESV_STAGING; first field */
    struct tx *tx;       /* NULL when the flow ended while this was in flight */
    struct engine *e;
    struct arena_resv resv;
    bool have_slot, resv_open;
    struct arena_grant slot;
    uint8_t *buf; /* staging bytes: in the arena, or malloc'd (own_buf) */
    bool own_buf;
    bway_kind_t way;         /* how it leaves (bounce_way.h), once a way took it */
    struct bput_reg *breg;   /* direct: the registration held until the chunk ended */
    bool to_peer;            /* buf is the landing slot in the peer's arena: mapped here, or
                              * at that address in process buf_pid (written over cma) */
    uint32_t buf_pid;        /* to_peer over cma: the peer daemon's pid; 0: mapped here */
    struct link_peer *held;  /* to_peer: the peer held (its mapping) until the gather ended */
    struct egpu_ppin *ppin;  /* to_peer by a GPU kernel: the page-locked mapping it writes */
    int err;             /* of the put, reported after the flush */
    struct dack *dack;   /* the failed flow's drain ack waiting for this chunk */
    uint64_t hold_key;   /* its peer's share key: what a failed send exposed is held under it */
    bool sent_am;        /* its buffer went out as an active-message payload (cma may read it) */
    bool dev;            /* buf is the staging slot's device twin (bounce_dev.h): sent as a
                          * rendezvous message, never put */
    struct wire_grant g; /* the landing slot it fills */
    uint8_t hdr[ENGINE_ENV_BYTES + 64];
    size_t hdr_len;
    struct stage *next;
};

/* bounce_stage.c: peer p was lost with err. Chunks or control messages (engine_send.c) to it
 * still in flight, or already held, are held until it cannot read them (arena_hold.h):
 * ENGINE_RECLAIM_MS from now, or, when it was lost for silence while it could read our memory
 * itself (a frozen peer on this host), until bstage_hold_peer_back. Returns true in that last
 * case (its process is then watched). */
bool bstage_hold_peer_down(struct engine *e, struct epeer *p, int err);
/* The daemon of key was heard again or its process exited: its holds end at the next tick. */
void bstage_hold_peer_back(struct engine *e, uint64_t key);

/* The flow failed (NACK to the generation daemon when nack): its stages let go of it. */
void ctx_tx_fail(struct tx *tx, kvf_error_t code, bool nack, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Every chunk completed: WRITER_DONE, and the SEND is told one reader was served. */
void ctx_tx_done(struct tx *tx);
/* bounce_stage.c: starts chunks for the flow's granted slots, up to arena.window in flight. */
void bstage_pump(struct tx *tx);
void ctx_on_recv_req(struct engine *e, struct epeer *p, uint64_t flow, struct wire_msg *m);
void ctx_on_grant(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void ctx_on_nack(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void ctx_on_cancel(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void ctx_send_arrived(struct engine *e, struct xfer *s);
void ctx_xfer_end(struct engine *e, struct xfer *s, kvf_error_t err);
void bstage_granted(struct stage *st, const struct arena_grant *g);
void bstage_timeout(struct stage *st);
void ctx_peer_down(struct engine *e, struct epeer *p, int err);
void ctx_tick(struct engine *e, uint64_t now);
void ctx_table_ready(struct engine *e, struct itable *tab, int err, const char *msg);
void ctx_fail_all(struct engine *e, kvf_error_t code, const char *why);
void ctx_sweep(struct engine *e);
/* The GPU gather of st's chunk ended (status 0 or -errno): moves it on as after copy_gather. */
void bstage_gathered(struct stage *st, int status);

#endif
