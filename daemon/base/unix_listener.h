/* unix_listener.h: one listening unix stream socket of the daemon (the worker socket, the
 * control socket): the path prepared (sockpath.h), bound with sockets.mode and handed to
 * sockets.group (sockowner.h); each accepted peer's credentials read (SO_PEERCRED,
 * SO_PEERGROUPS) and checked against access.*, then against the owner's connection limits:
 * max_conns in all and max_conns_per_uid, where the operator (root and the daemon's own uid)
 * may be exempt from the per-uid cap and keep a reserve past max_conns, and an owner may make
 * room by closing one of its connections (ops->make_room) before anyone is refused. A refused
 * peer is told why in the socket's own protocol (ops->refuse) and closed; an admitted one is
 * handed over (ops->adopt). A failing accept() (the daemon out of descriptors: EMFILE,
 * ENFILE; or out of memory) pauses the listener for UNIX_LISTENER_PAUSE_MS, so connections wait
 * in the backlog instead of the loop spinning on a socket that stays readable; failures are
 * counted and logged at most once per UNIX_LISTENER_REPORT_MS, with the count and the limit.
 * Embedded in its owner (struct workers, struct control), which keeps the connections and their
 * counts. Loop thread only. */
#ifndef KVF_UNIX_LISTENER_H
#define KVF_UNIX_LISTENER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/un.h>
#include <uv.h>

#include "access.h"

/* The connection limits, read at every accept (they follow reloads). */
struct unix_listener_limits {
    int64_t max_conns, max_conns_per_uid;
    uint32_t operator_reserve; /* connections past max_conns that stay the operator's */
    bool operator_exempt;      /* the operator is not held to max_conns_per_uid */
    const char *no_room;       /* appended when make_room found nothing: ", all past HELLO" */
};

/* Refusals, counted by the listener; the owner shows them (stats, metrics) and counts the
 * connections it adopted. */
struct unix_listener_counters {
    uint64_t refused_access, refused_limit;
    uint64_t accept_failed; /* accept() errors (each pauses the listener) */
};

#define UNIX_LISTENER_PAUSE_MS 100    /* the listener rests this long after a failed accept() */
#define UNIX_LISTENER_REPORT_MS 10000 /* at most one accept failure logged per this interval */

struct unix_listener_ops {
    void (*limits)(void *ctx, struct unix_listener_limits *ret);
    /* Live connections in all, and of uid. */
    void (*count)(void *ctx, uid_t uid, int64_t *all, int64_t *of_uid);
    /* Refusal before the limits (a draining daemon): 0, or -errno with why in msg. NULL: none. */
    int (*admit)(void *ctx, const struct peer_cred *peer, char *msg, size_t len);
    /* Closes one connection (of uid when only_uid) to make room under `limit` (the key, for
     * its message): true when one was closed. NULL: never. */
    bool (*make_room)(void *ctx, bool only_uid, uid_t uid, const char *limit);
    /* Writes the refusal (err: -errno) to fd in the socket's protocol; the listener closes fd. */
    void (*refuse)(void *ctx, int fd, int err, const char *msg);
    /* Serves fd (takes ownership, also on error). 0 or -errno. */
    int (*adopt)(void *ctx, int fd, const struct peer_cred *peer);
};

struct unix_listener {
    const char *what; /* "worker", "control": the socket's name in messages and config keys */
    const char *log;  /* log prefix: "workers", "control" */
    const char *key;  /* limit keys' section: "workers", "control" */
    const struct access *access; /* borrowed: the daemon's, updated in place on reload */
    const struct unix_listener_ops *ops;
    void *ctx;
    uv_poll_t poll;
    uv_timer_t pause; /* resumes the poll after a failed accept() */
    int fd; /* -1 when not listening */
    bool poll_inited, pause_inited;
    bool report_recovery; /* a failure was logged: say so when accept() works again */
    uint64_t reported_ms; /* loop time of the last accept failure logged; 0: none yet */
    uint64_t unreported;  /* accept failures since the one logged last */
    uint64_t failing;     /* accept failures since the last accepted connection */
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)]; /* "" when not listening */
    struct unix_listener_counters counters;
};

/* Not listening yet (fd -1). */
void unix_listener_init(struct unix_listener *l, const char *what, const char *log,
                        const char *key, const struct access *access,
                        const struct unix_listener_ops *ops, void *ctx);
/* Listens at path (directory made 0750 if missing, a stale socket replaced, a live one
 * -EADDRINUSE) with mode and a backlog of `backlog`. 0, or -errno with why in err. */
int unix_listener_start(struct unix_listener *l, uv_loop_t *loop, const char *path, mode_t mode,
                        int backlog, char *err, size_t errlen);
/* Admission of one peer: access, then the limits. 0, or -EACCES / -EUSERS (or the admit hook's
 * -errno) with the message the peer is told in msg; counted. */
int unix_listener_admit(struct unix_listener *l, struct peer_cred *peer, char *msg, size_t len);
/* Closes the socket and unlinks its path. Idempotent; the poll handle closes with the loop. */
void unix_listener_stop(struct unix_listener *l);

#endif
