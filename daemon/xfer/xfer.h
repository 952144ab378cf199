/* xfer.h: the request object, one per SEND or RECV a worker made (docs/DESIGN.md §7): its one
 * state machine (xfer_state.c checks every edge), its deadlines, the failure it holds while its
 * pools are written. The request table above (daemon/request/transfers.h) owns and drives it;
 * the engine below it reads it and reports through the ops it was given (engine.h), so both see
 * one definition here, below both. Loop thread only. */
#ifndef KVF_XFER_H
#define KVF_XFER_H

#include <stdbool.h>
#include <stdint.h>

#include "dheap.h"
#include "kvferry.h"
#include "proto.h"
#include "readers.h"
#include "xfer_phases.h"

struct xclient;
struct xstream;
struct stream_copy;

/* A failed reader that read every context rank (the engine's reader_failed op, xfer_nack.h). */
#define XFER_NACK_ALL UINT32_MAX
struct reg_rank;
struct rx;
struct xgpu_job;
struct copyeng_job;
struct req;
struct transfers;

typedef enum {
    XFER_WAITING = 0, /* recv: for its writers' SENDs; send: for its readers */
    XFER_COPYING,     /* recv: bytes moving */
    XFER_DONE,        /* recv: DONE sent; send: SENT sent */
    XFER_FAILED,      /* FAILED sent (or the worker is gone) */
    XFER__COUNT
} xfer_state_t;

const char *xfer_state_to_string(xfer_state_t s);
/* Whether from -> to is an edge of the request state machine (xfer_set_state allows no other). */
bool xfer_state_edge_ok(xfer_state_t from, xfer_state_t to);

/* Which end of a request a struct xfer is (the values are the letters logs have always shown). */
typedef enum {
    XFER_SEND = 'S', /* a context rank's SEND */
    XFER_RECV = 'R', /* a generation rank's RECV */
} xfer_side_t;

/* A failure (cancel, deadline, lost writer, an engine error) that came while a RECV's pools
 * were still being written: by its local copy (gpu_job, cpu_job) or by the engine's part
 * (engine_recv_writing: scatter kernels, copy threads, fragment puts). The worker hears of it
 * once the writes ended, so it never reuses blocks under them. The first failure is kept. */
struct xfer_held {
    kvf_error_t code; /* KVF_OK: none held */
    char msg[PROTO_MSG_MAX + 1];
};

struct xfer {
    uint64_t id;                /* daemon-wide, for logs */
    xfer_side_t side;
    uint64_t req_id;
    struct xclient *conn;       /* borrowed */
    struct transfers *owner;    /* borrowed: the request table that made it (transfers.h) */
    struct reg_rank *rank;      /* borrowed: the requesting rank */
    char ctx_instance[64];      /* send: the rank's own instance */
    int32_t ctx_dp_rank;
    uint64_t tokens;            /* recv: the prompt's tokens (plan_input.tokens), 0: not given */
    struct proto_items items;   /* owned ids */
    uint32_t n_readers, served;
    uint32_t remote_served;     /* send: of served, the remote flows that read it (the rest are
                                   the local RECVs of its generation, counted by reqtab.h) */
    uint32_t derived;           /* send with n_readers 0: the readers the daemon counted
                                   (readers.h), 0 while unknown */
    struct readers_tally readers; /* send, between daemons: what its RECV_REQs told of them */
    uint64_t bytes;
    xfer_state_t state;
    uint64_t created_ms, deadline_ms;
    struct dheap_node due;      /* its next deadline in t->due (the lookup's, then its own);
                                   not queued once the engine follows it (its clock) or ended */
    uint64_t taken_ns;          /* the SEND or RECV taken (uv_hrtime) */
    uint64_t lookup_ns, credit_ns, moving_ns; /* recv: phase stamps (xfer_phases.h) */
    uint64_t validated_ns;                             /* recv: its plan accepted */
    struct xfer_lstamps ls;     /* recv, same daemon: its host timeline (xfer_phases.h) */
    uint64_t bytes_done;        /* recv: bytes landed so far (kvferryctl transfers) */
    uint64_t bytes_planned;     /* recv: bytes its plan moves, once planned (0 before) */
    char peer[256];             /* recv: the context home daemon of a remote request, else "";
                                   send: the link id of its first remote reader's daemon, else "" */
    uint64_t lookup_deadline_ms; /* recv: the context instance must be known by then */
    struct rx *rx;              /* recv between daemons: the engine's part of it (engine_gen.h),
                                 * owned: made by engine_recv, freed with x by the sweep (a
                                 * part whose pools are still written keeps x, ended, on
                                 * t->draining until engine_recv_idle); NULL on the local path */
    struct xgpu_job *gpu_job;   /* recv: its GPU copy in flight (xfer_gpu.c); detached when
                                   the request ends first */
    struct copyeng_job *cpu_job; /* recv: its host copy on the copy threads (xfer_local.c);
                                   cancelled when the request ends first */
    struct xfer_held held;      /* recv: the failure held while its pools are written */
    bool release_owed;          /* recv: ended FAILED|HELD: RELEASED owed to conn_id once its
                                   engine part is idle (xfer_held.c) */
    uint64_t conn_id;           /* its connection's id (xclient.id): x->conn may close first */
    struct xstream *stream;     /* send, owned: a streaming SEND's readiness (xstream.h) */
    struct stream_copy *scopy;  /* recv, owned: its copy of streaming SENDs on this daemon
                                   (daemon/request/stream.h) */
    struct req *req;            /* its entry in the request table while not ended (reqtab.h) */
    uint64_t gen;               /* the SEND generation it met (0: none yet) */
    uint32_t rank_idx;          /* send: the context rank's index in its instance */
    struct xfer *prev, *next;   /* t->list */
    struct xfer *dead_next;     /* t->dead: ended, freed by the next sweep */
};

/* Holds a failure of RECV x while its pools are written (the first one held is kept). */
void xfer_hold(struct xfer *x, kvf_error_t code, const char *msg);

#endif
