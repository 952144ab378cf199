/* engine.h: the engine between daemons (docs/DESIGN.md §5-§7, issue 5): a context rank on
 * one node, a generation rank on another, each with its own kvferryd.
 *
 * Parts (one duty per file):
 *   engine.c       start/stop: the UCX link (listen.*, cluster.secret_file) and the arena over
 *                  the link's UCX-allocated region (arena.*: three quarters landing slots, one
 *                  quarter staging slots, so sending never waits behind this daemon's own
 *                  landing credits); message dispatch; the tick that drives deadlines;
 *                  status/stats sections and control commands.
 *   engine_peer.c  peers: one struct epeer per link peer, connect on demand, loss.
 *   engine_tab.c   instance tables: TABLE_REQ/TABLE served from the registry of the home daemon
 *                  (plus the layouts forwarded to it), cached by the generation side with the
 *                  epoch; verdicts cached per (instance, epoch, generation rank).
 *   engine_gen.c   generation side: RECV -> table -> plan -> per writer RECV_REQ + credits ->
 *                  chunks land in granted slots -> scatter -> DONE.
 *   frag_gen.c     fragment path, generation side: pools registered with UCX, the gates
 *                  (gates.min_bytes / gates.min_blocks), rkeys in RECV_REQ, its path row.
 *   frag_ctx.c     fragment path, context side: one put per region into those pools.
 *   engine_home.c  homes: layouts of ranks registered away from home forwarded there.
 *   engine_quar.c  quarantined landing slots and the context side's drain acknowledgements.
 *   engine_nack.c  failed readers told to the context side (READER_NACK), so a SEND ends as soon
 *                  as no reader can come (transfers.h).
 *   engine_gpu.c   GPU pools on the bounce path: the arena page-locked for CUDA, gather and
 *                  scatter kernels through its device alias, completions on the loop.
 *   path_local.c   a writer of a spread context instance registered at this daemon: pool to
 *                  pool once its SEND is here, by the same-daemon copy (move/move_local.h).
 *   engine_ctx.c   context side: RECV_REQ meets the rank's SEND -> plan with its own ids ->
 *                  per granted slot gather into a staging slot -> put+flush+CHUNK or AM CHUNK
 *                  -> WRITER_DONE -> SENT per transfers.h.
 *   engine_recv.c  a RECV's engine part as a member of its request: writing, idle, free.
 *   path*.c        the paths as rows (path.h): local, bounce, fragment, and the rule that
 *                  picks one per request; bounce_exec.c: the bounce copies' executors (host,
 *                  GPU) as rows (bounce_exec.h). The drivers call through both.
 *
 * Envelope. Every engine message is a link message whose type is the wire type and whose link
 * header starts with a u64 little-endian "flow": the generation daemon's id of one (request,
 * generation rank, writer) stream. Wire request ids are the application's (they meet the SEND),
 * and two generation ranks of one daemon may read the same writer of the same request (TP2->TP4,
 * replicated MLA), so (peer, flow) is the key of every message after RECV_REQ. The wire message
 * rides the payload, except CHUNK whose encoded message follows the flow in the header (its
 * payload is the chunk's bytes, received straight into the landing slot, or nothing when the
 * bytes were put into the slot before).
 *
 * Stale tables: the generation side refetches a table older than ENGINE_TABLE_TTL_MS, and a
 * context daemon answers a RECV_REQ naming an epoch other than its table's with NACK
 * UNKNOWN_INSTANCE with reason STALE_TABLE (wire.h): the generation side drops its cached table and replans that
 * request once with a refetched table (a second stale answer fails it). Table epochs never
 * repeat: they mix the home's random run id, its newest registration and newest forward.
 *
 * Quarantine (engine_quar.c): a landing reservation closed while chunks may still come (a
 * failed request with credits out) keeps its slots QUARANTINED under the writer's flow id. The
 * context daemon acknowledges every failed flow with CANCEL(flow) once none of its chunks is in
 * flight; the slots are reclaimed then, or ENGINE_RECLAIM_MS after the peer was lost. Flow ids
 * start at a random value per run, so a NACK or CANCEL is routed to the side that owns the flow.
 *
 * Deadlines: deadlines.lookup bounds a table fetch, arena.reserve_timeout the first landing
 * credit (and a staging slot), deadlines.send_wait the context side's wait for the SEND, the
 * RECV's deadline (or send_wait) + deadlines.transfer the whole request. Compatibility and
 * planning are synchronous (no validation deadline).
 *
 * GPU pools (engine_gpu.c): with a GPU the arena is page-locked for CUDA at start; ranks with
 * GPU pools take the bounce path, gathered and scattered by kernels through the arena's device
 * alias (either side may be host while the other is GPU).
 *
 * Fragment flows have a pool quarantine (engine_quar.c): a failed request whose puts may still
 * land reports FAILED to its worker only once the context daemon acked the drain (its job
 * completed) or the peer was lost.
 *
 * Known limits: a dead generation worker's pools are unmapped while fragment puts to them may
 * be in flight; a forwarded rank that leaves is not withdrawn from its home until it registers
 * again.
 *
 * Ownership: struct daemon owns the engine (d->engine); the engine owns its link, arena, peers,
 * tables and the context side's flows. A remote RECV's engine part (struct rx) is owned by its
 * request (x->rx) and freed with it; the part points back at the request until it ended. Loop
 * thread only. */
#ifndef KVF_ENGINE_H
#define KVF_ENGINE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "kvferry.h"

struct daemon;
struct engine;
struct transfers;
struct xfer;
struct reg_rank;
struct rx;

#define ENGINE_TABLE_TTL_MS 10000u
#define ENGINE_RECLAIM_MS 200u
#define ENGINE_TICK_MS 20u

/* Creates the link (when cluster.secret_file is set) and the arena. No secret: the engine
 * exists, logs once that inter-daemon traffic is refused, and remote requests fail NO_ROUTE.
 * 0 or -errno with a message in err (fatal before READY). */
/* What the engine needs of the request table above it (daemon/request/transfers.h), given at
 * engine_new: it names nothing up there, and the table stays opaque here. Each op is the
 * table's function of the same name (transfers_engine_ops). */
struct engine_req_ops {
    /* The SEND of req_id from rank that has not ended, or NULL: where a RECV_REQ meets it. */
    struct xfer *(*find_send)(const struct transfers *t, const struct reg_rank *rank,
                              uint64_t req_id);
    /* One reader served by SEND s (SENT once all were). */
    void (*served)(struct transfers *t, struct xfer *s, uint64_t bytes);
    /* A RECV's bytes started moving: waiting -> copying. */
    void (*copying)(struct transfers *t, struct xfer *x);
    /* A request ends with its terminal event. */
    void (*end)(struct transfers *t, struct xfer *x, kvf_error_t err, uint64_t bytes,
                const char *msg);
    /* The writes into RECV x's pools ended: the failure it held, if any, ends it now. */
    void (*writes_ended)(struct transfers *t, struct xfer *x);
    /* Frees the ended requests whose engine part went idle. */
    void (*reap)(struct transfers *t);
    /* A reader of (inst, req_id) failed and will not come; the SENDs it would read learn it. */
    void (*reader_failed)(struct transfers *t, const char *inst, uint64_t req_id, uint32_t writer,
                          kvf_error_t code, const char *msg);
    /* SEND s's reading flow ended unserved: s learns its readers again. */
    void (*reread)(struct transfers *t, struct xfer *s);
    /* The readers SEND s waits for (n_readers, else the count derived). */
    uint32_t (*need)(struct xfer *s);
    /* RECV x's failure, held while only peers' puts may still land in its pools: ends it now,
     * flagged HELD, where its worker can hear that (RELEASED later); whether it did. */
    bool (*held_end)(struct transfers *t, struct xfer *x);
};

struct registry;
struct xfer_phases;

/* The request side as the engine sees it; every pointer borrowed from the worker socket, which
 * outlives the engine's traffic (engine_requests_gone before it is freed). */
struct engine_req {
    const struct engine_req_ops *ops; /* static */
    struct transfers *t;              /* NULL: gone (only at exit) */
    struct registry *reg;             /* the ranks and instances of this daemon */
    struct xfer_phases *phases;       /* t's phase histograms: flows served by peer */
    uint64_t epoch;                   /* the worker socket's run epoch (home tables' epochs) */
};

int engine_new(struct daemon *d, const struct engine_req *req, struct engine **ret, char *err,
               size_t errlen);
/* The request table is about to be freed: the engine calls it no more. */
void engine_requests_gone(struct engine *e);
/* Starts the link and its arenas (engine_new, or later once its interface is up:
 * engine_linkwait.c). 0 or -errno with a message; e->link NULL: the link did not start. */
int engine_link_up(struct engine *e, char *err, size_t errlen);
/* Fails every request, closes the link and the timer; run the loop, then engine_free. */
void engine_stop(struct engine *e);
struct engine *engine_free(struct engine *e);

/* Hooks from transfers.c. engine_recv takes a RECV whose context instance is homed elsewhere
 * and gives it its engine part (r->rx, owned by r); engine_send tells of a new SEND (it may
 * meet a waiting RECV_REQ); engine_send_end: SEND s ended, the flows still reading it fail. */
void engine_recv(struct engine *e, struct transfers *t, struct xfer *r, const char *ctx_home);
void engine_send(struct engine *e, struct transfers *t, struct xfer *s);
void engine_send_end(struct engine *e, struct xfer *s, kvf_error_t err);
/* Whether a flow of the engine still reads SEND s (engine_nack.c): its end waits. */
bool engine_send_reading(const struct engine *e, const struct xfer *s);
/* A RECV's engine part (struct rx, engine_gen.h), owned by its request. writing: kernels, copy
 * threads or fragment puts may still write into the rank's pools (a failure is then held,
 * xfer_hold). stop: the request failed while writing: its flows stop, and the request
 * ends (transfers_writes_ended) once the writes ended. end: the request ended; the part lets
 * go of it. idle: ended and nothing writes any more: free may run (transfers_reap). */
bool engine_recv_writing(const struct rx *rx);
/* Writing, and only by peer daemons (fragment puts, which a lost peer may end only when it
 * fences them or exits): a failure may then end the request flagged HELD (xfer_held.c). */
bool engine_recv_held_remote(const struct rx *rx);
void engine_recv_stop(struct rx *rx, kvf_error_t err, const char *msg);
void engine_recv_end(struct rx *rx, kvf_error_t err);
bool engine_recv_idle(const struct rx *rx);
void engine_recv_free(struct rx *rx);
/* Its labels (kvferryctl transfers, metrics): the daemon its remote writers are read from, by
 * its link id as `peers` lists it (the first writer whose peer is up; NULL before one is), and
 * its path's name ("bounce", "fragment"; "local" before one is chosen). NULL rx: NULL, "local". */
const char *engine_recv_peer(const struct rx *rx);
const char *engine_recv_path(const struct rx *rx);
/* 1 when addr ("host:port") is this daemon's listen address. Accepts a NULL engine (0). */
int engine_is_self(const struct engine *e, const char *addr);

/* Hook from the worker connection: a rank registered; when it names a home other than this
 * daemon, its layout is forwarded there (engine_home.c). Accepts a NULL engine. */
void engine_rank_registered(struct engine *e, struct reg_rank *rk);
/* Hook from the worker connection, before the registry removes (and unmaps) a rank. */
void engine_rank_removed(struct engine *e, struct reg_rank *rk);

/* Module rows (modules.c) and control commands (ctl_cmds.c). */
int engine_peers_status(struct daemon *d, json_t *ret);
int engine_peers_stats(struct daemon *d, json_t *ret);
int engine_arena_status(struct daemon *d, json_t *ret);
int engine_arena_stats(struct daemon *d, json_t *ret);
void engine_drain_start(struct daemon *d);
/* Reload: pushes the live keys the engine keeps copies of (arena.reserve_timeout, in both
 * arenas) to their holders; the rest it reads from d->cfg at each use. */
void engine_reloaded(struct daemon *d);
int engine_live(struct daemon *d, json_t *ret);
size_t engine_in_flight(struct daemon *d);
json_t *engine_peers_json(struct daemon *d);
json_t *engine_arena_json(struct daemon *d);

#endif
