/* control.c: the control socket through a unix_listener (credentials, control.max_conns and
 * max_conns_per_uid), its connections, status and stats. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "control.h"
#include "metrics_http.h"
#include "sockpath.h"
#include "ctl_cmds.h"
#include "daemon.h"
#include "unix_listener.h"
/* Root and the daemon's own user are the operator: the per-uid cap does not apply to them, and
 * these many connections past control.max_conns stay theirs, so no user can lock them out. */
#define CONTROL_OPERATOR_RESERVE 8

struct control {
    struct daemon *d; /* borrowed: owns us */
    const struct control_ops *ops; /* borrowed: the daemon's, outlives us */
    struct unix_listener listener;
    bool stopped;
    struct ctl_conn *conns; /* every open connection */
    uint32_t n_conns;
    struct control_counters counters;
    struct metrics_http *http; /* GET /metrics when metrics.listen is set, else NULL */
};

static struct ctl_conn_limits limits_of(const struct kvf_config *c)
{
    struct ctl_conn_limits l = {(size_t)c->control_max_line, c->control_idle_timeout_ms};
    return l;
}

static int conn_handle(void *ctx, struct ctl_conn *c, const char *cmd, json_t *args, json_t **ret,
                       char *msg, size_t msglen)
{
    struct control *ctl = ctx;
    struct peer_cred *peer = ctl_conn_peer(c);
    if (!access_current(&ctl->d->access, peer)) { /* a reload took it away: admin is fresh too */
        ctl->counters.revoked++;
        log_info("control: pid %d uid %u may no longer use the socket (access.* changed by a "
                 "reload): closing", (int)peer->pid, (unsigned)peer->uid);
        snprintf(msg, msglen, "uid %u may no longer use the control socket (access.* changed "
                 "by a reload): closing", (unsigned)peer->uid);
        ctl_conn_close_after_reply(c);
        return -EACCES;
    }
    return ctl_cmds_run(ctl->d, peer, cmd, args, ret, msg, msglen);
}

static void conn_closed(void *ctx, struct ctl_conn *c)
{
    struct control *ctl = ctx;
    for (struct ctl_conn **pp = &ctl->conns; *pp; pp = ctl_conn_next(*pp))
        if (*pp == c) {
            *pp = *ctl_conn_next(c);
            ctl->n_conns--;
            log_debug("control: pid %d disconnected", (int)ctl_conn_peer(c)->pid);
            return;
        }
}

static const struct ctl_conn_ops conn_ops = {conn_handle, conn_closed};

static const struct unix_listener_ops listener_ops;

int control_new(struct daemon *d, const struct control_ops *ops, struct control **ret)
{
    struct control *ctl = calloc(1, sizeof(*ctl));
    if (!ctl)
        return -ENOMEM;
    ctl->d = d;
    ctl->ops = ops;
    unix_listener_init(&ctl->listener, "control", "control", "control", &d->access, &listener_ops,
                       ctl);
    *ret = ctl;
    return 0;
}

int control_adopt(struct control *ctl, int fd, const struct peer_cred *peer)
{
    struct ctl_conn_limits l = limits_of(&ctl->d->cfg);
    struct ctl_conn *c;
    int r = ctl_conn_new(&ctl->d->loop, fd, peer, &l, &conn_ops, ctl, &ctl->counters.conn, &c);
    if (r < 0)
        return r;
    *ctl_conn_next(c) = ctl->conns;
    ctl->conns = c;
    ctl->n_conns++;
    ctl->counters.accepted++;
    return 0;
}

/* One error line; the listener closes fd. The socket is fresh, so a short line fits. */
static void refuse(void *ctx, int fd, int err, const char *msg)
{
    (void)ctx;
    char *line = ctl_error_line(NULL, -err, msg);
    if (line)
        (void)!send(fd, line, strlen(line), MSG_DONTWAIT | MSG_NOSIGNAL);
    free(line);
}

static void limits(void *ctx, struct unix_listener_limits *ret)
{
    const struct kvf_config *cfg = &((struct control *)ctx)->d->cfg;
    *ret = (struct unix_listener_limits){.max_conns = cfg->control_max_conns,
                                         .max_conns_per_uid = cfg->control_max_conns_per_uid,
                                         .operator_reserve = CONTROL_OPERATOR_RESERVE,
                                         .operator_exempt = true};
}

static void count(void *ctx, uid_t uid, int64_t *all, int64_t *of_uid)
{
    const struct control *ctl = ctx;
    *all = ctl->n_conns;
    *of_uid = 0;
    for (struct ctl_conn *c = ctl->conns; c; c = *ctl_conn_next(c))
        *of_uid += ctl_conn_peer(c)->uid == uid;
}

static int adopt(void *ctx, int fd, const struct peer_cred *peer)
{
    return control_adopt(ctx, fd, peer);
}

static const struct unix_listener_ops listener_ops = {limits, count, NULL, NULL, refuse, adopt};

int control_listen(struct control *ctl, char *err, size_t errlen)
{
    const struct kvf_config *cfg = &ctl->d->cfg;
    char path[SOCKPATH_BUF];
    int r = cfg_control_path(cfg, path, sizeof(path)); /* -ENAMETOOLONG: sockpath_addr says why */
    if (r < 0 && r != -ENAMETOOLONG) {
        snprintf(err, errlen, "control socket path: %s", strerror(-r));
        return r;
    }
    r = unix_listener_start(&ctl->listener, &ctl->d->loop, path, (mode_t)cfg->sockets_mode, 64,
                            err, errlen);
    if (r < 0)
        return r;
    if (cfg->metrics_listen && cfg->metrics_listen[0])
        return metrics_http_start(ctl->d, cfg->metrics_listen, &ctl->http, err, errlen);
    return 0;
}

void control_stop(struct control *ctl)
{
    if (!ctl || ctl->stopped)
        return;
    ctl->stopped = true;
    metrics_http_stop(ctl->http);
    ctl->http = NULL;
    unix_listener_stop(&ctl->listener);
    for (struct ctl_conn *c = ctl->conns; c; c = *ctl_conn_next(c))
        ctl_conn_close(c, false);
}

struct control *control_free(struct control *ctl)
{
    if (!ctl)
        return NULL;
    control_stop(ctl);
    free(ctl);
    return NULL;
}

uint32_t control_connections(const struct control *ctl)
{
    return ctl ? ctl->n_conns : 0;
}
struct control_counters *control_counters(struct control *ctl)
{
    return &ctl->counters;
}
const char *control_path(const struct control *ctl)
{
    return ctl ? ctl->listener.path : "";
}

const struct control_ops *control_ops(const struct control *ctl)
{
    return ctl->ops;
}

int control_status(struct daemon *d, json_t *ret)
{
    struct control *ctl = d->control;
    if (!ctl)
        return 0;
    json_object_set_new(ret, "socket", json_string(ctl->listener.path));
    json_object_set_new(ret, "listening", json_boolean(ctl->listener.fd >= 0));
    json_object_set_new(ret, "connections", json_integer(ctl->n_conns));
    json_object_set_new(ret, "max_conns", json_integer(d->cfg.control_max_conns));
    if (ctl->http)
        json_object_set_new(ret, "metrics_http", metrics_http_status(ctl->http));
    return 0;
}

int control_stats(struct daemon *d, json_t *ret)
{
    struct control *ctl = d->control;
    if (!ctl)
        return 0;
    const struct control_counters *k = &ctl->counters;
    json_object_set_new(ret, "connections_accepted", json_integer((json_int_t)k->accepted));
    const struct unix_listener_counters *lk = &ctl->listener.counters;
    json_object_set_new(ret, "connections_refused_access",
                        json_integer((json_int_t)lk->refused_access));
    json_object_set_new(ret, "connections_refused_limit",
                        json_integer((json_int_t)lk->refused_limit));
    json_object_set_new(ret, "connections_accept_failed",
                        json_integer((json_int_t)lk->accept_failed));
    json_object_set_new(ret, "connections_open", json_integer(ctl->n_conns));
    json_object_set_new(ret, "commands", json_integer((json_int_t)k->conn.commands));
    json_object_set_new(ret, "errors", json_integer((json_int_t)k->conn.errors));
    json_object_set_new(ret, "malformed", json_integer((json_int_t)k->conn.malformed));
    json_object_set_new(ret, "lines_too_long", json_integer((json_int_t)k->conn.lines_too_long));
    json_object_set_new(ret, "idle_timeouts", json_integer((json_int_t)k->conn.idle_timeouts));
    json_object_set_new(ret, "refused_not_admin", json_integer((json_int_t)k->refused_admin));
    json_object_set_new(ret, "access_revoked", json_integer((json_int_t)k->revoked));
    metrics_http_stats(ctl->http, ret);
    return 0;
}

/* control.max_line and control.idle_timeout are live: apply them to open connections too. */
void control_reloaded(struct daemon *d)
{
    struct control *ctl = d->control;
    if (!ctl)
        return;
    struct ctl_conn_limits l = limits_of(&d->cfg);
    for (struct ctl_conn *c = ctl->conns; c; c = *ctl_conn_next(c))
        ctl_conn_set_limits(c, &l);
}

/* control.max_line and control.idle_timeout as the open connections hold them (each conn keeps
 * its own copy, updated by control_reloaded): one value when they agree, else a note saying they
 * do not; the listener reads max_conns and max_conns_per_uid from the config at each accept. */
int control_live(struct daemon *d, json_t *ret)
{
    struct control *ctl = d->control;
    if (!ctl)
        return 0;
    struct ctl_conn_limits want = limits_of(&d->cfg), seen = want;
    bool first = true, agree = true;
    for (struct ctl_conn *c = ctl->conns; c; c = *ctl_conn_next(c)) {
        const struct ctl_conn_limits *l = ctl_conn_limits(c);
        if (first)
            seen = *l;
        agree &= l->max_line == seen.max_line && l->idle_timeout_ms == seen.idle_timeout_ms;
        first = false;
    }
    json_object_set_new(ret, "control.max_line",
                        agree ? json_integer((json_int_t)seen.max_line)
                              : json_string("open connections hold different values"));
    json_object_set_new(ret, "control.idle_timeout",
                        agree ? json_integer((json_int_t)seen.idle_timeout_ms)
                              : json_string("open connections hold different values"));
    static const char *const at_accept[] = {"control.max_conns", "control.max_conns_per_uid",
                                            NULL};
    return cfg_values_json(&d->cfg, at_accept, ret);
}
