/* stream_send.c: a streaming SEND's own side (stream.h): its READY frames (those naming the
 * rank's CUDA event captured on the GPU at once: gpu_event_capture), its idle deadline and its
 * end, which the same daemon's streamed RECVs share. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "engine.h"
#include "engine_gen.h"
#include "gpu.h"
#include "path.h"
#include "registry.h"
#include "registry_gpu.h"
#include "stream.h"
#include "stream_gate.h"
#include "transfers.h"
#include "xstream.h"

static uint64_t now_ms(const struct transfers *t)
{
    uv_update_time(&t->d->loop);
    return uv_now(&t->d->loop);
}

/* While layers are missing the SEND's deadline is the stream's idle one; once every layer is
 * final, a plain SEND's from then on (its readers have send_wait + transfer to read it). */
static bool set_deadline(struct transfers *t, struct xfer *x)
{
    const struct kvf_config *cfg = &t->d->cfg;
    uint64_t now = now_ms(t);
    x->deadline_ms = now + (xstream_final(x)
                                ? cfg->deadlines_send_wait_ms + cfg->deadlines_transfer_ms
                                : cfg->deadlines_stream_idle_ms);
    if (dheap_update(&t->due, &x->due, x->deadline_ms) == 0)
        return true;
    transfers_fail_now(t, x, KVF_E_INTERNAL, "out of memory queueing its deadline");
    return false;
}

bool stream_send_begin(struct transfers *t, struct xfer *x)
{
    struct xstream *st = calloc(1, sizeof *st);
    if (!st) {
        transfers_fail_now(t, x, KVF_E_INTERNAL, "out of memory");
        return false;
    }
    const struct layout *l = &x->rank->layout;
    st->bound = l->n_layers_total ? l->n_layers_total : LAYOUT_MAX_LAYERS;
    for (uint32_t g = 0; g < l->n_groups; g++) {
        const struct layout_group *gg = &l->groups[g];
        if (gg->n_layers && gg->layers[gg->n_layers - 1] + 1u > st->full)
            st->full = gg->layers[gg->n_layers - 1] + 1u;
    }
    x->stream = st;
    return set_deadline(t, x);
}

/* A READY naming the rank's CUDA event idx: "" when it may, else why not in msg. */
static void event_check(const struct xfer *x, uint32_t idx, char *msg, size_t len)
{
    const struct reg_gpu *rg = x->rank->gpu;
    uint32_t n = rg ? gpu_event_count(rg->events) : 0;
    if (!rg)
        snprintf(msg, len, "READY for request %llu names CUDA event %u, but context rank %u's "
                 "pools are host memory: events order GPU work (say READY once the writes "
                 "completed)", (unsigned long long)x->req_id, idx, x->rank_idx);
    else if (n == 0)
        snprintf(msg, len, "READY for request %llu names CUDA event %u, but context rank %u "
                 "passed no events (kvf_register_events)", (unsigned long long)x->req_id, idx,
                 x->rank_idx);
    else if (idx >= n)
        snprintf(msg, len, "READY for request %llu names CUDA event %u, but context rank %u "
                 "passed %u (0..%u)", (unsigned long long)x->req_id, idx, x->rank_idx, n, n - 1);
}

/* READY m raises st's layers: kept with its GPU mark when it names an event (captured now on
 * the rank's stream: the event's record of this moment), so the copies of the layers it makes
 * final wait for that record and no later one. false: out of memory or CUDA, msg says. */
static bool mark(struct xstream *st, const struct proto_ready *m, struct reg_gpu *rg, char *msg,
                 size_t len)
{
    if (!st->marks && !(st->marks = calloc(XSTREAM_MARKS, sizeof *st->marks))) {
        snprintf(msg, len, "out of memory");
        return false;
    }
    struct xstream_mark *k = &st->marks[m->layers_upto];
    k->raised = true;
    char why[GPU_REASON_MAX + 64];
    if (m->event && gpu_event_capture(rg->events, m->event - 1, &k->ev, why, sizeof why) < 0) {
        snprintf(msg, len, "waiting for CUDA event %u on the GPU: %s", m->event - 1, why);
        return false;
    }
    return true;
}

void stream_send_ready(struct transfers *t, struct xclient *c, const struct proto_ready *m)
{
    struct xfer *x = transfers_find_conn(t, c, m->req_id);
    if (!x) { /* ended meanwhile (its event is on the way): nothing to move */
        log_debug("READY for request %llu, not in flight: ignored", (unsigned long long)m->req_id);
        return;
    }
    struct xstream *st = x->stream;
    char msg[PROTO_MSG_MAX + 1] = "";
    if (x->side != XFER_SEND || !st)
        snprintf(msg, sizeof msg, "READY for request %llu, which %s", (unsigned long long)x->req_id,
                 x->side != XFER_SEND ? "is a RECV" : "was sent without streaming "
                 "(kvf_send_begin streams)");
    else if (m->layers_upto < st->upto)
        snprintf(msg, sizeof msg, "READY for request %llu: layers_upto %u after %u (layers "
                 "become final in order)", (unsigned long long)x->req_id, m->layers_upto, st->upto);
    else if (m->layers_upto > st->bound)
        snprintf(msg, sizeof msg, "READY for request %llu: layers_upto %u past the model's %u "
                 "layers", (unsigned long long)x->req_id, m->layers_upto, st->bound);
    else if (m->event)
        event_check(x, m->event - 1, msg, sizeof msg);
    if (msg[0]) {
        log_req(LOG_LVL_INFO, x->req_id, NULL, x->ctx_instance, "%s", msg);
        transfers_end(t, x, KVF_E_BAD_REQUEST, 0, msg);
        return;
    }
    if (m->layers_upto == st->upto)
        return; /* no progress: the idle deadline runs on */
    if ((m->event || st->marks) && !mark(st, m, x->rank->gpu, msg, sizeof msg)) {
        snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (READY for request %llu)",
                 (unsigned long long)x->req_id);
        log_req(LOG_LVL_WARN, x->req_id, NULL, x->ctx_instance, "%s", msg);
        transfers_end(t, x, KVF_E_INTERNAL, 0, msg);
        return;
    }
    bool was_final = xstream_final(x);
    st->upto = m->layers_upto;
    if (!set_deadline(t, x)) {
        transfers_end(t, x, KVF_E_INTERNAL, 0, "out of memory queueing its deadline");
        return;
    }
    bool now_final = xstream_final(x);
    uint64_t id = x->req_id;
    stream_local_kick(t, x); /* its last reader's DONE may end x (SENT): looked up again */
    struct engine *e = t->d->engine;
    if (e && (x = transfers_find_conn(t, c, id)))
        stream_kick(e, x);
    if (e && !was_final && now_final && (x = transfers_find_conn(t, c, id)))
        path_local_send_arrived(e, x); /* writers of a spread instance: may end and free x */
}

bool stream_send_due(struct transfers *t, struct xfer *x, uint64_t now)
{
    if (xstream_final(x) || now < x->deadline_ms)
        return false;
    char msg[PROTO_MSG_MAX + 1];
    snprintf(msg, sizeof msg, "streaming request %llu: no layer made final within %llu ms "
             "(deadlines.stream_idle); layers below %u of %u were",
             (unsigned long long)x->req_id,
             (unsigned long long)t->d->cfg.deadlines_stream_idle_ms, x->stream->upto,
             x->stream->full);
    transfers_fail_now(t, x, KVF_E_TIMEOUT, msg);
    return true;
}

void stream_send_ended(struct transfers *t, struct xfer *x, struct req *q, kvf_error_t err,
                       const char *msg)
{
    if (!q || !q->n_live)
        return;
    struct xfer **live = malloc(q->n_live * sizeof *live); /* failing one changes q->live */
    uint32_t n = live ? q->n_live : 0;
    if (live)
        memcpy(live, q->live, n * sizeof *live);
    for (uint32_t i = 0; i < n; i++) {
        struct xfer *r = live[i];
        struct stream_copy *sc = r->side == XFER_RECV ? r->scopy : NULL;
        bool reads = false;
        for (uint32_t c = 0; sc && sc->sends && c < sc->n_ctx; c++)
            if (sc->sends[c] == x) {
                sc->sends[c] = NULL; /* x is freed by the next sweep */
                reads = true;
            }
        if (!reads)
            continue;
        char m[PROTO_MSG_MAX + 1];
        snprintf(m, sizeof m, "context rank %u's streaming SEND ended before its last layer "
                 "was read: %s", x->rank_idx, err != KVF_OK ? msg : "released");
        transfers_fail_now(t, r, err != KVF_OK ? err : KVF_E_CANCELLED, m);
    }
    free(live);
}

void stream_send_free(struct xfer *x)
{
    if (x->stream) {
        free(x->stream->flows);
        for (uint32_t u = 0; x->stream->marks && u < XSTREAM_MARKS; u++) /* copies queued keep */
            x->stream->marks[u].ev = gpu_event_mark_free(x->stream->marks[u].ev);
        free(x->stream->marks);
    }
    free(x->stream);
    x->stream = NULL;
    x->scopy = stream_local_free(x->scopy);
}
