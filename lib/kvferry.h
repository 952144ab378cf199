/* kvferry.h: the public client API of libkvferry (kvf_*), and the typed errors every part of
 * kvferry reports. Plain C types only, so it binds from Python with ctypes.
 * Thread-safety and ownership are stated per function below. */
#ifndef KVFERRY_H
#define KVFERRY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* libkvferry is built with -fvisibility=hidden: what this header declares is its API, visible. */
#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility push(default)
#endif

/* The ABI of this header: bumped whenever a struct below or a function's meaning changes in a
 * way an existing binding (ctypes, an older build) would misread. Bindings compare it with
 * kvf_abi_version() of the library they load and refuse a mismatch. */
#define KVF_ABI_VERSION 4
/* KVF_ABI_VERSION of the library as built. Thread-safe. */
uint32_t kvf_abi_version(void);
/* The library's version string ("0.1.0"). Never NULL. Thread-safe. */
const char *kvf_version(void);

/* Typed errors (docs/DESIGN.md §7). Values are stable: they travel on the wire. */
typedef enum {
    KVF_OK = 0,
    KVF_E_PEER_INCOMPATIBLE = 1,
    KVF_E_NO_ROUTE = 2,
    KVF_E_UNKNOWN_INSTANCE = 3,
    KVF_E_PEER_UNREACHABLE = 4,
    KVF_E_PEER_LOST = 5,
    KVF_E_TIMEOUT = 6,
    KVF_E_BOUND_VIOLATION = 7,
    KVF_E_CANCELLED = 8,
    KVF_E_BAD_REQUEST = 9,
    KVF_E_INTERNAL = 10,
    KVF_E__COUNT
} kvf_error_t;

/* "PEER_INCOMPATIBLE", ...; "UNKNOWN" for values out of range. Never NULL. Thread-safe. */
const char *kvf_error_to_string(kvf_error_t e);
/* Inverse of kvf_error_to_string; returns -1 for an unknown name. */
int kvf_error_from_string(const char *name);

/* ---------------------------------------------------------------------------------------------
 * libkvferry: the worker side of the local socket (docs/DESIGN.md §8). A worker process (one rank)
 * connects to its node's kvferryd, registers its layout and pools once, then issues SEND
 * (context ranks) and RECV (generation ranks) and collects events.
 *
 * Threads: every function may be called from any thread; one internal mutex serializes them.
 * kvf_connect, kvf_register and a kvf_poll that has to reconnect block for at most
 * options.connect_timeout_ms; kvf_send / kvf_recv / kvf_cancel write one frame and read what
 * the daemon sent meanwhile into the event queue (so events never back up behind them).
 * Event loop use: put kvf_fd() in your poll/epoll set (readable when an event may be waiting or
 * a reconnect is due) and call kvf_poll(c, &ev, 0) until it returns 0. The fd stays the same
 * across reconnects.
 * Reconnect: when the daemon goes away, every request in flight fails with KVF_E_PEER_LOST (never
 * hangs), a KVF_EV_DISCONNECTED event is queued, and kvf_poll reconnects with exponential
 * backoff and re-registers the same layout and pools, then queues KVF_EV_RECONNECTED. While
 * disconnected, kvf_send / kvf_recv return -ENOTCONN.
 * Request ids are the caller's (uint64, not 0); a context rank's SEND and the generation ranks'
 * RECVs of one request use the same id: they meet by (context instance, request id).
 * Events must be drained: the daemon never blocks on a worker, so a worker that lets its socket
 * buffer fill (thousands of unread events) is disconnected.
 * Errors: functions return 0 or -errno. */

struct kvf_client;

/* Event kinds. */
#define KVF_EV_SENT 1         /* context side: the SEND's blocks/slots may be reused */
#define KVF_EV_DONE 2         /* generation side: every byte of the RECV is in place */
#define KVF_EV_FAILED 3       /* the request failed: error, message */
#define KVF_EV_DISCONNECTED 4 /* lost the daemon (req_id 0); requests in flight were failed */
#define KVF_EV_RECONNECTED 5  /* reconnected and re-registered (req_id 0) */
#define KVF_EV_RELEASED 6     /* generation side: a RECV that ended FAILED with KVF_EVF_HELD:
                               * nothing can write into its blocks any more (ABI 4) */

/* Event flags (ABI 4). */
/* FAILED of a RECV (only to a worker that asked: kvf_options.held_events): the request ended
 * (its id is free, the error is final), but a peer daemon
 * that was lost may still be writing into its blocks: they may not be reused until
 * KVF_EV_RELEASED comes for this id. The daemon releases them when no write can land any more:
 * the context daemon acknowledged the drain, proved on a new link that its writes from before
 * ended (a fence), or its process exited. A connection lost meanwhile (KVF_EV_DISCONNECTED)
 * does not release them; a daemon that restarted (RECONNECTED to a new daemon) does: the
 * library queues RELEASED for each held id then. Without the flag a FAILED RECV's blocks are
 * free at once. */
#define KVF_EVF_HELD 1u

#define KVF_MESSAGE_MAX 512

struct kvf_event {
    uint64_t req_id;
    int32_t kind;  /* KVF_EV_* */
    int32_t error; /* kvf_error_t; KVF_OK unless FAILED / DISCONNECTED */
    uint64_t bytes; /* bytes moved (DONE, SENT) */
    char message[KVF_MESSAGE_MAX]; /* NUL-terminated; "" when there is nothing to say */
    uint32_t flags; /* KVF_EVF_* (ABI 4) */
};

#define KVF_POOL_HOST 0
#define KVF_POOL_CUDA 1     /* cudaMalloc memory, by legacy IPC handle */
#define KVF_POOL_CUDA_VMM 2 /* CUDA VMM memory (cuMemCreate), by POSIX fd handles */

/* One pool of the rank, in the order of the layout's pools. */
struct kvf_pool {
    int32_t kind;     /* KVF_POOL_* */
    int32_t device;   /* CUDA device ordinal; -1 for host pools */
    uint64_t bytes;   /* == the layout's pool size */
    int32_t fd;       /* host: a memfd of at least `bytes`; borrowed (the library keeps a dup) */
    uint64_t offset;  /* CUDA: offset of the pool inside the IPC allocation; CUDA_VMM: inside
                       * the chunks mapped back to back */
    uint8_t ipc_handle[64]; /* CUDA: the bytes of cudaIpcGetMemHandle's handle */
    /* CUDA_VMM: the allocation is n_fds physical chunks of chunk_bytes each, mapped back to back
     * (a PyTorch expandable segment, a cuMemCreate allocator); fds[k] is chunk k exported with
     * cuMemExportToShareableHandle(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR); borrowed (the
     * library keeps dups and passes them with SCM_RIGHTS). Zero for the other kinds. */
    const int32_t *fds;
    uint32_t n_fds;
    uint64_t chunk_bytes;
};

/* All fields zero means the defaults. */
struct kvf_options {
    uint32_t connect_timeout_ms; /* handshake and registration wait; default 5000 */
    uint32_t reconnect_min_ms;   /* first reconnect delay; default 50 */
    uint32_t reconnect_max_ms;   /* backoff cap; default 2000 */
    int32_t no_reconnect;        /* 1: after a loss stay disconnected */
    const char *name;            /* shown by `kvferryctl workers`; default "pid N" */
    const char *home;            /* the instance's home daemon "host:port" (where its rank 0
                                  * registers); NULL or "": this daemon. A rank registered away
                                  * from its home has its layout forwarded there. */
    char *err; size_t errlen; /* optional: why kvf_connect failed, as the daemon said it */
    int32_t held_events; /* 1 (ABI 4): this worker reads KVF_EVF_HELD and KVF_EV_RELEASED, so a
                          * RECV whose blocks a lost peer may still write ends at once, FAILED
                          * flagged HELD; 0: its FAILED waits until nothing can write them,
                          * which a peer cut off or frozen may hold past every deadline */
};

/* Connects and says HELLO. socket_path NULL: $KVFERRY_WORKER_SOCKET, else the daemon's default
 * (/run/kvferry/worker.sock for root, $XDG_RUNTIME_DIR/kvferry/worker.sock, ./run/worker.sock).
 * opt may be NULL. Returns 0 and *ret, or -errno (-ENOENT / -ECONNREFUSED: no daemon); then
 * opt->err (if given) says why, with the daemon's own words when it refused us (protocol
 * version, access.allow_*, connection limits). */
int kvf_connect(const char *socket_path, const struct kvf_options *opt, struct kvf_client **ret);

/* Registers the rank: its layout (lib/layout.h's JSON encoding) and pools. Blocks until the
 * daemon answers. Returns 0, -EINVAL with "ERROR_NAME: message" in err when the daemon refuses
 * (or the arguments are bad), -EALREADY if registered, or -errno. err may be NULL. */
int kvf_register(struct kvf_client *c, const char *layout_json, const struct kvf_pool *pools,
                 uint32_t n_pools, char *err, size_t errlen);

/* Context rank: the request's data is in these items and will stay until KVF_EV_SENT (or
 * FAILED). counts[g] ids per group of the layout (state groups: 1 slot), ids concatenated.
 * n_readers 0 (recommended): the daemon counts the readers itself and sends SENT once every
 * generation rank that reads this request from this rank has read it, on either path (README
 * "n_readers"; a generation instance with PP > 1 on another daemon is counted stage by stage
 * from its readers' requests); where it cannot tell (a plan failing) it releases the SEND at its
 * deadline (deadlines.send_wait + deadlines.transfer): SENT if a read completed, else
 * FAILED/TIMEOUT. n_readers > 0: SENT after that many reads, where a read is
 * one RECV completing on the same daemon, one flow reading this rank between daemons.
 * Either event means the items may be reused.
 * Host pool memfds must be sealed with F_SEAL_SHRINK (kvf_register is refused otherwise).
 * Returns 0, -EINVAL, -EEXIST (id in flight), -EBUSY (max in flight), -ENOTCONN, -EMSGSIZE. */
int kvf_send(struct kvf_client *c, uint64_t req_id, uint32_t n_groups, const uint32_t *counts,
             const uint32_t *ids, uint32_t n_readers);

/* Context rank, streaming (issue 28): as kvf_send, but the items are not final yet. The
 * daemon plans the request at once and moves each layer only once kvf_send_ready said it is
 * final, on every path; the generation ranks still get DONE only once every byte is there.
 * A streaming SEND that makes no progress (no kvf_send_ready raising layers_upto) for
 * deadlines.stream_idle ends FAILED/TIMEOUT, and so do its readers. Returns as kvf_send. */
int kvf_send_begin(struct kvf_client *c, uint64_t req_id, uint32_t n_groups,
                   const uint32_t *counts, const uint32_t *ids, uint32_t n_readers);

/* Streaming SEND req_id: every global layer id below layers_upto is final in its items (the
 * worker's writes to them completed: for GPU pools, its stream synchronized, or see
 * kvf_send_ready_event below). Call in order,
 * layers_upto never decreasing; layers_upto = the model's layer count (n_layers_total) or any
 * value past this rank's last layer says everything is final. The daemon answers nothing: a
 * READY it refuses (on a SEND that does not stream, decreasing, past the model's layers) fails
 * that SEND with KVF_E_BAD_REQUEST naming what is wrong. Returns 0, -EINVAL (layers_upto over
 * 256), -ENOENT (no SEND of that id in flight), -ENOTCONN. */
int kvf_send_ready(struct kvf_client *c, uint64_t req_id, uint32_t layers_upto);

/* CUDA interprocess events (issue 28): a GPU rank's readiness without synchronizing
 * its stream. The rank creates up to KVF_EVENTS_MAX events with cudaEventInterprocess |
 * cudaEventDisableTiming on the device of its pools (a ring reused across layers and
 * requests), passes their handles once, after kvf_register, and then after
 * cudaEventRecord(events[i], stream) of layer L's last write calls
 * kvf_send_ready_event(c, id, L + 1, i). The daemon opens the handles once (closed when the rank
 * leaves); its copies of layers below layers_upto wait for the event on the GPU
 * (cudaStreamWaitEvent), never on the host.
 * Reuse rule: the daemon takes the event's record of the moment it handles the READY (a
 * cudaStreamWaitEvent then), which is this record or a later one. Re-recording event i before
 * then is safe when its records are in one stream's order (a later record completes later: the
 * copy waits longer, never less); an event re-recorded on another stream may only be reused once
 * the layers it announced were read (the SEND's SENT). A ring of n events over one stream is
 * safe at any n >= 1; n = the layers in flight keeps the copies from waiting for later layers.
 * handles: n * 64 bytes, handle i the bytes of cudaIpcGetEventHandle(events[i]). Once per
 * registration (kept and passed again on every reconnect). Blocks until the daemon answers.
 * Returns 0, -EINVAL with "ERROR_NAME: message" in err when refused (n is 0 or over
 * KVF_EVENTS_MAX, host pools, a handle that does not open: BAD_REQUEST naming the event),
 * -EALREADY (events passed already), -ENOTCONN (not registered or not connected). */
#define KVF_EVENTS_MAX 256
int kvf_register_events(struct kvf_client *c, const uint8_t *handles, uint32_t n, char *err,
                        size_t errlen);

/* kvf_send_ready, with the rank's CUDA event `event` (index into kvf_register_events' handles)
 * recorded after the layers' last writes: the daemon's copies of them wait for it on the GPU.
 * Send it after cudaEventRecord (never before). The daemon fails the SEND BAD_REQUEST naming
 * what is wrong when the rank has no such event (none passed, index past them) or host pools.
 * Returns as kvf_send_ready; -EINVAL also for event >= KVF_EVENTS_MAX. */
int kvf_send_ready_event(struct kvf_client *c, uint64_t req_id, uint32_t layers_upto,
                         uint32_t event);

struct kvf_recv_args {
    uint64_t req_id;
    const char *ctx_instance; /* the context instance that ran the prefill */
    int32_t ctx_dp_rank;      /* its DP rank that ran the request under attention-DP, else -1 */
    uint32_t deadline_ms;     /* 0: the daemon's deadlines */
    const char *ctx_home;     /* NULL or "": known to this daemon; else its home "host:port" */
    uint32_t n_groups;        /* destination items, as for kvf_send */
    const uint32_t *counts;
    const uint32_t *ids;
    uint64_t tokens;          /* the prompt's tokens, or 0 when unknown (ABI 3). Needed where the
                               * sides' tokens_per_block differ and the prompt does not end on a
                               * block of both (5 blocks of 16 -> blocks of 32): the blocks then
                               * map from token 0 and rows past the last token are left alone;
                               * without it such a request is BAD_REQUEST (docs/PLANNING.md) */
};

/* Generation rank: fetch the request into these items; KVF_EV_DONE once every byte is there.
 * Returns as kvf_send. */
int kvf_recv(struct kvf_client *c, const struct kvf_recv_args *a);

/* Cancels a request in flight; its FAILED/CANCELLED event follows (or its natural end, if it
 * was already finishing). -ENOENT when not in flight. */
int kvf_cancel(struct kvf_client *c, uint64_t req_id);

/* Takes the next event: returns 1 and fills *ret, 0 when none came within timeout_ms (0: do not
 * wait, -1: forever), or -errno. Also performs due reconnects. */
int kvf_poll(struct kvf_client *c, struct kvf_event *ret, int timeout_ms);

/* A file descriptor to watch for readability (see above). Owned by the client. */
int kvf_fd(const struct kvf_client *c);

/* Requests in flight (sent, no terminal event yet). */
uint32_t kvf_inflight(struct kvf_client *c);

/* Closes the connection and frees everything; pending events are dropped. Accepts NULL;
 * returns NULL. Must not race with other calls on the same client. */
struct kvf_client *kvf_close(struct kvf_client *c);

#if defined(__GNUC__) && !defined(__CUDACC__)
#pragma GCC visibility pop
#endif

#ifdef __cplusplus
}
#endif
#endif
