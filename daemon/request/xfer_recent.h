/* xfer_recent.h: requests that finished lately, kept for `kvferryctl transfers` with their
 * outcome for transfers.keep_finished (live) and at most XFER_RECENT_MAX of them (the oldest go
 * first): an operator polling or watching sees how each request ended, not only that its row
 * vanished. Also the phase of a request in flight (xfer_phase_name). Loop thread only. */
#ifndef KVF_XFER_RECENT_H
#define KVF_XFER_RECENT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "xfer_phases.h"

#define XFER_RECENT_MAX 256

struct xfer;

struct xfer_recent_row {
    uint64_t id, req_id;
    char side; /* xfer_side_t: XFER_SEND or XFER_RECV */
    int rank;
    char instance[64], ctx_instance[64], peer[256], outcome[32];
    uint64_t bytes_done, bytes_planned;
    uint64_t created_ms, ended_ms;
    uint64_t moving_ns, ended_ns; /* for the rate: first byte to the end */
    struct xfer_lstamps ls;       /* a same-daemon RECV's host timeline */
};

struct xfer_recent {
    struct xfer_recent_row rows[XFER_RECENT_MAX]; /* a ring: next is the slot written next */
    size_t next, n;
};

/* What a request in flight is doing: "lookup", "credits", "wait-send", "moving" (recv);
 * "wait-readers", "serving" (send). One word each (columns of kvferryctl transfers). */
const char *xfer_phase_name(const struct xfer *x);
/* Bytes per second since the first byte moved (0 before). */
double xfer_rate(uint64_t bytes_done, uint64_t moving_ns, uint64_t until_ns);

/* x just ended with outcome ("DONE", "SENT" or an error name); peer: its
 * transfers_peer_label. */
void xfer_recent_add(struct xfer_recent *r, const struct xfer *x, const char *peer,
                     const char *outcome,
                     uint64_t now_ms);
/* Appends the rows ended within keep_ms of now_ms to `a`, newest first. */
void xfer_recent_json(const struct xfer_recent *r, json_t *a, uint64_t now_ms, uint64_t keep_ms);

#endif
