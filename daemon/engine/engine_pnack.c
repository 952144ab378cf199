/* engine_pnack.c: failed readers' NACKs that wait (see engine_pnack.h, docs/DESIGN.md §7).
 *
 * A reader that fails while its context instance's table is being fetched (cancelled, its
 * worker dead, timed out, the home not knowing the instance yet or unreachable) has planned
 * nothing, so the writers it would have read are not known. It leaves a TABLE entry with what
 * planning needs (its layout as JSON, its ids, DP rank and tokens); when the table of
 * (instance, home) comes, the entry is planned as the reader would have been and each writer's
 * daemon is told (this daemon's SENDs directly). While it waits the table is asked for again
 * after a failed fetch, PNACK_RETRY_MS later, the wait doubling per ask up to 4 s. Its writers
 * are the ones its shape reads (plan_writers_of_shape: a request whose ids or tokens its plan
 * would refuse had them too); an incompatible verdict tells every daemon of the table; an
 * attention-DP reader without a valid DP rank, nobody (its writers stay unknown).
 *
 * A READER_NACK for a daemon that is not connected leaves a PEER entry by address, sent when a
 * peer of that address comes up, and connected again while it waits (the same backoff). A
 * peer that was up and is lost is not queued for: its daemon counts the readers of its own
 * flows as lost (nack_flow_lost), so a late NACK would count one twice.
 *
 * Bounds: PNACK_MAX entries per daemon and an age of deadlines.send_wait + deadlines.transfer;
 * past either the NACK is dropped (peers.reader_nacks_unsent) and its SEND ends at its deadline.
 *
 * An entry is tied to the incarnation of the daemon it waits for (the home, or the writer's
 * daemon): the daemon id last heard at that address when the reader failed (e->pn_seen). If
 * the table or the connection comes from another id, that daemon restarted since: every SEND
 * the reader could have read ended with it, and a SEND there now is a newer incarnation's that
 * may reuse the id (a context instance restarted in another shape), so the NACK is dropped
 * (peers.reader_nacks_stale), never told to it (chaos seed 52021). An address never heard
 * before ties to nothing (the home's first answer may well be the reader's epoch).
 * Loop thread only. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon.h"
#include "engine_gen.h"
#include "engine_nack.h"
#include "engine_peer.h"
#include "engine_pnack.h"
#include "engine_tab.h"
#include "plan_request.h"
#include "registry.h"
#include "xfer.h"

enum pn_kind { PN_TABLE, PN_PEER };

struct pnack {
    struct pnack *next;
    enum pn_kind kind;
    uint64_t born_ms, retry_ms; /* retry_ms: ask again then (0: a fetch or connection is on) */
    uint32_t tries;             /* asks so far: the wait between them doubles (backoff) */
    char where[WIRE_ADDR_MAX];  /* TABLE: the instance's home; PEER: the writer's daemon */
    char where_id[sizeof(((struct pnack_seen *)0)->id)]; /* where's daemon id when it failed */
    struct wire_reader_nack n;  /* TABLE: writer unused */
    /* TABLE: the failed reader's plan input */
    char *gen_json;
    struct proto_items items;
    int32_t ctx_dp_rank;
    uint64_t tokens;
};

/* When pn asks again: PNACK_RETRY_MS, doubled per ask up to 16 times that. */
static uint64_t backoff(struct pnack *pn, uint64_t now)
{
    uint32_t k = pn->tries < 4 ? pn->tries : 4;
    pn->tries++;
    return now + ((uint64_t)PNACK_RETRY_MS << k);
}

static void pn_free(struct pnack *pn)
{
    free(pn->gen_json);
    free(pn->items.ids);
    free(pn);
}

/* The daemon id last heard at addr ("" if none). */
static const char *seen_id(const struct engine *e, const char *addr)
{
    for (uint32_t i = 0; i < PNACK_SEEN_MAX; i++)
        if (e->pn_seen[i].addr[0] && strcmp(e->pn_seen[i].addr, addr) == 0)
            return e->pn_seen[i].id;
    return "";
}

/* Notes that addr answered as id; the oldest address makes room. */
static void seen_note(struct engine *e, const char *addr, const char *id)
{
    struct pnack_seen *s = &e->pn_seen[0];
    for (uint32_t i = 0; i < PNACK_SEEN_MAX; i++) {
        struct pnack_seen *x = &e->pn_seen[i];
        if (x->addr[0] && strcmp(x->addr, addr) == 0) {
            s = x;
            break;
        }
        if (x->at_ms < s->at_ms)
            s = x;
    }
    snprintf(s->addr, sizeof s->addr, "%s", addr);
    snprintf(s->id, sizeof s->id, "%s", id);
    s->at_ms = engine_now(e) + 1; /* 0: a free entry */
}

/* Whether pn waited for a daemon that restarted since its reader failed (now answering as id):
 * then it is dropped, counted and logged. */
static bool stale(struct engine *e, const struct pnack *pn, const char *id)
{
    if (!pn->where_id[0] || !id[0] || strcmp(pn->where_id, id) == 0)
        return false;
    e->c.reader_nacks_stale++;
    log_req(LOG_LVL_INFO, pn->n.req_id, pn->where, pn->n.ctx_instance,
            "engine: request %llu of %s: a failed reader's NACK (%s) waited for %s, which "
            "restarted since (%s, then %s): dropped, not told to the new incarnation's SEND",
            (unsigned long long)pn->n.req_id, pn->n.ctx_instance, kvf_error_to_string(pn->n.code),
            pn->where, pn->where_id, id);
    return true;
}

static struct pnack *pn_new(struct engine *e, enum pn_kind kind, const char *where,
                            const struct wire_reader_nack *n)
{
    if (e->n_pnacks >= PNACK_MAX) {
        e->c.reader_nacks_unsent++;
        log_req(LOG_LVL_WARN, n->req_id, where, n->ctx_instance,
                "engine: request %llu of %s: %u reader NACKs wait already (at most %u): this "
                "one is not told, its SEND ends at its deadline", (unsigned long long)n->req_id,
                n->ctx_instance, e->n_pnacks, PNACK_MAX);
        return NULL;
    }
    struct pnack *pn = calloc(1, sizeof *pn);
    if (!pn) {
        e->c.reader_nacks_unsent++;
        return NULL;
    }
    pn->kind = kind;
    pn->born_ms = engine_now(e);
    snprintf(pn->where, sizeof pn->where, "%s", where);
    snprintf(pn->where_id, sizeof pn->where_id, "%s", seen_id(e, where));
    pn->n = *n;
    pn->next = e->pnacks;
    e->pnacks = pn;
    e->n_pnacks++;
    e->c.reader_nacks_queued++;
    engine_due(e, EPART_PNACK, ENGINE_DUE_NEXT);
    return pn;
}

static void unlink_free(struct engine *e, struct pnack *pn)
{
    for (struct pnack **pp = &e->pnacks; *pp; pp = &(*pp)->next)
        if (*pp == pn) {
            *pp = pn->next;
            e->n_pnacks--;
            break;
        }
    pn_free(pn);
}

static struct epeer *up_peer(struct engine *e, const char *addr)
{
    for (struct epeer *p = e->peers; p; p = p->next)
        if (p->up && p->lp && p->outbound && strcmp(p->addr, addr) == 0)
            return p;
    return NULL;
}

static bool send_now(struct epeer *p, const struct wire_reader_nack *n)
{
    struct wire_msg m = {.type = WIRE_READER_NACK};
    m.u.reader_nack = *n;
    if (engine_send_msg(p, 0, &m) < 0)
        return false;
    p->e->c.reader_nacks_sent++;
    return true;
}

void pnack_send(struct engine *e, struct epeer *p, const char *addr,
                const struct wire_reader_nack *n)
{
    if (!p)
        p = up_peer(e, addr);
    if (p && p->up) {
        send_now(p, n);
        return;
    }
    if (!p && !addr[0])
        return;
    const char *to = p ? p->addr : addr;
    struct pnack *pn = to[0] ? pn_new(e, PN_PEER, to, n) : NULL; /* inbound: not called back */
    if (!pn)
        return;
    pn->retry_ms = backoff(pn, engine_now(e)); /* connected again then, if still down */
    struct epeer *c;
    if (!p)
        epeer_get(e, to, &c); /* connect, so the NACK can go: pnack_peer_up sends it */
}

void pnack_unplanned(struct rx *rx, kvf_error_t code, const char *why)
{
    struct engine *e = rx->e;
    const struct xfer *x = rx->x;
    if (!x || !e->link || e->stopping)
        return;
    struct wire_reader_nack n = {.req_id = rx->req_id, .code = code};
    snprintf(n.ctx_instance, sizeof n.ctx_instance, "%s", rx->ctx_instance);
    snprintf(n.message, sizeof n.message, "%s", why);
    json_t *o = layout_to_jobj(&x->rank->layout);
    char *json = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    uint32_t n_ids = 0;
    for (uint32_t g = 0; g < x->items.n_groups; g++)
        n_ids += x->items.counts[g];
    uint32_t *ids = malloc((n_ids ? n_ids : 1) * sizeof *ids);
    struct pnack *pn = json && ids ? pn_new(e, PN_TABLE, rx->home, &n) : NULL;
    if (!pn) {
        free(json);
        free(ids);
        return;
    }
    if (n_ids)
        memcpy(ids, x->items.ids, n_ids * sizeof *ids);
    pn->gen_json = json;
    pn->items = x->items;
    pn->items.ids = ids;
    pn->ctx_dp_rank = x->ctx_dp_rank;
    pn->tokens = x->tokens;
    /* the fetch the reader waited for goes on; none left (it failed): ask again soon */
    bool fetching = false;
    for (const struct itable *t = e->tables; t && !fetching; t = t->next)
        fetching = t->state == TAB_FETCHING && !strcmp(t->instance, n.ctx_instance) &&
                   !strcmp(t->home, rx->home);
    pn->retry_ms = fetching ? 0 : backoff(pn, engine_now(e));
}

/* TABLE entry pn with its table t: the writers its reader would have read, each told. */
static void resolve(struct engine *e, struct pnack *pn, const struct itable *t)
{
    struct layout *gen = malloc(sizeof *gen);
    char err[256] = "out of memory";
    if (!gen || layout_from_json(pn->gen_json, strlen(pn->gen_json), gen, err, sizeof err) < 0) {
        log_warn("engine: request %llu of %s: the failed reader's layout: %s: not told",
                 (unsigned long long)pn->n.req_id, pn->n.ctx_instance, err);
        e->c.reader_nacks_unsent++;
        free(gen);
        return;
    }
    struct plan_input pin = {.gen = gen,
                             .ctx = t->ranks,
                             .n_ctx = t->n,
                             .ctx_ids = NULL,
                             .ctx_dp_rank = pn->ctx_dp_rank,
                             .tokens = pn->tokens};
    plan_ids_of(pn->items.n_groups, pn->items.counts, pn->items.ids, &pin.gen_ids);
    /* who it would have read: the writers its shape reads, whatever its ids (a request its plan
     * refuses, for those or its tokens, still had them) */
    uint8_t *writers = calloc(t->n ? t->n : 1, 1);
    struct plan_error pe = {.code = KVF_E_INTERNAL, .message = "out of memory"};
    int rc = writers ? plan_writers_of_shape(&pin, writers, &pe) : -ENOMEM;
    free(gen);
    struct wire_reader_nack n = pn->n;
    n.epoch = t->epoch; /* the epoch it is told against: the home's now */
    if (rc < 0 && pe.code != KVF_E_PEER_INCOMPATIBLE) { /* its writers stay unknown */
        e->c.reader_nacks_unsent++;
        log_req(LOG_LVL_INFO, n.req_id, t->home, n.ctx_instance,
                "engine: request %llu of %s: a reader that failed before the table came (%s) "
                "cannot be told: its writers: %s", (unsigned long long)n.req_id, n.ctx_instance,
                kvf_error_to_string(n.code), pe.message);
        free(writers);
        return;
    }
    uint32_t told = rc == 0 ? nack_tell_writers(e, t, &n, writers) : nack_tell_all(e, t, &n);
    free(writers);
    log_req(LOG_LVL_INFO, n.req_id, t->home, n.ctx_instance,
            "engine: request %llu of %s: a reader that failed before the table came (%s): %u "
            "%s told%s", (unsigned long long)n.req_id, n.ctx_instance, kvf_error_to_string(n.code),
            told, rc == 0 ? "writer(s)" : "writer daemon(s)",
            rc == 0 ? "" : " (an incompatible plan)");
}

void pnack_table_ready(struct engine *e, const struct itable *t, int err)
{
    uint64_t now = engine_now(e);
    for (struct pnack *pn = e->pnacks, *nx; pn; pn = nx) {
        nx = pn->next;
        if (pn->kind != PN_TABLE || strcmp(pn->n.ctx_instance, t->instance) != 0 ||
            strcmp(pn->where, t->home) != 0)
            continue;
        if (err) {
            pn->retry_ms = backoff(pn, now); /* the home may know it later */
            continue;
        }
        if (!stale(e, pn, t->from_id))
            resolve(e, pn, t); /* may add PEER entries: at the head, not met by this walk */
        unlink_free(e, pn);
    }
}

void pnack_peer_up(struct engine *e, struct epeer *p)
{
    if (!p->outbound || !p->addr[0] || !p->lp)
        return;
    const char *id = link_peer_id(p->lp);
    seen_note(e, p->addr, id);
    for (struct pnack *pn = e->pnacks, *nx; pn; pn = nx) {
        nx = pn->next;
        if (pn->kind != PN_PEER || strcmp(pn->where, p->addr) != 0 || !p->up)
            continue;
        if (stale(e, pn, id) || send_now(p, &pn->n))
            unlink_free(e, pn);
    }
}

uint64_t pnack_tick(struct engine *e, uint64_t now)
{
    uint64_t age = e->d->cfg.deadlines_send_wait_ms + e->d->cfg.deadlines_transfer_ms;
    for (struct pnack *pn = e->pnacks, *nx; pn; pn = nx) {
        nx = pn->next;
        /* born_ms may be after now: the tick's now is taken before tab_tick, whose lookup
         * deadlines fail readers that make entries with a fresh clock (now - born_ms wrapped
         * and dropped such an entry at once: check_nack_early, once in a loaded run) */
        if (now >= pn->born_ms + age) {
            e->c.reader_nacks_unsent++;
            log_req(LOG_LVL_INFO, pn->n.req_id, pn->where, pn->n.ctx_instance,
                    "engine: request %llu of %s: a failed reader's NACK waited %llu ms for %s "
                    "%s: dropped", (unsigned long long)pn->n.req_id, pn->n.ctx_instance,
                    (unsigned long long)age, pn->kind == PN_TABLE ? "the table from" : "daemon",
                    pn->where);
            unlink_free(e, pn);
        }
    }
    /* then ask again: what this starts may end (and free entries) at once, so one at a time */
    for (bool again = true; again;) {
        again = false;
        for (struct pnack *pn = e->pnacks; pn; pn = pn->next) {
            if (!pn->retry_ms || now < pn->retry_ms)
                continue;
            pn->retry_ms = backoff(pn, now);
            if (pn->kind == PN_TABLE) {
                int err;
                pn->retry_ms = 0; /* the fetch's end says when to ask again */
                char inst[LAYOUT_NAME_MAX], home[WIRE_ADDR_MAX];
                snprintf(inst, sizeof inst, "%s", pn->n.ctx_instance);
                snprintf(home, sizeof home, "%s", pn->where);
                struct itable *t = tab_get(e, inst, home, &err);
                if (err < 0)
                    pn->retry_ms = backoff(pn, now);
                else if (t)
                    pnack_table_ready(e, t, 0);
            } else {
                struct epeer *p;
                if (epeer_get(e, pn->where, &p) == 0 && p->up)
                    pnack_peer_up(e, p);
            }
            again = true;
            break;
        }
    }
    return e->pnacks ? ENGINE_DUE_NEXT : 0;
}

void pnack_free_all(struct engine *e)
{
    while (e->pnacks) {
        struct pnack *pn = e->pnacks;
        e->pnacks = pn->next;
        pn_free(pn);
    }
    e->n_pnacks = 0;
}
