/* path_frag.c: the fragment row of path.h: no landing slots; the RECV_REQ carries the rkeys of
 * the generation rank's pools and the writer's daemon puts its extent straight into them
 * (engine_frag.c), flushed before WRITER_DONE. From the RECV_REQ on a failure is held until no
 * put can land any more (engine_quar.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "engine_drive.h"
#include "engine_ctx.h"
#include "engine_frag.h"
#include "engine_gen.h"
#include "engine_peer.h"
#include "engine_quar.h"
#include "path.h"
#include "registry.h"
#include "xfer.h"

static void start(struct rxw *w)
{
    int rc = w->rx->e->drive->rx_send_req(w, NULL, 0);
    if (rc == 0) {
        quar_frag_moving(w); /* from now a failure is held until the puts drained */
        return;
    }
    char msg[WIRE_TEXT_MAX];
    snprintf(msg, sizeof msg, "could not send RECV_REQ to context rank %u's daemon: %s",
             w->ctx_rank, strerror(-rc));
    w->rx->e->drive->rx_fail(w->rx, KVF_E_PEER_LOST, msg);
}

static int fill_req(struct rxw *w, struct wire_recv_req *q)
{
    return frag_fill_rkeys(w->rx->e, w->rx->x, q);
}

static void writer_done(struct rxw *w, struct epeer *p)
{
    struct engine *e = w->rx->e;
    w->scattered = w->extent; /* its puts were flushed before WRITER_DONE */
    if (w->rx->x)
        w->rx->x->bytes_done += w->extent;
    p->bytes_recv += w->extent;
    e->c.bytes_landed += w->extent;
    w->rx->e->drive->rx_check_done(w->rx);
}

static bool writing(const struct rxw *w)
{
    return w->state == RXW_MOVING || w->state == RXW_DONE || w->state == RXW_NACKED;
}

static void serve(struct tx *tx)
{
    char msg[WIRE_TEXT_MAX];
    int rc = frag_start(tx, &tx->send->rank->mem, msg, sizeof msg);
    if (rc < 0)
        drive_tx_fail(tx, rc == -ERANGE ? KVF_E_BOUND_VIOLATION : KVF_E_INTERNAL, true, "%s", msg);
}

const struct path_row path_frag_row = {
    .name = "fragment",
    .kind = PATH_FRAGMENT,
    .wire = WIRE_PATH_FRAGMENT,
    .start = start,
    .fill_req = fill_req,
    .writer_done = writer_done,
    .writing = writing,
    .serve = serve,
};
