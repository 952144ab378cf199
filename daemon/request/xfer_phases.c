/* xfer_phases.c: phase histograms of completed RECVs (xfer_phases.h). */
#include <uv.h>

#include "registry.h"
#include "transfers.h"
#include "xfer_phases.h"

void xfer_phase_mark(uint64_t *at)
{
    if (!*at)
        *at = uv_hrtime();
}

static void span(struct hist *h, uint64_t from, uint64_t to)
{
    if (from && to >= from)
        hist_observe(h, &hist_latency_seconds, (double)(to - from) / 1e9);
}

void xfer_phases_done(struct xfer_phases *p, const struct xfer *x, uint64_t bytes,
                      size_t max_labels)
{
    label_table_add(&p->by_instance, x->rank ? x->rank->layout.instance : "", max_labels, bytes);
    label_table_add(&p->by_peer, x->peer, max_labels, bytes);
    uint64_t now = uv_hrtime();
    span(&p->lookup, x->recv_ns, x->lookup_ns);
    span(&p->validate, x->lookup_ns, x->validated_ns);
    span(&p->first_credit, x->validated_ns, x->credit_ns);
    span(&p->first_byte, x->recv_ns, x->moving_ns);
    span(&p->transfer, x->moving_ns, now);
    span(&p->end_to_end, x->recv_ns, now);
    hist_observe(&p->bytes, &hist_request_bytes, (double)bytes);
}

void xfer_phases_served(struct xfer_phases *p, const char *peer, uint64_t bytes, size_t max_labels)
{
    label_table_add(&p->served, peer, max_labels, bytes);
}

void xfer_phases_json(const struct xfer_phases *p, json_t *o)
{
    json_object_set_new(o, "lookup_s", hist_json(&p->lookup, &hist_latency_seconds));
    json_object_set_new(o, "validate_s", hist_json(&p->validate, &hist_latency_seconds));
    json_object_set_new(o, "first_credit_s", hist_json(&p->first_credit, &hist_latency_seconds));
    json_object_set_new(o, "first_byte_s", hist_json(&p->first_byte, &hist_latency_seconds));
    json_object_set_new(o, "transfer_s", hist_json(&p->transfer, &hist_latency_seconds));
    json_object_set_new(o, "end_to_end_s", hist_json(&p->end_to_end, &hist_latency_seconds));
    json_object_set_new(o, "request_bytes", hist_json(&p->bytes, &hist_request_bytes));
    json_object_set_new(o, "per_instance", label_table_json(&p->by_instance));
    json_object_set_new(o, "per_peer", label_table_json(&p->by_peer));
    json_object_set_new(o, "served_per_peer", label_table_json(&p->served));
}

void xfer_phases_free(struct xfer_phases *p)
{
    label_table_free(&p->by_instance);
    label_table_free(&p->by_peer);
    label_table_free(&p->served);
}
