/* workers.c: the worker socket (sockets.worker) through a unix_listener (credentials
 * against access.*, workers.max_conns and max_conns_per_uid: wlimits.c); the workers
 * module's hooks (status, stats, drain) and its control command documents. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "sockpath.h"
#include "daemon.h"
#include "workers.h"

static void reap_cb(uv_timer_t *h)
{
    struct workers *w = h->data;
    for (struct wconn *c = w->conns; c; c = c->next)
        if (c->broken && !c->xc.closing)
            wconn_close(c, c->why[0] ? c->why : "its socket failed (the worker is gone)");
}

void workers_reap_soon(struct workers *w)
{
    if (!w->stopped)
        uv_timer_start(&w->reap, reap_cb, 0, 0);
}

static void refuse(void *ctx, int fd, int err, const char *msg);
static int adopt(void *ctx, int fd, const struct peer_cred *peer);

static const struct unix_listener_ops listener_ops = {
    wlimits_limits, wlimits_count, wlimits_admit, wlimits_make_room, refuse, adopt,
};

/* The request table's way back up: events to a connection, and whether requests are taken. */
static void xt_event(void *ctx, struct xclient *xc, uint64_t req_id, uint32_t kind,
                     kvf_error_t error, uint64_t bytes, const char *message, uint32_t flags)
{
    (void)ctx;
    wconn_event_flags(wconn_of(xc), req_id, kind, error, bytes, message, flags);
}

static bool xt_released(void *ctx, uint64_t conn_id, uint64_t req_id)
{
    for (struct wconn *c = ((struct workers *)ctx)->conns; c; c = c->next)
        if (c->xc.id == conn_id && !c->xc.closing) {
            wconn_event(c, req_id, PROTO_EV_RELEASED, KVF_OK, 0,
                        "no write into its blocks can land any more");
            return true;
        }
    return false;
}

static bool xt_draining(void *ctx)
{
    return ((struct workers *)ctx)->draining;
}

static bool xt_stopped(void *ctx)
{
    return ((struct workers *)ctx)->stopped;
}

const struct transfers_ops workers_xt_ops = {xt_event, xt_released, xt_draining, xt_stopped};

int workers_new(struct daemon *d, struct workers **ret)
{
    struct workers *w = calloc(1, sizeof *w);
    if (!w)
        return -ENOMEM;
    w->d = d;
    unix_listener_init(&w->listener, "worker", "workers", "workers", &d->access, &listener_ops, w);
    w->next_conn_id = 1;
    proto_limits_init(&w->lim, d->cfg.workers_max_frame, (uint64_t)d->cfg.workers_max_blocks);
    if (getrandom(&w->epoch, sizeof w->epoch, 0) != sizeof w->epoch)
        w->epoch = (uint64_t)getpid() << 32 ^ uv_hrtime();
    registry_init(&w->reg, d->unmapper);
    int rc = uv_timer_init(&d->loop, &w->reap);
    if (rc == 0)
        rc = uv_timer_init(&d->loop, &w->sweep);
    if (rc) {
        free(w);
        return rc;
    }
    w->reap.data = w;
    w->sweep.data = w;
    rc = transfers_init(&w->xt, d, &w->reg, &workers_xt_ops, w);
    if (rc) {
        uv_close((uv_handle_t *)&w->reap, NULL);
        uv_close((uv_handle_t *)&w->sweep, NULL);
        w->stopped = true;
        *ret = w; /* the caller frees after the loop closed the timer */
        return rc;
    }
    *ret = w;
    return 0;
}

int workers_adopt(struct workers *w, int fd, const struct peer_cred *peer)
{
    struct wconn *c = calloc(1, sizeof *c);
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    c->w = w;
    c->fd = fd;
    c->peer = *peer;
    c->xc.id = w->next_conn_id++;
    c->connected_ms = uv_now(&w->d->loop);
    struct proto_limits first = w->lim; /* until HELLO: a HELLO-sized frame at most */
    first.max_frame = WCONN_HELLO_FRAME_MAX;
    int rc = frame_reader_init(&c->rd, &first);
    if (rc == 0)
        rc = uv_poll_init(&w->d->loop, &c->poll, fd);
    if (rc) {
        frame_reader_done(&c->rd);
        close(fd);
        free(c);
        return rc;
    }
    c->poll.data = c;
    c->next = w->conns;
    w->conns = c;
    w->n_conns++;
    w->counters.accepted++;
    uv_poll_start(&c->poll, UV_READABLE, wconn_readable);
    return 0;
}

static void refuse(void *ctx, int fd, int err, const char *msg)
{
    (void)ctx;
    (void)err; /* the worker protocol's ERROR carries BAD_REQUEST for every refusal */
    struct proto_msg m = {.type = PROTO_ERROR};
    m.u.error.error = KVF_E_BAD_REQUEST;
    snprintf(m.u.error.message, sizeof m.u.error.message, "%s", msg);
    uint8_t *buf;
    size_t len;
    if (proto_encode(&m, NULL, &buf, &len) == 0) {
        fdpass_send(fd, buf, len, NULL, 0, 0);
        free(buf);
    }
}

static int adopt(void *ctx, int fd, const struct peer_cred *peer)
{
    return workers_adopt(ctx, fd, peer);
}

int workers_listen(struct workers *w, char *err, size_t errlen)
{
    char path[SOCKPATH_BUF];
    int r = cfg_worker_path(&w->d->cfg, path, sizeof path); /* too long: sockpath_addr says why */
    if (r < 0 && r != -ENAMETOOLONG) {
        snprintf(err, errlen, "worker socket path: %s", strerror(-r));
        return r;
    }
    r = unix_listener_start(&w->listener, &w->d->loop, path, (mode_t)w->d->cfg.sockets_mode, 128,
                            err, errlen);
    if (r == 0)
        wlimits_sweep_start(w);
    return r;
}

void workers_stop(struct workers *w)
{
    if (!w || w->stopped)
        return;
    w->stopped = true;
    unix_listener_stop(&w->listener);
    /* requests still in flight get their FAILED event before their connections close */
    transfers_fail_all(&w->xt, KVF_E_CANCELLED, "the daemon is stopping (drain timed out or "
                       "it was not drained)");
    for (struct wconn *c = w->conns; c; c = c->next)
        wconn_close(c, "the daemon is stopping");
    transfers_stop(&w->xt);
    uv_close((uv_handle_t *)&w->reap, NULL);
    uv_close((uv_handle_t *)&w->sweep, NULL);
}

struct workers *workers_free(struct workers *w)
{
    if (!w)
        return NULL;
    registry_done(&w->reg);
    free(w);
    return NULL;
}

/* ---- module hooks and control documents ---- */

json_t *workers_list_json(struct workers *w)
{
    json_t *a = json_array();
    uint64_t now = uv_now(&w->d->loop);
    for (struct wconn *c = w->conns; c; c = c->next) {
        if (c->xc.closing)
            continue;
        json_t *o = json_pack("{s:I,s:i,s:i,s:s,s:b,s:i,s:I}", "conn_id", (json_int_t)c->xc.id, "pid",
                              (int)c->peer.pid, "uid", (int)c->peer.uid, "name", c->name,
                              "registered", c->xc.rank != NULL, "in_flight", (int)c->xc.inflight,
                              "age_ms", (json_int_t)(now - c->connected_ms));
        json_object_set_new(o, "events_queued", json_integer(c->outq.n));
        json_object_set_new(o, "events_queued_peak", json_integer(c->outq.peak));
        if (c->xc.rank) {
            json_t *r = registry_rank_json(c->xc.rank);
            json_object_update(o, r);
            json_decref(r);
        }
        json_array_append_new(a, o);
    }
    return a;
}

/* The worker side reads its live keys from the config at each use (wlimits.c's sweep, the
 * frame budget, the phase histograms' label cap, the finished list). */
int workers_live(struct daemon *d, json_t *ret)
{
    static const char *const at_use[] = {"workers.read_timeout",     "workers.hello_timeout",
                                         "workers.frame_timeout",    "workers.frame_memory",
                                         "metrics.max_label_values", "transfers.keep_finished",
                                         NULL};
    return d->workers ? cfg_values_json(&d->cfg, at_use, ret) : 0;
}

int workers_status(struct daemon *d, json_t *ret)
{
    struct workers *w = d->workers;
    if (!w)
        return 0;
    json_object_set_new(ret, "socket", json_string(w->listener.path));
    json_object_set_new(ret, "connections", json_integer(w->n_conns));
    json_object_set_new(ret, "ranks", json_integer(w->reg.n_ranks));
    json_object_set_new(ret, "instances", registry_instances_json(&w->reg));
    json_object_set_new(ret, "transfers_in_flight", json_integer(w->xt.n));
    json_object_set_new(ret, "draining", json_boolean(w->draining));
    return 0;
}

int workers_stats(struct daemon *d, json_t *ret)
{
    struct workers *w = d->workers;
    if (!w)
        return 0;
    const struct workers_counters *k = &w->counters;
    json_object_set_new(ret, "accepted", json_integer((json_int_t)k->accepted));
    const struct unix_listener_counters *lk = &w->listener.counters;
    json_object_set_new(ret, "refused_access", json_integer((json_int_t)lk->refused_access));
    json_object_set_new(ret, "refused_limit", json_integer((json_int_t)lk->refused_limit));
    json_object_set_new(ret, "accept_failed", json_integer((json_int_t)lk->accept_failed));
    json_object_set_new(ret, "registered", json_integer((json_int_t)k->registered));
    json_object_set_new(ret, "register_refused", json_integer((json_int_t)k->register_refused));
    json_object_set_new(ret, "bad_frames", json_integer((json_int_t)k->bad_frames));
    json_object_set_new(ret, "lost", json_integer((json_int_t)k->lost));
    json_object_set_new(ret, "evicted", json_integer((json_int_t)k->evicted));
    json_object_set_new(ret, "hello_timeouts", json_integer((json_int_t)k->hello_timeouts));
    json_object_set_new(ret, "frame_timeouts", json_integer((json_int_t)k->frame_timeouts));
    json_object_set_new(ret, "read_timeouts", json_integer((json_int_t)k->read_timeouts));
    json_object_set_new(ret, "frame_memory_refused",
                        json_integer((json_int_t)k->frame_memory_refused));
    json_object_set_new(ret, "event_queue_full", json_integer((json_int_t)k->event_queue_full));
    json_object_set_new(ret, "access_revoked", json_integer((json_int_t)k->access_revoked));
    json_object_set_new(ret, "frame_memory_bytes", json_integer((json_int_t)w->frame_bytes));
    wprefault_stats(w, ret);
    json_object_set_new(ret, "transfers", transfers_stats_json(&w->xt));
    return 0;
}

void workers_reloaded(struct daemon *d)
{
    if (!d->workers)
        return;
    for (struct wconn *c = d->workers->conns; c; c = c->next)
        (void)wlimits_access(c);
}

void workers_drain_start(struct daemon *d)
{
    if (d->workers)
        d->workers->draining = true;
}

size_t workers_in_flight(struct daemon *d) { return d->workers ? d->workers->xt.n : 0; }
