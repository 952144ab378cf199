/* xfer_phases.c: phase histograms of completed RECVs (xfer_phases.h). */
#include <stddef.h>
#include <string.h>
#include <uv.h>

#include "registry.h"
#include "xfer.h"
#include "xfer_phases.h"

static json_t *local_json(const struct xfer_lsums *l);

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

/* The phases of a completed RECV, in the order of struct xfer_phases' totals and of a labeled
 * row's histograms. */
static const char *const phase_names[HIST_TABLE_HISTS] = {
    "lookup", "validate", "first_credit", "first_byte", "transfer", "end_to_end"};

static void observe_phases(struct hist *h[HIST_TABLE_HISTS], const struct xfer *x, uint64_t now)
{
    span(h[0], x->taken_ns, x->lookup_ns);
    span(h[1], x->lookup_ns, x->validated_ns);
    span(h[2], x->validated_ns, x->credit_ns);
    span(h[3], x->taken_ns, x->moving_ns);
    span(h[4], x->moving_ns, now);
    span(h[5], x->taken_ns, now);
}

void xfer_phases_done(struct xfer_phases *p, const struct xfer *x, uint64_t bytes,
                      const char *path, const char *peer, size_t max_labels)
{
    const char *inst = x->rank ? x->rank->layout.instance : "";
    label_table_add(&p->by_instance, inst, max_labels, bytes);
    label_table_add(&p->by_peer, peer, max_labels, bytes);
    uint64_t now = uv_hrtime();
    struct hist *totals[HIST_TABLE_HISTS] = {&p->lookup, &p->validate, &p->first_credit,
                                             &p->first_byte, &p->transfer, &p->end_to_end};
    observe_phases(totals, x, now);
    const char *key[HIST_TABLE_LABELS] = {path, peer, inst};
    struct hist_row *row = hist_table_row(&p->labeled, key, max_labels);
    struct hist *labeled[HIST_TABLE_HISTS];
    for (int i = 0; i < HIST_TABLE_HISTS; i++)
        labeled[i] = &row->h[i];
    observe_phases(labeled, x, now);
    hist_observe(&p->bytes, &hist_request_bytes, (double)bytes);
}

void xfer_phases_sent(struct xfer_phases *p, const struct xfer *s)
{
    span(&p->send, s->taken_ns, uv_hrtime());
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
    json_object_set_new(o, "send_s", hist_json(&p->send, &hist_latency_seconds));
    const struct hist_spec *specs[HIST_TABLE_HISTS];
    for (int i = 0; i < HIST_TABLE_HISTS; i++)
        specs[i] = &hist_latency_seconds;
    json_object_set_new(o, "phase_s", hist_table_json(&p->labeled, phase_names, specs));
    json_object_set_new(o, "local_phase_s", local_json(&p->local));
    json_object_set_new(o, "local_phase_requests", json_integer((json_int_t)p->local.n));
    json_object_set_new(o, "per_instance", label_table_json(&p->by_instance));
    json_object_set_new(o, "per_peer", label_table_json(&p->by_peer));
    json_object_set_new(o, "served_per_peer", label_table_json(&p->served));
}

void xfer_phases_free(struct xfer_phases *p)
{
    label_table_free(&p->by_instance);
    label_table_free(&p->by_peer);
    label_table_free(&p->served);
    hist_table_free(&p->labeled);
}

/* Each span: its name and the stamps it runs between (offsets in struct xfer_lstamps). */
#define AT(f) offsetof(struct xfer_lstamps, f)
static const struct {
    const char *name;
    size_t from, to;
} spans[XFER_LS__COUNT] = {
    [XFER_LS_READ] = {"read", AT(trig_read), AT(trig_frame)},
    [XFER_LS_DECODE] = {"decode", AT(trig_frame), AT(trig_entry)},
    [XFER_LS_ADMIT] = {"admit", AT(trig_entry), AT(met)},
    [XFER_LS_PLAN] = {"plan", AT(met), AT(planned)},
    [XFER_LS_CHECK] = {"check", AT(planned), AT(checked)},
    [XFER_LS_START] = {"start", AT(checked), AT(started)},
    [XFER_LS_RUN] = {"run", AT(started), AT(copied)},
    [XFER_LS_DONE] = {"done", AT(copied), AT(written)},
    [XFER_LS_TOTAL] = {"total", AT(trig_read), AT(written)},
    [XFER_LS_WAIT_SEND] = {"wait_send", AT(frame), AT(trig_frame)},
};
static const struct {
    const char *name;
    size_t at;
} stamps[] = {{"read", AT(read)}, {"frame", AT(frame)}, {"trig_read", AT(trig_read)},
              {"trig_frame", AT(trig_frame)}, {"trig_entry", AT(trig_entry)}, {"met", AT(met)},
              {"planned", AT(planned)}, {"checked", AT(checked)}, {"started", AT(started)},
              {"copied", AT(copied)}, {"written", AT(written)}};
#undef AT

static uint64_t stamp(const struct xfer_lstamps *s, size_t at)
{
    uint64_t v;
    memcpy(&v, (const char *)s + at, sizeof v);
    return v;
}

void xfer_phases_local_done(struct xfer_phases *p, const struct xfer_lstamps *s)
{
    uint64_t d[XFER_LS__COUNT];
    for (int i = 0; i < XFER_LS__COUNT; i++) {
        uint64_t from = stamp(s, spans[i].from), to = stamp(s, spans[i].to);
        if (!from || to < from)
            return; /* a stamp missing: not a timeline of the local path */
        d[i] = to - from;
    }
    p->local.n++;
    for (int i = 0; i < XFER_LS__COUNT; i++)
        p->local.ns[i] += d[i];
}

json_t *xfer_lstamps_json(const struct xfer_lstamps *s)
{
    if (!s->met)
        return NULL;
    json_t *o = json_object();
    for (size_t i = 0; o && i < sizeof stamps / sizeof *stamps; i++)
        if (stamp(s, stamps[i].at))
            json_object_set_new(o, stamps[i].name, json_integer((json_int_t)stamp(s, stamps[i].at)));
    return o;
}

static json_t *local_json(const struct xfer_lsums *l)
{
    json_t *o = json_object();
    for (int i = 0; i < XFER_LS__COUNT; i++)
        json_object_set_new(o, spans[i].name, json_real(l->ns[i] / 1e9));
    return o;
}
