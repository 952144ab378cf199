/* xfer_held.c: a RECV that ended while a peer daemon may still write into its pools (kvferry.h
 * KVF_EVF_HELD). Its failure used to wait for those writes to end, and a lost peer's writes end
 * only when it fences them on a new link or its process exits (engine_quar.c): a partition held
 * the worker's RECV past every deadline. A worker that speaks conversation 2 (proto.h
 * PROTO_CONV_HELD) now hears of the failure at once, flagged HELD, and RELEASED once no write
 * can land (the request, ended, waits on t->draining for its engine part to go idle:
 * transfers_reap). Writes of this daemon's own (scatters, GPU kernels, local copies) end within
 * moments: their failure is still held until they did, and so is every failure told to an older
 * worker. Loop thread only. */
#include "engine.h"
#include "log.h"
#include "transfers.h"
#include "xclient.h"

bool xfer_held_report(const struct xfer *x)
{
    return x->conn && !x->conn->closing && x->conn->conv >= PROTO_CONV_HELD && x->rx &&
           engine_recv_held_remote(x->rx);
}

bool xfer_held_end(struct transfers *t, struct xfer *x)
{
    if (!xfer_held_report(x))
        return false;
    x->release_owed = true; /* finish() sends FAILED|HELD and lets the engine part go */
    transfers_end(t, x, x->held.code != KVF_OK ? x->held.code : KVF_E_INTERNAL, 0, x->held.msg);
    return true;
}

void xfer_held_released(struct transfers *t, struct xfer *x)
{
    if (!x->release_owed)
        return;
    x->release_owed = false;
    t->counters.released++;
    bool told = t->ops->released(t->ops_ctx, x->conn_id, x->req_id); /* x->conn may be gone */
    log_req(LOG_LVL_DEBUG, x->req_id, NULL, NULL,
            "xfer %llu (req %llu): its pools are released: no write of a peer can land%s",
            (unsigned long long)x->id, (unsigned long long)x->req_id,
            told ? "" : " (its worker left)");
}
