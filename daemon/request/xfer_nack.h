/* xfer_nack.h: readers that failed and will not come, so a SEND ends as soon as no reader can
 * (docs/DESIGN.md §7, "the context side always learns the end"). The failures live with the
 * SEND generation in the request table (reqtab.h): an entry holds the set of its current
 * generation and the set of the next one (failures that came before any SEND of a new
 * request); a new generation adopts the pending set and forgets the old one, so a prefill
 * that restarted and reuses an id never meets the failures of the request it replaced. A set
 * counts failures of every writer (XFER_NACK_ALL: the same-daemon path, where every generation
 * rank reads every SEND, and an incompatible verdict, which refuses them all) and per context
 * rank (a remote reader names the writer it would have read), the first reason (an
 * incompatible verdict wins) and the reader count a same-daemon failure implies. Limits: at
 * most XFER_FAIL_WRITERS writers per set and XFER_FAIL_ENTRIES request-table entries opened
 * by failures alone; past them a failure is dropped and the SEND falls back to its deadline.
 * Loop thread only. */
#ifndef KVF_XFER_NACK_H
#define KVF_XFER_NACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvferry.h"
#include "proto.h"
#include "xfer.h"

#define XFER_FAIL_WRITERS 1024u
#define XFER_FAIL_ENTRIES 65536u

struct req;
struct xfer;
struct engine;

struct xfer_fail_w {
    uint32_t writer, n;
};

struct xfer_fails {
    uint32_t n_all;   /* failed readers of every writer */
    uint32_t readers; /* the reader count the failures imply (same daemon), 0 unknown */
    bool incompatible;
    kvf_error_t code; /* the first failure's; PEER_INCOMPATIBLE wins */
    char msg[PROTO_MSG_MAX + 1];
    struct xfer_fail_w *w; /* per context rank */
    uint32_t n_w, cap_w;
};

void xfer_fails_free(struct xfer_fails *f);

/* The generation a failed reader of `writer` (or XFER_NACK_ALL) that met no SEND belongs to:
 * q's current one while a SEND of it from that writer is live or still to come; 0 (the next
 * request's) when q has none open; UINT64_MAX (dropped) when that writer's SEND of the current
 * generation already ended: a late reader of it and an early one of the next request cannot
 * be told apart, and a wrong FAILED is worse than waiting for the deadline. */
uint64_t xfer_fail_gen(const struct req *q, uint32_t writer);
/* Records one failed reader of generation gen (xfer_fail_gen, or the generation a reader met)
 * in q. 0; 1 dropped (an ended generation's, or past a limit); -ENOMEM. */
int xfer_fails_add(struct req *q, uint64_t gen, uint32_t writer, uint32_t readers,
                   kvf_error_t code, const char *msg);
/* A same-daemon RECV r of q failed: every SEND of its generation (the one it met, else the one
 * it waits in: xfer_fail_gen) loses a reader, since each generation rank reads every SEND
 * there. As xfer_fails_add. */
int xfer_fails_local(struct req *q, const struct xfer *r, kvf_error_t err, const char *msg);

/* After a failure of q was added (rc, xfer_fails_add's) while q has no SEND generation: it waits
 * for the next SEND (fail_next). registered: a rank of the context instance is registered here
 * now; if none is, the failure's reader could only have been served by an instance registering
 * within deadlines.lookup (lookup_ms) of now, the longest a RECV waits for one. */
void xfer_fails_pending(struct req *q, int rc, bool registered, uint64_t now_ms,
                        uint64_t lookup_ms);
/* Before SEND x of a rank registered at registered_ms meets q: failures waiting for the next SEND
 * that all came while no rank of the instance was registered, more than deadlines.lookup before
 * this rank registered, were an earlier incarnation's readers (chaos seed 77031): dropped (and
 * logged). Returns how many failure sets were dropped (0 or 1). */
int xfer_fails_orphans(struct req *q, uint64_t registered_ms);
/* The readers SEND s waits for: n_readers, else the count the daemon derived (a failed
 * same-daemon reader derives it as a served one would). */
uint32_t xfer_need(struct xfer *s);
/* Whether SEND s (of its entry's current generation, served counted) ends FAILED now: some
 * reader failed, served + failed reach the count (or, with the count unknown, a reader was
 * refused as incompatible) and no reader still copies from its blocks. Then *code and msg say
 * why. */
bool xfer_no_reader_can_come(struct xfer *s, const struct engine *e, kvf_error_t *code,
                             char *msg, size_t len);

#endif
