/* metrics_conns.h: who may hold a connection to the /metrics listener (metrics_http.c), so that
 * no client can wedge it: at most METRICS_HTTP_CONNS connections, METRICS_HTTP_CONNS_PER_IP from
 * one address. A connection over its address's limit takes the place of that address's oldest
 * connection not being answered (evicted), so slow-header connections cannot lock a scraper
 * sharing their address out; one over the total is refused (the caller answers 503 and
 * closes). Each connection has METRICS_HTTP_IDLE_S seconds from its accept, or from its last
 * reply, to complete its next request, however slowly it sends: then it is closed (timed out).
 * Bookkeeping only: the caller shuts down what it is told to (a connection told to go stays
 * listed, and counts toward no limit, until metrics_conns_remove). Owned by struct
 * metrics_http; loop thread only. */
#ifndef KVF_METRICS_CONNS_H
#define KVF_METRICS_CONNS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#define METRICS_HTTP_CONNS 16
#define METRICS_HTTP_CONNS_PER_IP 8
#define METRICS_HTTP_IDLE_S 10

struct metrics_conn {
    struct metrics_conn *next;
    int fd;                /* borrowed: libmicrohttpd's once handed over */
    uint8_t addr[16];      /* the peer's address (4 bytes for IPv4) */
    uint8_t addr_len;
    uint64_t since_ms;     /* accept, or the last reply: the deadline counts from here */
    bool busy;             /* a request is being answered: not evicted */
    bool going;            /* told to go (evicted, timed out): counts toward no limit */
    bool handed;           /* libmicrohttpd took it (its STARTED notice came) */
    bool replied;          /* a request of it was answered: at its deadline it was idle */
};

struct metrics_conns_counters {
    uint64_t accepted, refused, evicted;
    uint64_t timed_out;   /* at the deadline before any request of it was answered */
    uint64_t idle_closed; /* at the deadline after a reply (a keep-alive, as usual) */
};

struct metrics_conns {
    struct metrics_conn *head; /* owned, newest first */
    uint32_t n, n_going;
    struct metrics_conns_counters counters;
};

/* Admission of a connection from sa at now_ms. 0: admitted, *ret is its new entry (owned by
 * the table) and *victim an entry the caller must shut down first (evicted), or NULL.
 * -EUSERS: the table is full (refused, counted); -ENOMEM. */
int metrics_conns_admit(struct metrics_conns *t, int fd, const struct sockaddr *sa,
                        uint64_t now_ms, struct metrics_conn **ret, struct metrics_conn **victim);
/* Frees an entry (its connection closed). */
void metrics_conns_remove(struct metrics_conns *t, struct metrics_conn *c);
/* A request began (busy) or its reply ended (the deadline restarts at now_ms). */
void metrics_conns_busy(struct metrics_conn *c, bool busy, uint64_t now_ms);
/* The next connection past its deadline at now_ms, marked going and counted (timed_out, or
 * idle_closed when it was answered before); NULL: none. */
struct metrics_conn *metrics_conns_expired(struct metrics_conns *t, uint64_t now_ms);
/* Frees every entry. */
void metrics_conns_done(struct metrics_conns *t);

#endif
