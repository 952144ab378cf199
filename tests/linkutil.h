/* linkutil.h: a two-process harness for the link tests (bodies in tests/support/linkutil.c).
 * A forked server process runs its own uv loop and link and answers a small set of test
 * messages (echo, verify a rendezvous payload, verify its arena, register memory, quit); the test
 * process runs the client side on its own loop. UCX is initialised only after fork. */
#ifndef KVF_LINKUTIL_H
#define KVF_LINKUTIL_H

#include "link.h"
#include "log.h"
#include "testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

enum {
    LT_PING = 1, /* server echoes as LT_PONG, header and payload */
    LT_PONG,
    LT_BIG,         /* hdr {seed}: server verifies the pattern, and that it landed in its buffer */
    LT_RESULT,      /* hdr {ok} */
    LT_CHECK_ARENA, /* hdr {off, len, seed}: server verifies its arena */
    LT_GIVE_MREG,   /* hdr {len}: server registers a buffer, answers LT_MREG {addr} + rkey */
    LT_MREG,
    LT_CHECK_MREG, /* hdr {len, seed} */
    LT_QUIT,
};

struct lt_check {
    uint64_t off, len, seed;
};

struct lt {
    uv_loop_t loop;
    struct link *link;
    struct link_peer *peer;
    int ups, downs, down_err;
    int msgs, results_ok, results_bad, quit;
    int sends_done, sends_failed;
    uint16_t last_type;
    uint16_t order[64]; /* the types of the first messages received, in order */
    int n_order;
    uint8_t last_hdr[LINK_HDR_MAX];
    size_t last_hdr_len, last_len;
    uint8_t last_data[LINK_RKEY_MAX];
    void *rndv_buf;      /* where the last rendezvous payload landed */
    void *rndv_bufs[64]; /* owned: one buffer per rendezvous message, freed at lt_close */
    size_t rndv_lens[64];
    int n_rndv;
    struct link_mreg *mreg;
    void *mreg_buf;
    size_t mreg_len;
};

uint64_t lt_now_ns(void);

void lt_fill(void *buf, size_t len, uint64_t seed);

int lt_verify(const void *buf, size_t len, uint64_t seed);

/* Writes a secret file with the given content and mode; returns its path in buf. */
void lt_secret(const char *dir, const char *name, const char *content, mode_t mode, char *buf,
               size_t len);

/* 1 in the forked server process: its callbacks answer, the client's only record and stop
 * the loop. */
extern int lt_is_server;

void lt_send_done(void *arg, int status);

/* Server: greet each new peer from on_peer_up (racing the handshake's last message). */
extern int lt_greet;

int lt_open(struct lt *t, const struct link_config *cfg);

/* Tears down; returns uv_loop_close's result. */
int lt_close(struct lt *t);

/* Runs the loop until *flag >= want or timeout_ms passes; returns 1 when reached. */
int lt_run_until(struct lt *t, const int *flag, int want, unsigned timeout_ms);

/* Runs the loop for up to timeout_ms until the peer's puts are fast (wireup settled). */
int lt_wait_put_fast(struct lt *t, unsigned timeout_ms);

/* Forks a server with cfg. With gate_fd >= 0 the child first reads a port (uint16) from it and
 * listens there: fork it before this process starts UCX (a forked UCX process has no async
 * thread), open the gate later. Its port comes on *port_fd, its stats on *stats_fd at exit. */
pid_t lt_server_fork(const struct link_config *cfg, unsigned lifetime_ms, int gate_fd, int *port_fd,
                     int *stats_fd);

uint16_t lt_read_port(int port_fd);

/* Forks a server and waits for its port. */
pid_t lt_server_start(const struct link_config *cfg, unsigned lifetime_ms, uint16_t *port_ret,
                      int *stats_fd);

/* Waits for the server; returns its exit status and fills its stats (zeros if none came). */
int lt_server_wait(pid_t pid, int stats_fd, struct link_stats *st);

void lt_connect(struct lt *t, uint16_t port);

#endif
