/* engine_gone.c: a remote context worker killed mid-request gives its readers PEER_LOST (README,
 * "Failures and typed errors"). When a context rank's connection closes, transfers.c fails its
 * SENDs (their flows NACK PEER_LOST); the flows still waiting for a SEND of it fail here, and
 * the departure is remembered so a reader whose RECV_REQ comes later (its table cached from
 * before) hears that the rank died rather than that it was never known. Loop thread only. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine_drive.h"
#include "xclient.h"
#include "daemon.h"
#include "engine_ctx.h"
#include "engine_gone.h"
#include "registry.h"

/* The flows waiting for a SEND of rank `writer` of `instance` fail PEER_LOST (once per
 * departure: a walk over the flows is fine here). */
static void writer_gone(struct engine *e, const char *instance, uint32_t writer, const char *msg)
{
    for (struct tx *tx = e->txs; tx; tx = tx->next)
        if (!tx_ended(tx) && !tx->send && tx->rr.u.recv_req.writer == writer &&
            strcmp(tx->rr.u.recv_req.ctx_instance, instance) == 0)
            drive_tx_fail(tx, KVF_E_PEER_LOST, true, "%s", msg);
}

void gone_rank_removed(struct engine *e, const struct reg_rank *rk)
{
    if (rk->layout.role != ROLE_CONTEXT)
        return;
    if (!e->gone && !(e->gone = calloc(1, sizeof *e->gone)))
        return; /* readers then hear UNKNOWN_INSTANCE */
    struct gone_rank *g = &e->gone->r[e->gone->next];
    e->gone->next = (e->gone->next + 1) % GONE_MAX;
    if (e->gone->n < GONE_MAX)
        e->gone->n++;
    snprintf(g->instance, sizeof g->instance, "%s", rk->layout.instance);
    g->rank = layout_rank(&rk->layout);
    g->pid = rk->conn ? rk->conn->pid : 0;
    g->at_ms = engine_now(e);
    char msg[WIRE_TEXT_MAX];
    snprintf(msg, sizeof msg, "context instance %s rank %u (pid %u) went away before the request "
             "was served", g->instance, g->rank, g->pid);
    writer_gone(e, g->instance, g->rank, msg);
}

bool gone_lookup(struct engine *e, const char *instance, uint32_t rank, char *msg, size_t len)
{
    const struct kvf_config *cfg = &e->d->cfg;
    uint64_t now = engine_now(e), window = (uint64_t)(cfg->deadlines_send_wait_ms +
                                                      cfg->deadlines_transfer_ms);
    for (uint32_t i = 0; e->gone && i < e->gone->n; i++) {
        /* newest first: the latest departure of a rank that came and went more than once */
        const struct gone_rank *g = &e->gone->r[(e->gone->next + GONE_MAX - 1 - i) % GONE_MAX];
        if (g->rank == rank && now - g->at_ms <= window && strcmp(g->instance, instance) == 0) {
            snprintf(msg, len, "context instance %s rank %u (pid %u) went away %llu ms ago",
                     instance, rank, g->pid, (unsigned long long)(now - g->at_ms));
            return true;
        }
    }
    return false;
}

kvf_error_t gone_or_unknown(struct engine *e, const char *instance, uint32_t rank, char *msg,
                            size_t len)
{
    if (gone_lookup(e, instance, rank, msg, len))
        return KVF_E_PEER_LOST; /* its worker died: not an instance never known */
    snprintf(msg, len, "rank %u of context instance %s is not registered at %s", rank, instance,
             e->self_addr[0] ? e->self_addr : link_self_id(e->link));
    return KVF_E_UNKNOWN_INSTANCE;
}

void gone_free(struct engine *e)
{
    free(e->gone);
    e->gone = NULL;
}
