/* control.c: the control socket listener: accept, peer checks, connection limits. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control.h"
#include "sockowner.h"
#include "sockpath.h"
#include "ctl_cmds.h"
#include "daemon.h"

#define CONTROL_ACCEPT_BURST 64 /* accepts per wakeup, so a flood cannot starve the loop */
/* Root and the daemon's own user are the operator: the per-uid cap does not apply to them, and
 * these many connections past control.max_conns stay theirs, so no user can lock them out. */
#define CONTROL_OPERATOR_RESERVE 8

struct control {
    struct daemon *d; /* borrowed: owns us */
    uv_poll_t poll;
    int fd; /* listening socket, -1 when not listening */
    bool poll_inited;
    bool stopped;
    char path[sizeof(((struct sockaddr_un *)0)->sun_path)];
    struct ctl_conn *conns; /* every open connection */
    uint32_t n_conns;
    struct control_counters counters;
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
    return ctl_cmds_run(ctl->d, ctl_conn_peer(c), cmd, args, ret, msg, msglen);
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

int control_new(struct daemon *d, struct control **ret)
{
    struct control *ctl = calloc(1, sizeof(*ctl));
    if (!ctl)
        return -ENOMEM;
    ctl->d = d;
    ctl->fd = -1;
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

/* One error line, then close. The socket is fresh, so a short line fits its buffer. */
static void refuse(int fd, int err, const char *msg)
{
    char *line = ctl_error_line(NULL, err, msg);
    if (line)
        (void)!send(fd, line, strlen(line), MSG_DONTWAIT | MSG_NOSIGNAL);
    free(line);
    close(fd);
}

static uint32_t conns_of_uid(const struct control *ctl, uid_t uid)
{
    uint32_t n = 0;
    for (struct ctl_conn *c = ctl->conns; c; c = *ctl_conn_next(c))
        if (ctl_conn_peer(c)->uid == uid)
            n++;
    return n;
}

static void accept_one(struct control *ctl, int fd)
{
    const struct kvf_config *cfg = &ctl->d->cfg;
    struct peer_cred peer;
    char msg[160];
    if (access_peer_cred(fd, &peer) < 0) {
        close(fd);
        return;
    }
    if (!access_check(&ctl->d->access, &peer)) {
        ctl->counters.refused_access++;
        log_warn("control: refused uid %u gid %u pid %d: not in access.allow_*", (unsigned)peer.uid,
                 (unsigned)peer.gid, (int)peer.pid);
        snprintf(msg, sizeof(msg), "uid %u is not allowed on this socket (access.allow_uids/gids)",
                 (unsigned)peer.uid);
        refuse(fd, EACCES, msg);
        return;
    }
    bool operator = peer.uid == 0 || peer.uid == geteuid();
    if ((int64_t)ctl->n_conns >= cfg->control_max_conns + (operator ? CONTROL_OPERATOR_RESERVE : 0)) {
        ctl->counters.refused_limit++;
        snprintf(msg, sizeof(msg), "too many control connections (control.max_conns %lld%s)",
                 (long long)cfg->control_max_conns,
                 operator ? ", and the operator's reserve is in use too" : "");
        refuse(fd, EUSERS, msg);
        return;
    }
    if (!operator && (int64_t)conns_of_uid(ctl, peer.uid) >= cfg->control_max_conns_per_uid) {
        ctl->counters.refused_limit++;
        snprintf(msg, sizeof(msg),
                 "too many control connections of uid %u (control.max_conns_per_uid %lld)",
                 (unsigned)peer.uid, (long long)cfg->control_max_conns_per_uid);
        refuse(fd, EUSERS, msg);
        return;
    }
    if (control_adopt(ctl, fd, &peer) < 0) {
        log_warn("control: cannot serve pid %d: out of memory or handles", (int)peer.pid);
        return;
    }
    log_debug("control: pid %d uid %u connected%s", (int)peer.pid, (unsigned)peer.uid,
              peer.admin ? " (admin)" : "");
}

static void poll_cb(uv_poll_t *p, int status, int events)
{
    struct control *ctl = p->data;
    (void)events;
    if (status < 0)
        return;
    for (int i = 0; i < CONTROL_ACCEPT_BURST && ctl->fd >= 0; i++) {
        int fd = accept4(ctl->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                log_warn("control: accept: %s", strerror(errno));
            return;
        }
        accept_one(ctl, fd);
    }
}

/* mkdir -p for the directory part of path, missing components created with mode. */
int control_listen(struct control *ctl, char *err, size_t errlen)
{
    const struct kvf_config *cfg = &ctl->d->cfg;
    struct sockaddr_un sa;
    char path[SOCKPATH_BUF];
    int r = cfg_control_path(cfg, path, sizeof(path)); /* -ENAMETOOLONG: sockpath_addr says why */
    if (r < 0 && r != -ENAMETOOLONG) {
        snprintf(err, errlen, "control socket path: %s", strerror(-r));
        return r;
    }
    if ((r = sockpath_addr(&sa, path, "control", err, errlen)) < 0)
        return r;
    snprintf(ctl->path, sizeof(ctl->path), "%s", sa.sun_path);
    if ((r = sockpath_mkdir_parents(ctl->path, 0750)) < 0) {
        snprintf(err, errlen, "control socket directory for %s: %s", ctl->path, strerror(-r));
        return r;
    }
    if ((r = sockpath_clear_stale(&sa)) < 0) {
        snprintf(err, errlen, "control socket %s: %s", ctl->path,
                 r == -EADDRINUSE ? "another kvferryd is serving it" : strerror(-r));
        ctl->path[0] = '\0';
        return r;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        r = -errno;
        snprintf(err, errlen, "control socket: %s", strerror(errno));
        ctl->path[0] = '\0';
        return r;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
        chmod(sa.sun_path, (mode_t)cfg->sockets_mode) < 0 || listen(fd, 64) < 0) {
        r = -errno;
        snprintf(err, errlen, "control socket %s: %s", ctl->path, strerror(errno));
        close(fd);
        unlink(sa.sun_path);
        ctl->path[0] = '\0';
        return r;
    }
    if ((r = sockowner_apply(sa.sun_path, &ctl->d->access, err, errlen)) < 0) {
        close(fd);
        unlink(sa.sun_path);
        ctl->path[0] = '\0';
        return r;
    }
    ctl->fd = fd;
    if ((r = uv_poll_init(&ctl->d->loop, &ctl->poll, fd)) < 0) {
        snprintf(err, errlen, "control socket poll: %s", uv_strerror(r));
        return r;
    }
    ctl->poll_inited = true;
    ctl->poll.data = ctl;
    if ((r = uv_poll_start(&ctl->poll, UV_READABLE, poll_cb)) < 0) {
        snprintf(err, errlen, "control socket poll: %s", uv_strerror(r));
        return r;
    }
    log_info("control: listening on %s (mode %04llo)", ctl->path,
             (unsigned long long)cfg->sockets_mode);
    return 0;
}

void control_stop(struct control *ctl)
{
    if (!ctl || ctl->stopped)
        return;
    ctl->stopped = true;
    if (ctl->poll_inited)
        uv_close((uv_handle_t *)&ctl->poll, NULL);
    if (ctl->fd >= 0) {
        close(ctl->fd);
        ctl->fd = -1;
    }
    if (ctl->path[0])
        unlink(ctl->path);
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
    return ctl ? ctl->path : "";
}

int control_status(struct daemon *d, json_t *ret)
{
    struct control *ctl = d->control;
    if (!ctl)
        return 0;
    json_object_set_new(ret, "socket", json_string(ctl->path));
    json_object_set_new(ret, "listening", json_boolean(ctl->fd >= 0));
    json_object_set_new(ret, "connections", json_integer(ctl->n_conns));
    json_object_set_new(ret, "max_conns", json_integer(d->cfg.control_max_conns));
    return 0;
}

int control_stats(struct daemon *d, json_t *ret)
{
    struct control *ctl = d->control;
    if (!ctl)
        return 0;
    const struct control_counters *k = &ctl->counters;
    json_object_set_new(ret, "connections_accepted", json_integer((json_int_t)k->accepted));
    json_object_set_new(ret, "connections_refused_access",
                        json_integer((json_int_t)k->refused_access));
    json_object_set_new(ret, "connections_refused_limit",
                        json_integer((json_int_t)k->refused_limit));
    json_object_set_new(ret, "connections_open", json_integer(ctl->n_conns));
    json_object_set_new(ret, "commands", json_integer((json_int_t)k->conn.commands));
    json_object_set_new(ret, "errors", json_integer((json_int_t)k->conn.errors));
    json_object_set_new(ret, "malformed", json_integer((json_int_t)k->conn.malformed));
    json_object_set_new(ret, "lines_too_long", json_integer((json_int_t)k->conn.lines_too_long));
    json_object_set_new(ret, "idle_timeouts", json_integer((json_int_t)k->conn.idle_timeouts));
    json_object_set_new(ret, "refused_not_admin", json_integer((json_int_t)k->refused_admin));
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
