/* transfers.c: requests in flight and their state machine (see transfers.h). Terminal requests
 * are marked, reported, leave the request table and the connection index at once, and are
 * freed by sweep() at the end of each entry point, so a loop over the list never sees a freed
 * node. Every per-request lookup is by hash: requests by (context instance, id) in reqtab.h,
 * by (connection, id) in by_conn. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "copyeng.h"
#include "daemon.h"
#include "engine.h"
#include "registry.h"
#include "require.h"
#include "transfers.h"
#include "readers.h"
#include "daemon.h"
#include "stream.h"
#include "xclient.h"

#define TICK_MS 20

static void tick_cb(uv_timer_t *h);
static void settle_sends(struct transfers *t, struct req *q, uint32_t writer, int added);

static bool terminal(const struct xfer *x) { return x->state == XFER_DONE || x->state == XFER_FAILED; }

/* An illegal edge is an invariant failure (require.h): fatal in debug and tests; in release it
 * is logged and ignored (the request keeps its state and ends through its own deadline). */
static void xfer_set_state(struct xfer *x, xfer_state_t to)
{
    if (!KVF_REQUIRE(xfer_state_edge_ok(x->state, to), "xfer %llu: illegal edge %s -> %s (ignored)",
                     (unsigned long long)x->id, xfer_state_to_string(x->state),
                     xfer_state_to_string(to)))
        return;
    log_debug("xfer %llu: %s -> %s", (unsigned long long)x->id, xfer_state_to_string(x->state),
              xfer_state_to_string(to));
    if (to == XFER_COPYING)
        xfer_phase_mark(&x->moving_ns);
    x->state = to;
}

/* A fresh clock: the loop's cached time can be a whole busy iteration old, and deadlines set
 * from it came early (UNKNOWN_INSTANCE after 1.85 s of a 2 s deadline) */
static uint64_t now_ms(const struct transfers *t)
{
    uv_update_time(&t->d->loop);
    return uv_now(&t->d->loop);
}

static uint64_t keep_ms(const struct transfers *t)
{
    const struct kvf_config *cfg = &t->d->cfg;
    return (uint64_t)cfg->deadlines_send_wait_ms + (uint64_t)cfg->deadlines_transfer_ms;
}

static uint64_t conn_key(const struct xclient *c, uint64_t req_id)
{
    return hmap_pair((uint64_t)(uintptr_t)c, req_id);
}

/* An ended request leaves the table and the connection index at once (its id is free for a
 * new request) and waits on t->dead for sweep. */
static void forget(struct transfers *t, struct xfer *x)
{
    dheap_remove(&t->due, &x->due);
    reqtab_unbind(&t->reqs, x, now_ms(t), keep_ms(t));
    hmap_del(&t->by_conn, conn_key(x->conn, x->req_id), x);
    x->dead_next = t->dead;
    t->dead = x;
}

/* Ends a request: state, counters, one event to its worker (unless it is gone). */
static void finish(struct transfers *t, struct xfer *x, uint32_t kind, kvf_error_t err,
                   uint64_t bytes, const char *msg)
{
    if (terminal(x))
        return;
    bool writing = x->gpu_job || x->cpu_job || (x->rx && engine_recv_writing(x->rx));
    if (writing && err != KVF_OK && x->conn && !x->conn->closing && !t->ops->stopped(t->ops_ctx) &&
        !x->release_owed) {
        if (xfer_held_report(x)) { /* only peers write: ends now, flagged HELD */
            x->release_owed = true;
        } else {
            xfer_hold(x, err, msg); /* told when the writes ended (copy_done, writes_ended) */
            if (x->rx) /* the engine stops its flows and ends x once nothing writes any more */
                engine_recv_stop(x->rx, err, msg);
            return;
        }
    }
    xfer_set_state(x, err == KVF_OK ? XFER_DONE : XFER_FAILED);
    struct req *q = x->req; /* kept (idle) after x leaves it */
    forget(t, x);
    if (kind == PROTO_EV_DONE && err == KVF_OK) { /* the local path copies at once */
        if (bytes > x->bytes_done)
            x->bytes_done = bytes;
        if (x->bytes_planned < x->bytes_done)
            x->bytes_planned = x->bytes_done;
    }
    if (x->conn) { /* the event first: what follows is bookkeeping the worker does not wait for */
        x->conn->inflight--;
        if (!x->conn->closing)
            t->ops->event(t->ops_ctx, x->conn, x->req_id, kind, err, bytes, msg,
                          x->release_owed ? PROTO_EVF_HELD : 0);
        if (x->release_owed) {
            x->conn_id = x->conn->id;
            t->counters.held++;
        }
        if (!x->conn->closing && x->ls.met && kind == PROTO_EV_DONE) { /* DONE written */
            x->ls.written = uv_hrtime();
            xfer_phases_local_done(&t->phases, &x->ls);
        }
    }
    if (err != KVF_OK)
        t->counters.failed[err]++;
    else if (kind == PROTO_EV_DONE) {
        t->counters.done++;
        xfer_phases_done(&t->phases, x, bytes, engine_recv_path(x->rx), transfers_peer_label(x),
                         (size_t)t->d->cfg.metrics_max_label_values);
    }
    else {
        t->counters.sent++;
        xfer_phases_sent(&t->phases, x);
    }
    xfer_recent_add(&t->recent, x, transfers_peer_label(x),
                    err != KVF_OK ? kvf_error_to_string(err) : kind == PROTO_EV_DONE ? "DONE" : "SENT",
                    now_ms(t));
    if (err != KVF_OK && log_get_level() >= LOG_LVL_DEBUG)
        log_req(LOG_LVL_DEBUG, x->req_id, NULL, NULL, "xfer %llu (req %llu): %s: %s",
                (unsigned long long)x->id, (unsigned long long)x->req_id,
                kvf_error_to_string(err), msg);
    if (x->side == XFER_SEND && x->stream) /* its streamed readers here share its end */
        stream_send_ended(t, x, q, err, msg);
    if (x->rx) /* its engine part lets go (freed with x, by transfers_reap) */
        engine_recv_end(x->rx, err);
    else if (x->side == XFER_SEND) /* the flows still reading it fail */
        engine_send_end(t->d->engine, x, err);
    if (x->side == XFER_RECV && err != KVF_OK && !x->peer[0] && q) /* every SEND loses it */
        settle_sends(t, q, XFER_NACK_ALL, xfer_fails_local(q, x, err, msg));
}

static void fail(struct transfers *t, struct xfer *x, kvf_error_t err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void fail(struct transfers *t, struct xfer *x, kvf_error_t err, const char *fmt, ...)
{
    char msg[PROTO_MSG_MAX + 1];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    finish(t, x, PROTO_EV_FAILED, err, 0, msg);
}

void transfers_fail_now(struct transfers *t, struct xfer *x, kvf_error_t err, const char *msg)
{
    finish(t, x, PROTO_EV_FAILED, err, 0, msg);
}

static void free_xfer(struct xfer *x)
{
    if (x->stream || x->scopy)
        stream_send_free(x);
    if (x->rx)
        engine_recv_free(x->rx);
    free(x->items.ids);
    free(x);
}

/* Ended requests leave the list; a remote RECV waits on t->draining for its engine part, which
 * the engine may still be using up the stack (transfers_end is its hook): transfers_reap frees
 * it from the engine's sweep or the tick, once idle. */
static void sweep(struct transfers *t)
{
    while (t->dead) {
        struct xfer *x = t->dead;
        t->dead = x->dead_next;
        if (x->prev)
            x->prev->next = x->next;
        else
            t->list = x->next;
        if (x->next)
            x->next->prev = x->prev;
        if (x->gpu_job)
            xfer_gpu_detach(x->gpu_job);
        copyeng_cancel(x->cpu_job); /* its pins keep the pools mapped until it stops */
        t->n--;
        if (x->rx) {
            x->dead_next = t->draining;
            t->draining = x;
        } else {
            free_xfer(x);
        }
    }
    if (t->n == 0 && !t->reqs.idle_head)
        uv_timer_stop(&t->tick);
}

void transfers_reap(struct transfers *t)
{
    for (struct xfer **pp = &t->draining; *pp;) {
        struct xfer *x = *pp;
        if (!engine_recv_idle(x->rx)) {
            pp = &x->dead_next;
            continue;
        }
        *pp = x->dead_next;
        if (x->release_owed)
            xfer_held_released(t, x);
        free_xfer(x);
    }
}

void transfers_writes_ended(struct transfers *t, struct xfer *x)
{
    if (terminal(x))
        return;
    if (x->held.code == KVF_OK)
        xfer_hold(x, KVF_E_INTERNAL, "writes into its pools ended without a failure held");
    transfers_end(t, x, x->held.code, 0, x->held.msg);
}

/* x's next deadline is at; false: no memory to queue it, x failed (its event sent; no sweep). */
static bool queue_due(struct transfers *t, struct xfer *x, uint64_t at)
{
    if (dheap_update(&t->due, &x->due, at) == 0)
        return true;
    finish(t, x, PROTO_EV_FAILED, KVF_E_INTERNAL, 0, "out of memory queueing its deadline");
    return false;
}

/* ---- the meeting of SEND and RECV ---- */

struct xfer *transfers_find_send(const struct transfers *t, const struct reg_rank *rank,
                                 uint64_t req_id)
{
    struct req *q = reqtab_find(&t->reqs, rank->layout.instance, req_id);
    struct xfer *s = reqtab_send_of(q, layout_rank(&rank->layout));
    return s && s->rank == rank ? s : NULL;
}

/* The live requests of q of one side, copied: serving or running them changes q->live. NULL
 * with *n 0 when there are none (or no memory: the deadlines end them). */
static struct xfer **live_of(const struct req *q, xfer_side_t side, uint32_t *n)
{
    *n = 0;
    struct xfer **a = q && q->n_live ? malloc(q->n_live * sizeof *a) : NULL;
    for (uint32_t i = 0; a && i < q->n_live; i++)
        if (q->live[i]->side == side)
            a[(*n)++] = q->live[i];
    return a;
}

/* A SEND learns how many readers of its request were served: the local RECVs of its
 * generation (the table's tally) plus the remote flows that read it; SENT when that reaches
 * n_readers. */
static void serve(struct transfers *t, struct xfer *s, uint32_t local_done)
{
    s->served = local_done + s->remote_served;
    uint32_t need = xfer_need(s);
    char m[PROTO_MSG_MAX + 1];
    kvf_error_t code;
    if (need > 0 && s->served >= need) {
        snprintf(m, sizeof m, "%u of %u readers served%s", s->served, need,
                 s->n_readers ? "" : " (counted by the daemon)");
        finish(t, s, PROTO_EV_SENT, KVF_OK, s->bytes, m);
    } else if (xfer_no_reader_can_come(s, t->d->engine, &code, m, sizeof m)) {
        finish(t, s, PROTO_EV_FAILED, code, 0, m);
    }
}

/* A reader of q failed (added: xfer_fails_add's verdict): the live SENDs of writer (or all)
 * learn their readers' state again. No sweep. */
static void settle_sends(struct transfers *t, struct req *q, uint32_t writer, int added)
{
    if (added != 0) /* not held: its SENDs fall back to their deadline */
        return (void)t->fails_dropped++;
    const struct reg_instance *in = registry_find(t->reg, q->instance);
    xfer_fails_pending(q, added, in && in->n_registered > 0, now_ms(t),
                       t->d->cfg.deadlines_lookup_ms);
    uint32_t n;
    struct xfer **sends = live_of(q, XFER_SEND, &n);
    for (uint32_t i = 0; i < n; i++)
        if (writer == XFER_NACK_ALL || sends[i]->rank_idx == writer)
            serve(t, sends[i], sends[i]->gen == q->gen ? q->done : 0);
    free(sends);
}

void transfers_reader_failed(struct transfers *t, const char *inst, uint64_t req_id,
                             uint32_t writer, kvf_error_t code, const char *msg)
{
    struct req *q = reqtab_find(&t->reqs, inst, req_id);
    if (!q && reqtab_count(&t->reqs) < XFER_FAIL_ENTRIES &&
        (q = reqtab_open(&t->reqs, inst, req_id))) { /* before any SEND or RECV of it here */
        reqtab_park(&t->reqs, q, now_ms(t), keep_ms(t));
        if (!uv_is_active((uv_handle_t *)&t->tick))
            uv_timer_start(&t->tick, tick_cb, TICK_MS, TICK_MS);
    }
    settle_sends(t, q, writer, q ? xfer_fails_add(q, xfer_fail_gen(q, writer), writer, 0, code,
                                                  msg) : 1);
}

void transfers_reread(struct transfers *t, struct xfer *s)
{
    const struct req *q = s->req;
    if (q && !terminal(s))
        serve(t, s, s->gen == q->gen ? q->done : 0);
}

static void copy_done(struct transfers *t, struct xfer *r, kvf_error_t e, uint64_t bytes,
                      const char *msg);

/* Runs the RECV if its context instance is complete and every writer has SENT. */
static void try_run(struct transfers *t, struct xfer *r)
{
    if (terminal(r) || r->state != XFER_WAITING || r->rx)
        return;
    struct reg_instance *in = registry_find(t->reg, r->ctx_instance);
    if (in && in->role != ROLE_CONTEXT) {
        fail(t, r, KVF_E_BAD_REQUEST, "instance %s is a generation instance, not a context one",
             r->ctx_instance);
        return;
    }
    if (!registry_complete(in))
        return;
    xfer_phase_mark(&r->lookup_ns);
    char msg[PROTO_MSG_MAX + 1];
    uint8_t *writers = calloc(in->n_ranks, 1);
    struct xfer **sends = calloc(in->n_ranks, sizeof *sends);
    kvf_error_t e = writers && sends ? xfer_writers(&t->wcache, r, in, writers, msg, sizeof msg)
                                     : KVF_E_INTERNAL;
    if (e != KVF_OK) {
        if (!writers || !sends)
            snprintf(msg, sizeof msg, "out of memory");
        finish(t, r, PROTO_EV_FAILED, e, 0, msg);
        goto out;
    }
    xfer_phase_mark(&r->validated_ns);
    for (uint32_t c = 0; c < in->n_ranks; c++) {
        sends[c] = transfers_find_send(t, in->ranks[c], r->req_id);
        if (writers[c] && !sends[c])
            goto out; /* this writer has not sent yet */
    }
    r->ls.met = uv_hrtime(); /* and what completed the meeting: the frame being handled */
    r->ls.trig_read = t->read_ns;
    r->ls.trig_frame = t->frame_ns;
    r->ls.trig_entry = t->entry_ns;
    xfer_set_state(r, XFER_COPYING);
    r->gen = r->req ? r->req->gen : 0; /* the SEND generation this reader met */
    uint64_t bytes = 0, t0 = uv_hrtime();
    e = xfer_local_run(t, r, sends, in->n_ranks, &bytes, msg, sizeof msg);
    t->counters.local_copy_ns += uv_hrtime() - t0;
    if (e == KVF_OK && (r->gpu_job || r->cpu_job || r->scopy))
        goto out; /* on a GPU stream, the copy threads or streamed: transfers_copy_done follows */
    copy_done(t, r, e, bytes, msg);
out:
    free(writers);
    free(sends);
}

/* The end of a RECV's copy; no sweep (callers may be walking the list). */
static void copy_done(struct transfers *t, struct xfer *r, kvf_error_t e, uint64_t bytes,
                      const char *msg)
{
    if (e == KVF_OK && r->held.code != KVF_OK) { /* failed while its copy ran */
        e = r->held.code;
        msg = r->held.msg;
    }
    if (e != KVF_OK) {
        finish(t, r, PROTO_EV_FAILED, e, 0, msg);
        return;
    }
    t->counters.bytes_local += bytes;
    struct req *q = r->req;
    bool counts = q && r->gen && r->gen == q->gen; /* a reader of the generation it met */
    finish(t, r, PROTO_EV_DONE, KVF_OK, bytes, "");
    if (!counts)
        return;
    uint32_t n, derived = readers_local(&r->rank->layout);
    struct xfer **sends = live_of(q, XFER_SEND, &n);
    bool derive = false;
    for (uint32_t i = 0; i < n; i++)
        derive |= !sends[i]->n_readers;
    uint32_t done = reqtab_recv_done(q, derive ? derived : 0);
    for (uint32_t i = 0; i < n; i++) {
        if (!sends[i]->n_readers && !sends[i]->derived)
            sends[i]->derived = derived;
        serve(t, sends[i], done);
    }
    free(sends);
}

void transfers_copy_done(struct transfers *t, struct xfer *r, kvf_error_t e, uint64_t bytes,
                         const char *msg)
{
    copy_done(t, r, e, bytes, msg);
    sweep(t);
}

struct xfer *transfers_find_conn(const struct transfers *t, const struct xclient *c,
                                 uint64_t req_id)
{
    uint32_t pos = 0;
    for (struct xfer *x; (x = hmap_next(&t->by_conn, conn_key(c, req_id), &pos));)
        if (x->conn == c && x->req_id == req_id && !terminal(x))
            return x;
    return NULL;
}

/* Common admission; returns the new request or NULL after reporting why. */
static struct xfer *admit(struct transfers *t, struct xclient *c, xfer_side_t side, uint64_t req_id,
                          struct proto_items *items)
{
    char msg[PROTO_MSG_MAX + 1];
    const struct kvf_config *cfg = &t->d->cfg;
    kvf_error_t e = KVF_E_BAD_REQUEST;
    if (!c->rank) {
        snprintf(msg, sizeof msg, "%s before REGISTER", side == XFER_SEND ? "SEND" : "RECV");
    } else if (c->rank->layout.role != (side == XFER_SEND ? ROLE_CONTEXT : ROLE_GENERATION)) {
        snprintf(msg, sizeof msg, "%s from a %s rank", side == XFER_SEND ? "SEND" : "RECV",
                 layout_role_to_string(c->rank->layout.role));
    } else if (t->ops->draining(t->ops_ctx)) {
        e = KVF_E_NO_ROUTE;
        snprintf(msg, sizeof msg, "the daemon is draining: no new requests");
    } else if ((int64_t)c->inflight >= cfg->workers_max_inflight) {
        snprintf(msg, sizeof msg, "%u requests in flight: workers.max_inflight is %lld", c->inflight,
                 (long long)cfg->workers_max_inflight);
    } else if (xfer_check_items(&c->rank->layout, items, msg, sizeof msg) == 0) {
        bool dup = transfers_find_conn(t, c, req_id) != NULL;
        if (!dup) {
            struct xfer *x = calloc(1, sizeof *x);
            if (x && hmap_put(&t->by_conn, conn_key(c, req_id), x) < 0) {
                free(x);
                x = NULL;
            }
            if (x) {
                x->id = ++t->next_id;
                dheap_node_init(&x->due);
                x->side = side;
                x->req_id = req_id;
                x->conn = c;
                x->owner = t;
                x->rank = c->rank;
                x->items = *items;
                items->ids = NULL;
                x->created_ms = now_ms(t);
                x->taken_ns = uv_hrtime();
                x->ls.read = side == XFER_RECV ? t->read_ns : 0;
                x->ls.frame = side == XFER_RECV ? t->frame_ns : 0;
                x->next = t->list;
                if (t->list)
                    t->list->prev = x;
                t->list = x;
                t->n++;
                c->inflight++;
                if (!uv_is_active((uv_handle_t *)&t->tick))
                    uv_timer_start(&t->tick, tick_cb, TICK_MS, TICK_MS);
                return x;
            }
            e = KVF_E_INTERNAL;
            snprintf(msg, sizeof msg, "out of memory");
        } else {
            snprintf(msg, sizeof msg, "request %llu is already in flight on this connection",
                     (unsigned long long)req_id);
        }
    }
    t->counters.failed[e]++;
    t->ops->event(t->ops_ctx, c, req_id, PROTO_EV_FAILED, e, 0, msg, 0);
    return NULL;
}

/* A new request takes its place in the request table: a SEND meets its generation (reqtab.h),
 * a RECV of the local path joins one or waits for the next; refused BAD_REQUEST when its id
 * is reused while the previous request is in flight. false: it ended (its event sent). */
static bool meet(struct transfers *t, struct xfer *x)
{
    char msg[PROTO_MSG_MAX + 1];
    struct req *q = reqtab_open(&t->reqs, x->ctx_instance, x->req_id);
    kvf_error_t e = KVF_OK;
    if (!q) {
        e = KVF_E_INTERNAL;
        snprintf(msg, sizeof msg, "out of memory");
    } else if (x->side == XFER_SEND) {
        t->fails_dropped += (uint64_t)xfer_fails_orphans(q, x->rank->registered_ms);
        e = reqtab_send_meets(&t->reqs, q, x->rank_idx, x->rank->inst->inst_epoch, x->n_readers,
                              msg, sizeof msg);
        x->gen = q->gen;
    } else if (!x->peer[0]) {
        e = reqtab_recv_meets(&t->reqs, q, msg, sizeof msg);
    }
    if (e == KVF_OK && reqtab_bind(&t->reqs, q, x) < 0) {
        e = KVF_E_INTERNAL;
        snprintf(msg, sizeof msg, "out of memory");
    }
    if (e != KVF_OK) {
        if (e == KVF_E_BAD_REQUEST)
            log_req(LOG_LVL_INFO, x->req_id, NULL, x->ctx_instance, "%s", msg);
        finish(t, x, PROTO_EV_FAILED, e, 0, msg);
        return false;
    }
    return true;
}

void transfers_send(struct transfers *t, struct xclient *c, struct proto_send *m)
{
    t->entry_ns = uv_hrtime();
    t->counters.sends++;
    struct xfer *s = admit(t, c, XFER_SEND, m->req_id, &m->items);
    if (!s)
        return;
    const struct kvf_config *cfg = &t->d->cfg;
    snprintf(s->ctx_instance, sizeof s->ctx_instance, "%s", c->rank->layout.instance);
    s->n_readers = m->n_readers;
    s->rank_idx = layout_rank(&c->rank->layout);
    s->deadline_ms = s->created_ms + cfg->deadlines_send_wait_ms + cfg->deadlines_transfer_ms;
    bool due = m->stream ? stream_send_begin(t, s) : queue_due(t, s, s->deadline_ms);
    if (!due || !meet(t, s)) {
        sweep(t);
        return;
    }
    serve(t, s, s->req->done); /* readers of its generation that completed or failed before it */
    uint32_t n;
    struct xfer **recvs = live_of(s->req, XFER_RECV, &n);
    for (uint32_t i = 0; i < n; i++)
        try_run(t, recvs[i]);
    free(recvs);
    if (!terminal(s))
        engine_send(t->d->engine, t, s);
    sweep(t);
}

void transfers_recv(struct transfers *t, struct xclient *c, struct proto_recv *m)
{
    t->entry_ns = uv_hrtime();
    t->counters.recvs++;
    struct xfer *r = admit(t, c, XFER_RECV, m->req_id, &m->items);
    if (!r)
        return;
    const struct kvf_config *cfg = &t->d->cfg;
    snprintf(r->ctx_instance, sizeof r->ctx_instance, "%s", m->ctx_instance);
    r->ctx_dp_rank = m->ctx_dp_rank;
    r->tokens = m->tokens;
    r->deadline_ms = r->created_ms + (m->deadline_ms ? m->deadline_ms : cfg->deadlines_send_wait_ms);
    r->lookup_deadline_ms = r->created_ms + cfg->deadlines_lookup_ms;
    if (!queue_due(t, r, r->lookup_deadline_ms < r->deadline_ms ? r->lookup_deadline_ms
                                                                  : r->deadline_ms)) {
        sweep(t);
        return;
    }
    struct reg_instance *in = registry_find(t->reg, m->ctx_instance);
    bool remote = m->ctx_home[0] && (!in || (!registry_complete(in) &&
                                             !engine_is_self(t->d->engine, m->ctx_home)));
    if (remote && t->d->engine)
        snprintf(r->peer, sizeof r->peer, "%s", m->ctx_home);
    if (!meet(t, r)) {
        sweep(t);
        return;
    }
    if (remote && t->d->engine) {
        engine_recv(t->d->engine, t, r, m->ctx_home);
    }
    else if (!in && m->ctx_home[0])
        fail(t, r, KVF_E_NO_ROUTE, "context instance %s is homed at %s: this daemon has no "
             "inter-daemon path to it", m->ctx_instance, m->ctx_home);
    else
        try_run(t, r); /* an unknown instance is waited for until lookup_deadline_ms */
    sweep(t);
}

void transfers_registered(struct transfers *t, const char *instance)
{
    t->entry_ns = uv_hrtime();
    for (struct xfer *x = t->list; x; x = x->next)
        if (x->side == XFER_RECV && !terminal(x) && strcmp(x->ctx_instance, instance) == 0)
            try_run(t, x);
    sweep(t);
}

void transfers_cancel(struct transfers *t, struct xclient *c, uint64_t req_id)
{
    struct xfer *x = transfers_find_conn(t, c, req_id);
    if (x)
        fail(t, x, KVF_E_CANCELLED, "cancelled by the worker");
    sweep(t);
}

void transfers_conn_gone(struct transfers *t, struct xclient *c)
{
    for (struct xfer *x = t->list; x; x = x->next)
        if (!terminal(x) && x->conn == c)
            fail(t, x, KVF_E_PEER_LOST, "worker gone"); /* no event: c is closing */
    if (c->rank) /* its templates are never hit again (worker ids are not reused): free them */
        plan_tcache_forget(&t->tcache, c->rank->worker_id);
    if (c->rank && c->rank->layout.role == ROLE_CONTEXT) {
        const struct layout *l = &c->rank->layout;
        for (struct xfer *x = t->list; x; x = x->next)
            if (!terminal(x) && x->side == XFER_RECV && strcmp(x->ctx_instance, l->instance) == 0)
                fail(t, x, KVF_E_PEER_LOST, "context instance %s rank %u (pid %u) went away "
                     "before request %llu was served", l->instance, layout_rank(l), c->pid,
                     (unsigned long long)x->req_id);
    }
    sweep(t);
}

/* The tick touches only the requests whose next deadline passed (t->due). */
static void tick_cb(uv_timer_t *h)
{
    struct transfers *t = h->data;
    uint64_t now = now_ms(t);
    for (struct dheap_node *nd; (nd = dheap_pop_due(&t->due, now));) {
        struct xfer *x = (struct xfer *)((char *)nd - offsetof(struct xfer, due));
        /* a RECV the engine follows has one clock, the engine's (gen_tick) */
        if (terminal(x) || x->rx)
            continue;
        if (x->side == XFER_SEND && x->stream && stream_send_due(t, x, now))
            continue; /* a stream's idle deadline */
        if (x->side == XFER_RECV && now >= x->lookup_deadline_ms &&
            !registry_find(t->reg, x->ctx_instance)) {
            fail(t, x, KVF_E_UNKNOWN_INSTANCE, "no rank of context instance %s registered with "
                 "this daemon within deadlines.lookup", x->ctx_instance);
            continue;
        }
        if (now < x->deadline_ms) { /* the lookup's passed: its own is next */
            queue_due(t, x, x->deadline_ms);
            continue;
        }
        if (x->side == XFER_RECV)
            fail(t, x, KVF_E_TIMEOUT, "request %llu: context instance %s did not SEND from every "
                 "writer within %llu ms (deadlines.send_wait or the RECV's deadline)",
                 (unsigned long long)x->req_id, x->ctx_instance,
                 (unsigned long long)(x->deadline_ms - x->created_ms));
        else if (x->served > 0) {
            char m[128];
            snprintf(m, sizeof m, "released at its deadline after %u reader(s)", x->served);
            finish(t, x, PROTO_EV_SENT, KVF_OK, x->bytes, m);
        } else
            fail(t, x, KVF_E_TIMEOUT, "request %llu: no RECV claimed it within %llu ms; blocks "
                 "released", (unsigned long long)x->req_id,
                 (unsigned long long)(x->deadline_ms - x->created_ms));
    }
    reqtab_expire(&t->reqs, now);
    sweep(t);
    transfers_reap(t); /* no engine frame is up the stack here */
}

void transfers_end(struct transfers *t, struct xfer *x, kvf_error_t err, uint64_t bytes,
                   const char *msg)
{
    uint32_t kind = err != KVF_OK ? PROTO_EV_FAILED : x->side == XFER_RECV ? PROTO_EV_DONE : PROTO_EV_SENT;
    if (err == KVF_OK && x->side == XFER_RECV)
        t->counters.bytes_remote += bytes;
    finish(t, x, kind, err, bytes, msg);
    sweep(t);
}

const char *transfers_peer_label(const struct xfer *x)
{
    const char *id = x->side == XFER_RECV ? engine_recv_peer(x->rx) : NULL;
    return id ? id : x->peer[0] ? x->peer : "local";
}

void transfers_copying(struct transfers *t, struct xfer *x)
{
    (void)t;
    if (x->state == XFER_WAITING)
        xfer_set_state(x, XFER_COPYING);
}

void transfers_served(struct transfers *t, struct xfer *s, uint64_t bytes)
{
    if (terminal(s))
        return;
    s->bytes += bytes;
    s->remote_served++;
    serve(t, s, s->req && s->gen == s->req->gen ? s->req->done : 0);
    sweep(t);
}

void transfers_fail_all(struct transfers *t, kvf_error_t err, const char *why)
{
    for (struct xfer *x = t->list; x; x = x->next)
        if (!terminal(x))
            fail(t, x, err, "%s", why);
    sweep(t);
}
