/* bounce_tl.h: the bounce path's per-chunk timeline, for profiling (issue 12): each daemon keeps
 * the last N events of its chunks (a ring), stamped with CLOCK_MONOTONIC, so that two daemons
 * of one host can be read side by side (scripts/bench-gpu-remote joins them by request and
 * extent offset: a chunk's wait for its landing credit, its CHUNK and CREDIT messages, how long
 * both kernels were idle, how many chunks were in flight).
 * Off unless arena.timeline is N > 0 (events kept, 64 .. 1048576): then `kvferryctl arena`
 * shows them as "bounce_timeline". Off, a mark is one branch.
 * Ownership: the engine owns its ring (btl_new at start, btl_free at engine_free). Loop thread
 * only. */
#ifndef KVF_BOUNCE_TL_H
#define KVF_BOUNCE_TL_H

#include <jansson.h>
#include <stdint.h>

struct btl;

typedef enum {
    BTL_GRANT_RX,      /* context side: a landing credit arrived (GRANT or RECV_REQ) */
    BTL_GATHER_LAUNCH, /* context side: the chunk's gather was launched / submitted */
    BTL_GATHER_DONE,   /* context side: the loop learned it ended */
    BTL_CHUNK_SENT,    /* context side: the CHUNK's send completed */
    BTL_CHUNK_RX,      /* generation side: the CHUNK arrived */
    BTL_SCATTER_LAUNCH,
    BTL_SCATTER_DONE,  /* the loop learned it ended */
    BTL_LANDED,        /* the slot released and the next credits asked (bland_landed) */
    BTL_KINDS
} btl_kind_t;

/* A ring of n events (clamped to 64 .. 1048576); NULL when n is 0 (off) or out of memory. */
struct btl *btl_new(uint32_t n);
struct btl *btl_free(struct btl *t);
/* One event of request req's writer rank, extent offset ext_off. t may be NULL (off). */
void btl_mark(struct btl *t, btl_kind_t kind, uint64_t req, uint32_t writer, uint64_t ext_off);
/* {"capacity", "dropped", "kinds": [names], "events": [[t_ns, kind, req, writer, ext_off]...]},
 * oldest first; NULL when off. */
json_t *btl_json(const struct btl *t);

#endif
