/* xfer_nack.c: the failed-reader tally of SENDs (see xfer_nack.h): a hash by (instance,
 * request id), so a storm of failing RECVs costs one bucket each. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xfer_nack.h"

static uint32_t bucket(const char *inst, uint64_t req_id)
{
    uint64_t h = 1469598103934665603ull ^ req_id; /* FNV-1a over the id, then the name */
    for (const unsigned char *p = (const unsigned char *)inst; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return (uint32_t)(h ^ h >> 32) % XFER_NACK_BUCKETS;
}

static void expire_bucket(struct xfer_nacks *t, struct xfer_nack **pp, uint64_t now)
{
    while (*pp) {
        struct xfer_nack *y = *pp;
        if (now >= y->expires_ms) {
            *pp = y->next;
            free(y);
            t->n--;
        } else {
            pp = &y->next;
        }
    }
}

int xfer_nacks_add(struct xfer_nacks *t, const char *inst, uint64_t req_id, uint32_t writer,
                   uint32_t readers, kvf_error_t code, const char *msg, uint64_t now,
                   uint64_t ttl_ms)
{
    struct xfer_nack **head = &t->b[bucket(inst, req_id)];
    expire_bucket(t, head, now);
    struct xfer_nack *y = *head;
    while (y && !(y->req_id == req_id && y->writer == writer && strcmp(y->ctx_instance, inst) == 0))
        y = y->next;
    if (!y) {
        if (t->n >= XFER_NACKS_MAX) {
            t->dropped++;
            return -ENOSPC;
        }
        if (!(y = calloc(1, sizeof *y)))
            return -ENOMEM;
        snprintf(y->ctx_instance, sizeof y->ctx_instance, "%s", inst);
        y->req_id = req_id;
        y->writer = writer;
        y->code = code;
        snprintf(y->msg, sizeof y->msg, "%s", msg);
        y->next = *head;
        *head = y;
        t->n++;
    } else if (code == KVF_E_PEER_INCOMPATIBLE && y->code != code) {
        y->code = code; /* the verdict explains the end best */
        snprintf(y->msg, sizeof y->msg, "%s", msg);
    }
    y->n++;
    if (readers > y->readers)
        y->readers = readers;
    y->expires_ms = now + ttl_ms;
    return 0;
}

struct xfer_nack_sum xfer_nacks_of(const struct xfer_nacks *t, const char *inst, uint64_t req_id,
                                   uint32_t writer, uint64_t now)
{
    struct xfer_nack_sum s = {0};
    for (const struct xfer_nack *y = t->b[bucket(inst, req_id)]; y; y = y->next) {
        if (now >= y->expires_ms || y->req_id != req_id ||
            (y->writer != writer && y->writer != XFER_NACK_ALL) ||
            strcmp(y->ctx_instance, inst) != 0)
            continue;
        if (!s.n || (y->code == KVF_E_PEER_INCOMPATIBLE && !s.incompatible)) {
            s.code = y->code;
            s.msg = y->msg;
        }
        s.n += y->n;
        s.incompatible |= y->code == KVF_E_PEER_INCOMPATIBLE;
        if (y->readers > s.readers)
            s.readers = y->readers;
    }
    return s;
}

void xfer_nacks_expire(struct xfer_nacks *t, uint64_t now)
{
    for (uint32_t i = 0; i < XFER_NACK_BUCKETS && t->n; i++)
        expire_bucket(t, &t->b[i], now);
}
