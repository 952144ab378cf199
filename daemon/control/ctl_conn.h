/* ctl_conn.h: one control connection: the JSON-lines framing, apart from what commands mean.
 * It reads bytes into a line buffer bounded by max_line, parses each line as a JSON object
 * {"id":..,"cmd":"..","args":{..}}, hands cmd and args to the handler, and writes one reply line
 * {"id":..,"ok":true,"result":..} or {"id":..,"ok":false,"error":"EINVAL","message":".."}.
 * Malformed JSON or a non-object gets an error reply and the connection stays usable; a line
 * longer than max_line gets an error reply and the connection is closed; no byte for
 * idle_timeout_ms closes it (after an error line); a peer that does not read its replies (write
 * queue past CTL_CONN_WRITE_MAX) is closed.
 * Works on any connected stream socket fd (a socketpair in tests). A struct ctl_conn owns its fd
 * and handles and frees itself after its handles closed, then calls ops->closed.
 * Loop thread only. */
#ifndef KVF_CTL_CONN_H
#define KVF_CTL_CONN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "access.h"

#define CTL_CONN_WRITE_MAX (64u * 1024 * 1024) /* queued reply bytes before we give up on a peer   \
                                                */

struct ctl_conn;

struct ctl_conn_limits {
    size_t max_line;          /* bytes per line, newline excluded */
    uint64_t idle_timeout_ms; /* 0: none */
};

struct ctl_conn_ops {
    /* Runs one command. On success stores a new reference in *ret (may be NULL: result {}) and
     * returns 0; on failure returns -errno and writes a message for the peer into msg. */
    int (*handle)(void *ctx, struct ctl_conn *c, const char *cmd, json_t *args, json_t **ret,
                  char *msg, size_t msglen);
    /* Called once, after the connection is closed and just before it is freed. May be NULL. */
    void (*closed)(void *ctx, struct ctl_conn *c);
};

/* Counters a connection adds to (borrowed: must outlive the connection; may be NULL). */
struct ctl_conn_counters {
    uint64_t commands;
    uint64_t errors;    /* error replies of any kind */
    uint64_t malformed; /* not JSON, not an object, no cmd */
    uint64_t lines_too_long;
    uint64_t idle_timeouts;
};

/* Takes ownership of fd, also on error (then it is closed). 0 or -errno. */
int ctl_conn_new(uv_loop_t *loop, int fd, const struct peer_cred *peer,
                 const struct ctl_conn_limits *limits, const struct ctl_conn_ops *ops, void *ctx,
                 struct ctl_conn_counters *counters, struct ctl_conn **ret);
/* Starts closing; with graceful, replies already queued are written first. Idempotent. */
void ctl_conn_close(struct ctl_conn *c, bool graceful);

/* The peer's credentials and its access decision (access_current updates it in place). */
struct peer_cred *ctl_conn_peer(struct ctl_conn *c);
/* From inside ops->handle: the connection closes once this command's reply is written. */
void ctl_conn_close_after_reply(struct ctl_conn *c);
void ctl_conn_set_limits(struct ctl_conn *c, const struct ctl_conn_limits *limits);
const struct ctl_conn_limits *ctl_conn_limits(const struct ctl_conn *c);
/* Intrusive list link for the owner (the control server). */
struct ctl_conn **ctl_conn_next(struct ctl_conn *c);

/* Name of an errno value for replies: "EINVAL", "EPERM", ...; "EIO" when unknown. */
const char *ctl_errno_name(int err);
/* One error line (newline included) for a peer we will not serve; malloc'd. */
char *ctl_error_line(json_t *id, int err, const char *message);

#endif
