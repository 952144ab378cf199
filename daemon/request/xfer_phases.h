/* xfer_phases.h: per-phase latency and size histograms of completed RECVs (local and remote),
 * from the phase timestamps on struct xfer (transfers.h): RECV taken, context instance known
 * (lookup), plan accepted (validate), landing credits reserved (remote only), first byte
 * moving, DONE. Exported in the
 * workers section of `stats` and as kvferry_workers_transfers_* histograms. Loop thread only. */
#ifndef KVF_XFER_PHASES_H
#define KVF_XFER_PHASES_H

#include <jansson.h>
#include <stdint.h>

#include "hist.h"
#include "label_table.h"

struct xfer;

struct xfer_phases {
    struct hist lookup, validate, first_credit, first_byte, transfer, end_to_end, bytes;
    struct label_table by_instance; /* the receiving (generation) instance */
    struct label_table by_peer;     /* the context side's daemon, "local" on the local path */
    struct label_table served;      /* context side: remote writer flows done, by generation daemon */
};

/* Stamps the phase `at` (uv_hrtime) once: later calls for the same phase keep the first. */
void xfer_phase_mark(uint64_t *at);
/* x completed with DONE after moving `bytes`: every phase it has a stamp for is observed, and it
 * counts for its instance and peer (at most max_labels values each, then "other"). */
void xfer_phases_done(struct xfer_phases *p, const struct xfer *x, uint64_t bytes,
                      size_t max_labels);
/* Context side: a writer flow to the daemon `peer` (its link id) completed after `bytes`. */
void xfer_phases_served(struct xfer_phases *p, const char *peer, uint64_t bytes, size_t max_labels);
void xfer_phases_free(struct xfer_phases *p);
/* Adds the histograms (hist.h form) to o: lookup_s, validate_s, first_credit_s, first_byte_s, transfer_s,
 * end_to_end_s, request_bytes; and per_instance, per_peer, served_per_peer ({"<value>":
 * {requests, bytes}}). */
void xfer_phases_json(const struct xfer_phases *p, json_t *o);

#endif
