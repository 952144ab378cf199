/* reqtab.h: the request table of the local path (docs/DESIGN.md §7): one entry per (context
 * instance, request id), found by hash, holding every request of that key from its first frame
 * (a SEND or a RECV) to its last event, and kept a while after (the late SENDs of other context
 * ranks still count the readers already served).
 *
 * Meetings are by the SEND's own generation, not by the id alone. The first SEND of an entry
 * opens a generation (a daemon-wide number); SENDs of the other context ranks and the RECVs
 * join it; completed RECVs are tallied per generation. A SEND from a rank whose SEND of the
 * current generation has already ended opens a new generation: the old one's tally, readers
 * and ended ranks are forgotten, so the state of an ended request never satisfies a new one (a
 * prefill instance that restarted its request counter). While the old generation still has a
 * SEND in flight, such a SEND is refused BAD_REQUEST, as is a RECV beyond the readers the
 * generation's SENDs named: an id reused in flight. A RECV that finds its generation ended
 * (every named reader served, no SEND in flight) waits for the next generation.
 * Loop thread only; owned by struct transfers. */
#ifndef KVF_REQTAB_H
#define KVF_REQTAB_H

#include <stddef.h>
#include <stdint.h>

#include "hmap.h"
#include "kvferry.h"

struct xfer;
struct xclient;
struct xfer_fails;

struct req {
    char instance[64]; /* key: the context instance */
    uint64_t id;       /* key: the request id */
    uint64_t h;        /* hash of the key */
    uint64_t gen;      /* the current SEND generation; 0 until a SEND opened one */
    uint64_t epoch;    /* the context instance's epoch that opened it (registry.h inst_epoch) */
    uint32_t done;     /* RECVs of this generation completed (the local readers' tally) */
    uint32_t need;     /* readers the generation's SENDs named (or the daemon counted); 0: unknown */
    struct xfer **live; /* bound requests not ended (SENDs and RECVs, local and remote) */
    uint32_t n_live, cap_live;
    uint32_t *ended;    /* context ranks whose SEND of this generation ended */
    uint32_t n_ended, cap_ended;
    struct xfer_fails *fail_cur;  /* readers of this generation that failed (xfer_nack.h) */
    struct xfer_fails *fail_next; /* failed before any SEND of the next one: it adopts them */
    /* fail_next's failures that came while no rank of the instance was registered here: a
     * SEND of a rank registered after orphan_ms is not theirs (xfer_fails_orphans); anchored:
     * one came while a rank was (the set is this instance's) */
    uint64_t orphan_ms;
    bool anchored;
    uint64_t idle_until_ms;           /* with nothing live: forgotten then */
    struct req *idle_prev, *idle_next; /* the idle list, oldest first */
};

struct reqtab {
    struct hmap by_key;           /* struct req by (instance, id) */
    struct req *idle_head, *idle_tail;
    uint64_t next_gen;
};

void reqtab_init(struct reqtab *t);
/* Frees every entry (requests themselves are not the table's). */
void reqtab_free(struct reqtab *t);
struct req *reqtab_find(const struct reqtab *t, const char *instance, uint64_t id);
/* The entry of (instance, id), created when missing; NULL: out of memory. */
struct req *reqtab_open(struct reqtab *t, const char *instance, uint64_t id);
/* x joins q's requests (x->req = q). 0 or -ENOMEM. */
int reqtab_bind(struct reqtab *t, struct req *q, struct xfer *x);
/* x ended: it leaves its entry (a SEND's rank is marked ended); an entry with nothing live is
 * kept keep_ms from now. */
void reqtab_unbind(struct reqtab *t, struct xfer *x, uint64_t now_ms, uint64_t keep_ms);
/* q, with nothing live (opened for a failure alone), is kept keep_ms from now. */
void reqtab_park(struct reqtab *t, struct req *q, uint64_t now_ms, uint64_t keep_ms);
/* Frees the idle entries whose time is up (all of them with now_ms UINT64_MAX). */
void reqtab_expire(struct reqtab *t, uint64_t now_ms);
uint32_t reqtab_count(const struct reqtab *t);

/* The live SEND of q from the context rank with index rank, or NULL. */
struct xfer *reqtab_send_of(const struct req *q, uint32_t rank);
/* A SEND from context rank `rank` of instance epoch `epoch` naming n_readers: KVF_OK (it joins
 * q's current generation or, when that rank's SEND of it ended or the generation is of another
 * epoch, and no SEND of it is in flight, a new one, which this opens), else BAD_REQUEST with a
 * message naming the id, the instance and the generation. */
kvf_error_t reqtab_send_meets(struct reqtab *t, struct req *q, uint32_t rank, uint64_t epoch,
                              uint32_t n_readers, char *msg, size_t len);
/* A RECV of the local path: KVF_OK (it joins the current generation, or waits for the next one
 * when the current one ended), else BAD_REQUEST when every reader of a generation in flight is
 * already there. */
kvf_error_t reqtab_recv_meets(struct reqtab *t, struct req *q, char *msg, size_t len);
/* A RECV of q's generation completed: the tally (returned) grows; need is the readers count
 * when the daemon derived it (0: keep). */
uint32_t reqtab_recv_done(struct req *q, uint32_t need);

#endif
