/* client_int.h: internals of libkvferry shared by client.c (public API, events, requests in
 * flight) and client_conn.c (socket, handshake, registration, frame I/O, reconnect).
 * Every function here runs with c->mu held. */
#ifndef KVF_CLIENT_INT_H
#define KVF_CLIENT_INT_H

#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/un.h>

#include "frame.h"
#include "kvferry.h"
#include "monotonic.h"
#include "proto.h"

#define CLIENT_DEF_TIMEOUT_MS 5000u
#define CLIENT_DEF_RECONNECT_MIN_MS 50u
#define CLIENT_DEF_RECONNECT_MAX_MS 2000u

struct client_req {
    uint64_t id;
    char kind; /* 'S' send, 'R' recv */
};

struct kvf_client {
    pthread_mutex_t mu;
    char path[PATH_MAX]; /* as given, never truncated to sun_path: client_conn_open refuses it */
    char name[PROTO_NAME_MAX + 1];
    char home[PROTO_HOME_MAX + 1]; /* options.home: sent with every REGISTER */
    uint32_t timeout_ms, backoff_min_ms, backoff_max_ms;
    bool no_reconnect;
    bool held_events;  /* options.held_events: HELLO offers conversation 2 */

    int sock;          /* -1 while disconnected; owned */
    int epfd, evfd, tfd; /* epoll set {sock, evfd, tfd}; owned */
    struct frame_reader rd;
    bool rd_live;
    struct proto_limits lim; /* the daemon's, from WELCOME */
    uint32_t max_inflight;
    uint64_t epoch;
    uint64_t seq;

    bool sending;      /* inside send_all: a PING's PONG waits (pong_owed) */
    bool pong_owed;
    char lost_why[KVF_MESSAGE_MAX]; /* why the last connection (or attempt) ended */

    uint32_t backoff_ms;
    int64_t next_attempt_ms; /* < 0: no reconnect scheduled */

    /* what kvf_register gave, kept for re-registration; owned (fds are dups) */
    char *layout_json;
    uint32_t layout_len;
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    uint32_t n_pools;
    bool registered;
    uint8_t *ev_handles;     /* kvf_register_events': n_events * 64 bytes, kept; owned */
    uint32_t n_events;

    /* synchronous replies */
    bool got_welcome, got_registered;
    struct proto_welcome welcome;
    struct proto_registered registered_reply;

    struct client_req *reqs; /* owned */
    uint32_t n_reqs, cap_reqs;

    struct kvf_event *evq;   /* ring; owned */
    uint32_t q_head, q_len, q_cap;

    uint64_t *held;          /* owned: RECVs ended FAILED|HELD, RELEASED not yet (client_held.c) */
    uint32_t n_held, cap_held;
};

/* client.c */
int client_queue_event(struct kvf_client *c, uint64_t req_id, int32_t kind, int32_t error,
                       uint64_t bytes, const char *message, uint32_t flags);
/* Fails every request in flight with error (PEER_LOST) and message. */
void client_fail_all(struct kvf_client *c, int32_t error, const char *message);
/* A daemon EVENT: ends the request if terminal, queues it. Unknown ids are dropped. */
void client_on_event(struct kvf_client *c, const struct proto_event *ev);

/* client_held.c */
void client_held_add(struct kvf_client *c, uint64_t id);
/* id is not held any more; whether it was. */
bool client_held_take(struct kvf_client *c, uint64_t id);
/* After a reconnect: a new daemon epoch releases every id held (RELEASED queued). */
void client_held_epoch(struct kvf_client *c, uint64_t old_epoch);
void client_held_free(struct kvf_client *c);

/* client_conn.c */
/* Opens the socket and does HELLO/WELCOME; then REGISTER if a registration is kept. */
int client_conn_open(struct kvf_client *c, char *err, size_t errlen);
/* Drops the connection: fails requests in flight, queues DISCONNECTED, schedules a reconnect. */
void client_conn_lost(struct kvf_client *c, const char *why);
/* Sends one message (with fds for REGISTER). On failure the connection is dropped: -ENOTCONN. */
int client_conn_send(struct kvf_client *c, struct proto_msg *m, const int *fds, unsigned nfds);
/* Reads and handles what is available without blocking. 0, or -ENOTCONN if the link dropped. */
int client_conn_pump(struct kvf_client *c);
/* Waits (up to deadline) until pred(c) holds, handling frames. 0, -ETIMEDOUT or -ENOTCONN. */
int client_conn_wait(struct kvf_client *c, bool (*pred)(const struct kvf_client *), int64_t deadline);
/* client_events.c: sends EVENTS of the kept handles and waits for REGISTERED. */
int client_conn_events(struct kvf_client *c, char *err, size_t errlen);
/* Whether REGISTERED came (the wait's predicate). */
bool client_have_registered(const struct kvf_client *c);
/* Sends REGISTER of the kept registration and waits for REGISTERED. */
int client_conn_register(struct kvf_client *c, char *err, size_t errlen);
/* The fds a REGISTER of these pools carries: one per host pool, n_fds per VMM pool. */
uint32_t client_pool_fds(const struct kvf_pool *pools, uint32_t n);
/* Reconnects if one is due; 0 when connected afterwards, else -ENOTCONN. */
int client_conn_maybe_reconnect(struct kvf_client *c);
/* Sets / clears the readiness of the event fd and the reconnect timer. */
void client_sync_fds(struct kvf_client *c);

#endif
