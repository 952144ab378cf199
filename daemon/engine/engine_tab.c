/* engine_tab.c: instance tables between daemons (see engine.h). The home daemon answers
 * TABLE_REQ from its registry's complete table of a context instance (every rank's layout and
 * the address of the daemon hosting it: its own listen address); the generation side caches the
 * answer per (instance, home) with its epoch, refetches after ENGINE_TABLE_TTL_MS or when a
 * context daemon NACKs a stale epoch, and keeps the incompatible verdicts of its generation ranks
 * per (instance, epoch). Fetches have the deadline deadlines.lookup. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_drive.h"
#include "daemon.h"
#include "engine_ctx.h"
#include "engine_gen.h"
#include "engine_peer.h"
#include "engine_pnack.h"
#include "engine_tab.h"

#define TAB_RETRY_MS 50 /* between asks for an instance not yet complete at its home */
#include "registry.h"

void tab_ready(struct engine *e, struct itable *t, int err, const char *msg)
{
    e->drive->rx_table_ready(e, t, err, msg);
    e->drive->tx_table_ready(e, t, err, msg);
    pnack_table_ready(e, t, err); /* readers that failed waiting for it: their writers told */
}

struct itable *tab_free_one(struct itable *t)
{
    if (t) {
        free(t->ranks);
        free(t->addrs);
        free(t);
    }
    return NULL;
}

static void table_nack(struct epeer *p, uint64_t flow, const char *instance, kvf_error_t code,
                       const char *msg)
{
    struct wire_msg m = {.type = WIRE_TABLE_NACK};
    snprintf(m.u.table_nack.instance, sizeof m.u.table_nack.instance, "%s", instance);
    m.u.table_nack.code = code;
    snprintf(m.u.table_nack.message, sizeof m.u.table_nack.message, "%s", msg);
    p->e->c.table_nacks++;
    engine_send_msg(p, flow, &m);
}

void tab_on_table_req(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m)
{
    if (m->type != WIRE_TABLE_REQ) {
        log_warn("engine: peer %s: %s is not supported by this daemon (ranks register with the "
                 "daemon of their instance's home): dropped",
                 link_peer_id(p->lp), wire_type_to_string(m->type));
        return;
    }
    const char *inst = m->u.table_req.instance;
    char msg[WIRE_TEXT_MAX];
    struct itable *h = NULL;
    if (!e->self_addr[0]) {
        table_nack(p, flow, inst, KVF_E_NO_ROUTE,
                   "the home daemon has no listener (listen.port 0)");
        return;
    }
    if (home_table(e, inst, &h, msg, sizeof msg) < 0) {
        table_nack(p, flow, inst, KVF_E_UNKNOWN_INSTANCE, msg);
        return;
    }
    uint32_t n = h->n;
    struct wire_rank *ranks = calloc(n, sizeof *ranks);
    char **texts = calloc(n, sizeof *texts);
    int rc = ranks && texts ? 0 : -ENOMEM;
    for (uint32_t i = 0; rc == 0 && i < n; i++) {
        json_t *o = layout_to_jobj(&h->ranks[i]);
        texts[i] = o ? json_dumps(o, JSON_COMPACT) : NULL;
        json_decref(o);
        if (!texts[i]) {
            rc = -ENOMEM;
            break;
        }
        snprintf(ranks[i].addr, sizeof ranks[i].addr, "%s", h->addrs[i]);
        ranks[i].json = texts[i];
        ranks[i].json_len = (uint32_t)strlen(texts[i]);
    }
    if (rc == 0) {
        struct wire_msg t = {.type = WIRE_TABLE};
        snprintf(t.u.table.instance, sizeof t.u.table.instance, "%s", inst);
        t.u.table.epoch = h->epoch;
        t.u.table.n_ranks = n;
        t.u.table.ranks = ranks;
        rc = engine_send_msg(p, flow, &t);
        if (rc == 0)
            e->c.tables_served++;
    }
    if (rc < 0)
        table_nack(p, flow, inst, KVF_E_INTERNAL, "could not send the table");
    for (uint32_t i = 0; texts && i < n; i++)
        free(texts[i]);
    free(texts);
    free(ranks);
}

static struct itable *find(struct engine *e, const char *instance, const char *home)
{
    for (struct itable *t = e->tables; t; t = t->next)
        if (strcmp(t->instance, instance) == 0 && strcmp(t->home, home) == 0)
            return t;
    return NULL;
}

static void clear_ranks(struct itable *t)
{
    free(t->ranks);
    free(t->addrs);
    t->ranks = NULL;
    t->addrs = NULL;
    t->n = 0;
}

void tab_drop(struct engine *e, struct itable *t)
{
    for (struct itable **pp = &e->tables; *pp; pp = &(*pp)->next)
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    if (t->peer)
        t->peer->users--;
    clear_ranks(t);
    free(t);
}

static void send_req(struct engine *e, struct itable *t)
{
    struct wire_msg m = {.type = WIRE_TABLE_REQ};
    snprintf(m.u.table_req.instance, sizeof m.u.table_req.instance, "%s", t->instance);
    if (engine_send_msg(t->peer, 0, &m) < 0) {
        char msg[WIRE_TEXT_MAX];
        snprintf(msg, sizeof msg, "could not ask home %s for the table of %s", t->home,
                 t->instance);
        tab_ready(e, t, KVF_E_PEER_UNREACHABLE, msg);
        tab_drop(e, t);
    }
}

struct itable *tab_get(struct engine *e, const char *instance, const char *home, int *err)
{
    uint64_t now = engine_now(e);
    struct itable *t = find(e, instance, home);
    *err = 0;
    if (t && t->state == TAB_READY && now - t->fetched_ms < ENGINE_TABLE_TTL_MS)
        return t;
    if (t && t->state == TAB_FETCHING)
        return NULL;
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t) {
            *err = -ENOMEM;
            return NULL;
        }
        snprintf(t->instance, sizeof t->instance, "%s", instance);
        snprintf(t->home, sizeof t->home, "%s", home);
        t->next = e->tables;
        e->tables = t;
    }
    struct epeer *p;
    int rc = epeer_get(e, home, &p);
    if (rc < 0) {
        *err = rc;
        tab_drop(e, t);
        return NULL;
    }
    t->state = TAB_FETCHING;
    t->retry_ms = 0;
    t->nack_code = 0;
    t->peer = p;
    p->users++;
    t->deadline_ms = now + e->d->cfg.deadlines_lookup_ms;
    engine_due(e, EPART_TAB, ENGINE_DUE_NEXT);
    if (p->up)
        send_req(e, t);
    return NULL;
}

int tab_refetch(struct engine *e, struct itable *t, int *err)
{
    *err = 0;
    if (t->state != TAB_READY)
        return 0; /* a fetch is on: its answer is the fresh one */
    t->fetched_ms = 0; /* expired: tab_get asks the home again */
    char instance[LAYOUT_NAME_MAX], home[WIRE_ADDR_MAX];
    snprintf(instance, sizeof instance, "%s", t->instance); /* tab_get may drop t */
    snprintf(home, sizeof home, "%s", t->home);
    tab_get(e, instance, home, err);
    return *err;
}

void tab_peer_up(struct engine *e, struct epeer *p)
{
    for (struct itable *t = e->tables, *nx; t; t = nx) {
        nx = t->next;
        if (t->state == TAB_FETCHING && t->peer == p)
            send_req(e, t);
    }
    pnack_peer_up(e, p);
}

/* Checks a received table: ranks in index order, one instance, context role, sizes agree. */
static int load(struct itable *t, const struct wire_table *w, char *msg, size_t len)
{
    t->ranks = calloc(w->n_ranks, sizeof *t->ranks);
    t->addrs = calloc(w->n_ranks, sizeof *t->addrs);
    if (!t->ranks || !t->addrs) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    for (uint32_t i = 0; i < w->n_ranks; i++) {
        char err[256];
        struct layout *l = &t->ranks[i];
        if (layout_from_json(w->ranks[i].json, w->ranks[i].json_len, l, err, sizeof err) < 0) {
            snprintf(msg, len, "rank %u's layout: %s", i, err);
            return -EINVAL;
        }
        if (strcmp(l->instance, t->instance) != 0 || l->role != ROLE_CONTEXT ||
            layout_rank(l) != i || l->tp_size * l->pp_size != w->n_ranks) {
            snprintf(msg, len,
                     "rank %u's layout is rank %u of %s %s (tp %u pp %u), not rank %u "
                     "of %u of context instance %s",
                     i, layout_rank(l), layout_role_to_string(l->role), l->instance, l->tp_size,
                     l->pp_size, i, w->n_ranks, t->instance);
            return -EINVAL;
        }
        snprintf(t->addrs[i], sizeof t->addrs[i], "%s", w->ranks[i].addr);
    }
    t->n = w->n_ranks;
    return 0;
}

void tab_on_table(struct engine *e, struct epeer *p, const struct wire_msg *m)
{
    const struct wire_table *w = &m->u.table;
    struct itable *t = NULL;
    for (struct itable *x = e->tables; x && !t; x = x->next)
        if (x->state == TAB_FETCHING && x->peer == p && strcmp(x->instance, w->instance) == 0)
            t = x;
    if (!t)
        return; /* late answer of a fetch that timed out */
    uint64_t old_epoch = t->epoch;
    clear_ranks(t);
    char msg[WIRE_TEXT_MAX];
    if (load(t, w, msg, sizeof msg) < 0) {
        char m2[WIRE_TEXT_MAX * 2];
        snprintf(m2, sizeof m2, "table of %s from %s refused: %s", t->instance, t->home, msg);
        log_warn("engine: %s", m2);
        tab_ready(e, t, KVF_E_BAD_REQUEST, m2);
        tab_drop(e, t);
        return;
    }
    if (old_epoch != w->epoch)
        t->n_bad = 0; /* verdicts are per epoch */
    t->epoch = w->epoch;
    snprintf(t->from_id, sizeof t->from_id, "%s", p->lp ? link_peer_id(p->lp) : "");
    t->state = TAB_READY;
    t->fetched_ms = engine_now(e);
    engine_due(e, EPART_TAB, t->fetched_ms + 6 * ENGINE_TABLE_TTL_MS + 1); /* dropped then */
    t->peer->users--;
    t->peer = NULL;
    e->c.tables_fetched++;
    log_debug("engine: table of %s from %s: %u ranks, epoch %llu", t->instance, t->home, t->n,
              (unsigned long long)t->epoch);
    tab_ready(e, t, 0, NULL);
}

void tab_on_table_nack(struct engine *e, struct epeer *p, const struct wire_msg *m)
{
    const struct wire_table_nack *n = &m->u.table_nack;
    for (struct itable *t = e->tables; t; t = t->next)
        if (t->state == TAB_FETCHING && t->peer == p && strcmp(t->instance, n->instance) == 0) {
            /* An instance not (yet) complete at its home: its ranks may still be registering
             * (GPU pools take seconds to set up). Ask again until deadlines.lookup, as the
             * local path waits for an unregistered context instance. */
            uint64_t now = engine_now(e);
            if (n->code == KVF_E_UNKNOWN_INSTANCE && now + TAB_RETRY_MS < t->deadline_ms) {
                t->retry_ms = now + TAB_RETRY_MS;
                t->nack_code = n->code;
                snprintf(t->nack_msg, sizeof t->nack_msg, "%s", n->message);
                e->c.table_retries++;
                engine_due(e, EPART_TAB, ENGINE_DUE_NEXT);
                return;
            }
            char msg[WIRE_TEXT_MAX * 2];
            snprintf(msg, sizeof msg, "home %s: %s", t->home, n->message);
            tab_ready(e, t, n->code, msg);
            tab_drop(e, t);
            return;
        }
}

uint64_t tab_tick(struct engine *e, uint64_t now)
{
    for (struct itable *t = e->tables, *nx; t; t = nx) {
        nx = t->next;
        if (t->state == TAB_FETCHING && t->retry_ms && now >= t->retry_ms &&
            now < t->deadline_ms) {
            t->retry_ms = 0;
            if (t->peer->up)
                send_req(e, t);
        } else if (t->state == TAB_FETCHING && now >= t->deadline_ms) {
            char msg[WIRE_TEXT_MAX * 2];
            if (t->nack_code) /* the home kept saying no: say what it said */
                snprintf(msg, sizeof msg, "home %s: %s (asked for %llu ms, deadlines.lookup)",
                         t->home, t->nack_msg, (unsigned long long)e->d->cfg.deadlines_lookup_ms);
            else
                snprintf(msg, sizeof msg,
                         "home %s did not send the table of %s within %llu ms "
                         "(deadlines.lookup)",
                         t->home, t->instance, (unsigned long long)e->d->cfg.deadlines_lookup_ms);
            tab_ready(e, t, t->nack_code ? t->nack_code : KVF_E_TIMEOUT, msg);
            tab_drop(e, t);
        } else if (t->state == TAB_READY && now > t->fetched_ms + 6 * ENGINE_TABLE_TTL_MS) {
            tab_drop(e, t);
        }
    }
    uint64_t next = 0; /* fetching: every tick; cached: when it is old enough to drop */
    for (const struct itable *t = e->tables; t; t = t->next) {
        uint64_t at = t->state == TAB_FETCHING ? ENGINE_DUE_NEXT
                                               : t->fetched_ms + 6 * ENGINE_TABLE_TTL_MS + 1;
        if (!next || at < next)
            next = at;
    }
    return next;
}

void tab_peer_down(struct engine *e, struct epeer *p)
{
    for (struct itable *t = e->tables, *nx; t; t = nx) {
        nx = t->next;
        if (t->state == TAB_FETCHING && t->peer == p) {
            char msg[WIRE_TEXT_MAX];
            snprintf(msg, sizeof msg, "home %s of %s is unreachable", t->home, t->instance);
            tab_ready(e, t, p->up ? KVF_E_PEER_LOST : KVF_E_PEER_UNREACHABLE, msg);
            tab_drop(e, t);
        }
    }
}

void tab_free_all(struct engine *e)
{
    pnack_free_all(e);
    while (e->tables) {
        struct itable *t = e->tables;
        t->peer = NULL;
        tab_drop(e, t);
    }
}
