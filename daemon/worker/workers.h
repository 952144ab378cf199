/* workers.h: the worker side of kvferryd (docs/DESIGN.md §3, §7, §8): the listener on the worker
 * socket (workers.c), one wconn per worker connection (wconn.c), the registry of
 * ranks (registry.c) and the requests in flight (transfers.c, xfer_local.c).
 * struct workers is owned by struct daemon (d->workers); it owns its connections, registry and
 * transfers. Lifecycle: workers_new -> workers_listen -> ... -> workers_stop -> (loop runs the
 * close callbacks) -> workers_free. Loop thread only. */
#ifndef KVF_WORKERS_H
#define KVF_WORKERS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>
#include <uv.h>

#include "access.h"
#include "frame.h"
#include "proto.h"
#include "registry.h"
#include "transfers.h"
#include "unix_listener.h"
#include "outq.h"
#include "xclient.h"

struct daemon;
struct copyeng_job;

#define WCONN_HELLO_FRAME_MAX 4096 /* frame size limit until HELLO */

struct workers_counters {
    uint64_t accepted; /* refusals: listener.counters */
    uint64_t registered, register_refused;
    uint64_t bad_frames;  /* connections closed for a bad frame */
    uint64_t lost;        /* connections that ended without being asked to */
    uint64_t evicted;     /* still in their handshake when a connection limit was reached */
    uint64_t hello_timeouts, frame_timeouts, read_timeouts;
    uint64_t frame_memory_refused; /* frames that would have passed workers.frame_memory */
    uint64_t event_queue_full;     /* disconnected at workers.event_queue */
    uint64_t access_revoked;       /* closed: a reload took their uid's access away */
    /* pools mapped in at REGISTER (wprefault.c): jobs started, ended, cancelled by a
     * worker gone first; pool bytes of those ended and their REGISTER-to-end time, summed */
    uint64_t prefaults, prefaults_done, prefaults_cancelled, prefault_bytes, prefault_ns;
};

struct wconn {
    struct xclient xc;          /* what its requests know of it: rank, pid, closing */
    struct workers *w;          /* borrowed: owns us */
    int fd;                     /* owned; closed after the poll handle */
    uv_poll_t poll;
    struct frame_reader rd;     /* owned */
    struct peer_cred peer;
    char name[PROTO_NAME_MAX + 1];
    bool hello;
    bool broken;                /* a write failed: close at the next reap */
    struct copyeng_job *prefault; /* the rank's pools being mapped in; NULL: none (owned by
                                   * the copy engine: cancelled at close, wprefault.c) */
    int *fds_ahead;             /* owned: fds of FDS frames, for the REGISTER that follows */
    uint32_t n_fds_ahead;
    bool fds_lost;              /* an FDS frame's fds found the daemon at RLIMIT_NOFILE */
    uint64_t seq;
    uint64_t connected_ms;
    struct wconn_outq outq;     /* owned: frames waiting for socket room */
    bool want_write;            /* the poll handle waits for UV_WRITABLE too */
    char why[PROTO_MSG_MAX + 1]; /* told to the worker at close ("" : nothing to tell) */
    kvf_error_t why_error;
    uint64_t frame_at;          /* stream offset of the frame in progress */
    uint64_t frame_since_ms;    /* when its first byte came; 0: none in progress */
    size_t frame_counted;       /* this reader's bytes in workers.frame_bytes */
    struct wconn *next;
};

struct workers {
    struct daemon *d;           /* borrowed: owns us */
    struct unix_listener listener; /* sockets.worker */
    bool stopped, draining;
    uv_timer_t reap;            /* closes broken connections outside their callers */
    uv_timer_t sweep;           /* HELLO, frame and reading deadlines (wlimits.c) */
    uint64_t frame_bytes;       /* partial frame buffers beyond FRAME_BUF_INITIAL, all conns */
    struct proto_limits lim;
    uint64_t epoch;             /* sent in WELCOME: changes at every start */
    uint64_t next_conn_id;
    struct wconn *conns;
    uint32_t n_conns;
    struct registry reg;
    struct transfers xt;
    struct workers_counters counters;
};

/* The connection that embeds xc (every xclient the request side holds is one). */
static inline struct wconn *wconn_of(struct xclient *xc)
{
    return (struct wconn *)((char *)xc - offsetof(struct wconn, xc));
}

/* What the request table calls up here (events, drain, stop), given at transfers_init. */
extern const struct transfers_ops workers_xt_ops;

int workers_new(struct daemon *d, struct workers **ret);
/* Binds sockets.worker (mode sockets.mode, stale socket replaced) and listens. 0 or -errno with
 * a message in err. */
int workers_listen(struct workers *w, char *err, size_t errlen);
/* Serves a connected socket (the listener after its checks; tests with a socketpair). Takes
 * ownership of fd, also on error. */
int workers_adopt(struct workers *w, int fd, const struct peer_cred *peer);
/* Closes the listener and every connection (their requests fail). Idempotent. */
void workers_stop(struct workers *w);
/* After the close callbacks ran. Accepts NULL; returns NULL. */
struct workers *workers_free(struct workers *w);

/* Closes broken connections from a zero timer, outside the callers that found them broken. */
void workers_reap_soon(struct workers *w);

/* wlimits.c: the worker socket's defenses (connection limits with eviction of
 * connections still in their handshake, deadlines, memory for partial frames). */
/* The listener's hooks (unix_listener.h; ctx: struct workers): workers.max_conns and
 * max_conns_per_uid, live connections, no new ones while draining, and room made by evicting
 * the oldest connection still in its handshake. */
void wlimits_limits(void *ctx, struct unix_listener_limits *ret);
void wlimits_count(void *ctx, uid_t uid, int64_t *all, int64_t *of_uid);
int wlimits_admit(void *ctx, const struct peer_cred *peer, char *msg, size_t len);
bool wlimits_make_room(void *ctx, bool only_uid, uid_t uid, const char *limit);
void wlimits_sweep_start(struct workers *w);
/* Before a read: may the frame reader grow as it wants? false: c is being closed, told why. */
bool wlimits_frame_room(struct wconn *c);
/* After the frames of a read were handled: the frame in progress and the memory held. */
void wlimits_frame_after(struct wconn *c);
/* At close: gives back the memory counted for c. */
void wlimits_conn_gone(struct wconn *c);
/* May c's peer still use the socket (access.* as it is now)? false: c is being closed, told
 * why. Asked at each frame and, for every connection, at each reload. */
bool wlimits_access(struct wconn *c);

/* wprefault.c: after REGISTER, the rank's host pools mapped in on the copy threads, in
 * the background (copy.prefault); cancelled when the connection closes first. */
void wprefault_start(struct wconn *c);
void wprefault_cancel(struct wconn *c);
/* prefaults, prefaults_done, prefaults_cancelled, prefaulting, prefault_bytes, _seconds. */
void wprefault_stats(const struct workers *w, json_t *ret);

/* wconn_send.c: frames out, through the connection's queue. */
/* Sends (or queues) one encoded frame; takes ownership of buf. */
void wconn_send_frame(struct wconn *c, uint8_t *buf, size_t len);
/* The poll handle reported room: writes what waits. */
void wconn_writable(struct wconn *c);
/* At close: tells c->why (if any) after what was half written, and writes what fits. */
void wconn_send_final(struct wconn *c);
/* Closes c at the next reap, telling the worker why (error and message). */
void wconn_close_told(struct wconn *c, kvf_error_t error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* wconn.c */
/* Sends an EVENT; a failed write marks the connection broken (closed at the next reap). */
void wconn_event(struct wconn *c, uint64_t req_id, uint32_t kind, kvf_error_t error,
                 uint64_t bytes, const char *message);
/* The same with PROTO_EVF_* flags (conversation 2 only: the caller checks c->xc.conv). */
void wconn_event_flags(struct wconn *c, uint64_t req_id, uint32_t kind, kvf_error_t error,
                       uint64_t bytes, const char *message, uint32_t flags);
/* Starts closing (idempotent): fails/cancels its requests, removes its registration. */
void wconn_close(struct wconn *c, const char *why);
/* Marks for closing at the next reap (safe inside transfer callbacks). */
void wconn_close_later(struct wconn *c);
void wconn_readable(uv_poll_t *p, int status, int events);

/* Module hooks (modules.c) and control commands (ctl_cmds.c). */
int workers_status(struct daemon *d, json_t *ret);
int workers_stats(struct daemon *d, json_t *ret);
int workers_live(struct daemon *d, json_t *ret);
void workers_drain_start(struct daemon *d);
/* After a reload: connections whose uid lost its access are closed (wlimits_access). */
void workers_reloaded(struct daemon *d);
size_t workers_in_flight(struct daemon *d);
json_t *workers_list_json(struct workers *w);

#endif
