/* xfer_recent.c: finished requests kept a while, and the phase of those in flight
 * (xfer_recent.h). */
#include <stdio.h>
#include <string.h>
#include <uv.h>

#include "layout.h"
#include "registry.h"
#include "transfers.h"
#include "xfer_recent.h"

const char *xfer_phase_name(const struct xfer *x)
{
    if (x->side == XFER_SEND)
        return x->served ? "serving" : "wait-readers";
    if (x->state == XFER_COPYING || x->moving_ns)
        return "moving";
    if (!x->lookup_ns)
        return "lookup";
    if (x->peer[0] && !x->credit_ns)
        return "credits";
    return "wait-send";
}

double xfer_rate(uint64_t bytes_done, uint64_t moving_ns, uint64_t until_ns)
{
    if (!moving_ns || until_ns <= moving_ns)
        return 0;
    return (double)bytes_done * 1e9 / (double)(until_ns - moving_ns);
}

void xfer_recent_add(struct xfer_recent *r, const struct xfer *x, const char *peer,
                     const char *outcome,
                     uint64_t now_ms)
{
    struct xfer_recent_row *w = &r->rows[r->next];
    memset(w, 0, sizeof *w);
    w->id = x->id;
    w->req_id = x->req_id;
    w->side = x->side;
    w->rank = x->rank ? (int)layout_rank(&x->rank->layout) : -1;
    snprintf(w->instance, sizeof w->instance, "%s", x->rank ? x->rank->layout.instance : "");
    snprintf(w->ctx_instance, sizeof w->ctx_instance, "%s", x->ctx_instance);
    snprintf(w->peer, sizeof w->peer, "%s", peer);
    snprintf(w->outcome, sizeof w->outcome, "%s", outcome);
    w->bytes_done = x->side == XFER_SEND ? x->bytes : x->bytes_done;
    w->bytes_planned = x->side == XFER_SEND ? x->bytes : x->bytes_planned;
    w->created_ms = x->created_ms;
    w->ended_ms = now_ms;
    w->moving_ns = x->moving_ns;
    w->ended_ns = uv_hrtime();
    w->ls = x->ls;
    r->next = (r->next + 1) % XFER_RECENT_MAX;
    if (r->n < XFER_RECENT_MAX)
        r->n++;
}

void xfer_recent_json(const struct xfer_recent *r, json_t *a, uint64_t now_ms, uint64_t keep_ms)
{
    for (size_t k = 0; k < r->n; k++) {
        const struct xfer_recent_row *w =
            &r->rows[(r->next + XFER_RECENT_MAX - 1 - k) % XFER_RECENT_MAX];
        if (now_ms > w->ended_ms + keep_ms)
            break; /* newest first: the rest are older */
        bool ok = !strcmp(w->outcome, "DONE") || !strcmp(w->outcome, "SENT");
        json_t *row = json_pack("{s:I,s:I,s:s,s:s,s:s,s:i,s:s,s:s,s:s,s:I,s:I,s:f,s:I,s:I,s:s}", "id",
                         (json_int_t)w->id, "req_id", (json_int_t)w->req_id, "side",
                         w->side == XFER_SEND ? "send" : "recv", "instance", w->instance, "ctx_instance",
                         w->ctx_instance, "rank", w->rank, "state", ok ? "done" : "failed",
                         "phase", "ended", "peer", w->peer, "bytes_done",
                         (json_int_t)w->bytes_done, "bytes_planned",
                         (json_int_t)w->bytes_planned, "rate_bps",
                         xfer_rate(w->bytes_done, w->moving_ns, w->ended_ns), "age_ms",
                         (json_int_t)(w->ended_ms - w->created_ms), "ended_ago_ms",
                         (json_int_t)(now_ms - w->ended_ms), "outcome", w->outcome);
        json_t *ls = xfer_lstamps_json(&w->ls);
        if (row && ls)
            json_object_set_new(row, "stamps_ns", ls);
        else
            json_decref(ls);
        json_array_append_new(a, row);
    }
}
