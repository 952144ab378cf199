/* transfers_life.c: the request table's start and stop, and the ops it gives the engine
 * (transfers_engine_ops: its own functions, engine.h). */
#include <string.h>

#include "daemon.h"
#include "engine.h"
#include "transfers.h"

const struct engine_req_ops transfers_engine_ops = {
    .find_send = transfers_find_send,
    .served = transfers_served,
    .copying = transfers_copying,
    .end = transfers_end,
    .writes_ended = transfers_writes_ended,
    .reap = transfers_reap,
    .reader_failed = transfers_reader_failed,
    .reread = transfers_reread,
    .need = xfer_need,
    .held_end = xfer_held_end,
};

int transfers_init(struct transfers *t, struct daemon *d, struct registry *reg,
                   const struct transfers_ops *ops, void *ops_ctx)
{
    memset(t, 0, sizeof *t);
    t->d = d;
    t->reg = reg;
    t->ops = ops;
    t->ops_ctx = ops_ctx;
    reqtab_init(&t->reqs);
    hmap_init(&t->by_conn);
    dheap_init(&t->due);
    int rc = plan_tcache_init(&t->tcache, XFER_TCACHE_ENTRIES, XFER_TCACHE_BYTES);
    if (rc || (rc = uv_timer_init(&d->loop, &t->tick)))
        return rc;
    t->tick.data = t;
    return 0;
}

void transfers_stop(struct transfers *t)
{
    transfers_fail_all(t, KVF_E_CANCELLED, "the daemon is stopping"); /* and frees them */
    reqtab_free(&t->reqs);
    hmap_free(&t->by_conn);
    dheap_free(&t->due);
    xfer_phases_free(&t->phases);
    xfer_wcache_done(&t->wcache);
    plan_tcache_done(&t->tcache);
    if (!uv_is_closing((uv_handle_t *)&t->tick))
        uv_close((uv_handle_t *)&t->tick, NULL);
}
