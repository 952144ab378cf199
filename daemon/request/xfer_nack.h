/* xfer_nack.h: readers that failed and will not come, so a SEND ends as soon as no reader can
 * (docs/DESIGN.md §7, "the context side always learns the end"). One entry per (context
 * instance, request id, writer rank): how many readers of it failed, the first reason, and the
 * reader count a same-daemon failure implies (readers_local). writer XFER_NACK_ALL: every writer
 * of the instance (the same-daemon path, where every generation rank reads every SEND, and an
 * incompatible verdict, which refuses them all). Entries outlive the RECVs that made them (a
 * SEND may come later) until deadlines.send_wait + deadlines.transfer, like the completed-RECV
 * tallies; at most XFER_NACKS_MAX are held (past it a failure is dropped and the SEND falls back
 * to its deadline). Loop thread only. */
#ifndef KVF_XFER_NACK_H
#define KVF_XFER_NACK_H

#include <stdbool.h>
#include <stdint.h>

#include "kvferry.h"
#include "proto.h"

#define XFER_NACK_ALL UINT32_MAX
#define XFER_NACK_BUCKETS 1024u
#define XFER_NACKS_MAX 65536u

struct xfer_nack {
    char ctx_instance[64];
    uint64_t req_id;
    uint32_t writer;  /* context rank, or XFER_NACK_ALL */
    uint32_t n;       /* readers failed */
    uint32_t readers; /* the reader count the failures imply (same daemon), 0 unknown */
    kvf_error_t code; /* the first failure's; PEER_INCOMPATIBLE wins */
    char msg[PROTO_MSG_MAX + 1];
    uint64_t expires_ms;
    struct xfer_nack *next;
};

struct xfer_nacks {
    struct xfer_nack *b[XFER_NACK_BUCKETS];
    uint32_t n;
    uint64_t dropped; /* failures not held (XFER_NACKS_MAX) */
};

/* What the failed readers of one SEND say: their count (0: none), the reason, the reader
 * count they imply, and whether one was refused as incompatible. */
struct xfer_nack_sum {
    uint32_t n, readers;
    bool incompatible;
    kvf_error_t code;
    const char *msg; /* borrowed from the entry */
};

/* Records one failed reader. 0, or -ENOSPC past XFER_NACKS_MAX, -ENOMEM. */
int xfer_nacks_add(struct xfer_nacks *t, const char *inst, uint64_t req_id, uint32_t writer,
                   uint32_t readers, kvf_error_t code, const char *msg, uint64_t now,
                   uint64_t ttl_ms);
/* The failed readers of the SEND of context rank `writer` of (inst, req_id). */
struct xfer_nack_sum xfer_nacks_of(const struct xfer_nacks *t, const char *inst, uint64_t req_id,
                                   uint32_t writer, uint64_t now);
/* Drops expired entries (all with now UINT64_MAX). */
void xfer_nacks_expire(struct xfer_nacks *t, uint64_t now);

#endif
