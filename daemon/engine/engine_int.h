/* engine_int.h: the engine's core, shared by the engine*.c files (see engine.h); not for other
 * modules: struct engine, its counters and engine.c's helpers. Each part's types and functions
 * are in its own header (engine_peer.h, engine_tab.h, engine_gen.h, engine_ctx.h, frag_gen.h, frag_ctx.h,
 * engine_quar.h, engine_gpu.h); a file includes the parts it uses. Loop thread only. */
#ifndef KVF_ENGINE_INT_H
#define KVF_ENGINE_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "arena.h"
#include "arena_hold.h"
#include "bounce_way.h"
#include "copy.h"
#include "dheap.h"
#include "gpu_retire.h"
#include "engine.h"
#include "engine_ix.h"
#include "layout.h"
#include "link.h"
#include "plan.h"
#include "wire.h"

#define ENGINE_ENV_BYTES 8u            /* the flow id that opens every link header */
#define ENGINE_MAX_CREDITS 64u         /* arena max_credits: slots one writer holds + wants */
#define ENGINE_WINDOW 8u               /* credits asked per writer at once */
#define ENGINE_MAX_FWD_INSTANCES 1024u /* instances a home keeps forwarded layouts of */
#define PNACK_SEEN_MAX 64u /* daemon addresses whose last id is kept (engine_pnack.c) */

struct daemon;
struct transfers;
struct xfer;
struct reg_rank;
struct egpu_job;
struct egpu_op;
/* The engine's parts, each declared in its own header (engine_<part>.h). */
struct epeer;  /* engine_peer.h */
struct itable; /* engine_tab.h */
struct fwd_out;
struct fwd_inst;
struct rx; /* engine_gen.h */
struct rxw;
struct tx; /* engine_ctx.h */
struct stage;
struct fragreg; /* frag_gen.h */
struct fragjob; /* frag_ctx.h */
struct plocal;  /* path_local.c */
struct bh_op;    /* bounce_host.h */
struct bput_reg; /* bounce_put.h */
struct egpu_ppin; /* egpu_peer.h */
struct qflow; /* engine_quar.h */
struct dack;
struct gone_ranks; /* engine_gone.h */
struct msg_out;    /* engine_send.c */

/* The parts the engine's tick asks, each only while it holds something due (engine_due): a
 * request that needs none of them never runs their files. The drivers (gen_tick, ctx_tick, their
 * sweeps) and the arenas' waiters are asked on every tick while flows live; these are not. */
typedef enum {
    EPART_TAB,   /* tables fetching (retry, deadlines.lookup) or cached (dropped when old) */
    EPART_PNACK, /* failed readers' NACKs waiting for a table or a connection */
    EPART_QUAR,  /* quarantined flows with a time (engine_quar.c) */
    EPART_HOLD,  /* staging and messages failed peers may still read (arena_hold.h, e->shold) */
    EPART_FENCE, /* fences owed once writes to a returned peer ended */
    EPART_LOST,  /* lost peers dialed again while something of theirs is held */
    EPART_HOME,  /* registrations still to forward to their home */
    EPART_GPU,   /* GPU jobs to free once the GPUs are idle */
    EPART__COUNT
} engine_part_t;

/* A part's tick: does what is due at now and returns when it is due next (engine_now's clock;
 * ENGINE_DUE_NEXT: at the next tick), or 0 when it holds nothing timed any more. */
typedef uint64_t (*engine_part_tick_fn)(struct engine *e, uint64_t now);
#define ENGINE_DUE_NEXT 1u

/* Tagged owner of an arena reservation. */
enum resv_kind { RESV_LANDING = 1, RESV_STAGING = 2 };

struct engine_counters {
    uint64_t remote_recvs, remote_done, remote_failed;
    uint64_t flows, flows_done, flows_failed;
    uint64_t chunks_put, chunks_am, bytes_put, bytes_am, chunks_landed, bytes_landed;
    uint64_t staging_fallbacks, staging_held, msgs_held, bound_violations, stale_epochs;
    uint64_t tables_served, tables_fetched, table_nacks, table_retries, layouts_forwarded,
        forwards_refused;
    uint64_t layouts_sent, layouts_referenced, layouts_decoded, layouts_missed; /* laycache */
    uint64_t path_bounce_shm_put, path_bounce_am;
    uint64_t path_bounce_cma; /* flows to a peer whose arena the copy threads write over cma */
    uint64_t chunks_device, chunks_landed_device; /* device to device (bounce_dev.h) */
    uint64_t path_fragment_state, path_fragment_kv, path_bounce_gate_bytes, path_bounce_gate_blocks;
    uint64_t path_bounce_no_rkeys, fragment_puts, bytes_fragment;
    uint64_t fragment_cma_writes; /* fragment runs written into the pools over cma, per call */
    uint64_t fragment_copy_jobs;  /* fragment programs the copy threads wrote over cma */
    uint64_t peers_exited_reclaimed; /* frozen lost peers whose exit ended their hold */
    uint64_t peers_lost, nacks_sent, nacks_recv, slots_reclaimed, replans, bytes_local_writers;
    uint64_t path_bounce_gpu_pools, gpu_gathers, gpu_scatters, bytes_gpu_gathered;
    uint64_t bytes_gpu_scattered, gpu_failures;
    /* bounce chunks on the host (bounce_host.c, bounce_put.c): copies and the put/gather rule */
    uint64_t host_gathers, host_scatters, bytes_host_gathered, bytes_host_scattered, direct_puts;
    /* the ways of bounce chunks (bounce_way.h): [way][0] taken, [way][r] refused for reason r */
    uint64_t ways[BWAY__COUNT][1 + BWAY_REASONS];
    uint64_t peer_arenas_pinned, peer_arenas_unpinned, peer_arena_pin_failures;
    uint64_t reader_nacks_sent, reader_nacks_recv; /* engine_nack.c */
    uint64_t reader_nacks_queued, reader_nacks_unsent; /* engine_pnack.c: waited, never sent */
    uint64_t reader_nacks_stale; /* dropped: their daemon restarted meanwhile (engine_pnack.c),
                                    or another epoch than the home's here (engine_nack.c) */
    uint64_t frag_holds; /* failed fragment flows whose report waited for their drain */
    uint64_t link_waits; /* link starts that waited for their interface (engine_linkwait.c) */
    uint64_t last_wall_ns, last_bytes; /* the last remote request done: first chunk to DONE */
};

struct engine {
    struct daemon *d;          /* borrowed: owns us */
    struct engine_req req;     /* the request side above us (engine.h) */
    const struct engine_drive *drive; /* the drivers, for the parts below them (engine_drive.h) */
    struct link *link;         /* owned; NULL without a cluster secret, or while its start
                                  waits for its interface (lw) */
    struct linkwait *lw;       /* owned: the link's start waiting (engine_linkwait.c); NULL */
    struct arena *arena;       /* owned; landing slots over [0, stage_off); NULL without link */
    struct arena *stage_arena; /* owned; staging slots over [stage_off, len); NULL: shared */
    uint64_t stage_off;
    struct arena_hold *shold;  /* owned: staging memory failed peers may still read (arena_hold.h) */
    uint8_t *arena_base;
    size_t arena_len;
    char self_addr[WIRE_ADDR_MAX]; /* listen.address:port as peers reach us; "" without */
    uv_timer_t tick;
    uv_timer_cb tick_cb;       /* engine.c's tick: engine_kick_tick starts it */
    uint64_t due[EPART__COUNT]; /* when each part is next asked; 0: it holds nothing due */
    bool tick_inited, stopping, draining, warned_no_secret;
    uint64_t next_key, next_flow;
    struct epeer *peers;
    struct itable *tables;
    struct rx *rxs;
    struct tx *txs;
    struct dheap rx_due, tx_due; /* rxs and txs by deadline: the tick pops what expired */
    struct stage *stages;       /* in flight */
    struct msg_out *msgs;       /* control messages in flight (engine_send.c) */
    struct fwd_out *fwds;       /* registrations still to forward */
    struct fwd_inst *fwd_insts; /* as a home: forwarded layouts */
    struct itable *home_tab;    /* as a home: the last table built (home_table) */
    uint64_t forwards_seen;
    uint32_t n_fwd_insts;
    struct fragreg *fragregs; /* generation ranks' pools registered with UCX */
    struct fragjob *frags;    /* fragment puts in flight */
    struct plocal *plocals;   /* local writers' copies on the copy threads (path_local.c) */
    bool warned_frag;
    struct qflow *qflows; /* generation side: quarantined flows (engine_quar.c) */
    struct dack *dacks;   /* context side: drained acks owed */
    struct fence *fences; /* fences sent to returned peers, or owed to them (engine_fence.c) */
    uint64_t fence_serial;
    struct gone_ranks *gone; /* context ranks that went away (engine_gone.c); owned */
    struct elost *lost;   /* peers lost a moment ago, frozen ones watched (engine_lost.c) */
    struct pnack *pnacks; /* failed readers' NACKs waiting (engine_pnack.c) */
    uint32_t n_pnacks;
    /* the daemon id last heard at each address we connected to (engine_pnack.c): a restarted
     * daemon has a new one */
    struct pnack_seen {
        char addr[WIRE_ADDR_MAX];
        char id[LINK_HOST_MAX + 2 * LINK_ID_BYTES + 2];
        uint64_t at_ms;
    } pn_seen[PNACK_SEEN_MAX];
    uint64_t flow_base;   /* random start of this run's flow ids */
    /* GPU pools (engine_gpu.c) */
    struct gpu *gpu;                    /* borrowed: the daemon's; NULL or CPU mode: none */
    void *arena_dev;                    /* device alias of arena_base (page-locked); NULL: not */
    uint8_t *darena;                    /* the device arena (bounce_dev.h); NULL: none */
    char darena_why[320];
    char arena_why[768];                /* placement and why, for status */
    struct egpu_op *gpu_ops;            /* kernels in flight */
    struct egpu_ppin *peer_pins;        /* peers' arenas page-locked here (egpu_peer.h) */
    struct btl *tl;                     /* owned: chunk timeline (bounce_tl.h); NULL: off */
    bool bounce_ce;                     /* GPU chunks cross PCIe by copy engines (bounce_ce.h) */
    struct bce_table *ce_scratch;       /* owned: their device scratch per stream; NULL: none */
    struct gpu_retire_list gpu_retired; /* jobs freed when the GPUs are idle */
    struct engine_ix ix;                /* per-request lookups by hash (engine_ix.h) */
    struct bh_op *host_ops; /* bounce copies on the copy threads (bounce_host.c) */
    struct bput_reg *bputs; /* context ranks' pools registered with UCX (bounce_put.c) */
    struct engine_counters c;
};

/* engine_clock.c */
uint64_t engine_now(const struct engine *e);
void engine_kick_tick(struct engine *e);
/* Part `part` holds something due at at_ms (ENGINE_DUE_NEXT: the next tick): the tick asks it
 * then (the earlier of two registrations holds) and keeps running, or wakes for it. */
void engine_due(struct engine *e, engine_part_t part, uint64_t at_ms);
/* The earliest registration, 0 when no part holds anything. */
uint64_t engine_next_due(const struct engine *e);
/* The arena staging slots come from, and the region offset of its byte 0. */
static inline struct arena *engine_stage_arena(const struct engine *e, uint64_t *off)
{
    *off = e->stage_arena ? e->stage_off : 0;
    return e->stage_arena ? e->stage_arena : e->arena;
}
/* arena.window: chunks in flight per writer flow, at most ENGINE_MAX_CREDITS. */
uint32_t engine_window(const struct engine *e);
/* engine_send.c. Encodes m and sends it to p with the flow envelope. 0 or -errno. A send that
 * fails after it went out keeps its bytes for as long as the peer may still read them (cma
 * rendezvous: arena_hold.h under the peer's share key), as a failed chunk's are. */
int engine_send_msg(struct epeer *p, uint64_t flow, const struct wire_msg *m);
/* Whether a control message to the peer of share key `key` is in flight. */
bool engine_msgs_in_flight(const struct engine *e, uint64_t key);
/* reason: what the generation side does about it beyond failing the flow (wire.h's NACK). */
int engine_send_nack(struct epeer *p, uint64_t flow, uint64_t req_id, uint32_t writer,
                     kvf_error_t code, wire_nack_reason_t reason, const char *msg);

#endif
