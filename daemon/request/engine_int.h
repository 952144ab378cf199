/* engine_int.h: internals shared by the engine*.c files (see engine.h); not for other modules.
 * Loop thread only. */
#ifndef KVF_ENGINE_INT_H
#define KVF_ENGINE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "arena.h"
#include "copy.h"
#include "gpu_retire.h"
#include "engine.h"
#include "layout.h"
#include "link.h"
#include "plan.h"
#include "wire.h"

#define ENGINE_ENV_BYTES 8u            /* the flow id that opens every link header */
#define ENGINE_MAX_CREDITS 64u         /* arena max_credits: slots one writer holds + wants */
#define ENGINE_WINDOW 8u               /* credits asked per writer at once */
#define ENGINE_MAX_FWD_INSTANCES 1024u /* instances a home keeps forwarded layouts of */

struct daemon;
struct transfers;
struct xfer;
struct reg_rank;
struct egpu_job;
struct egpu_op;

/* One peer daemon, for as long as its link peer lives. */
struct epeer {
    struct engine *e;
    struct link_peer *lp;     /* borrowed from the link; NULL once down */
    uint64_t key;             /* serial: the arena's quarantine key */
    char addr[WIRE_ADDR_MAX]; /* "host:port" we connected to; "" for an inbound peer */
    bool outbound, up;
    uint64_t since_ms;
    uint32_t users; /* requests (rx writers, tx flows, table fetches) using it */
    uint64_t chunks_sent, chunks_recv, bytes_sent, bytes_recv, puts, ams;
    struct epeer *next;
};

/* A context instance's table as the generation side caches it (or the home builds it). */
struct itable {
    char instance[LAYOUT_NAME_MAX];
    char home[WIRE_ADDR_MAX];
    uint64_t epoch;
    uint32_t n;                   /* ranks; 0 while fetching */
    struct layout *ranks;         /* owned, n */
    char (*addrs)[WIRE_ADDR_MAX]; /* owned, n: the daemon hosting each rank */
    enum { TAB_FETCHING, TAB_READY } state;
    uint64_t fetched_ms, deadline_ms;
    uint64_t retry_ms;  /* fetching: ask the home again then (0: not waiting to retry) */
    int nack_code;      /* fetching: the home's last answer was this NACK (0: none) */
    char nack_msg[WIRE_TEXT_MAX];
    struct epeer *peer; /* the home while fetching */
    /* verdict cache: generation ranks found incompatible at this epoch */
    uint32_t n_bad;
    struct tab_verdict {
        uint64_t worker_id;
        int code;
        char msg[WIRE_TEXT_MAX];
    } bad[16];
    struct itable *next;
};

/* Tagged owner of an arena reservation. */
enum resv_kind { RESV_LANDING = 1, RESV_STAGING = 2 };

struct rx;

/* Generation side: one writer of one RECV. */
struct rxw {
    enum resv_kind kind; /* RESV_LANDING; first field: arena resv->data points here */
    struct rx *rx;
    uint32_t idx, ctx_rank;
    uint64_t flow;
    struct epeer *peer;
    struct arena_resv resv;
    bool resv_open, req_sent, writer_done;
    bool no_nack; /* the writer's daemon ended the flow: no NACK back */
    bool local;   /* the writer rank is registered here: pool to pool (engine_local.c) */
    uint64_t extent, scattered;
    uint32_t n_out; /* grants out (sent or to send), not yet landed */
    struct arena_grant out[ENGINE_MAX_CREDITS];
};

/* The generation side's request: lookup (the table) -> connect (planned, writers starting) ->
 * moving (RECV_REQs out, chunks landing) -> ended; a stale table sends connect or moving back to
 * lookup once (replan). rx_set_state (engine_gen.c) refuses every other edge. */
enum rx_state { RX_LOOKUP, RX_CONNECT, RX_MOVING, RX_ENDED, RX__COUNT };

struct rx {
    struct engine *e;
    struct transfers *t;        /* borrowed */
    struct xfer *x;             /* borrowed until engine_xfer_end; NULL after */
    char *gen_json;             /* owned: the generation rank's layout, for RECV_REQ */
    struct layout *ctx_layouts; /* owned copy of the table when a writer is local, n_ctx */
    uint32_t n_ctx;
    uint64_t req_id;
    char home[WIRE_ADDR_MAX];
    char ctx_instance[LAYOUT_NAME_MAX];
    enum rx_state state;
    struct itable *tab; /* borrowed while READY */
    uint64_t epoch;
    struct plan plan;
    bool planned, retried;
    wire_path_t path; /* bounce or fragment, for every writer */
    uint32_t n_w;
    struct rxw *w; /* owned, n_w */
    uint64_t phase_deadline_ms, deadline_ms;
    uint64_t started_ms;
    /* GPU pools (engine_gpu.c): one job per writer, scatters in flight, a failure held until
     * they ended (the worker must not reuse blocks under a running kernel) */
    struct egpu_job **gpu; /* owned references, n_w; NULL: host pools */
    uint32_t gpu_busy, gpu_serial; /* serial: bumped by a replan (older scatters are stale) */
    kvf_error_t held;
    char held_msg[WIRE_TEXT_MAX];
    uint64_t t0_ns;     /* RECV taken (uv_hrtime) */
    uint64_t moving_ns; /* first chunk landed: the last request's wall time starts here */
    struct rx *next;
};

/* Context side: one flow (a generation rank's RECV_REQ for one writer of ours). */
struct tx {
    struct engine *e;
    struct epeer *peer;
    uint64_t flow;
    struct wire_msg rr; /* the decoded RECV_REQ (owned) */
    struct layout gen;  /* decoded from rr */
    struct xfer *send;  /* borrowed until engine_xfer_end; NULL before the meeting */
    bool planned, ended, done_sent;
    bool wait_table, refetched; /* waiting for the instance's table from its home */
    struct fragjob *frag;       /* fragment path: its puts in flight */
    char home[WIRE_ADDR_MAX];   /* the writer rank's home when it is not this daemon */
    struct plan plan;
    const struct plan_writer *pw;
    uint64_t sent, completed; /* extent bytes handed to the link, completed */
    uint32_t n_ops;           /* staging operations in flight */
    uint32_t q_head, q_len;   /* granted landing slots not yet filled (ring) */
    struct wire_grant q[ENGINE_MAX_CREDITS];
    uint64_t deadline_ms;
    struct egpu_job *gpu; /* owned reference: the writer's program on its GPU; NULL: host pools */
    struct tx *next;
};

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
    int err;             /* of the put, reported after the flush */
    struct dack *dack;   /* the failed flow's drain ack waiting for this chunk */
    struct wire_grant g; /* the landing slot it fills */
    uint8_t hdr[ENGINE_ENV_BYTES + 64];
    size_t hdr_len;
    struct stage *next;
};

/* Non-home side: a registration to forward to its instance's home. */
struct fwd_out {
    char home[WIRE_ADDR_MAX];
    char instance[LAYOUT_NAME_MAX];
    uint32_t rank;
    char *json;         /* owned: the layout */
    struct epeer *peer; /* the home, once connecting */
    bool sent;
    struct fwd_out *next;
};

/* Home side: the layouts other daemons forwarded for one instance. */
struct fwd_inst {
    char instance[LAYOUT_NAME_MAX];
    uint32_t n;                   /* tp * pp */
    struct layout *ranks;         /* owned, n */
    char (*addrs)[WIRE_ADDR_MAX]; /* owned, n */
    bool *have;                   /* owned, n */
    uint64_t epoch;
    struct fwd_inst *next;
};

/* Generation side: a rank's host pools registered with UCX for the fragment path. */
struct fragreg {
    const struct reg_rank *rk; /* borrowed: dropped by engine_rank_removed */
    uint32_t n;
    struct link_mreg *m[LAYOUT_MAX_POOLS];
    struct fragreg *next;
};

/* Context side: the puts of one fragment flow. */
struct fragjob {
    struct engine *e;
    struct tx *tx;    /* NULL once the flow ended */
    uint32_t pending; /* puts + the flush not yet completed */
    uint64_t puts;
    int err;
    bool issued, own_mem;
    struct copy_mem mem; /* a departing rank's mappings, unmapped at the end */
    struct fragjob *next;
};

/* Generation side: a flow whose landing slots are quarantined until its drain is acked. */
struct qflow {
    uint64_t flow;
    struct epeer *peer; /* NULL once lost */
    uint64_t at_ms;     /* 0: waiting for the ack; else reclaim at (peer lost) */
    struct qflow *next;
};

/* Context side: a failed flow's chunks still in flight; CANCEL(flow) when they completed. */
struct dack {
    struct epeer *peer;
    uint64_t flow, req_id;
    uint32_t writer, n;
    struct dack *next;
};

struct engine_counters {
    uint64_t remote_recvs, remote_done, remote_failed;
    uint64_t flows, flows_done, flows_failed;
    uint64_t chunks_put, chunks_am, bytes_put, bytes_am, chunks_landed, bytes_landed;
    uint64_t staging_fallbacks, bound_violations, stale_epochs;
    uint64_t tables_served, tables_fetched, table_nacks, table_retries, layouts_forwarded,
        forwards_refused;
    uint64_t path_bounce_shm_put, path_bounce_am;
    uint64_t path_fragment_state, path_fragment_kv, path_bounce_gate_bytes, path_bounce_gate_blocks;
    uint64_t path_bounce_no_rkeys, fragment_puts, bytes_fragment;
    uint64_t peers_lost, nacks_sent, nacks_recv, slots_reclaimed, replans, bytes_local_writers;
    uint64_t path_bounce_gpu_pools, gpu_gathers, gpu_scatters, bytes_gpu_gathered;
    uint64_t bytes_gpu_scattered, gpu_failures;
    uint64_t last_wall_ns, last_bytes; /* the last remote request done: first chunk to DONE */
};

struct engine {
    struct daemon *d;          /* borrowed: owns us */
    struct link *link;         /* owned; NULL without a cluster secret */
    struct arena *arena;       /* owned; landing slots over [0, stage_off); NULL without link */
    struct arena *stage_arena; /* owned; staging slots over [stage_off, len); NULL: shared */
    uint64_t stage_off;
    uint8_t *arena_base;
    size_t arena_len;
    char self_addr[WIRE_ADDR_MAX]; /* listen.address:port as peers reach us; "" without */
    uv_timer_t tick;
    bool tick_inited, stopping, draining, warned_no_secret;
    uint64_t next_key, next_flow;
    struct epeer *peers;
    struct itable *tables;
    struct rx *rxs;
    struct tx *txs;
    struct stage *stages;       /* in flight */
    struct fwd_out *fwds;       /* registrations still to forward */
    struct fwd_inst *fwd_insts; /* as a home: forwarded layouts */
    uint64_t forwards_seen;
    uint32_t n_fwd_insts;
    struct fragreg *fragregs; /* generation ranks' pools registered with UCX */
    struct fragjob *frags;    /* fragment puts in flight */
    bool warned_frag;
    struct qflow *qflows; /* generation side: quarantined flows (engine_quar.c) */
    struct dack *dacks;   /* context side: drained acks owed */
    uint64_t flow_base;   /* random start of this run's flow ids */
    /* GPU pools (engine_gpu.c) */
    struct gpu *gpu;               /* borrowed: the daemon's; NULL or CPU mode: none */
    void *arena_dev;               /* device alias of arena_base (page-locked); NULL: not */
    char arena_why[768];           /* placement and why, for status */
    struct egpu_op *gpu_ops;       /* kernels in flight */
    struct gpu_retire_list gpu_retired; /* jobs freed when the GPUs are idle */
    struct engine_counters c;
};

/* engine.c */
uint64_t engine_now(const struct engine *e);
void engine_kick_tick(struct engine *e);
/* The arena staging slots come from, and the region offset of its byte 0. */
static inline struct arena *engine_stage_arena(const struct engine *e, uint64_t *off)
{
    *off = e->stage_arena ? e->stage_off : 0;
    return e->stage_arena ? e->stage_arena : e->arena;
}
/* Encodes m and sends it to p with the flow envelope. 0 or -errno. */
int engine_send_msg(struct epeer *p, uint64_t flow, const struct wire_msg *m);
int engine_send_nack(struct epeer *p, uint64_t flow, uint64_t req_id, uint32_t writer,
                     kvf_error_t code, const char *msg);

/* engine_peer.c */
int epeer_get(struct engine *e, const char *addr, struct epeer **ret);
struct epeer *epeer_of(struct engine *e, struct link_peer *lp); /* creates for inbound */
void epeer_up(struct engine *e, struct link_peer *lp);
void epeer_down(struct engine *e, struct link_peer *lp, int err);
void epeer_free_all(struct engine *e);
json_t *epeer_json(const struct epeer *p);

/* engine_tab.c */
void tab_on_table_req(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void tab_on_table(struct engine *e, struct epeer *p, const struct wire_msg *m);
void tab_on_table_nack(struct engine *e, struct epeer *p, const struct wire_msg *m);
/* The ready table of (instance, home), or NULL after starting (or joining) a fetch. */
struct itable *tab_get(struct engine *e, const char *instance, const char *home, int *err);
void tab_drop(struct engine *e, struct itable *t);
void tab_tick(struct engine *e, uint64_t now);
void tab_peer_up(struct engine *e, struct epeer *p);
void tab_peer_down(struct engine *e, struct epeer *p);
bool tab_fetching(const struct engine *e);
void tab_free_all(struct engine *e);

void tab_ready(struct engine *e, struct itable *t, int err, const char *msg);
struct itable *tab_free_one(struct itable *t);

/* engine_home.c */
void home_on_forward(struct engine *e, struct epeer *p, const struct wire_msg *m);
/* The table this daemon holds as the home of instance: 0 and a new READY itable (free with
 * tab_free_one), or -ENOENT / -ENOMEM with a message. */
int home_table(struct engine *e, const char *instance, struct itable **ret, char *msg, size_t len);
void home_tick(struct engine *e);
void home_peer_down(struct engine *e, struct epeer *p);
void home_sweep(struct engine *e);
void home_free_all(struct engine *e);

/* engine_quar.c */
void quar_init_flows(struct engine *e);
bool quar_own_flow(const struct engine *e, uint64_t flow);
void quar_add(struct engine *e, uint64_t flow, struct epeer *peer);
void quar_acked(struct engine *e, struct epeer *p, uint64_t flow);
void quar_peer_down(struct engine *e, struct epeer *p);
void quar_tick(struct engine *e, uint64_t now);
bool quar_timed(const struct engine *e);
void quar_flow_ended(struct engine *e, struct epeer *p, uint64_t flow, uint64_t req_id,
                     uint32_t writer, uint32_t in_flight, struct dack **ret);
void quar_stage_done(struct engine *e, struct dack *d);
void quar_ack_unknown(struct epeer *p, uint64_t flow, const struct wire_msg *m);
void quar_free_all(struct engine *e);

/* engine_frag.c */
void frag_rank_registered(struct engine *e, struct reg_rank *rk);
wire_path_t frag_choose(struct engine *e, const struct xfer *x, const struct plan *pl);
int frag_fill_rkeys(struct engine *e, const struct xfer *x, struct wire_recv_req *q);
int frag_start(struct tx *tx, const struct copy_mem *src, char *msg, size_t len);
void frag_tx_gone(struct engine *e, struct tx *tx);
void frag_send_gone(struct engine *e, struct tx *tx, struct xfer *s);
void frag_free_all(struct engine *e);
void frag_jobs_free(struct engine *e);

/* engine_gen.c */
void gen_recv(struct engine *e, struct transfers *t, struct xfer *r, const char *home);
void gen_table_ready(struct engine *e, struct itable *tab, int err, const char *msg);
void gen_peer_up(struct engine *e, struct epeer *p);
void gen_peer_down(struct engine *e, struct epeer *p, int err);
void gen_on_grant(struct rxw *w, const struct arena_grant *g, uint32_t n);
void gen_on_timeout(struct rxw *w);
int gen_on_rndv(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_chunk *c,
                size_t len, void **dest);
void gen_on_chunk(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_chunk *c,
                  const void *data, size_t len);
void gen_on_writer_done(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void gen_on_nack(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void gen_xfer_end(struct engine *e, struct rx *rx, kvf_error_t err);
void gen_tick(struct engine *e, uint64_t now);
void gen_fail_all(struct engine *e, kvf_error_t code, const char *why);
void gen_sweep(struct engine *e);
void gen_rx_fail(struct rx *rx, kvf_error_t code, const char *msg);
const char *rx_state_to_string(enum rx_state s);
/* Whether from -> to is an edge of the rx state machine. */
bool rx_state_edge_ok(enum rx_state from, enum rx_state to);
void gen_check_done(struct rx *rx);

/* engine_local.c */
void local_start(struct rxw *w);
void local_send_arrived(struct engine *e, struct xfer *s);

/* engine_ctx.c */
void ctx_on_recv_req(struct engine *e, struct epeer *p, uint64_t flow, struct wire_msg *m);
void ctx_on_grant(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void ctx_on_nack(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void ctx_on_cancel(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void ctx_send_arrived(struct engine *e, struct xfer *s);
void ctx_xfer_end(struct engine *e, struct xfer *s, kvf_error_t err);
void ctx_stage_granted(struct stage *st, const struct arena_grant *g);
void ctx_stage_timeout(struct stage *st);
void ctx_peer_down(struct engine *e, struct epeer *p, int err);
void ctx_tick(struct engine *e, uint64_t now);
void ctx_table_ready(struct engine *e, struct itable *tab, int err, const char *msg);
void ctx_frag_done(struct tx *tx);
void ctx_frag_failed(struct tx *tx, int err);
void ctx_fail_all(struct engine *e, kvf_error_t code, const char *why);
void ctx_sweep(struct engine *e);
/* The GPU gather of st's chunk ended (status 0 or -errno): moves it on as after copy_gather. */
void ctx_stage_gathered(struct stage *st, int status);
/* engine_gen.c: chunk w->out[i] is in the rank's pools: its credit goes back, the next is asked
 * (the request may end: DONE). */
void gen_landed(struct rxw *w, uint32_t i);

/* engine_gpu.c: the bounce path with GPU pools (see there) */
void egpu_arena_init(struct engine *e);
void egpu_arena_json(const struct engine *e, json_t *o);
/* The pools a plan of rk addresses: its GPU mappings, or its host mappings. */
const struct copy_mem *egpu_rank_mem(const struct reg_rank *rk);
/* Must the request take the bounce path because GPU pools are on either side? (counted) */
bool egpu_bounce_only(struct engine *e, const struct xfer *x, const struct itable *tab,
                      const struct plan *pl);
/* The writer rank's pools are on a GPU: its chunks are gathered by kernels. */
bool egpu_tx_on_gpu(const struct tx *tx);
/* A flow of a GPU writer rank is planned: its program uploaded. KVF_OK or the error + message. */
kvf_error_t egpu_tx_plan(struct tx *tx, char *msg, size_t len);
void egpu_tx_gone(struct tx *tx);
/* Launches the gather of st's chunk into its staging slot; ctx_stage_gathered follows. 0, or
 * -errno with a message (nothing runs then). */
int egpu_gather(struct stage *st, char *msg, size_t len);
kvf_error_t egpu_rx_start(struct rx *rx, char *msg, size_t len);
void egpu_rx_gone(struct rx *rx);
/* Launches the scatter of a landed chunk; gen_landed follows. 0 or -errno + message. */
int egpu_scatter(struct rx *rx, uint32_t widx, const struct arena_grant *g, char *msg,
                 size_t len);
/* A scatter of this (generation side) flow is running: its landing slots must stay. */
bool egpu_flow_busy(const struct engine *e, uint64_t flow);
/* Frees retired programs once no GPU completion is outstanding (from the tick). */
void egpu_tick(struct engine *e);
/* engine_stop: waits for the engine's kernels and completes them cancelled; then (after the
 * sweeps) frees every program and unpins the arena. */
void egpu_stop_kernels(struct engine *e);
void egpu_free(struct engine *e);

#endif
