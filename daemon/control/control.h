/* control.h: the control socket server of kvferryd. A unix stream socket at cfg_control_path(),
 * mode sockets.mode, served by a unix_listener (unix_listener.h): each accepted peer is checked
 * with SO_PEERCRED against access.*, control.max_conns (total) and control.max_conns_per_uid
 * (root and the daemon's own user are exempt from it and keep a few slots past max_conns); a
 * refused peer gets one error line and is closed. Accepted peers become ctl_conn objects
 * (framing) whose commands run through the command table (ctl_cmds.h), each decided against
 * access.* as it is now (access_current): a reload that revokes a uid closes its connections at
 * their next command (EACCES), one that revokes an admin refuses its next mutating command. struct control is owned by struct daemon (d->control).
 * Lifecycle: control_new -> control_listen -> ... -> control_stop -> (loop runs the close
 * callbacks) -> control_free. Loop thread only. */
#ifndef KVF_CONTROL_H
#define KVF_CONTROL_H

#include <jansson.h>
#include <stdint.h>

#include "access.h"
#include "ctl_conn.h"

struct daemon;
struct control;
struct prom_set;

/* What control needs of the daemon above it, given at creation (daemon_life.h's
 * daemon_control_ops): control never calls up by name. Loop thread only. */
struct control_ops {
    int (*reload)(struct daemon *d); /* 0 or -errno; the outcome in d->last_reload */
    void (*drain)(struct daemon *d); /* idempotent */
    json_t *(*status)(struct daemon *d); /* new reference, or NULL (out of memory) */
    json_t *(*stats)(struct daemon *d);
    int (*metrics_walk)(struct daemon *d, struct prom_set *set); /* every section, declared */
};

struct control_counters {
    uint64_t accepted;      /* refusals at the socket: the listener's counters */
    uint64_t refused_admin;  /* mutating command from a non-admin */
    uint64_t revoked;        /* connections closed: a reload took their uid's access away */
    struct ctl_conn_counters conn;
};

/* Creates the server (not listening). ops: borrowed, must outlive it. Returns 0 or -errno; *ret
 * owned by the caller. */
int control_new(struct daemon *d, const struct control_ops *ops, struct control **ret);
/* Creates the socket directory (0750) if missing, binds, chmods, listens. A stale socket file
 * (nobody accepting) is replaced; a live one is an error (-EADDRINUSE). Returns 0 or -errno,
 * with a message in err. */
int control_listen(struct control *ctl, char *err, size_t errlen);
/* Serves a connected socket as a control connection for `peer` (the listener does this after
 * its checks; tests use a socketpair). Takes ownership of fd, also on error. */
int control_adopt(struct control *ctl, int fd, const struct peer_cred *peer);
/* Closes the listener (unlinking its socket) and every connection. Idempotent. */
void control_stop(struct control *ctl);
/* Frees after the close callbacks ran. Accepts NULL; returns NULL. */
struct control *control_free(struct control *ctl);

uint32_t control_connections(const struct control *ctl);
struct control_counters *control_counters(struct control *ctl);
const char *control_path(const struct control *ctl);
const struct control_ops *control_ops(const struct control *ctl);

/* Module hooks (modules.c). */
int control_status(struct daemon *d, json_t *ret);
int control_stats(struct daemon *d, json_t *ret);
void control_reloaded(struct daemon *d);
int control_live(struct daemon *d, json_t *ret);

#endif
