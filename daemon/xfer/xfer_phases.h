/* xfer_phases.h: per-phase latency and size histograms of completed RECVs (local and remote),
 * from the phase timestamps on struct xfer (transfers.h): RECV taken, context instance known
 * (lookup), plan accepted (validate), landing credits reserved (remote only), first byte
 * moving, DONE. Exported in the
 * workers section of `stats` and as kvferry_workers_transfers_* histograms, totals and labeled by
 * path, peer and instance; and, on the context side, SEND taken to SENT. Loop thread only. */
#ifndef KVF_XFER_PHASES_H
#define KVF_XFER_PHASES_H

#include <jansson.h>
#include <stdint.h>

#include "hist.h"
#include "hist_table.h"
#include "label_table.h"

struct xfer;

/* A same-daemon RECV's host timeline (uv_hrtime ns, the host's CLOCK_MONOTONIC, so a worker's
 * own clock lines up; 0: not reached): its RECV frame (socket read began, decode began), and
 * the chain that ran it, from the frame that completed the meeting (the RECV itself, or the
 * last SEND or REGISTER it waited for: read, decode began, handed to transfers) through every
 * writer's SEND met, planned, bounds checked, copy started (GPU: programs bound and kernels
 * queued), completion back on the loop, DONE frame written to the worker's socket. */
struct xfer_lstamps {
    uint64_t read, frame;
    uint64_t trig_read, trig_frame, trig_entry;
    uint64_t met, planned, checked, started, copied, written;
};

/* The spans summed over completed same-daemon RECVs (exported as local_phase_s): read (socket
 * read to decode of the frame that completed the meeting), decode (to transfers), admit
 * (admission, the meeting, the writers: to met), plan, check, start, run (copy started to
 * completion on the loop), done (to the DONE frame written), total (read to written);
 * wait_send (its own frame decoded to the frame that completed the meeting) is time spent
 * waiting for the writers, not in the daemon. */
enum xfer_lspan {
    XFER_LS_READ, XFER_LS_DECODE, XFER_LS_ADMIT, XFER_LS_PLAN, XFER_LS_CHECK, XFER_LS_START,
    XFER_LS_RUN, XFER_LS_DONE, XFER_LS_TOTAL, XFER_LS_WAIT_SEND, XFER_LS__COUNT
};

struct xfer_lsums {
    uint64_t n, ns[XFER_LS__COUNT];
};

struct xfer_phases {
    struct hist lookup, validate, first_credit, first_byte, transfer, end_to_end, bytes;
    struct hist_table labeled;      /* the six phases again, per (path, peer, instance) */
    struct hist send;               /* context side: SEND taken to SENT */
    struct label_table by_instance; /* the receiving (generation) instance */
    struct label_table by_peer;     /* the context side's daemon, "local" on the local path */
    struct label_table served;      /* context side: remote writer flows done, by generation daemon */
    struct xfer_lsums local;        /* same-daemon RECVs' host timeline */
};

/* Stamps the phase `at` (uv_hrtime) once: later calls for the same phase keep the first. */
void xfer_phase_mark(uint64_t *at);
/* x completed with DONE after moving `bytes` over `path` from `peer` (its path's name and its
 * transfers_peer_label): every phase it has a stamp for is observed, and it
 * counts for its instance and peer (at most max_labels values each, then "other"). */
void xfer_phases_done(struct xfer_phases *p, const struct xfer *x, uint64_t bytes,
                      const char *path, const char *peer, size_t max_labels);
/* x, a same-daemon RECV, wrote its DONE frame: its timeline's spans join p->local (a RECV
 * with a stamp missing is left out). */
void xfer_phases_local_done(struct xfer_phases *p, const struct xfer_lstamps *s);
/* The timeline as JSON {"read": ns, ...}: the stamps it has, on the host clock; NULL when
 * it was never met (not a same-daemon RECV, or it ended before its writers all SENT). */
json_t *xfer_lstamps_json(const struct xfer_lstamps *s);
/* s, a SEND, ended SENT: its time since it was taken joins p->send. */
void xfer_phases_sent(struct xfer_phases *p, const struct xfer *s);
/* Context side: a writer flow to the daemon `peer` (its link id) completed after `bytes`. */
void xfer_phases_served(struct xfer_phases *p, const char *peer, uint64_t bytes, size_t max_labels);
void xfer_phases_free(struct xfer_phases *p);
/* Adds the histograms (hist.h form) to o: lookup_s, validate_s, first_credit_s, first_byte_s, transfer_s,
 * end_to_end_s, request_bytes, send_s; phase_s: the six phases by path, peer and instance
 * ({"<path>": {"<peer>": {"<instance>": {"lookup": hist, ...}}}}, metrics.max_label_values
 * tuples, then "other"); local_phase_s (p->local's spans in seconds), local_phase_requests (its count);
 * and per_instance, per_peer, served_per_peer ({"<value>":
 * {requests, bytes}}). */
void xfer_phases_json(const struct xfer_phases *p, json_t *o);

#endif
