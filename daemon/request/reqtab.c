/* reqtab.c: the request table and its meeting rule (see reqtab.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reqtab.h"
#include "transfers.h"
#include "xfer_nack.h"

static uint64_t key_hash(const char *instance, uint64_t id) { return hmap_str(instance, id); }

void reqtab_init(struct reqtab *t)
{
    memset(t, 0, sizeof *t);
    hmap_init(&t->by_key);
}

static void idle_unlink(struct reqtab *t, struct req *q)
{
    if (q->idle_prev)
        q->idle_prev->idle_next = q->idle_next;
    else if (t->idle_head == q)
        t->idle_head = q->idle_next;
    if (q->idle_next)
        q->idle_next->idle_prev = q->idle_prev;
    else if (t->idle_tail == q)
        t->idle_tail = q->idle_prev;
    q->idle_prev = q->idle_next = NULL;
}

static void req_free(struct reqtab *t, struct req *q)
{
    idle_unlink(t, q);
    hmap_del(&t->by_key, q->h, q);
    free(q->live);
    free(q->ended);
    xfer_fails_free(q->fail_cur);
    xfer_fails_free(q->fail_next);
    free(q);
}

void reqtab_expire(struct reqtab *t, uint64_t now_ms)
{
    /* idle entries are appended as they go idle with the same keep time, so the head is the
     * oldest (a live reload of the deadlines may keep a few a little longer: harmless) */
    while (t->idle_head && (now_ms == UINT64_MAX || now_ms >= t->idle_head->idle_until_ms))
        req_free(t, t->idle_head);
}

void reqtab_free(struct reqtab *t)
{
    for (uint32_t i = 0; i < t->by_key.cap; i++) {
        struct req *q = t->by_key.slots[i].v;
        if (q) {
            free(q->live);
            free(q->ended);
            xfer_fails_free(q->fail_cur);
            xfer_fails_free(q->fail_next);
            free(q);
        }
    }
    hmap_free(&t->by_key);
    t->idle_head = t->idle_tail = NULL;
}

uint32_t reqtab_count(const struct reqtab *t) { return hmap_count(&t->by_key); }

struct req *reqtab_find(const struct reqtab *t, const char *instance, uint64_t id)
{
    uint64_t h = key_hash(instance, id);
    uint32_t pos = 0;
    for (struct req *q; (q = hmap_next(&t->by_key, h, &pos));)
        if (q->id == id && strcmp(q->instance, instance) == 0)
            return q;
    return NULL;
}

struct req *reqtab_open(struct reqtab *t, const char *instance, uint64_t id)
{
    struct req *q = reqtab_find(t, instance, id);
    if (q)
        return q;
    q = calloc(1, sizeof *q);
    if (!q)
        return NULL;
    snprintf(q->instance, sizeof q->instance, "%s", instance);
    q->id = id;
    q->h = key_hash(q->instance, id);
    if (hmap_put(&t->by_key, q->h, q) < 0) {
        free(q);
        return NULL;
    }
    return q;
}

static int grow(void **p, uint32_t *cap, uint32_t n, size_t size)
{
    if (n < *cap)
        return 0;
    uint32_t c = *cap ? *cap * 2 : 4;
    void *np = realloc(*p, (size_t)c * size);
    if (!np)
        return -ENOMEM;
    *p = np;
    *cap = c;
    return 0;
}

int reqtab_bind(struct reqtab *t, struct req *q, struct xfer *x)
{
    if (grow((void **)&q->live, &q->cap_live, q->n_live, sizeof *q->live) < 0)
        return -ENOMEM;
    idle_unlink(t, q);
    q->live[q->n_live++] = x;
    x->req = q;
    return 0;
}

static bool rank_ended(const struct req *q, uint32_t rank)
{
    for (uint32_t i = 0; i < q->n_ended; i++)
        if (q->ended[i] == rank)
            return true;
    return false;
}

void reqtab_unbind(struct reqtab *t, struct xfer *x, uint64_t now_ms, uint64_t keep_ms)
{
    struct req *q = x->req;
    if (!q)
        return;
    x->req = NULL;
    for (uint32_t i = 0; i < q->n_live; i++)
        if (q->live[i] == x) {
            q->live[i] = q->live[--q->n_live];
            break;
        }
    /* a SEND's rank is marked ended in its own generation only (a new one forgot the old) */
    if (x->side == XFER_SEND && x->gen == q->gen && !rank_ended(q, x->rank_idx) &&
        grow((void **)&q->ended, &q->cap_ended, q->n_ended, sizeof *q->ended) == 0)
        q->ended[q->n_ended++] = x->rank_idx;
    if (q->n_live == 0)
        reqtab_park(t, q, now_ms, keep_ms);
}

void reqtab_park(struct reqtab *t, struct req *q, uint64_t now_ms, uint64_t keep_ms)
{
    idle_unlink(t, q);
    q->idle_until_ms = now_ms + keep_ms;
    q->idle_prev = t->idle_tail;
    q->idle_next = NULL;
    if (t->idle_tail)
        t->idle_tail->idle_next = q;
    else
        t->idle_head = q;
    t->idle_tail = q;
}

struct xfer *reqtab_send_of(const struct req *q, uint32_t rank)
{
    for (uint32_t i = 0; q && i < q->n_live; i++)
        if (q->live[i]->side == XFER_SEND && q->live[i]->rank_idx == rank)
            return q->live[i];
    return NULL;
}

static uint32_t live_sends(const struct req *q)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < q->n_live; i++)
        n += q->live[i]->side == XFER_SEND;
    return n;
}

/* Local RECVs bound to q (remote ones meet their SENDs at another daemon). */
static uint32_t live_local_recvs(const struct req *q)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < q->n_live; i++)
        n += q->live[i]->side == XFER_RECV && !q->live[i]->peer[0];
    return n;
}

/* Forgets the ended generation (its tally, readers, ended ranks and failures); the readers
 * that failed before this SEND came are the new one's. */
static void new_generation(struct reqtab *t, struct req *q, uint64_t epoch)
{
    q->gen = ++t->next_gen;
    q->epoch = epoch;
    q->done = q->need = 0;
    q->n_ended = 0;
    xfer_fails_free(q->fail_cur);
    q->fail_cur = q->fail_next;
    q->fail_next = NULL;
    q->orphan_ms = 0;
    q->anchored = false;
}

kvf_error_t reqtab_send_meets(struct reqtab *t, struct req *q, uint32_t rank, uint64_t epoch,
                              uint32_t n_readers, char *msg, size_t len)
{
    const struct xfer *old = reqtab_send_of(q, rank);
    if (old) {
        snprintf(msg, len, "request %llu of context instance %s is already in flight from rank "
                 "%u (SEND generation %llu): a request id may be reused only after its request "
                 "ended", (unsigned long long)q->id, q->instance, rank, (unsigned long long)q->gen);
        return KVF_E_BAD_REQUEST;
    }
    /* this rank already sent this generation, or the generation is another epoch's (another
     * set of ranks): a new request */
    bool stale = q->gen && q->epoch != epoch;
    if (q->gen && (stale || rank_ended(q, rank))) {
        uint32_t n = live_sends(q);
        if (n > 0) {
            snprintf(msg, len, "request %llu of context instance %s: the previous request with "
                     "this id (SEND generation %llu, instance epoch %llu) is still in flight (%u "
                     "SEND(s) of other ranks waiting): a request id may be reused only after its "
                     "request ended", (unsigned long long)q->id, q->instance,
                     (unsigned long long)q->gen, (unsigned long long)q->epoch, n);
            return KVF_E_BAD_REQUEST;
        }
        new_generation(t, q, epoch); /* RECVs waiting now are the new request's */
    } else if (!q->gen) {
        new_generation(t, q, epoch);
    }
    if (n_readers > q->need)
        q->need = n_readers;
    return KVF_OK;
}

kvf_error_t reqtab_recv_meets(struct reqtab *t, struct req *q, char *msg, size_t len)
{
    (void)t;
    if (!q->gen)
        return KVF_OK;
    uint32_t sends = live_sends(q);
    if (!sends && q->need && q->done >= q->need) {
        q->gen = 0; /* every reader was served and no SEND is left: the next SEND opens anew */
        q->done = q->need = 0;
        q->n_ended = 0;
        xfer_fails_free(q->fail_cur);
        q->fail_cur = NULL;
        return KVF_OK;
    }
    uint32_t recvs = live_local_recvs(q);
    if (sends && q->need && q->done + recvs >= q->need) {
        snprintf(msg, len, "request %llu of context instance %s already has its %u reader(s) "
                 "(SEND generation %llu, %u served): a request id may be reused only after its "
                 "request ended", (unsigned long long)q->id, q->instance, q->need,
                 (unsigned long long)q->gen, q->done);
        return KVF_E_BAD_REQUEST;
    }
    return KVF_OK;
}

uint32_t reqtab_recv_done(struct req *q, uint32_t need)
{
    if (need > q->need)
        q->need = need;
    return ++q->done;
}
