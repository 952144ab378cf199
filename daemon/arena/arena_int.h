/* arena_int.h: the arena's own tables, shared by arena.c (slots, credits, generations,
 * quarantine) and arena_read.c (what it reports); nothing outside daemon/arena uses it. */
#ifndef KVF_ARENA_INT_H
#define KVF_ARENA_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "arena.h"

#define NIL UINT32_MAX

#define MAX_CLASSES 32

typedef enum { SLOT_FREE = 0, SLOT_GRANTED, SLOT_FILLED, SLOT_QUARANTINED, SLOT_SPLIT } slot_state_t;

struct slot {
    uint32_t gen;             /* generation of the current/last grant; 0: never granted */
    uint32_t next;            /* next slot held by the same reservation */
    slot_state_t state;
    struct arena_resv *holder; /* GRANTED/FILLED only; borrowed */
    uint64_t peer;            /* QUARANTINED: the peer whose flush/close frees it */
    uint64_t owner;           /* GRANTED/FILLED/QUARANTINED: whose share it counts against */
    uint64_t ext_off, length; /* the current grant */
};

/* A whole slot cut into n_sub small slots of cls_bytes each (one class). */
struct split {
    uint32_t big;              /* the whole slot it was cut from */
    uint32_t cls;              /* class index: cls_bytes = align << cls */
    uint64_t cls_bytes;
    uint32_t n_sub, n_free;
    uint32_t *free_stack;      /* owned: free small slot indices */
    struct slot *subs;         /* owned, n_sub */
    struct split *prev, *next; /* its class's list of splits with a free small slot */
};

struct arena {
    struct arena_params p;
    uint64_t slot_bytes;
    uint32_t n_slots;
    struct slot *slots;        /* owned, n_slots */
    uint32_t *ring;            /* owned: FIFO of free slot ids, n_slots */
    uint32_t ring_head, n_free;
    uint32_t n_quarantined;
    struct arena_resv *q_head, *q_tail;
    uint32_t n_waiting;
    struct arena_grant *gbuf;  /* owned, max_credits: grants of one callback */
    bool pumping;
    struct arena_shares *shares; /* owned: bytes held per owner */
    uint64_t share_cap;          /* bytes one owner may hold */
    struct split **splits;     /* owned, n_slots (size classes only): set while SLOT_SPLIT */
    struct split *partial_head[MAX_CLASSES], *partial_tail[MAX_CLASSES];
    uint32_t n_classes, n_split, n_in_use;
    uint64_t q_bytes, small_grants_total;
    uint64_t grants_total, timeouts_total, stale_total, bound_total, reclaimed_total, refused_total;
};

#endif
