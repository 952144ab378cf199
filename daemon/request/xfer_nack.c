/* xfer_nack.c: the failed-reader sets of a SEND generation (see xfer_nack.h). Every lookup is
 * within one request-table entry: no walk over the requests in flight. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "log.h"
#include "registry.h"
#include "reqtab.h"
#include "transfers.h"
#include "xfer_nack.h"

void xfer_fails_free(struct xfer_fails *f)
{
    if (f)
        free(f->w);
    free(f);
}

static bool writer_ended(const struct req *q, uint32_t writer)
{
    for (uint32_t i = 0; i < q->n_ended; i++)
        if (q->ended[i] == writer)
            return true;
    return false;
}

static bool any_send_live(const struct req *q)
{
    for (uint32_t i = 0; i < q->n_live; i++)
        if (q->live[i]->side == XFER_SEND)
            return true;
    return false;
}

uint64_t xfer_fail_gen(const struct req *q, uint32_t writer)
{
    if (!q->gen)
        return 0;
    if (writer == XFER_NACK_ALL)
        return any_send_live(q) ? q->gen : UINT64_MAX;
    return reqtab_send_of(q, writer) || !writer_ended(q, writer) ? q->gen : UINT64_MAX;
}

static uint32_t *writer_slot(struct xfer_fails *f, uint32_t writer)
{
    for (uint32_t i = 0; i < f->n_w; i++)
        if (f->w[i].writer == writer)
            return &f->w[i].n;
    if (f->n_w >= XFER_FAIL_WRITERS)
        return NULL;
    if (f->n_w == f->cap_w) {
        uint32_t c = f->cap_w ? f->cap_w * 2 : 4;
        struct xfer_fail_w *nw = realloc(f->w, c * sizeof *nw);
        if (!nw)
            return NULL;
        f->w = nw;
        f->cap_w = c;
    }
    f->w[f->n_w] = (struct xfer_fail_w){.writer = writer};
    return &f->w[f->n_w++].n;
}

/* A failure not held (transfers.fails_dropped counts it): said in the log, since the SEND it
 * was for, if any is live, now waits for its deadline. */
static int dropped(const struct req *q, uint32_t writer, const char *why, const char *msg)
{
    char w[16] = "every";
    if (writer != XFER_NACK_ALL)
        snprintf(w, sizeof w, "%u", writer);
    log_req(LOG_LVL_INFO, q->id, NULL, q->instance,
            "transfers: request %llu of %s: a failed reader of context rank %s is not counted "
            "(%s): a SEND still waiting for it ends at its deadline; %s",
            (unsigned long long)q->id, q->instance, w, why, msg);
    return 1;
}

int xfer_fails_add(struct req *q, uint64_t gen, uint32_t writer, uint32_t readers,
                   kvf_error_t code, const char *msg)
{
    if (gen != 0 && gen != q->gen) /* a generation that ended (or a dropped one, UINT64_MAX) */
        return dropped(q, writer, gen == UINT64_MAX ? "it cannot be told from a reader of the "
                       "request that ended with this id" : "its request ended", msg);
    struct xfer_fails **pf = gen ? &q->fail_cur : &q->fail_next;
    if (!*pf && !(*pf = calloc(1, sizeof **pf)))
        return -ENOMEM;
    struct xfer_fails *f = *pf;
    uint32_t *n = writer == XFER_NACK_ALL ? &f->n_all : writer_slot(f, writer);
    if (!n)
        return dropped(q, writer, "more failed writers than XFER_FAIL_WRITERS", msg);
    if (!f->code || (code == KVF_E_PEER_INCOMPATIBLE && f->code != code)) {
        f->code = code; /* the verdict explains the end best */
        snprintf(f->msg, sizeof f->msg, "%s", msg);
    }
    (*n)++;
    f->incompatible |= code == KVF_E_PEER_INCOMPATIBLE;
    if (readers > f->readers)
        f->readers = readers;
    return 0;
}

/* The failures that count against SEND s: its generation's, of every writer and of its rank. */
static const struct xfer_fails *fails_of(const struct xfer *s, uint32_t *n)
{
    const struct req *q = s->req;
    const struct xfer_fails *f = q && s->gen == q->gen ? q->fail_cur : NULL;
    *n = 0;
    if (!f)
        return NULL;
    *n = f->n_all;
    for (uint32_t i = 0; i < f->n_w; i++)
        if (f->w[i].writer == s->rank_idx)
            *n += f->w[i].n;
    return f;
}

uint32_t xfer_need(struct xfer *s)
{
    uint32_t n;
    const struct xfer_fails *f = fails_of(s, &n);
    if (!s->n_readers && !s->derived && f && f->readers)
        s->derived = f->readers; /* a failed same-daemon reader counts them as a served one would */
    return s->n_readers ? s->n_readers : s->derived;
}

/* Whether a reader still copies from SEND s's blocks: a local RECV of its entry copying, or an
 * engine flow reading it. Its end must wait for them (their end settles it again). */
static bool read_now(const struct xfer *s, const struct engine *e)
{
    const struct req *q = s->req;
    for (uint32_t i = 0; q && i < q->n_live; i++) {
        const struct xfer *r = q->live[i];
        if (r->side == XFER_RECV && r->state == XFER_COPYING && !r->peer[0])
            return true;
    }
    return engine_send_reading(e, s);
}

bool xfer_no_reader_can_come(struct xfer *s, const struct engine *e, kvf_error_t *code,
                             char *msg, size_t len)
{
    uint32_t n;
    const struct xfer_fails *f = fails_of(s, &n);
    uint32_t need = xfer_need(s);
    if (!f || !n || !(need ? s->served + n >= need : f->incompatible) || read_now(s, e))
        return false;
    char of[32] = "";
    if (need)
        snprintf(of, sizeof of, " of %u", need);
    snprintf(msg, len, "no reader can come: %u%s served, %u failed; %s", s->served, of, n, f->msg);
    *code = f->code;
    return true;
}

void xfer_fails_pending(struct req *q, int rc, bool registered, uint64_t now_ms,
                        uint64_t lookup_ms)
{
    if (rc != 0 || q->gen || !q->fail_next) /* not held, or not waiting for the next SEND */
        return;
    q->anchored |= registered;
    if (!registered && now_ms + lookup_ms > q->orphan_ms)
        q->orphan_ms = now_ms + lookup_ms;
}

int xfer_fails_orphans(struct req *q, uint64_t registered_ms)
{
    const struct xfer_fails *f = q->fail_next;
    if (!f || q->anchored || !q->orphan_ms || registered_ms <= q->orphan_ms)
        return 0;
    log_req(LOG_LVL_INFO, q->id, NULL, q->instance,
            "transfers: request %llu of %s: readers that failed while no rank of it was "
            "registered here, more than deadlines.lookup before this SEND's rank registered, "
            "are an earlier incarnation's: not counted against it (%s)",
            (unsigned long long)q->id, q->instance, f->msg);
    xfer_fails_free(q->fail_next);
    q->fail_next = NULL;
    q->orphan_ms = 0;
    return 1;
}

int xfer_fails_local(struct req *q, const struct xfer *r, kvf_error_t err, const char *msg)
{
    char m[PROTO_MSG_MAX + 1];
    snprintf(m, sizeof m, "reader %s rank %u: %s: %s", r->rank->layout.instance,
             layout_rank(&r->rank->layout), kvf_error_to_string(err), msg);
    uint64_t gen = r->gen ? r->gen : xfer_fail_gen(q, XFER_NACK_ALL);
    return xfer_fails_add(q, gen, XFER_NACK_ALL, readers_local(&r->rank->layout), err, m);
}
