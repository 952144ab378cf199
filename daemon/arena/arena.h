/* arena.h: slot and credit bookkeeping of one staging/landing arena (docs/DESIGN.md §6, §7).
 *
 * The arena owns no data memory: it hands out offsets in [0, size) of a region someone else
 * allocated and registered (the UCX-allocated, maybe CUDA-registered arena). It cuts the region
 * into fixed slots of `slot_bytes` = chunk rounded up to `align` (a power of two >= 4 KiB), so
 * every slot offset is a multiple of `align`.
 *
 * Reservations. The engine embeds one struct arena_resv per (request, writer) that lands bytes
 * here; `bytes` is the length of the writer's extent. The reservation asks for up to N credits
 * (arena_want); a credit is one slot granted for the next chunk of the extent, in extent order:
 * grant k covers extent bytes [k*chunk, min((k+1)*chunk, bytes)). Each grant bumps the slot's
 * generation (monotonic per slot, starts at 1), which the sender echoes in its chunk report.
 *
 * Fairness: credits go strictly FIFO across waiting reservations. The head of the queue takes
 * min(wanted, free) slots; while it still wants more it keeps the head and everyone behind it
 * waits (head-of-line), so the oldest request finishes first and no request starves. A
 * reservation that asks again (window refill) joins the tail. A reservation waits for its FIRST
 * credit at most `reserve_timeout_ms` (deadline = now of the arena_want call + timeout; it
 * expires in arena_tick when now >= deadline); later asks have no deadline (the transfer
 * deadline of the engine bounds them).
 *
 * Size classes (params.size_classes). A grant shorter than half a slot takes a small slot
 * instead: the smallest power of two >= max(length, align). A free slot is cut into equal
 * small slots of one class when that class has none free, and becomes one whole free slot
 * again when the last of them is free (none in use, none quarantined). Small slots keep
 * everything whole ones have: offsets multiples of `align`, a generation per grant (drawn
 * from the counter of the slot they were cut from, so an id reused after a re-cut never
 * accepts a stale report), the same states and quarantine. Their ids follow the whole
 * slots' (slot >= arena_slots_total: n_slots + offset / align). A class takes small slots
 * from the slot with the fewest free first, so small requests crowd few slots and whole
 * slots come back for large ones. Without size_classes every grant takes a whole slot.
 *
 * Slot life: FREE -> GRANTED (arena_want) -> FILLED (arena_report accepted) -> FREE
 * (arena_release by its holder). A reservation closed while a put may still be in flight
 * (arena_resv_close with in_flight) moves its GRANTED/FILLED slots to QUARANTINED under its
 * peer id; arena_reclaim_peer(peer) frees them once that peer's endpoint is flushed or closed.
 * A report that does not name the current generation of a slot the reservation holds is
 * rejected (stale) and consumes nothing.
 *
 * Per-peer share (params.peer_share_pct). Slots are also counted per owner (the peer daemon a
 * reservation lands for, arena_resv_set_owner; 0: not counted): the bytes of its GRANTED,
 * FILLED and QUARANTINED slots. An owner never holds more than its share of the region, so a
 * frozen or lost peer, whose slots stay quarantined until it is known that no put can land,
 * never holds every slot. A waiter whose owner is at its share is passed over (it waits for its
 * own slots to come back); FIFO order holds among the others.
 *
 * Time is explicit (now_ms from the caller), so the module is pure and the engine drives it from
 * a uv timer: arm it for arena_next_deadline() and call arena_tick() when it fires.
 *
 * Callbacks run synchronously inside arena_want, arena_release, arena_resv_close,
 * arena_reclaim_peer and arena_tick. They may call any arena function; nested grant rounds are
 * folded into the running one, never recursed. A reservation must not be freed while it is
 * waiting or holds slots: close it first (arena_resv_close), after which it is inert.
 *
 * One thread (the daemon loop). Never logs above debug. */
#ifndef KVF_ARENA_H
#define KVF_ARENA_H

#include <stdbool.h>
#include <stdint.h>

#define ARENA_MIN_ALIGN 4096u
#define ARENA_MAX_SLOTS (1u << 20)
#define ARENA_MAX_CREDITS 1024u     /* ceiling for max_credits */
#define ARENA_MAX_WAITERS (1u << 20) /* ceiling for max_waiters */

struct arena;
struct arena_resv;

/* One landing credit: slot `slot` at region bytes [offset, offset + length) receives extent
 * bytes [ext_off, ext_off + length). length <= slot_bytes. */
struct arena_grant {
    uint32_t slot;
    uint32_t generation;
    uint64_t offset;
    uint64_t length;
    uint64_t ext_off;
};

/* `n` fresh grants for `r` (n >= 1; the array is only valid during the call). */
typedef void (*arena_grant_cb)(struct arena_resv *r, const struct arena_grant *g, uint32_t n,
                               void *user);
/* `r` waited reserve_timeout_ms for its first credit and got none; it left the queue and holds
 * nothing. The engine fails the request (TIMEOUT) or takes another path. */
typedef void (*arena_timeout_cb)(struct arena_resv *r, void *user);

struct arena_params {
    uint64_t size;               /* region bytes */
    uint64_t chunk;              /* bytes per credit (arena.chunk) */
    uint64_t align;              /* slot alignment; 0 = ARENA_MIN_ALIGN */
    uint64_t reserve_timeout_ms; /* first-credit wait (arena.reserve_timeout) */
    uint32_t max_waiters;        /* queued reservations at once */
    uint32_t max_credits;        /* slots one reservation may hold + want at once */
    bool size_classes;           /* short grants take small slots (see above) */
    uint32_t peer_share_pct;     /* 1..100: bytes one owner may hold; 0: 100 */
    arena_grant_cb on_grant;     /* required */
    arena_timeout_cb on_timeout; /* required */
    void *user;                  /* borrowed: passed to callbacks */
};

typedef enum {
    RESV_IDLE = 0, /* not queued (may hold slots) */
    RESV_WAITING,  /* queued for credits */
    RESV_TIMED_OUT, /* terminal: first credit never came */
    RESV_CLOSED,   /* terminal */
} arena_resv_state_t;

/* Embedded in the engine's transfer object; fields are the arena's, read-only to others. */
struct arena_resv {
    uint64_t id;           /* engine's key, for logs */
    uint64_t peer;         /* the peer daemon that puts into our slots (quarantine key) */
    uint64_t owner;        /* share key (arena_resv_set_owner); 0: not counted */
    uint64_t bytes;        /* extent length to land */
    uint64_t granted;      /* extent bytes granted so far (next grant's ext_off) */
    uint64_t landed;       /* extent bytes accepted by arena_report */
    uint64_t deadline_ms;  /* first-credit deadline while waiting for it (never granted yet) */
    const uint64_t *cuts;  /* borrowed: ascending extent offsets no grant crosses, n_cuts of
                              them (arena_resv_set_cuts); must outlive the reservation */
    uint32_t n_cuts;
    uint32_t want;         /* credits still wanted while WAITING */
    uint32_t held;         /* slots GRANTED or FILLED to it */
    uint32_t head_slot;    /* list of held slots (arena-internal) */
    arena_resv_state_t state;
    bool ever_granted;
    struct arena_resv *q_prev, *q_next; /* wait queue (arena-internal) */
    void *data;            /* the engine's, untouched */
};

/* slots_total/slots_free count whole slots; slots_in_use and slots_quarantined count grants
 * of either size; slots_split: whole slots cut into small ones now. */
struct arena_stats {
    uint64_t capacity_bytes, chunk_bytes, slot_bytes;
    uint32_t slots_total, slots_free, slots_in_use, slots_quarantined, slots_split;
    uint64_t small_grants_total;
    uint64_t quarantined_bytes;
    uint32_t waiting_requests;
    uint64_t grants_total, timeouts_total, stale_reports_total, bound_violations_total;
    uint64_t reclaimed_total, refused_waiters_total;
};

/* Validates params (size >= one slot, chunk > 0, align a power of two >= 4 KiB, slots <=
 * ARENA_MAX_SLOTS, limits in range, callbacks set). Returns 0 and *ret, or -EINVAL / -ENOMEM. */
int arena_new(const struct arena_params *p, struct arena **ret);
/* Accepts NULL; returns NULL. Reservations still attached become dangling: close them first. */
struct arena *arena_free(struct arena *a);

/* Ready a reservation (no arena call needed). bytes must be > 0 to be usable. */
void arena_resv_init(struct arena_resv *r, uint64_t id, uint64_t peer, uint64_t bytes);

/* Grants of r end at these extent offsets too (ascending; repeats and offsets already granted
 * are skipped): a grant is at most arena.chunk and never crosses a cut. Before the first
 * arena_want; cuts borrowed until r is closed. */
void arena_resv_set_cuts(struct arena_resv *r, const uint64_t *cuts, uint32_t n_cuts);

/* The owner whose share the reservation's slots count against (before its first arena_want). */
void arena_resv_set_owner(struct arena_resv *r, uint64_t owner);

/* Bytes an owner holds now (granted, filled, quarantined), and the most one may hold. */
uint64_t arena_owner_bytes(const struct arena *a, uint64_t owner);
uint64_t arena_share_bytes(const struct arena *a);
/* Up to max owners holding slots, largest first; returns how many were written. */
struct arena_owner {
    uint64_t owner, bytes;
};
uint32_t arena_owners(const struct arena *a, struct arena_owner *out, uint32_t max);

/* Ask for up to `credits` more slots (clamped to the chunks of the extent not yet granted).
 * Grants at once what FIFO order allows (on_grant runs before this returns), queues the rest.
 * Returns the number of credits queued or granted (0: the whole extent was already granted),
 * -EINVAL (bad reservation, credits == 0, terminal), -EALREADY (already waiting),
 * -E2BIG (held + credits > max_credits), -EAGAIN (the wait queue is full: max_waiters). */
int arena_want(struct arena *a, struct arena_resv *r, uint32_t credits, uint64_t now_ms);

/* The sender reports a chunk written into a slot. Accepted (0) only if `r` holds `slot` at
 * `generation` in GRANTED state and ext_off/length equal the grant: the slot becomes FILLED.
 * Else nothing changes and: -ESTALE (slot not held by r at that generation, quarantined, or
 * reused: counted in stale_reports_total), -EALREADY (already reported), -ERANGE (offset or
 * length differ from the grant: counted in bound_violations_total), -EINVAL (slot out of
 * range). On success *ret (may be NULL) receives the grant for the scatter. */
int arena_report(struct arena *a, struct arena_resv *r, uint32_t slot, uint32_t generation,
                 uint64_t ext_off, uint64_t length, struct arena_grant *ret);

/* The holder is done with a FILLED slot (scatter landed): it becomes FREE and waiters are served.
 * Returns 0, -ESTALE (not held by r at that generation), -EBUSY (GRANTED, never reported: such
 * credits return only through arena_resv_close). */
int arena_release(struct arena *a, struct arena_resv *r, uint32_t slot, uint32_t generation);

/* Terminal: leave the queue; held slots become FREE, or QUARANTINED under r->peer when a put may
 * still be in flight. Idempotent; accepts NULL. Waiters are then served. */
void arena_resv_close(struct arena *a, struct arena_resv *r, bool in_flight);

/* The peer's endpoint was flushed or closed: its quarantined slots become FREE. Returns how many. */
uint32_t arena_reclaim_peer(struct arena *a, uint64_t peer);

/* Live reload of arena.reserve_timeout: applies to waits that start after the call; waiters
 * keep the deadline they were given. */
void arena_set_reserve_timeout(struct arena *a, uint64_t timeout_ms);
uint64_t arena_reserve_timeout(const struct arena *a);

/* Expire waiters whose first-credit deadline is <= now_ms (on_timeout each). Returns how many. */
uint32_t arena_tick(struct arena *a, uint64_t now_ms);
/* Earliest pending first-credit deadline: 0 and *ret, or -ENOENT when none. */
int arena_next_deadline(const struct arena *a, uint64_t *ret);

/* Bounds for the sender side (DESIGN §6): 0 if a chunk of `length` bytes at extent ext_off fits
 * the grant exactly (same ext_off, length equal), -ERANGE otherwise. */
int arena_grant_check(const struct arena_grant *g, uint64_t ext_off, uint64_t length);

uint64_t arena_slot_bytes(const struct arena *a);
uint32_t arena_slots_total(const struct arena *a);
void arena_get_stats(const struct arena *a, struct arena_stats *ret);
/* For `kvferryctl arena`: a new jansson object with capacity_bytes, chunk_bytes, slot_bytes,
 * slots_total, slots_free, slots_in_use, waiting_requests, quarantined_slots, quarantined_bytes,
 * grants_total, timeouts_total, stale_reports_total, bound_violations_total, reclaimed_total,
 * refused_waiters_total, slots_split, small_grants_total. NULL on OOM. */
struct json_t;
struct json_t *arena_stats_json(const struct arena *a);

const char *arena_resv_state_to_string(arena_resv_state_t s);

#endif
