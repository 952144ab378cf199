/* link_int.h: internals shared by the link_*.c files (not for other modules).
 * link.c: context, worker, libuv progress, listener, teardown, status.
 * link_peer.c: endpoints, peer state machine, close.  link_hs.c: secret + handshake.
 * link_msg.c: typed active messages.  link_rma.c: arena, put, flush, registrations.
 * link_alive.c: keepalive PING/PONG, suspect and lost peers.
 * link_proc.c: the peer daemon's process (pid, pid namespace, boot id) and its pidfd.
 * link_admit.c: who may hold a slot: unproven inbound endpoints apart, capped.
 * link_ucsfix.c: UCX's stale missed async events dropped (a refusal can then not abort us). */
#ifndef KVF_LINK_INT_H
#define KVF_LINK_INT_H

#include "link.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sodium.h>
#include <stdbool.h>
#include <sys/socket.h>
#include <ucp/api/ucp.h>

#define LINK_AM_HS 1   /* handshake messages */
#define LINK_AM_USER 2 /* user messages */
#define LINK_AM_ALIVE 3 /* keepalive PING/PONG (link_alive.c) */
#define LINK_NONCE_BYTES 32
#define LINK_BOOT_ID_BYTES 16

/* The sender's process, after PROOF and ACCEPT when both offered it (link_proc.c). Little
 * endian; all zero: not known. */
struct link_proc_id {
    uint32_t pid;
    uint32_t flags; /* 0; other values are refused */
    uint64_t pidns_dev, pidns_ino;
    uint8_t boot_id[LINK_BOOT_ID_BYTES];
    uint8_t mac[crypto_auth_hmacsha256_BYTES];
} __attribute__((packed));

struct link_pending; /* deferred work run after a progress round (link.c) */
struct link_early;   /* a user message that arrived just before READY (link_msg.c) */
struct link_ordered; /* a message waiting behind a rendezvous of its peer (link_order.c) */

struct link_peer {
    struct link *link;           /* borrowed: owns us */
    struct link_peer *next;      /* in link->peers */
    uint64_t serial;             /* for logs */
    link_peer_state_t state;
    int outbound;                /* we connected (client side of the handshake) */
    int announced;               /* the user knows it (outbound, or on_peer_up ran) */
    int down_reported;           /* on_peer_down ran */
    int close_started;           /* ucp_ep_close_nbx issued */
    int fail_err;                /* -errno of the failure */
    int refused;                 /* we refused its handshake */
    unsigned refs;               /* rendezvous receives in flight and link_peer_hold holders */
    ucp_ep_h ep;                 /* owned until the close completes */
    char addr[128];              /* "host:port" asked, or the remote address */
    uint64_t deadline_ms;        /* handshake deadline (uv_now) */
    int unauth;                  /* inbound, not yet proven: counted in link->n_unauth */
    /* handshake */
    int hs_step;                 /* what we wait for, LINK_HS_* of link_hs.c */
    uint8_t nonce_local[LINK_NONCE_BYTES], nonce_remote[LINK_NONCE_BYTES];
    uint8_t remote_rid[LINK_ID_BYTES];
    char remote_host[LINK_HOST_MAX];
    char remote_id[LINK_HOST_MAX + 2 * LINK_ID_BYTES + 2];
    /* peer's arena */
    ucp_rkey_h arena_rkey;       /* owned */
    uint64_t arena_addr, arena_len;
    uint8_t *arena_map;          /* the peer's arena mapped here (ucp_rkey_ptr); NULL: not */
    int arena_map_tried;         /* asked once the lanes were fast */
    int put_fast;
    int lane_checks;             /* re-detections after READY (tick) */
    char lanes[160];             /* transports of the put lanes, for status */
    char tl_all[160];            /* transports of every lane (am, rendezvous, put), for status */
    char rma_bw[160];            /* transports of the rendezvous (rma_bw) lanes: no tcp (trap 16) */
    int direct_mem;              /* a lane reaches the other process's memory (link_peer_direct_mem) */
    int cma_write;               /* link_peer_arena_cma: 0 not decided, 1 we may write, -1 not */
    int cma_proc;                /* link_peer_cma: 0 not decided, 1 we may write it, -1 not */
    /* keepalive (link_alive.c) */
    uint64_t alive_seen_ms;      /* last PING or PONG heard (uv_now); 0 until READY is checked */
    uint64_t alive_sent_ms;      /* last PING sent */
    uint64_t alive_seq;
    int alive_pending;           /* a PING send not yet complete (holds a ref) */
    int suspect;                 /* silent past two intervals */
    /* the peer's process (link_proc.c) */
    int proc_cap;                /* both sides offered it: PROOF and ACCEPT carry it */
    uint32_t remote_pid;         /* 0 unless in our pid namespace of this boot */
    int pidfd;                   /* owned, -1: none (opened at READY) */
    uint64_t remote_start;       /* without a pidfd: its start time (/proc/<pid>/stat), 0 none */
    const char *proc_why;        /* static: why there is no pidfd */
    /* CUDA memory (link_cuda.c) */
    int remote_cuda;             /* the peer offered HS_CAP_CUDA */
    int gpu_direct;              /* both offered it: chunks may go device to device */
    const char *gpu_why;         /* static: why gpu_direct is what it is */
    uint64_t msgs_sent, msgs_recv, bytes_sent, bytes_recv, bytes_put;
    void *user_data;
    /* Client side: the server proved the secret and we sent PROOF, its ACCEPT is on the way.
     * User messages it sends after ACCEPT may overtake it (UCX does not promise AM order across
     * lanes); they wait here, bounded, and are delivered when ACCEPT makes us READY. */
    int server_proven;
    struct link_early *early_head, *early_tail;
    unsigned early_count;
    size_t early_bytes;
    /* Messages in the order the peer sent them while one of its rendezvous is in flight
     * (link_order.c): the head waits for its payload, the rest for the head. */
    struct link_ordered *ord_head, *ord_tail;
    unsigned ord_count;
    size_t ord_bytes;
    int ord_flushing;
};

/* Work a UCX callback deferred to the next progress pass (link_defer.c queues, link.c runs). */
#define LINK_BUSY_QUICK 4 /* busy passes retried at once before the 1 ms timer */

enum { PEND_CONN, PEND_RNDV, PEND_DONE };

struct link_pending {
    struct link_pending *next;
    int kind;
    ucp_conn_request_h conn;
    struct link_peer *peer; /* a reference is held while queued */
    uint16_t type;
    void *desc;
    size_t len, hdr_len;
    uint8_t hdr[LINK_HDR_MAX];
    struct link_ordered *ord; /* PEND_RNDV: its place in the peer's order */
    link_done_cb cb; /* PEND_DONE */
    void *arg;
    int status;
};

struct link {
    uv_loop_t *loop;             /* borrowed: must outlive us */
    struct link_config cfg;      /* strings borrowed */
    struct link_ops ops;
    uv_poll_t poll;              /* on the worker's event fd */
    uv_timer_t busy_timer;       /* 1 ms progress while arm says busy, and kicks */
    uv_timer_cb busy_cb;         /* link.c's progress pass: what link_kick starts */
    /* link.c's, for link_peer.c below the handshake and the messages: a connected peer's
     * handshake starts; a freed peer's early and reordered messages go */
    int (*hs_start)(struct link_peer *p);
    void (*peer_freed)(struct link_peer *p);
    uv_timer_t tick;             /* handshake deadlines, keepalive */
    uint64_t alive_checked_ms;   /* last keepalive check (link_alive.c) */
    uint64_t alive_tick_ms;      /* the tick's period */
    int handles_open;            /* uv handles still to close */
    int freeing;
    int busy_mode;               /* poll stopped, progressing from busy_timer */
    int in_progress;             /* inside ucp_worker_progress */
    int in_pass;                 /* inside link_progress: a kick is its next round, no timer */
    int kicked;                  /* kicked during this pass */
    unsigned busy_passes;        /* passes in a row that ended with arm still busy */
    unsigned inflight;           /* sends, puts, flushes, receives not yet complete */
    ucp_context_h ctx;
    ucp_worker_h worker;
    ucp_listener_h listener;
    uint16_t port;
    int efd;
    /* arena */
    ucp_mem_h arena_memh;
    void *arena;
    size_t arena_len;
    pthread_t prefault;          /* faults the arena in after start; joined before unmap */
    bool prefaulting;
    atomic_bool prefault_stop;   /* set by link_arena_done: the thread stops at its next step */
    void *arena_rkey;            /* packed, ucp_rkey_buffer_release */
    size_t arena_rkey_len;
    /* identity */
    uint8_t secret[LINK_SECRET_MAX];
    size_t secret_len;
    uint8_t rid[LINK_ID_BYTES];
    char host[LINK_HOST_MAX];
    char self_id[LINK_HOST_MAX + 2 * LINK_ID_BYTES + 2];
    char tls_desc[64];
    int cma_invalidate;          /* CMA_MEMORY_INVALIDATE=y was set (link_ucx_init) */
    int tcp_put_off;             /* TCP_PUT_ENABLE=n was set (link_ucx_init, trap 16) */
    struct link_proc_id proc;    /* ours, mac unset */
    /* memory types and the device arena (link_cuda.c) */
    uint64_t mem_types;          /* ucp_context_query's memory_types */
    bool mem_cuda;               /* UCS_MEMORY_TYPE_CUDA among them */
    ucp_mem_h darena_memh;       /* owned: UCX-allocated CUDA memory, NULL: none */
    void *darena;
    size_t darena_len;
    /* peers */
    struct link_peer *peers;
    unsigned npeers;
    unsigned n_unauth;           /* inbound peers not yet proven (link_admit.c) */
    uint64_t refuse_logged_ms;   /* refusals are logged once a second, with a count */
    uint64_t refuse_unlogged;
    uint64_t next_serial;
    struct link_pending *pending_head, *pending_tail;
    struct link_stats st;
};

/* link_proc.c */
void link_proc_init(struct link *l);
void link_proc_fill(const struct link_peer *p, struct link_proc_id *out);
int link_proc_check(struct link_peer *p, const struct link_proc_id *in); /* -EPROTO: refuse */
void link_proc_ready(struct link_peer *p);
void link_proc_close(struct link_peer *p);

/* link.c */
void link_kick(struct link *l);                 /* progress soon, from the loop */
/* Runs cb(arg, 0) from the loop after this progress round: an operation that completed at once
 * (trap 7) still reports later, never before the call that started it returns. */
int link_defer_done(struct link *l, link_done_cb cb, void *arg);
/* The same with a status for cb (a synchronous operation that failed: cma writes). */
int link_defer_status(struct link *l, link_done_cb cb, void *arg, int status);
void link_defer_conn(struct link *l, ucp_conn_request_h req);
void link_defer_rndv(struct link *l, struct link_peer *p, uint16_t type, const void *hdr,
                     size_t hdr_len, void *desc, size_t len, struct link_ordered *o);
int link_err_from_ucs(ucs_status_t s);

/* link_peer.c */
int link_peer_accept(struct link *l, ucp_conn_request_h req);
void link_peer_fail(struct link_peer *p, int err);  /* safe inside UCX callbacks */
void link_peer_set_state(struct link_peer *p, link_peer_state_t s);
struct link_peer *link_peer_by_ep(struct link *l, ucp_ep_h ep);
void link_peer_reap(struct link *l);            /* report downs, start closes, free closed */
void link_peer_unref(struct link_peer *p);
void link_peers_check_deadlines(struct link *l, uint64_t now_ms);
void link_peer_detect_lanes(struct link_peer *p);

/* link_admit.c */
int link_admit_inbound(struct link *l, const char *addr); /* 0 or -EBUSY (counted, logged) */
/* "link: connection from <addr> <what>", once a second at most: strangers come by the hundred */
void link_admit_log(struct link *l, const char *addr, const char *what);
int link_admit_proven(struct link_peer *p);     /* at READY: 0 or -EBUSY (table full) */
void link_admit_release(struct link_peer *p);   /* at free */
unsigned link_admit_proven_count(const struct link *l);
void link_admit_status(const struct link *l, json_t *o);

/* link_ucsfix.c: UCX's stale async events filtered (docs/UCX.md trap 18) */
int link_ucsfix_active(void);     /* the interposition took: UCX registered handlers through it */
uint64_t link_ucsfix_dropped(void); /* stale events dropped */

/* link_hs.c */
int link_secret_load(struct link *l, const char *path);
void link_id_init(struct link *l);
int link_hs_start(struct link_peer *p);         /* client: send HELLO */
ucs_status_t link_hs_am_cb(void *arg, const void *header, size_t header_length, void *data,
                           size_t length, const ucp_am_recv_param_t *param);

/* link_msg.c */
ucs_status_t link_msg_am_cb(void *arg, const void *header, size_t header_length, void *data,
                            size_t length, const ucp_am_recv_param_t *param);
void link_msg_replay_early(struct link_peer *p); /* at READY */
void link_msg_drop_early(struct link_peer *p);   /* at free */
void link_deliver(struct link *l, struct link_peer *p, uint16_t type, const void *hdr,
                  size_t hdr_len, const void *data, size_t len);
/* link_order.c: delivery in the peer's send order (see there) */
#define LINK_MAX_BEHIND 4096             /* cfg.max_behind's default */
#define LINK_MAX_BEHIND_BYTES (64u << 20) /* eager bytes copied behind one peer's rendezvous */
struct link_ordered *link_order_rndv(struct link_peer *p, uint16_t type, const void *hdr,
                                     size_t hdr_len, size_t len); /* NULL: out of memory */
/* The rendezvous of o landed in buf (NULL: failed or dropped); owned: the link made buf. */
void link_order_landed(struct link_peer *p, struct link_ordered *o, void *buf, int owned);
void link_order_eager(struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                      const void *data, size_t len);
void link_order_free(struct link_peer *p); /* at free */
void link_msg_start_rndv(struct link *l, struct link_peer *p, uint16_t type, const void *hdr,
                         size_t hdr_len, void *desc, size_t len, struct link_ordered *o);
/* Sends an AM with a link-built header (copied) and borrowed data; cb may be NULL. */
int link_am_send(struct link_peer *p, unsigned am_id, const void *hdr, size_t hdr_len,
                 const void *data, size_t len, link_done_cb cb, void *arg);

/* link_alive.c */
ucs_status_t link_alive_am_cb(void *arg, const void *header, size_t header_length, void *data,
                              size_t length, const ucp_am_recv_param_t *param);
void link_alive_check(struct link *l, uint64_t now_ms); /* from the tick */

/* link_cuda.c */
void link_cuda_init(struct link *l);              /* after ucp_init: the memory types */
int link_cuda_offer(const struct link *l);        /* HS_CAP_CUDA in HELLO and CHALLENGE */
void link_cuda_peer_decide(struct link_peer *p);  /* at READY, counted */
void link_cuda_done(struct link *l);              /* before ucp_cleanup */
void link_cuda_status(const struct link *l, json_t *o);
void link_cuda_peer_status(const struct link_peer *p, json_t *o);

/* link_rma.c */
int link_arena_init(struct link *l);
void link_arena_done(struct link *l);
int link_peer_set_rkey(struct link_peer *p, const void *blob, size_t len, uint64_t addr,
                       uint64_t alen);

#endif
