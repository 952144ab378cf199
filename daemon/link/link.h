/* link.h: the UCX link layer between kvferry daemons (issue 5).
 *
 * One UCP context + worker per daemon, progressed from a libuv loop through the worker's event
 * fd. A listener accepts peers on address:port; endpoints to other daemons are made on demand by
 * "host:port". Every endpoint runs a handshake before anything else: protocol version and a cluster
 * secret proven by challenge-response HMAC-SHA256 (libsodium) over both nonces, both daemon ids,
 * the direction and the version. Only a READY peer carries user messages; anything else that
 * arrives on an endpoint before that is dropped and counted.
 *
 * Messages: typed active messages, a small header (copied by the link, at most LINK_HDR_MAX bytes)
 * and an optional payload (borrowed: must stay alive until the send's completion callback). Small
 * payloads go eager; large ones go rendezvous and land straight in a buffer that the receiver's
 * on_rndv callback chooses (a landing slot).
 *
 * RMA: the link owns one arena allocated by UCX (ucp_mem_map ALLOCATE: shared-memory puts are fast
 * only into UCX-allocated memory). Its packed rkey travels to each peer once, inside the handshake.
 * link_put writes into the peer's arena; link_flush completes every earlier put to the peer (flush
 * before sending the message that says the put is done: they may travel on different lanes).
 * link_mem_register registers other memory (a worker's memfd mapping) and gives an rkey blob for the
 * engine to send; the peer writes into it with link_put_rkey.
 *
 * Path rule (link_peer_put_fast): a put is fast only when a lane that carries the endpoint's puts
 * uses shared memory (posix, sysv, xpmem) or an RDMA transport (rc/dc), read from
 * ucp_ep_print_info's "put[lane]" lines (UCX 1.13 has no ucp_ep_query for lanes). Then the engine
 * puts into the peer's arena. Otherwise (tcp, cma: across namespaces, across hosts on Ethernet) UCX
 * emulates puts (0.01-1 GB/s) and the engine sends the chunk as an active message received straight
 * into the landing slot (2-4.5 GB/s over tcp). Measured on these machines: docs/UCX.md.
 * link_peer_same_host (hostnames in the ids) is informational: two namespaces share a hostname.
 *
 * Network namespaces: two daemons on one host in different network namespaces must set
 * no_shm = 1 (UCX_TLS=^sysv,posix): UCX would still pick shared memory, whose wakeup goes through
 * an abstract unix socket of one namespace, and an event-driven receiver would hang (trap 2).
 *
 * Two daemons that connect to each other get two peers, one each way; either carries traffic
 * both ways. The handshake authenticates the endpoint's ends; it does not encrypt or sign later
 * traffic (run the link on a trusted cluster network).
 *
 * Ownership: struct link owns its UCX objects, its uv handles and every peer. A struct link_peer
 * pointer is valid from link_connect (or on_peer_up for inbound peers) until on_peer_down returns
 * or link_free is called. Threads: everything on the loop thread; callbacks run from the loop,
 * some from inside UCX progress: they must be short, may call link_send/link_put/link_flush/
 * link_connect/link_peer_close, and must never call link_free or run the loop. Completion
 * callbacks never run inside the call that started the operation.
 * Note for callers that wait with uv_run(UV_RUN_ONCE): a callback fired from the link's timer does
 * not end that ONCE pass (libuv then blocks for I/O); call uv_stop() in the callback, as the tests
 * do. The daemon's uv_run(UV_RUN_DEFAULT) needs nothing. */
#ifndef KVF_LINK_H
#define KVF_LINK_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <uv.h>

#define LINK_PROTO_VERSION 3 /* 2: wire v2 (RECV_REQ names its layout: engine_laycache.h); 3:
                              * extents ordered layer first (issue 28): a v2 peer plans them
                              * in another order and would scatter bytes elsewhere */
#define LINK_HDR_MAX 256        /* user header bytes per message */
#define LINK_ID_BYTES 16        /* random part of a daemon id */
#define LINK_HOST_MAX 64        /* hostname part of a daemon id, NUL included */
#define LINK_SECRET_MIN 16      /* bytes in the cluster secret file */
#define LINK_SECRET_MAX 4096

struct link;
struct link_peer;

typedef enum {
    LINK_PEER_CONNECTING = 0, /* endpoint made, hello not yet sent out */
    LINK_PEER_HANDSHAKING,    /* proving the secret */
    LINK_PEER_READY,          /* user traffic allowed */
    LINK_PEER_FAILED,         /* refused, lost or timed out; closing */
    LINK_PEER_CLOSED,         /* endpoint closed; about to be freed */
} link_peer_state_t;

struct link_config {
    const char *listen_host;      /* borrowed; NULL: no listener (outbound only) */
    uint16_t listen_port;         /* 0: ephemeral, see link_listen_port */
    const char *secret_path;      /* borrowed; file of mode 0600 (no group/other bits) */
    const char *tls;              /* borrowed; NULL: UCX picks. Troubleshooting override of UCX_TLS */
    int no_shm;                   /* 1: exclude sysv/posix (different network namespaces) */
    int tcp_put;                  /* 1: leave UCX's tcp put zcopy on (docs/UCX.md trap 16) */
    size_t arena_bytes;           /* UCX-allocated arena; 0: none */
    bool arena_prefault;          /* fault it in on a thread of its own after start */
    size_t max_payload;           /* largest incoming message payload accepted; 0: 1 GiB */
    unsigned max_behind;          /* messages of one peer waiting behind its rendezvous in flight
                                   * (link_order.c); beyond: dropped, counted; 0: 4096 */
    unsigned max_peers;           /* proven and outbound endpoints at once; 0: 256 */
    unsigned handshake_timeout_ms; /* an outbound handshake's deadline; 0: 5000 */
    /* Inbound endpoints that have not proven the secret yet (link_admit.c): their own slots,
     * apart from max_peers, at most max_unauth at once (0: 32) and max_unauth_per_addr from one
     * address (0: 4), each closed after unauth_timeout_ms without a finished handshake (0:
     * 2000). Beyond a cap a connection is refused (accepted, then closed) and counted. */
    unsigned max_unauth;
    unsigned max_unauth_per_addr;
    unsigned unauth_timeout_ms;
    uint16_t proto_version;       /* 0: LINK_PROTO_VERSION (others for upgrade tests) */
    int proc_test;                /* 0; LINK_PROC_TEST_* for upgrade and bound tests */
    unsigned keepalive_interval_ms; /* PING a READY peer this often; 0: 1000 */
    unsigned keepalive_misses;    /* silent this many intervals: lost (-ETIMEDOUT); 0: 5, min 3 */
    int gpu_direct_off;           /* 1: never offer CUDA memory to peers (transport.gpu_direct) */
    int cuda_claim_test;          /* tests of the handshake only: offer CUDA memory as if UCX
                                   * handled it (Debian's UCX does not); nothing else changes */
};

/* What the handshake tells of our process, for tests (link_proc.c): as a daemon from before the
 * process identity (offers nothing), a pid past the kernel's limit, unknown flags, a bad MAC. */
enum { LINK_PROC_TEST_OLD = 1, LINK_PROC_TEST_PID, LINK_PROC_TEST_FLAGS, LINK_PROC_TEST_MAC };

/* Completion of a send, put or flush: status 0 or -errno (-ECONNRESET when the peer went away). */
typedef void (*link_done_cb)(void *arg, int status);

struct link_ops {
    /* A peer finished the handshake. Inbound peers are first seen here. */
    void (*on_peer_up)(void *arg, struct link_peer *p);
    /* A peer the user knows (outbound, or announced by on_peer_up) failed or closed; err is
     * -errno. The pointer dies when this returns. */
    void (*on_peer_down)(void *arg, struct link_peer *p, int err);
    /* A message arrived from a READY peer. hdr and data are valid only during the call. For a
     * rendezvous message data is the buffer on_rndv chose. */
    void (*on_msg)(void *arg, struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                   const void *data, size_t len);
    /* Optional. A rendezvous message of len bytes is announced: return 0 and set *dest_ret to a
     * buffer of at least len bytes that stays valid until on_msg for it (or the peer's
     * on_peer_down); return -ENOBUFS to let the link allocate a temporary buffer, any other
     * -errno to drop the message (counted). */
    int (*on_rndv)(void *arg, struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                   size_t len, void **dest_ret);
    void *arg;
};

/* Reads the secret, sets up UCX, maps the arena, starts the listener. 0 or -errno (-EPERM for
 * a group/world-readable secret file, -EADDRINUSE for a busy port). On error the link's uv
 * handles are closing: run the loop before uv_loop_close. */
int link_new(uv_loop_t *loop, const struct link_config *cfg, const struct link_ops *ops,
             struct link **ret);
/* Closes every endpoint (forced), releases UCX and closes the uv handles; the memory is freed
 * from the last close callback, so run the loop afterwards. on_peer_down is not called; completion
 * callbacks of operations still in flight do run, with an error, before it returns. Accepts NULL,
 * returns NULL. */
struct link *link_free(struct link *l);

/* Port the listener is bound to (after port 0 was asked), 0 without a listener. */
uint16_t link_listen_port(const struct link *l);
/* This daemon's id: "<hostname>/<32 hex>". */
const char *link_self_id(const struct link *l);

/* The peer for "host:port" (IPv4/IPv6 literal or name, port required): an existing live outbound
 * one, else a new endpoint that starts the handshake. on_peer_up/on_peer_down report the outcome. */
int link_connect(struct link *l, const char *hostport, struct link_peer **ret);
/* Starts closing a peer (flushes, then closes); on_peer_down(-ECANCELED) follows. */
void link_peer_close(struct link_peer *p);

link_peer_state_t link_peer_state(const struct link_peer *p);
const char *link_peer_state_to_string(link_peer_state_t s);
/* The remote daemon's id (after the handshake), "" before. */
const char *link_peer_id(const struct link_peer *p);
/* 1 when the remote daemon runs on this host (same hostname in the ids exchanged). */
int link_peer_same_host(const struct link_peer *p);
/* 1 when puts to this peer are fast (see the path rule above). Asked again while 0: the lanes
 * settle only when UCX's client-server wireup finishes, a few ms after READY. */
int link_peer_put_fast(struct link_peer *p);
/* 1 when the peer's process can read or write our memory by itself, without a call of ours in
 * between: a fast put lane (shared memory, RDMA) or a zero-copy lane of one host (cma, knem,
 * xpmem; cma carries rendezvous with CMA_MEMORY_INVALIDATE, the receiver reading the sender's
 * buffer with process_vm_readv). A peer that froze while it could do so may still do it when it
 * runs again, whatever we closed: what it may touch is held (docs/UCX.md trap 12). */
int link_peer_direct_mem(struct link_peer *p);
/* Keepalive (link_alive.c). UCX 1.13's own keepalive (UCX_KEEPALIVE_INTERVAL, 20 s) only asks
 * the transport whether the connection is up: a SIGSTOPped peer's kernel still answers tcp, and
 * shared memory checks that the process exists, so a frozen peer stays "connected" for ever and a
 * partitioned one until tcp gives up (minutes). So the link PINGs every READY peer each
 * keepalive_interval_ms and the peer answers PONG from its loop: a peer heard from neither for
 * two intervals is suspect; for keepalive_misses intervals it fails with -ETIMEDOUT (on_peer_down,
 * its endpoint force-closed). A peer that comes back connects again as a new peer. */
int link_peer_suspect(const struct link_peer *p);
/* Milliseconds since the peer was last heard (PING or PONG), 0 before READY. */
uint64_t link_peer_silent_ms(const struct link_peer *p);

/* The peer daemon's process, when it runs in our pid namespace of this boot (link_proc.c): its
 * pid (0 when not known) and a pidfd opened when the link became READY, which polls readable
 * once that process has exited. take moves the pidfd to the caller (-1: none, *why says why in a
 * static string). */
uint32_t link_peer_pid(const struct link_peer *p);
int link_peer_take_pidfd(struct link_peer *p, const char **why);
/* Where pidfd_open is missing (kernels before 5.3) or refused (seccomp), or KVF_TEST_NO_PIDFD=1
 * is set (tests only), the pid and the process start time (clock ticks since boot,
 * /proc/<pid>/stat) read at READY stand in for the pidfd: true and *pid, *start when known. */
bool link_peer_proc_start(const struct link_peer *p, uint32_t *pid, uint64_t *start);
/* Whether the process pid that started at start still runs: 1 yes (or it cannot be told: its
 * entry hidden while the pid exists), 0 it exited (no such pid, a zombie, or the pid reused by
 * a process with another start time), -errno the check failed. Any thread. */
int link_proc_alive(uint32_t pid, uint64_t start);

/* Size of the peer's arena (0 when it has none). */
size_t link_peer_arena_bytes(const struct link_peer *p);
/* Opaque user pointer carried by the peer. */
void link_peer_set_data(struct link_peer *p, void *data);
void *link_peer_data(const struct link_peer *p);

/* Sends a typed message to a READY peer. hdr (<= LINK_HDR_MAX) is copied; data (may be NULL with
 * len 0) is borrowed until cb. cb (may be NULL) runs exactly once, from the loop, never before
 * link_send returns (an immediate completion is deferred: trap 7). Returns 0, or -errno without
 * calling cb (-ENOTCONN: peer not READY, -EMSGSIZE: header too large). */
int link_send(struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len, const void *data,
              size_t len, link_done_cb cb, void *arg);

/* link_send for a caller that can take the answer at once: a send that completed in the call (an
 * eager message, its payload copied out) returns 1 and cb is never called; otherwise as
 * link_send (0, cb later; or -errno). Saves the deferred completion and a progress round. */
int link_send_now(struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                  const void *data, size_t len, link_done_cb cb, void *arg);

/* The local arena: base and size (NULL/0 without one). */
void *link_arena(const struct link *l, size_t *len_ret);
/* Puts len bytes from local (any memory; the arena is fastest) at remote_offset of the peer's
 * arena. -ERANGE when it does not fit, -ENOTCONN when not READY. cb as for link_send. */
int link_put(struct link_peer *p, const void *local, size_t len, uint64_t remote_offset,
             link_done_cb cb, void *arg);
/* Completes every put issued to the peer before it. cb as for link_send. */
int link_flush(struct link_peer *p, link_done_cb cb, void *arg);

/* The peer's arena mapped into this process, where a shared-memory transport maps it (sysv,
 * posix, xpmem: ucp_rkey_ptr; asked once the put lanes are fast, the answer kept): 0 and
 * *base_ret, its byte 0 (link_peer_arena_bytes long), which any thread may write while the peer
 * is held (link_peer_hold), or -ENOTSUP where no transport maps it (tcp, cma, RDMA: put), or
 * -ENOTCONN. A put over those lanes is a memcpy on the loop (docs/UCX.md trap 14): a copy thread
 * writing here does the same work off the loop. The bytes count as landed for the peer once a
 * message sent after the writes ended (on the loop) reaches it: no flush is needed. */
int link_peer_arena_map(struct link_peer *p, uint8_t **base_ret);
/* Where the peer's arena is not mapped here but its process is reachable over cma (another
 * network namespace of this host: cma among the endpoint's lanes, the peer's pid known in our
 * pid namespace of this boot, link_proc.c, that pid running our own binary, and a 1-byte
 * process_vm_readv of its arena allowed; tried once): 0, *pid_ret and *base_ret, the arena's
 * byte 0 in that process, which a copy
 * thread may write with process_vm_writev (copy_remote.h) while the peer is held; -ENOTSUP
 * (not reachable so, or not decided yet while the lanes settle) or -ENOTCONN. As for the
 * mapping, the bytes count as landed for the peer once a message sent after the writes ended
 * reaches it. The pid is the one the handshake proved: a process that took it after the
 * peer's exit would be the one written, so copies stop when the peer is lost (its endpoint
 * fails about 10 ms after its death, long before a pid comes round again). */
int link_peer_arena_cma(struct link_peer *p, uint32_t *pid_ret, uint64_t *base_ret);
/* Whether the peer's process may be written from here over cma (link_cma.c): cma among the
 * endpoint's lanes, its pid known in our pid namespace of this boot (link_proc.c), that pid
 * running our own binary, and a 1-byte process_vm_readv at probe_addr (an address the peer named
 * as writable, e.g. a pool's base in RECV_REQ) allowed; decided once per peer. 0 yes; -ENOTSUP
 * (not so, or not decided yet while the lanes settle) or -ENOTCONN. On yes, *pid_ret (may be
 * NULL) is the peer's pid, for writes by the copy threads (copy_remote.h). */
int link_peer_cma(struct link_peer *p, uint64_t probe_addr, uint32_t *pid_ret);
/* Writes local[i] to remote[i] (addresses in the peer's process, the same lengths), i < n <=
 * LINK_CMA_IOV_MAX, with one process_vm_writev, on this thread, now (link_peer_cma must have
 * said yes). cb as for link_send, with 0 or the call's -errno (-EFAULT: a short write, the range
 * is not mapped there; -ESRCH: the process exited). As with the mapping, the bytes count as
 * landed for the peer once a message sent after cb reaches it. -EINVAL / -ENOTCONN without cb. */
#define LINK_CMA_IOV_MAX 1024 /* IOV_MAX */
int link_cma_write(struct link_peer *p, const struct iovec *local, const struct iovec *remote,
                   unsigned n, link_done_cb cb, void *arg);
/* Keeps p's memory, its arena's mapping included, until link_peer_release, also past
 * on_peer_down (a failed peer's mapping stays valid, its endpoint closed). Loop thread; every hold
 * is released before link_free. */
void link_peer_hold(struct link_peer *p);
void link_peer_release(struct link_peer *p);

/* A registration of existing memory for zero-copy puts into it. */
struct link_mreg;
int link_mem_register(struct link *l, void *ptr, size_t len, struct link_mreg **ret);
/* The packed rkey to send to a peer (borrowed from the registration). */
const void *link_mreg_rkey(const struct link_mreg *m, size_t *len_ret);
struct link_mreg *link_mreg_free(struct link *l, struct link_mreg *m);
/* link_put from memory this link registered (link_mem_register: m, or NULL), so UCX uses that
 * registration instead of registering the source on the fly (zero-copy lanes: cma, RDMA). */
int link_put_from(struct link_peer *p, const void *local, const struct link_mreg *m, size_t len,
                  uint64_t remote_offset, link_done_cb cb, void *arg);
/* Puts into a remote registration described by its rkey blob, at its virtual address
 * remote_addr (the peer sends both). Blob bounded by LINK_RKEY_MAX. */
#define LINK_RKEY_MAX 4096
int link_put_rkey(struct link_peer *p, const void *local, size_t len, const void *rkey,
                  size_t rkey_len, uint64_t remote_addr, link_done_cb cb, void *arg);

/* CUDA device memory (link_cuda.c, issue 30). Whether this link's UCX handles CUDA memory
 * (ucp_context_query at start: a CUDA-aware UCX, scripts/build-ucx-cuda; Debian's handles host
 * memory only). Device memory moves between daemons only as rendezvous messages (link_send
 * from it, on_rndv pointing into it): UCX 1.13.1's puts of device memory crash. */
bool link_cuda(const struct link *l);
/* 1 when both ends' UCX handle CUDA memory and neither turned it off (chosen at the handshake),
 * so chunks may go device to device; *why (may be NULL) says why, in a static string. */
int link_peer_gpu_direct(const struct link_peer *p, const char **why);
/* Allocates the device arena: `bytes` of CUDA memory by UCX (ucp_mem_map ALLOCATE, memory type
 * CUDA), on the CUDA context current in this thread (make one current first). Once per link;
 * unmapped by link_free. 0 and *base_ret (a device pointer), -ENOTSUP (UCX without CUDA),
 * -EALREADY, or UCX's error. */
int link_device_arena_map(struct link *l, size_t bytes, void **base_ret);
/* The device arena: base and size (NULL/0 without one). */
void *link_device_arena(const struct link *l, size_t *len_ret);

/* Counters of the whole link. */
struct link_stats {
    uint64_t msgs_sent, msgs_recv, bytes_sent, bytes_recv, puts, bytes_put;
    uint64_t refused, dropped, peers_failed, progress_busy_fallbacks;
    uint64_t peers_lost_keepalive; /* failed for silence (link_alive.c) */
    uint64_t cma_writes;           /* link_cma_write calls */
    /* inbound connections refused before any handshake (link_admit.c): unproven endpoints at
     * max_unauth, from one address at max_unauth_per_addr, the proven table full at READY */
    uint64_t conns_refused_unauth, conns_refused_addr, conns_refused_table;
    uint64_t handshake_timeouts;   /* endpoints closed at their handshake deadline */
    uint64_t unproven_endpoints;   /* now: inbound endpoints not yet proven (a gauge) */
    uint64_t ucx_stale_events_dropped; /* of the process: link_ucsfix.c, docs/UCX.md trap 18 */
    /* the loop's work for UCX: event fd wake-ups, progress passes (a wake-up, a kick or the
     * busy timer), ucp_worker_progress calls (busy: those that found work), ucp_worker_arm */
    uint64_t wakeups, progress_passes, progress_calls, progress_busy, arms;
    /* peers READY by how their chunks may travel (link_cuda.c): device to device, or host
     * staging because our UCX has no CUDA, the peer's has none, or transport.gpu_direct is off */
    uint64_t peers_gpu_direct, peers_host_staged_local, peers_host_staged_peer;
    uint64_t peers_host_staged_off;
};
void link_get_stats(const struct link *l, struct link_stats *ret);

/* Adds the "link" section: UCX version, transports, memory types, listener, peers, counters. */
int link_status(const struct link *l, json_t *out);

/* link_ifstate.c: whether a link started now would accept on host (the listen address): 1 yes
 * (its interface is up and running, or host is a wildcard); 0 no: its interface (named in
 * ifname) is down or has no carrier, and UCX fixes its devices at ucp_init, so a link started
 * now would refuse every connection on it for its life; -EADDRNOTAVAIL: no interface holds
 * host; -errno otherwise. Any thread (no link needed). */
int link_ifstate(const char *host, char *ifname, size_t len);

#endif
