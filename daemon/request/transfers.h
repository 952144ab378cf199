/* transfers.h: the requests in flight of the local path (docs/DESIGN.md §7). A SEND from a context
 * rank and the RECVs of generation ranks meet by (context instance, request id), in either
 * order. A RECV is checked and planned against the context instance's table when it arrives
 * (incompatible: PEER_INCOMPATIBLE at once, to the generation rank only; an instance not
 * registered yet is waited for up to deadlines.lookup, then UNKNOWN_INSTANCE), waits until every
 * writer of its plan has SENT, then runs pool to pool (xfer_local.c) and reports DONE.
 * n_readers of a SEND is the number of generation ranks that will RECV this request from this
 * context instance (e.g. the generation instance's rank count), whether or not each needs this
 * particular rank's bytes: completed RECVs are tallied per (context instance, request id, SEND
 * generation) in the request table (reqtab.h), so the count is right in any order, and a reused
 * id never counts the readers of an ended request; an id reused while the previous request of
 * it is in flight fails BAD_REQUEST (reqtab.h says when). A SEND ends with SENT once the tally reaches n_readers
 * (n_readers > 0), or at its deadline (deadlines.send_wait + deadlines.transfer): SENT if at
 * least one RECV completed, else FAILED/TIMEOUT; either way its blocks may be reused.
 * n_readers 0: the daemon derives the count (readers.h) from its readers and then ends the
 * SEND as if the worker had passed it; where it cannot, the deadline rule above applies.
 * A reader that failed (refused, incompatible, dead, cancelled, timed out) is told to the SEND
 * (xfer_nack.h): the SEND ends FAILED with that reason as soon as no reader can come, i.e. once
 * served + failed reach the count (some served and the rest failed is FAILED too), or, with the
 * count still unknown, at once on an incompatible verdict; never while a reader still copies
 * from its blocks.
 * A RECV whose writers do not all SEND within deadlines.send_wait (or its own deadline_ms)
 * fails with TIMEOUT; a writer whose worker goes away fails it with PEER_LOST.
 * Each request is a state machine (xfer_set_state checks the allowed edges and logs them);
 * terminal requests are freed, never reused. Owned by struct workers. Loop thread only. */
#ifndef KVF_TRANSFERS_H
#define KVF_TRANSFERS_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "dheap.h"
#include "gpu_retire.h"
#include "kvferry.h"
#include "plan_tcache.h"
#include "proto.h"
#include "engine.h"
#include "hmap.h"
#include "readers.h"
#include "reqtab.h"
#include "xfer_nack.h"
#include "xfer_phases.h"
#include "xfer_recent.h"
#include "xfer.h"
#include "xfer_writers.h"

struct daemon;
struct registry;
struct xclient;
struct reg_rank;
struct xgpu_job;
struct copyeng_job;
struct rx;

struct transfers_counters {
    uint64_t sends, recvs, done, sent, failed[KVF_E__COUNT];
    uint64_t held, released; /* RECVs ended FAILED|HELD; of them, released (xfer_held.c) */
    uint64_t bytes_local, bytes_remote;
    uint64_t local_gpu, bytes_local_gpu; /* of which copied by GPU kernels (xfer_gpu.c) */
    uint64_t local_copy_ns;     /* plan + checks + copy of local RECVs */
    uint64_t local_memcpy_ns;   /* of which copy_direct, or GPU copy (upload to completion) */
    uint64_t local_gpu_bind_ns, local_gpu_launch_ns, local_gpu_run_ns; /* xfer_gpu.c phases */
    uint64_t local_gpu_kernel_ns; /* of run: the kernels' GPU time (timing events) */
};

/* What the request table needs of the worker socket above it, given at transfers_init (it
 * calls nothing up there by name). */
struct transfers_ops {
    /* One event to the worker of connection c (dropped once c is closing); flags PROTO_EVF_*
     * (conversation 2 only: the caller checks c->conv). */
    void (*event)(void *ctx, struct xclient *c, uint64_t req_id, uint32_t kind, kvf_error_t error,
                  uint64_t bytes, const char *message, uint32_t flags);
    /* RELEASED for req_id to the connection with that id, if it is still open; whether it was
     * (a held end's connection may have closed since: xfer_held.c). */
    bool (*released)(void *ctx, uint64_t conn_id, uint64_t req_id);
    /* Whether the worker socket refuses new requests (drain) or has stopped (shutdown). */
    bool (*draining)(void *ctx);
    bool (*stopped)(void *ctx);
};

struct transfers {
    struct daemon *d;           /* borrowed: the loop, the config, the engine */
    struct registry *reg;       /* borrowed: the ranks and instances requests name */
    const struct transfers_ops *ops; /* borrowed: static */
    void *ops_ctx;              /* borrowed: the worker socket that owns us */
    uv_timer_t tick;            /* deadline sweep while anything is in flight */
    struct xfer *list;          /* owned: every request not yet freed */
    struct xfer *dead;          /* of those, the ended ones (freed by sweep) */
    struct xfer *draining;      /* ended, off the list, whose engine part still writes into
                                   their pools: freed by transfers_reap once it is idle */
    struct reqtab reqs;         /* (context instance, id) -> its requests, readers' tally and
                                   failed readers, per SEND generation */
    struct hmap by_conn;        /* (connection, id) -> its request not ended */
    struct dheap due;           /* requests by their next deadline: the tick pops what expired */
    uint64_t fails_dropped;     /* failed readers not held (xfer_nack.h limits) */
    uint32_t n;
    uint64_t next_id;
    struct transfers_counters counters;
    struct xfer_phases phases;  /* completed RECVs' phase histograms */
    struct xfer_recent recent;  /* finished requests, shown a while by `transfers` */
    struct gpu_retire_list gpu_retired; /* finished GPU jobs freed when the GPU is idle */
    struct xfer_wcache wcache;  /* same-daemon RECVs' writers per registrations (xfer_writers.h) */
    struct plan_tcache tcache;  /* same-daemon RECVs' plan templates (xfer_local.c) */
    uint64_t read_ns, frame_ns, entry_ns; /* the worker frame being handled: its socket read
                                             began, its decode began (wconn.c), it came
                                             to transfers: the local timeline's first stamps */
};

/* The same-daemon path's plan templates (lib/plan_tcache.h): a kimi-k3 8k template is under
 * 1 MiB, a llama-3-70b TP2 -> TP1 8k one 19 MiB (bench_plan). */
#define XFER_TCACHE_ENTRIES 64
#define XFER_TCACHE_BYTES (64u << 20)

/* The table's side of the engine's ops (engine.h): what the engine below calls back up. */
extern const struct engine_req_ops transfers_engine_ops;

int transfers_init(struct transfers *t, struct daemon *d, struct registry *reg,
                   const struct transfers_ops *ops, void *ops_ctx);
/* Fails every request in flight, each with an event to its worker. */
void transfers_fail_all(struct transfers *t, kvf_error_t err, const char *why);
/* Closes the timer (the loop then runs its close callback) after freeing every request. */
void transfers_stop(struct transfers *t);

/* Take ownership of m's ids (left NULL in m). */
void transfers_send(struct transfers *t, struct xclient *c, struct proto_send *m);
void transfers_recv(struct transfers *t, struct xclient *c, struct proto_recv *m);
/* A rank of `instance` registered: RECVs waiting for it are looked at again. */
void transfers_registered(struct transfers *t, const char *instance);
void transfers_cancel(struct transfers *t, struct xclient *c, uint64_t req_id);
/* The connection is closing: its requests end without events; RECVs of other connections that
 * need its rank fail with PEER_LOST. Call before the rank leaves the registry. */
void transfers_conn_gone(struct transfers *t, struct xclient *c);

/* The request of connection c with id req_id that has not ended, or NULL. */
struct xfer *transfers_find_conn(const struct transfers *t, const struct xclient *c,
                                 uint64_t req_id);
/* Ends x FAILED with err and msg (its event; held while its pools are written). No sweep:
 * callable while transfers.c walks its list (the next entry point frees what ended). */
void transfers_fail_now(struct transfers *t, struct xfer *x, kvf_error_t err, const char *msg);

/* Hooks for the transfer engine (engine*.c): end a request with its terminal event (recv:
 * DONE or FAILED, send: SENT or FAILED) and free it if terminal; count one reader served by a
 * SEND (SENT once n_readers were served). Not to be called while iterating t->list. */
void transfers_end(struct transfers *t, struct xfer *x, kvf_error_t err, uint64_t bytes,
                   const char *msg);
void transfers_served(struct transfers *t, struct xfer *s, uint64_t bytes);
/* The writes into RECV x's pools ended: the failure held, if any, ends x now. */
void transfers_writes_ended(struct transfers *t, struct xfer *x);
/* Frees the ended requests on t->draining whose engine part went idle (engine_recv_idle). */
void transfers_reap(struct transfers *t);

/* xfer_held.c: RECV x's failure is held while only peers may still write its pools: whether
 * its worker hears of it now, flagged HELD (conversation 2); _end ends x so (true) or leaves
 * it held (false); _released: x's engine part went idle: RELEASED, if owed. */
bool xfer_held_report(const struct xfer *x);
bool xfer_held_end(struct transfers *t, struct xfer *x);
void xfer_held_released(struct transfers *t, struct xfer *x);
/* A reader of (inst, req_id) failed and will not come (writer: the context rank it read, or
 * XFER_NACK_ALL): the SENDs it would have read learn it (xfer_nack.h), now or when they come.
 * From the engine (READER_NACK, a local writer, a lost generation daemon). No sweep: callable while
 * transfers.c walks its list (the tick frees what ended). */
void transfers_reader_failed(struct transfers *t, const char *inst, uint64_t req_id,
                             uint32_t writer, kvf_error_t code, const char *msg);
/* SEND s's reading flow ended unserved: s learns its readers again, so failures counted while
 * that flow still read (xfer_nack.h waits for them) end it now. No sweep, as above. */
void transfers_reread(struct transfers *t, struct xfer *s);
/* The SEND of request req_id from rank that has not ended, or NULL: where a RECV (local path)
 * or a RECV_REQ (engine) meets its writer. */
struct xfer *transfers_find_send(const struct transfers *t, const struct reg_rank *rank,
                                 uint64_t req_id);
/* The engine started moving a RECV's bytes: waiting -> copying (shown by `transfers`). */
void transfers_copying(struct transfers *t, struct xfer *x);

json_t *transfers_json(const struct transfers *t, uint64_t now_ms);
/* The daemon at x's other end, as `peers` and the metrics' peer label name it: a RECV's writers'
 * daemon (its link id once up; before, the context home's address), a SEND's first remote
 * reader's daemon (its link id); "local" when the other end is this daemon. */
const char *transfers_peer_label(const struct xfer *x);
/* The requests finished within transfers.keep_finished, newest first (xfer_recent.h). */
json_t *transfers_finished_json(const struct transfers *t, uint64_t now_ms);
json_t *transfers_stats_json(const struct transfers *t);
/* Item ids against the rank's own layout l: group count, one slot per state group, ids in
 * range. 0, or -EINVAL with why in msg (xfer_items.c). */
struct proto_items;
int xfer_check_items(const struct layout *l, const struct proto_items *it, char *msg, size_t len);


/* xfer_local.c: runs a RECV whose writers all SENT, pool to pool. Returns 0 and the bytes
 * moved, or a typed error with a message. With GPU pools the copy is started on a daemon stream
 * and recv->gpu_job is set; host copies of at least MOVE_LOCAL_INLINE_MAX bytes go to the copy
 * threads (move_local.h) and recv->cpu_job is set: the RECV then stays COPYING until
 * transfers_copy_done. Smaller host copies run on the loop (a thread hop costs more). */
kvf_error_t xfer_local_run(struct transfers *t, struct xfer *recv, struct xfer **sends,
                           uint32_t n_ctx, uint64_t *bytes, char *msg, size_t msglen);
struct plan;
struct reg_instance;
/* Every writer's program of p inside the mapped pools of its context rank and of gen (gpu:
 * their GPU pools, else their host pools): copy_check of every op until tmpl (p's template
 * entry, or NULL) is marked fits, which plan_template_fits proves once for every id of the
 * entry's registrations (a rank that registers again has a new worker id: a new entry); from
 * then on nothing per request. KVF_OK, INTERNAL (a writer not registered so) or
 * BOUND_VIOLATION, with msg. */
kvf_error_t xfer_check_bounds(struct plan_tcache_entry *tmpl, const struct plan *p,
                              const struct reg_instance *in, const struct reg_rank *gen, bool gpu,
                              char *msg, size_t msglen);

/* The end of a RECV's copy that ran asynchronously (GPU, copy threads): DONE (e == KVF_OK) or FAILED, the
 * readers' tally, SENT to writers whose readers are all served. */
void transfers_copy_done(struct transfers *t, struct xfer *recv, kvf_error_t e, uint64_t bytes,
                         const char *msg);

/* xfer_gpu.c: the local path with GPU pools (either side GPU: both must be). Checks the plan's
 * programs against the mapped pools, uploads them to the destination's device (peer access
 * enabled between the two GPUs), launches kvk_direct on a daemon stream and sets
 * recv->gpu_job; completion comes back on the loop (gpu_notify) and ends in
 * transfers_copy_done. Never waits for the GPU. tmpl: p's template entry (NULL: none kept),
 * for xfer_check_bounds; with one, each writer runs its template's GPU program with the
 * request's ids (daemon/gpu/gpu_tprog.h). */
bool xfer_gpu_wanted(const struct reg_rank *gen, const struct reg_instance *ctx);
kvf_error_t xfer_gpu_start(struct transfers *t, struct xfer *recv, const struct plan *p,
                           struct reg_instance *ctx, struct xfer **sends,
                           struct plan_tcache_entry *tmpl, char *msg, size_t msglen);
/* Whether xfer_gpu_start takes a plan of a template hit whose writers have no ops (NULL: the
 * template's GPU programs add the request's ids; a writer bound from ops gets them from
 * xfer_local_ops). false: every plan comes with its ops substituted. */
bool xfer_gpu_lazy_ops(void);
/* The substituted plan of RECV r from its template entry (the one xfer_local_run used: valid
 * until the next call on the template cache), for a writer that runs from ops after all. */
kvf_error_t xfer_local_ops(struct xfer *r, struct xfer *const *sends,
                           const struct plan_tcache_entry *tmpl, struct plan *ret, char *msg,
                           size_t msglen);
/* Streamed (stream_local.c): RECV r's programs bound once over p (planned with marks), no
 * kernel launched; cb(t, r, e, msg) runs each time the kernels xfer_gpu_stream_run queued have
 * all ended (r alive: r->gpu_job is set while any runs), with the first failure among them.
 * KVF_OK and *ret, or the error with msg. */
struct CUevent_st;
typedef void (*xfer_gpu_batch_cb)(struct transfers *t, struct xfer *r, kvf_error_t e,
                                  const char *msg);
kvf_error_t xfer_gpu_stream_new(struct transfers *t, struct xfer *r, const struct plan *p,
                                struct reg_instance *in, xfer_gpu_batch_cb cb,
                                struct xgpu_job **ret, char *msg, size_t msglen);
/* Launches extent bytes [lo, hi) of plan writer w, one kernel after the GPU wait for mark
 * (NULL: none), behind the kernels already queued; cb runs once none is left in flight. KVF_OK
 * (launched, or nothing to launch), or the error with msg (this one not launched). */
kvf_error_t xfer_gpu_stream_run(struct xgpu_job *j, uint32_t w, uint64_t lo, uint64_t hi,
                                struct CUevent_st *mark, char *msg, size_t msglen);
/* The owner lets go: freed once its kernels ended (no cb then). NULL-safe; returns NULL. */
struct xgpu_job *xfer_gpu_stream_free(struct xgpu_job *j);
/* The request ended before its copy: the job finishes on its own (programs freed, mapping
 * references dropped at completion) without touching the request. */
void xfer_gpu_detach(struct xgpu_job *j);

#endif
