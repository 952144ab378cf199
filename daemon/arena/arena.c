/* arena.c: slots, size classes, FIFO landing credits, generations, first-credit timeouts and
 * quarantine of one arena region (see arena.h). The arena owns its slot table, free ring and
 * the tables of cut slots, never the region and never the reservations (the engine embeds
 * those). */
#include "arena.h"
#include "arena_int.h"
#include "arena_share.h"

#include <errno.h>
#include <stdlib.h>

#include "log.h"

int arena_new(const struct arena_params *p, struct arena **ret)
{
    if (!p || !ret || !p->on_grant || !p->on_timeout || p->chunk == 0)
        return -EINVAL;
    uint64_t align = p->align ? p->align : ARENA_MIN_ALIGN;
    if (align < ARENA_MIN_ALIGN || (align & (align - 1)) != 0)
        return -EINVAL;
    if (p->chunk > UINT64_MAX - align)
        return -EINVAL;
    uint64_t slot_bytes = (p->chunk + align - 1) & ~(align - 1);
    if (p->size < slot_bytes || p->size / slot_bytes > ARENA_MAX_SLOTS)
        return -EINVAL;
    if (p->max_waiters == 0 || p->max_waiters > ARENA_MAX_WAITERS || p->max_credits == 0 ||
        p->max_credits > ARENA_MAX_CREDITS || p->peer_share_pct > 100)
        return -EINVAL;

    struct arena *a = calloc(1, sizeof(*a));
    if (!a)
        return -ENOMEM;
    a->p = *p;
    a->p.align = align;
    a->slot_bytes = slot_bytes;
    a->n_slots = (uint32_t)(p->size / slot_bytes);
    a->slots = calloc(a->n_slots, sizeof(*a->slots));
    a->ring = calloc(a->n_slots, sizeof(*a->ring));
    a->gbuf = calloc(p->max_credits, sizeof(*a->gbuf));
    a->shares = shares_new();
    uint64_t pct = p->peer_share_pct ? p->peer_share_pct : 100;
    a->share_cap = (uint64_t)a->n_slots * slot_bytes * pct / 100; /* at least one slot: */
    a->share_cap = a->share_cap < slot_bytes ? slot_bytes : a->share_cap;
    if (p->size_classes) {
        while (a->n_classes < MAX_CLASSES && (align << a->n_classes) * 2 <= slot_bytes)
            a->n_classes++;
        if ((uint64_t)a->n_slots + (uint64_t)a->n_slots * slot_bytes / align > UINT32_MAX) {
            arena_free(a); /* small slot ids would not fit the grant's 32 bits */
            return -EINVAL;
        }
        a->splits = calloc(a->n_slots, sizeof(*a->splits));
    }
    if (!a->slots || !a->ring || !a->gbuf || !a->shares || (p->size_classes && !a->splits)) {
        arena_free(a);
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < a->n_slots; i++) {
        a->slots[i].next = NIL;
        a->ring[i] = i;
    }
    a->n_free = a->n_slots;
    log_debug("arena: %llu bytes, %u slots of %llu bytes (chunk %llu, align %llu)",
              (unsigned long long)p->size, a->n_slots, (unsigned long long)slot_bytes,
              (unsigned long long)p->chunk, (unsigned long long)align);
    *ret = a;
    return 0;
}

static void split_free(struct split *s)
{
    if (s) {
        free(s->free_stack);
        free(s->subs);
        free(s);
    }
}

struct arena *arena_free(struct arena *a)
{
    if (!a)
        return NULL;
    for (uint32_t i = 0; a->splits && i < a->n_slots; i++)
        split_free(a->splits[i]);
    free(a->splits);
    free(a->slots);
    free(a->ring);
    free(a->gbuf);
    shares_free(a->shares);
    free(a);
    return NULL;
}

void arena_resv_init(struct arena_resv *r, uint64_t id, uint64_t peer, uint64_t bytes)
{
    *r = (struct arena_resv){.id = id, .peer = peer, .bytes = bytes, .head_slot = NIL};
}

void arena_resv_set_owner(struct arena_resv *r, uint64_t owner)
{
    r->owner = owner;
}

void arena_resv_set_cuts(struct arena_resv *r, const uint64_t *cuts, uint32_t n_cuts)
{
    r->cuts = cuts;
    r->n_cuts = cuts ? n_cuts : 0;
}

/* ---- free ring (FIFO: a freed slot is reused last, which keeps stale reports rare) ---- */

static void ring_push(struct arena *a, uint32_t slot)
{
    a->ring[(a->ring_head + a->n_free) % a->n_slots] = slot;
    a->n_free++;
}

static uint32_t ring_pop(struct arena *a)
{
    uint32_t s = a->ring[a->ring_head];
    a->ring_head = (a->ring_head + 1) % a->n_slots;
    a->n_free--;
    return s;
}

/* ---- wait queue ---- */

static void q_append(struct arena *a, struct arena_resv *r)
{
    r->q_next = NULL;
    r->q_prev = a->q_tail;
    if (a->q_tail)
        a->q_tail->q_next = r;
    else
        a->q_head = r;
    a->q_tail = r;
    a->n_waiting++;
}

static void q_remove(struct arena *a, struct arena_resv *r)
{
    if (r->q_prev)
        r->q_prev->q_next = r->q_next;
    else
        a->q_head = r->q_next;
    if (r->q_next)
        r->q_next->q_prev = r->q_prev;
    else
        a->q_tail = r->q_prev;
    r->q_prev = r->q_next = NULL;
    a->n_waiting--;
}

/* ---- small slots: classes, cutting and merging ---- */

/* The class of a grant of `len` bytes, or -1: a whole slot. */
static int class_of(const struct arena *a, uint64_t len)
{
    for (uint32_t k = 0; k < a->n_classes; k++)
        if ((a->p.align << k) >= len)
            return (int)k;
    return -1;
}

static void partial_append(struct arena *a, struct split *s)
{
    s->next = NULL;
    s->prev = a->partial_tail[s->cls];
    if (s->prev)
        s->prev->next = s;
    else
        a->partial_head[s->cls] = s;
    a->partial_tail[s->cls] = s;
}

static void partial_remove(struct arena *a, struct split *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        a->partial_head[s->cls] = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        a->partial_tail[s->cls] = s->prev;
    s->prev = s->next = NULL;
}

/* Cuts a free whole slot into small slots of class k; NULL when memory is short (the caller
 * then grants the whole slot). */
static struct split *split_new(struct arena *a, uint32_t k)
{
    struct split *s = calloc(1, sizeof(*s));
    uint64_t cls = a->p.align << k;
    uint32_t n = (uint32_t)(a->slot_bytes / cls);
    if (!s || !(s->subs = calloc(n, sizeof(*s->subs))) ||
        !(s->free_stack = calloc(n, sizeof(*s->free_stack)))) {
        split_free(s);
        return NULL;
    }
    s->big = ring_pop(a);
    s->cls = k;
    s->cls_bytes = cls;
    s->n_sub = s->n_free = n;
    for (uint32_t i = 0; i < n; i++) {
        s->subs[i].next = NIL;
        s->free_stack[i] = n - 1 - i; /* lowest offsets first */
    }
    a->slots[s->big].state = SLOT_SPLIT;
    a->splits[s->big] = s;
    a->n_split++;
    partial_append(a, s);
    return s;
}

/* A small slot is free again; the last one makes its whole slot free. */
static void sub_free(struct arena *a, struct split *s, struct slot *x)
{
    x->state = SLOT_FREE;
    x->holder = NULL;
    s->free_stack[s->n_free++] = (uint32_t)(x - s->subs);
    if (s->n_free == 1)
        partial_append(a, s);
    if (s->n_free < s->n_sub)
        return;
    partial_remove(a, s);
    uint32_t big = s->big;
    a->splits[big] = NULL;
    split_free(s);
    a->slots[big].state = SLOT_FREE; /* keeps its generation counter */
    a->n_split--;
    ring_push(a, big);
}

/* The slot an id names now (whole or small), or NULL (*sp: its split, NULL when whole). */
static struct slot *slot_at(const struct arena *a, uint32_t id, struct split **sp)
{
    *sp = NULL;
    if (id < a->n_slots)
        return &a->slots[id];
    if (!a->splits)
        return NULL;
    uint64_t off = (uint64_t)(id - a->n_slots) * a->p.align;
    uint64_t b = off / a->slot_bytes;
    struct split *s = b < a->n_slots ? a->splits[b] : NULL;
    if (!s)
        return NULL;
    uint64_t within = off - b * a->slot_bytes;
    if (within % s->cls_bytes != 0 || within / s->cls_bytes >= s->n_sub)
        return NULL;
    *sp = s;
    return &s->subs[within / s->cls_bytes];
}

/* One past the largest id a grant can carry. */
static uint64_t id_limit(const struct arena *a)
{
    return a->splits ? a->n_slots + (uint64_t)a->n_slots * a->slot_bytes / a->p.align
                     : a->n_slots;
}

static void slot_free(struct arena *a, uint32_t id, struct slot *s, struct split *sp)
{
    shares_sub(a->shares, s->owner, sp ? sp->cls_bytes : a->slot_bytes);
    s->owner = 0;
    if (sp) {
        sub_free(a, sp, s);
    } else {
        s->state = SLOT_FREE;
        s->holder = NULL;
        ring_push(a, id);
    }
}

/* ---- held-slot list of a reservation ---- */

static void held_remove(struct arena *a, struct arena_resv *r, uint32_t slot)
{
    struct split *sp;
    uint32_t *link = &r->head_slot;
    while (*link != NIL && *link != slot)
        link = &slot_at(a, *link, &sp)->next;
    if (*link == slot) {
        struct slot *s = slot_at(a, slot, &sp);
        *link = s->next;
        s->next = NIL;
        r->held--;
    }
}

/* Grants r still needs: chunks of each stretch between its cuts (one stretch without cuts). */
static uint64_t chunks_left(const struct arena *a, const struct arena_resv *r)
{
    uint64_t at = r->granted, n = 0;
    for (uint32_t i = 0; i <= r->n_cuts; i++) {
        uint64_t end = i < r->n_cuts && r->cuts[i] < r->bytes ? r->cuts[i] : r->bytes;
        if (end <= at)
            continue;
        n += (end - at) / a->p.chunk + ((end - at) % a->p.chunk != 0);
        at = end;
    }
    return n;
}

static uint64_t next_len(const struct arena *a, const struct arena_resv *r)
{
    uint64_t left = r->bytes - r->granted, len = left < a->p.chunk ? left : a->p.chunk;
    uint32_t lo = 0, hi = r->n_cuts; /* the first cut past what was granted */
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (r->cuts[mid] <= r->granted)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < r->n_cuts && r->cuts[lo] - r->granted < len)
        len = r->cuts[lo] - r->granted;
    return len;
}

/* Room for r's next grant: a free small slot of its class or a free whole slot. */
static bool has_room(const struct arena *a, const struct arena_resv *r)
{
    int k = class_of(a, next_len(a, r));
    return a->n_free > 0 || (k >= 0 && a->partial_head[k]);
}

/* r's owner holds its share: its next grant would pass it. */
static bool share_full(const struct arena *a, const struct arena_resv *r)
{
    int k = class_of(a, next_len(a, r));
    uint64_t b = k >= 0 ? a->p.align << k : a->slot_bytes;
    return r->owner && shares_bytes(a->shares, r->owner) + b > a->share_cap;
}

static bool can_grant(const struct arena *a, const struct arena_resv *r)
{
    return has_room(a, r) && !share_full(a, r);
}

static uint32_t bump_gen(uint32_t g)
{
    g++;
    return g ? g : 1; /* wrapped after 2^32 grants: 0 means "never granted" */
}

static void grant_one(struct arena *a, struct arena_resv *r, struct arena_grant *g)
{
    uint64_t len = next_len(a, r), off;
    int k = class_of(a, len);
    struct split *sp = k >= 0 ? a->partial_head[k] : NULL;
    if (k >= 0 && !sp)
        sp = split_new(a, (uint32_t)k);
    struct slot *s;
    uint32_t id;
    if (sp) {
        uint32_t i = sp->free_stack[--sp->n_free];
        if (sp->n_free == 0)
            partial_remove(a, sp);
        s = &sp->subs[i];
        struct slot *big = &a->slots[sp->big];
        big->gen = bump_gen(big->gen); /* one counter per whole slot: ids reused after a re-cut
                                          never meet an old generation */
        s->gen = big->gen;
        off = (uint64_t)sp->big * a->slot_bytes + i * sp->cls_bytes;
        id = (uint32_t)(a->n_slots + off / a->p.align);
        a->small_grants_total++;
    } else {
        id = ring_pop(a);
        s = &a->slots[id];
        s->gen = bump_gen(s->gen);
        off = (uint64_t)id * a->slot_bytes;
    }
    s->state = SLOT_GRANTED;
    s->holder = r;
    s->owner = r->owner;
    (void)shares_add(a->shares, r->owner, sp ? sp->cls_bytes : a->slot_bytes);
    s->ext_off = r->granted;
    s->length = len;
    s->next = r->head_slot;
    r->head_slot = id;
    r->held++;
    r->granted += len;
    a->grants_total++;
    a->n_in_use++;
    *g = (struct arena_grant){.slot = id,
                              .generation = s->gen,
                              .offset = off,
                              .length = len,
                              .ext_off = s->ext_off};
}

/* Serve the queue head-first while its next grant has room, passing over waiters whose owner
 * holds its share. Re-entrant calls (from a callback) return at once: the running loop re-reads
 * the queue from its head after every callback. */
static void pump(struct arena *a)
{
    if (a->pumping)
        return;
    a->pumping = true;
    struct arena_resv *r = a->q_head;
    while (r) {
        if (share_full(a, r)) {
            r = r->q_next;
            continue;
        }
        if (!has_room(a, r))
            break;
        uint32_t n = 0;
        while (n < r->want && can_grant(a, r))
            grant_one(a, r, &a->gbuf[n++]);
        r->want -= n;
        r->ever_granted = true;
        r->deadline_ms = 0;
        if (r->want == 0) {
            q_remove(a, r);
            r->state = RESV_IDLE;
        }
        a->p.on_grant(r, a->gbuf, n, a->p.user);
        r = a->q_head;
    }
    a->pumping = false;
}

int arena_want(struct arena *a, struct arena_resv *r, uint32_t credits, uint64_t now_ms)
{
    if (!a || !r || credits == 0 || r->bytes == 0 || r->granted > r->bytes)
        return -EINVAL;
    if (r->state == RESV_WAITING)
        return -EALREADY;
    if (r->state != RESV_IDLE)
        return -EINVAL;
    uint64_t left = chunks_left(a, r);
    if (left == 0)
        return 0;
    if (credits > left)
        credits = (uint32_t)left;
    if ((uint64_t)r->held + credits > a->p.max_credits)
        return -E2BIG;
    if (a->n_waiting >= a->p.max_waiters) {
        a->refused_total++;
        return -EAGAIN;
    }
    r->want = credits;
    r->state = RESV_WAITING;
    r->deadline_ms = 0;
    if (!r->ever_granted) /* only the first credit has a deadline */
        r->deadline_ms = now_ms > UINT64_MAX - a->p.reserve_timeout_ms
                             ? UINT64_MAX
                             : now_ms + a->p.reserve_timeout_ms;
    q_append(a, r);
    pump(a);
    return (int)credits;
}

int arena_report(struct arena *a, struct arena_resv *r, uint32_t slot, uint32_t generation,
                 uint64_t ext_off, uint64_t length, struct arena_grant *ret)
{
    if (!a || !r || slot >= id_limit(a))
        return -EINVAL;
    struct split *sp;
    struct slot *s = slot_at(a, slot, &sp);
    bool held = s && (s->state == SLOT_GRANTED || s->state == SLOT_FILLED) && s->holder == r;
    if (!held || s->gen != generation) {
        a->stale_total++;
        return -ESTALE;
    }
    if (s->state == SLOT_FILLED) {
        a->stale_total++;
        return -EALREADY;
    }
    if (ext_off != s->ext_off || length != s->length) {
        a->bound_total++;
        return -ERANGE;
    }
    s->state = SLOT_FILLED;
    r->landed += length;
    if (ret)
        *ret = (struct arena_grant){.slot = slot,
                                    .generation = s->gen,
                                    .offset = sp ? (uint64_t)(slot - a->n_slots) * a->p.align
                                                 : (uint64_t)slot * a->slot_bytes,
                                    .length = s->length,
                                    .ext_off = s->ext_off};
    return 0;
}

int arena_release(struct arena *a, struct arena_resv *r, uint32_t slot, uint32_t generation)
{
    if (!a || !r || slot >= id_limit(a))
        return -EINVAL;
    struct split *sp;
    struct slot *s = slot_at(a, slot, &sp);
    bool held = s && (s->state == SLOT_GRANTED || s->state == SLOT_FILLED) && s->holder == r;
    if (!held || s->gen != generation)
        return -ESTALE;
    if (s->state == SLOT_GRANTED)
        return -EBUSY;
    held_remove(a, r, slot);
    a->n_in_use--;
    slot_free(a, slot, s, sp);
    pump(a);
    return 0;
}

void arena_resv_close(struct arena *a, struct arena_resv *r, bool in_flight)
{
    if (!a || !r || r->state == RESV_CLOSED || r->state == RESV_TIMED_OUT)
        return;
    if (r->state == RESV_WAITING)
        q_remove(a, r);
    r->state = RESV_CLOSED;
    r->want = 0;
    r->deadline_ms = 0;
    while (r->head_slot != NIL) {
        uint32_t id = r->head_slot;
        struct split *sp;
        struct slot *s = slot_at(a, id, &sp);
        r->head_slot = s->next;
        s->next = NIL;
        s->holder = NULL;
        a->n_in_use--;
        /* A GRANTED slot may still receive the peer's put; a FILLED one was reported after the
         * peer's flush, so nothing more can land in it. */
        if (in_flight && s->state == SLOT_GRANTED) {
            s->state = SLOT_QUARANTINED;
            s->peer = r->peer;
            a->n_quarantined++;
            a->q_bytes += sp ? sp->cls_bytes : a->slot_bytes;
        } else {
            slot_free(a, id, s, sp);
        }
    }
    r->held = 0;
    pump(a);
}

uint32_t arena_reclaim_peer(struct arena *a, uint64_t peer)
{
    if (!a)
        return 0;
    uint32_t n = 0;
    for (uint32_t i = 0; i < a->n_slots && a->n_quarantined > 0; i++) {
        struct slot *s = &a->slots[i];
        if (s->state == SLOT_SPLIT) {
            struct split *sp = a->splits[i];
            uint32_t n_sub = sp->n_sub;
            for (uint32_t k = 0; k < n_sub && a->splits[i] == sp; k++) {
                struct slot *x = &sp->subs[k];
                if (x->state != SLOT_QUARANTINED || x->peer != peer)
                    continue;
                x->peer = 0;
                shares_sub(a->shares, x->owner, sp->cls_bytes);
                x->owner = 0;
                a->n_quarantined--;
                a->q_bytes -= sp->cls_bytes;
                n++;
                sub_free(a, sp, x); /* the last one frees sp: the loop test stops */
            }
            continue;
        }
        if (s->state != SLOT_QUARANTINED || s->peer != peer)
            continue;
        s->state = SLOT_FREE;
        s->peer = 0;
        shares_sub(a->shares, s->owner, a->slot_bytes);
        s->owner = 0;
        a->n_quarantined--;
        a->q_bytes -= a->slot_bytes;
        ring_push(a, i);
        n++;
    }
    a->reclaimed_total += n;
    if (n)
        pump(a);
    return n;
}

uint32_t arena_tick(struct arena *a, uint64_t now_ms)
{
    if (!a)
        return 0;
    /* Unlink every expired waiter first, then call back: a callback may free its reservation
     * or touch the queue, never the detached list. */
    struct arena_resv *expired = NULL, **tail = &expired;
    for (struct arena_resv *r = a->q_head, *next; r; r = next) {
        next = r->q_next;
        if (r->ever_granted || now_ms < r->deadline_ms)
            continue;
        q_remove(a, r);
        r->state = RESV_TIMED_OUT;
        r->want = 0;
        *tail = r;
        tail = &r->q_next;
    }
    uint32_t n = 0;
    for (struct arena_resv *r = expired, *next; r; r = next) {
        next = r->q_next;
        r->q_next = NULL;
        a->timeouts_total++;
        n++;
        a->p.on_timeout(r, a->p.user);
    }
    pump(a);
    return n;
}
