/* client.c: libkvferry's public API (kvferry.h): arguments, requests in flight, the event queue
 * and kvf_poll. One mutex per client serializes every call; the connection work is in
 * client_conn.c. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "client_int.h"

/* Closes what the library kept of a pool (its dups). */
static void pool_release(struct kvf_pool *p)
{
    if (p->kind == KVF_POOL_HOST && p->fd >= 0)
        close(p->fd);
    if (p->kind == KVF_POOL_CUDA_VMM && p->fds) {
        for (uint32_t k = 0; k < p->n_fds; k++)
            close(p->fds[k]);
        free((int32_t *)p->fds);
    }
    p->fd = -1;
    p->fds = NULL;
}

/* ---- events and requests in flight ---- */

int client_queue_event(struct kvf_client *c, uint64_t req_id, int32_t kind, int32_t error,
                       uint64_t bytes, const char *message, uint32_t flags)
{
    if (c->q_len == c->q_cap) {
        uint32_t ncap = c->q_cap ? c->q_cap * 2 : 64;
        struct kvf_event *nq = malloc(ncap * sizeof *nq);
        if (!nq)
            return -ENOMEM;
        for (uint32_t i = 0; i < c->q_len; i++)
            nq[i] = c->evq[(c->q_head + i) % c->q_cap];
        free(c->evq);
        c->evq = nq;
        c->q_cap = ncap;
        c->q_head = 0;
    }
    struct kvf_event *e = &c->evq[(c->q_head + c->q_len) % c->q_cap];
    e->req_id = req_id;
    e->kind = kind;
    e->error = error;
    e->bytes = bytes;
    e->flags = flags;
    snprintf(e->message, sizeof e->message, "%s", message ? message : "");
    c->q_len++;
    return 0;
}

static struct client_req *req_find(struct kvf_client *c, uint64_t id)
{
    for (uint32_t i = 0; i < c->n_reqs; i++)
        if (c->reqs[i].id == id)
            return &c->reqs[i];
    return NULL;
}

static void req_remove(struct kvf_client *c, struct client_req *r)
{
    *r = c->reqs[--c->n_reqs];
}

void client_fail_all(struct kvf_client *c, int32_t error, const char *message)
{
    for (uint32_t i = 0; i < c->n_reqs; i++)
        client_queue_event(c, c->reqs[i].id, KVF_EV_FAILED, error, 0, message, 0);
    c->n_reqs = 0;
}

void client_on_event(struct kvf_client *c, const struct proto_event *ev)
{
    if (ev->kind == PROTO_EV_RELEASED) { /* of a request that ended held (the daemon sends it
                                            only then, so one not listed was not for lack of
                                            memory to list it: queued all the same) */
        client_held_take(c, ev->req_id);
        client_queue_event(c, ev->req_id, KVF_EV_RELEASED, KVF_OK, 0, ev->message, 0);
        return;
    }
    struct client_req *r = req_find(c, ev->req_id);
    if (!r)
        return; /* not ours (already ended): nothing to report */
    req_remove(c, r); /* SENT, DONE and FAILED all end a request */
    if (ev->flags & PROTO_EVF_HELD)
        client_held_add(c, ev->req_id);
    client_queue_event(c, ev->req_id, (int32_t)ev->kind, (int32_t)ev->error, ev->bytes, ev->message,
                       ev->flags);
}

/* ---- lifecycle ---- */

static void default_path(char *buf, size_t len)
{
    const char *env = getenv("KVFERRY_WORKER_SOCKET");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (env && *env)
        snprintf(buf, len, "%s", env);
    else if (geteuid() == 0)
        snprintf(buf, len, "/run/kvferry/worker.sock");
    else if (xdg && *xdg)
        snprintf(buf, len, "%s/kvferry/worker.sock", xdg);
    else
        snprintf(buf, len, "./run/worker.sock");
    /* no daemon of the user's own: the system daemon's (systemd unit, group kvferry) */
    if (!(env && *env) && geteuid() != 0 && access(buf, F_OK) != 0 &&
        access("/run/kvferry/worker.sock", F_OK) == 0)
        snprintf(buf, len, "/run/kvferry/worker.sock");
}

int kvf_connect(const char *socket_path, const struct kvf_options *opt, struct kvf_client **ret)
{
    struct kvf_options o = opt ? *opt : (struct kvf_options){0};
    char err[KVF_MESSAGE_MAX] = "";
    struct kvf_client *c = calloc(1, sizeof *c);
    if (!c)
        return -ENOMEM;
    pthread_mutex_init(&c->mu, NULL);
    c->sock = c->epfd = c->evfd = c->tfd = -1;
    c->next_attempt_ms = -1;
    int rc;
    if (socket_path) {
        if (strlen(socket_path) >= sizeof c->path) {
            rc = -ENAMETOOLONG;
            goto err_free;
        }
        snprintf(c->path, sizeof c->path, "%s", socket_path);
    } else {
        default_path(c->path, sizeof c->path);
    }
    c->timeout_ms = o.connect_timeout_ms ? o.connect_timeout_ms : CLIENT_DEF_TIMEOUT_MS;
    c->backoff_min_ms = o.reconnect_min_ms ? o.reconnect_min_ms : CLIENT_DEF_RECONNECT_MIN_MS;
    c->backoff_max_ms = o.reconnect_max_ms ? o.reconnect_max_ms : CLIENT_DEF_RECONNECT_MAX_MS;
    if (c->backoff_max_ms < c->backoff_min_ms)
        c->backoff_max_ms = c->backoff_min_ms;
    c->backoff_ms = c->backoff_min_ms;
    c->no_reconnect = o.no_reconnect != 0;
    c->held_events = o.held_events != 0;
    if (o.name && strlen(o.name) > PROTO_NAME_MAX) {
        rc = -EINVAL;
        goto err_free;
    }
    if (o.home && strlen(o.home) > PROTO_HOME_MAX) {
        rc = -EINVAL;
        goto err_free;
    }
    if (o.home)
        snprintf(c->home, sizeof c->home, "%s", o.home);
    if (o.name)
        snprintf(c->name, sizeof c->name, "%s", o.name);
    else
        snprintf(c->name, sizeof c->name, "pid %d", (int)getpid());

    c->epfd = epoll_create1(EPOLL_CLOEXEC);
    c->evfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    c->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
    if (c->epfd < 0 || c->evfd < 0 || c->tfd < 0) {
        rc = -errno;
        goto err_free;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = c->evfd};
    epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->evfd, &ev);
    ev.data.fd = c->tfd;
    epoll_ctl(c->epfd, EPOLL_CTL_ADD, c->tfd, &ev);

    rc = client_conn_open(c, err, sizeof err);
    if (rc)
        goto err_free;
    if (o.err && o.errlen)
        o.err[0] = '\0';
    *ret = c;
    return 0;

err_free:
    if (o.err && o.errlen)
        snprintf(o.err, o.errlen, "%s", err[0] ? err : strerror(-rc));
    kvf_close(c);
    return rc;
}

struct kvf_client *kvf_close(struct kvf_client *c)
{
    if (!c)
        return NULL;
    if (c->sock >= 0)
        close(c->sock);
    if (c->rd_live)
        frame_reader_done(&c->rd);
    for (uint32_t i = 0; i < c->n_pools; i++)
        pool_release(&c->pools[i]);
    if (c->epfd >= 0)
        close(c->epfd);
    if (c->evfd >= 0)
        close(c->evfd);
    if (c->tfd >= 0)
        close(c->tfd);
    free(c->layout_json);
    free(c->ev_handles);
    free(c->reqs);
    client_held_free(c);
    free(c->evq);
    pthread_mutex_destroy(&c->mu);
    free(c);
    return NULL;
}

int kvf_fd(const struct kvf_client *c) { return c->epfd; }

uint32_t kvf_inflight(struct kvf_client *c)
{
    pthread_mutex_lock(&c->mu);
    uint32_t n = c->n_reqs;
    pthread_mutex_unlock(&c->mu);
    return n;
}

/* ---- registration ---- */

static void drop_registration(struct kvf_client *c)
{
    for (uint32_t i = 0; i < c->n_pools; i++)
        pool_release(&c->pools[i]);
    c->n_pools = 0;
    free(c->layout_json);
    c->layout_json = NULL;
    c->layout_len = 0;
    free(c->ev_handles);
    c->ev_handles = NULL;
    c->n_events = 0;
}

static int check_vmm(const struct kvf_pool *p, uint32_t i, char *err, size_t errlen)
{
    uint64_t span = p->n_fds && p->chunk_bytes <= UINT64_MAX / p->n_fds
                        ? p->chunk_bytes * p->n_fds : 0;
    if (!p->fds || p->n_fds == 0 || p->n_fds > PROTO_VMM_MAX_FDS || p->chunk_bytes == 0 ||
        span == 0 || p->offset > span || p->bytes > span - p->offset) {
        snprintf(err, errlen, "BAD_REQUEST: pool %u: a VMM pool needs 1..%u chunk fds, a chunk "
                 "size, and bytes [%llu, +%llu) inside its %u x %llu bytes", i, PROTO_VMM_MAX_FDS,
                 (unsigned long long)p->offset, (unsigned long long)p->bytes, p->n_fds,
                 (unsigned long long)p->chunk_bytes);
        return -EINVAL;
    }
    for (uint32_t k = 0; k < p->n_fds; k++)
        if (p->fds[k] < 0) {
            snprintf(err, errlen, "BAD_REQUEST: pool %u: chunk %u has fd %d", i, k, p->fds[k]);
            return -EINVAL;
        }
    return 0;
}

static int check_pools(const struct kvf_pool *pools, uint32_t n, char *err, size_t errlen)
{
    if (n == 0 || n > LAYOUT_MAX_POOLS) {
        snprintf(err, errlen, "BAD_REQUEST: %u pools, expected 1..%d", n, LAYOUT_MAX_POOLS);
        return -EINVAL;
    }
    for (uint32_t i = 0; i < n; i++) {
        const struct kvf_pool *p = &pools[i];
        if ((p->kind != KVF_POOL_HOST && p->kind != KVF_POOL_CUDA && p->kind != KVF_POOL_CUDA_VMM) ||
            (p->kind == KVF_POOL_HOST && p->fd < 0) || (p->kind != KVF_POOL_HOST && p->device < 0)) {
            snprintf(err, errlen, "BAD_REQUEST: pool %u: kind %d device %d bytes %llu fd %d", i,
                     p->kind, p->device, (unsigned long long)p->bytes, p->fd);
            return -EINVAL;
        }
        if (p->kind == KVF_POOL_CUDA_VMM && check_vmm(p, i, err, errlen))
            return -EINVAL;
    }
    uint32_t nfds = client_pool_fds(pools, n); /* VMM n_fds bounded above: no overflow */
    if (nfds > PROTO_REGISTER_MAX_FDS) {
        snprintf(err, errlen, "BAD_REQUEST: the pools need %u fds (memfds and VMM chunks), one "
                 "REGISTER carries at most %d", nfds, PROTO_REGISTER_MAX_FDS);
        return -EINVAL;
    }
    return 0;
}

uint32_t client_pool_fds(const struct kvf_pool *pools, uint32_t n)
{
    uint32_t nfds = 0;
    for (uint32_t i = 0; i < n; i++)
        nfds += pools[i].kind == KVF_POOL_HOST       ? 1
                : pools[i].kind == KVF_POOL_CUDA_VMM ? pools[i].n_fds
                                                     : 0;
    return nfds;
}

/* Dups what the caller lent (memfd, VMM chunk fds) into *dst; -errno with nothing kept. */
static int pool_keep(struct kvf_pool *dst, const struct kvf_pool *src)
{
    *dst = *src;
    dst->fd = -1;
    dst->fds = NULL;
    if (src->kind == KVF_POOL_HOST) {
        dst->fd = fcntl(src->fd, F_DUPFD_CLOEXEC, 0);
        return dst->fd < 0 ? -errno : 0;
    }
    if (src->kind != KVF_POOL_CUDA_VMM)
        return 0;
    int32_t *fds = malloc(src->n_fds * sizeof *fds);
    if (!fds)
        return -ENOMEM;
    for (uint32_t k = 0; k < src->n_fds; k++) {
        fds[k] = fcntl(src->fds[k], F_DUPFD_CLOEXEC, 0);
        if (fds[k] < 0) {
            int e = -errno;
            while (k-- > 0)
                close(fds[k]);
            free(fds);
            return e;
        }
    }
    dst->fds = fds;
    return 0;
}

int kvf_register(struct kvf_client *c, const char *layout_json, const struct kvf_pool *pools,
                 uint32_t n_pools, char *err, size_t errlen)
{
    char dummy[8];
    if (!err || errlen == 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = 0;
    if (!layout_json || !*layout_json || strlen(layout_json) > LAYOUT_JSON_MAX) {
        snprintf(err, errlen, "BAD_REQUEST: layout JSON empty or over %d bytes", LAYOUT_JSON_MAX);
        return -EINVAL;
    }
    int rc = check_pools(pools, n_pools, err, errlen);
    if (rc)
        return rc;
    pthread_mutex_lock(&c->mu);
    if (c->layout_json) {
        rc = -EALREADY;
        snprintf(err, errlen, "already registered");
        goto out;
    }
    if (c->sock < 0 && client_conn_maybe_reconnect(c)) {
        rc = -ENOTCONN;
        snprintf(err, errlen, "not connected to the daemon");
        goto out;
    }
    c->layout_json = strdup(layout_json);
    if (!c->layout_json) {
        rc = -ENOMEM;
        goto out;
    }
    c->layout_len = (uint32_t)strlen(layout_json);
    for (uint32_t i = 0; i < n_pools; i++) {
        if ((rc = pool_keep(&c->pools[i], &pools[i])) < 0) {
            c->n_pools = i;
            drop_registration(c);
            goto out;
        }
    }
    c->n_pools = n_pools;
    rc = client_conn_register(c, err, errlen);
    if (rc)
        drop_registration(c); /* refused: nothing kept, the caller may try another layout */
out:
    client_sync_fds(c);
    pthread_mutex_unlock(&c->mu);
    return rc;
}
