/* unix_listener.c: one listening unix socket with credentials and limits (unix_listener.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "sockowner.h"
#include "sockpath.h"
#include "unix_listener.h"

#define UNIX_LISTENER_ACCEPT_BURST 64 /* accepts per wakeup, so a flood cannot starve the loop */

void unix_listener_init(struct unix_listener *l, const char *what, const char *log,
                        const char *key, const struct access *access,
                        const struct unix_listener_ops *ops, void *ctx)
{
    *l = (struct unix_listener){
        .what = what, .log = log, .key = key, .access = access, .ops = ops, .ctx = ctx, .fd = -1};
}

static int limits_admit(struct unix_listener *l, const struct peer_cred *peer, char *msg,
                        size_t len)
{
    struct unix_listener_limits lim;
    l->ops->limits(l->ctx, &lim);
    bool op = peer->uid == 0 || peer->uid == geteuid();
    const char *no_room = lim.no_room ? lim.no_room : "";
    int64_t all, of_uid;
    l->ops->count(l->ctx, peer->uid, &all, &of_uid);
    if (!(op && lim.operator_exempt) && of_uid >= lim.max_conns_per_uid) {
        char key[64];
        snprintf(key, sizeof key, "%s.max_conns_per_uid", l->key);
        if (!l->ops->make_room || !l->ops->make_room(l->ctx, true, peer->uid, key)) {
            snprintf(msg, len, "too many %s connections of uid %u (%s %lld%s)", l->what,
                     (unsigned)peer->uid, key, (long long)lim.max_conns_per_uid, no_room);
            return -EUSERS;
        }
        all--;
    }
    int64_t cap = lim.max_conns + (op ? (int64_t)lim.operator_reserve : 0);
    if (all >= cap) {
        char key[64];
        snprintf(key, sizeof key, "%s.max_conns", l->key);
        if (!l->ops->make_room || !l->ops->make_room(l->ctx, false, 0, key)) {
            snprintf(msg, len, "too many %s connections (%s %lld%s)", l->what, key,
                     (long long)lim.max_conns,
                     op && lim.operator_reserve ? ", and the operator's reserve is in use too"
                                                : no_room);
            return -EUSERS;
        }
    }
    return 0;
}

int unix_listener_admit(struct unix_listener *l, struct peer_cred *peer, char *msg, size_t len)
{
    if (!access_check(l->access, peer)) {
        l->counters.refused_access++;
        log_warn("%s: refused uid %u gid %u pid %d: not in access.allow_*", l->log,
                 (unsigned)peer->uid, (unsigned)peer->gid, (int)peer->pid);
        snprintf(msg, len, "uid %u is not allowed on this socket (access.allow_uids/gids)",
                 (unsigned)peer->uid);
        return -EACCES;
    }
    int rc = l->ops->admit ? l->ops->admit(l->ctx, peer, msg, len) : 0;
    if (rc == 0)
        rc = limits_admit(l, peer, msg, len);
    if (rc < 0) {
        l->counters.refused_limit++;
        log_warn("%s: refused uid %u pid %d: %s", l->log, (unsigned)peer->uid, (int)peer->pid,
                 msg);
    }
    return rc;
}

static void accept_one(struct unix_listener *l, int fd)
{
    struct peer_cred peer;
    char msg[160];
    if (access_peer_cred(fd, &peer) < 0) {
        close(fd);
        return;
    }
    int rc = unix_listener_admit(l, &peer, msg, sizeof msg);
    if (rc < 0) {
        l->ops->refuse(l->ctx, fd, rc, msg);
        close(fd);
        return;
    }
    if (l->ops->adopt(l->ctx, fd, &peer) < 0) {
        log_warn("%s: cannot serve pid %d: out of memory or handles", l->log, (int)peer.pid);
        return;
    }
    log_debug("%s: pid %d uid %u connected%s", l->log, (int)peer.pid, (unsigned)peer.uid,
              peer.admin ? " (admin)" : "");
}

static void poll_cb(uv_poll_t *p, int status, int events);

static void pause_done(uv_timer_t *t)
{
    struct unix_listener *l = t->data;
    if (l->fd >= 0 && l->poll_inited)
        uv_poll_start(&l->poll, UV_READABLE, poll_cb); /* fires at once if peers wait */
}

/* accept() failed with err: the listening socket stays readable, so polling it again at once
 * would spin (EMFILE: 2.6 million failures in 8 s at 100% CPU). Rest, count, log sparingly. */
static void accept_failed(struct unix_listener *l, int err)
{
    l->counters.accept_failed++;
    l->failing++;
    uint64_t now = uv_now(l->poll.loop) + 1; /* 0 stays "never reported" */
    if (l->reported_ms && now - l->reported_ms < UNIX_LISTENER_REPORT_MS) {
        l->unreported++;
    } else {
        char lim[48] = "", more[64] = "";
        struct rlimit rl;
        if ((err == EMFILE || err == ENFILE) && getrlimit(RLIMIT_NOFILE, &rl) == 0)
            snprintf(lim, sizeof lim, " (the daemon's RLIMIT_NOFILE is %llu)",
                     (unsigned long long)rl.rlim_cur);
        if (l->unreported)
            snprintf(more, sizeof more, "; %llu more failure(s) since the last report",
                     (unsigned long long)l->unreported);
        log_warn("%s: accept: %s%s: new connections wait while the listener retries every %d ms%s",
                 l->log, strerror(err), lim, UNIX_LISTENER_PAUSE_MS, more);
        l->reported_ms = now;
        l->unreported = 0;
        l->report_recovery = true;
    }
    uv_poll_stop(&l->poll);
    uv_timer_start(&l->pause, pause_done, UNIX_LISTENER_PAUSE_MS, 0);
}

static void poll_cb(uv_poll_t *p, int status, int events)
{
    struct unix_listener *l = p->data;
    (void)events;
    if (status < 0)
        return;
    for (int i = 0; i < UNIX_LISTENER_ACCEPT_BURST && l->fd >= 0; i++) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR && errno != ECONNABORTED)
                accept_failed(l, errno);
            return;
        }
        if (l->failing && l->report_recovery)
            log_info("%s: accepting again, after %llu failed accept(s)", l->log,
                     (unsigned long long)l->failing);
        l->failing = 0;
        l->report_recovery = false;
        accept_one(l, fd);
    }
}

int unix_listener_start(struct unix_listener *l, uv_loop_t *loop, const char *path, mode_t mode,
                        int backlog, char *err, size_t errlen)
{
    struct sockaddr_un sa;
    int r;
    if ((r = sockpath_addr(&sa, path, l->what, err, errlen)) < 0)
        return r;
    snprintf(l->path, sizeof l->path, "%s", sa.sun_path);
    if ((r = sockpath_mkdir_parents(l->path, 0750)) < 0) {
        snprintf(err, errlen, "%s socket directory for %s: %s", l->what, l->path, strerror(-r));
        goto err_path;
    }
    if ((r = sockpath_clear_stale(&sa)) < 0) {
        snprintf(err, errlen, "%s socket %s: %s", l->what, l->path,
                 r == -EADDRINUSE ? "another kvferryd is serving it" : strerror(-r));
        goto err_path;
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        r = -errno;
        snprintf(err, errlen, "%s socket: %s", l->what, strerror(errno));
        goto err_path;
    }
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || chmod(sa.sun_path, mode) < 0 ||
        listen(fd, backlog) < 0) {
        r = -errno;
        snprintf(err, errlen, "%s socket %s: %s", l->what, l->path, strerror(errno));
        goto err_unlink;
    }
    if ((r = sockowner_apply(sa.sun_path, l->access, err, errlen)) < 0)
        goto err_unlink;
    l->fd = fd;
    if ((r = uv_poll_init(loop, &l->poll, fd)) < 0) {
        snprintf(err, errlen, "%s socket poll: %s", l->what, uv_strerror(r));
        return r;
    }
    l->poll_inited = true;
    l->poll.data = l;
    if ((r = uv_timer_init(loop, &l->pause)) < 0) {
        snprintf(err, errlen, "%s socket timer: %s", l->what, uv_strerror(r));
        return r;
    }
    l->pause_inited = true;
    l->pause.data = l;
    if ((r = uv_poll_start(&l->poll, UV_READABLE, poll_cb)) < 0) {
        snprintf(err, errlen, "%s socket poll: %s", l->what, uv_strerror(r));
        return r;
    }
    log_info("%s: listening on %s (mode %04llo)", l->log, l->path, (unsigned long long)mode);
    return 0;

err_unlink:
    close(fd);
    unlink(sa.sun_path);
err_path:
    l->path[0] = '\0';
    return r;
}

void unix_listener_stop(struct unix_listener *l)
{
    if (l->poll_inited) {
        uv_close((uv_handle_t *)&l->poll, NULL);
        l->poll_inited = false;
    }
    if (l->pause_inited) {
        uv_close((uv_handle_t *)&l->pause, NULL);
        l->pause_inited = false;
    }
    if (l->fd >= 0) {
        close(l->fd);
        l->fd = -1;
    }
    if (l->path[0]) {
        unlink(l->path);
        l->path[0] = '\0';
    }
}
