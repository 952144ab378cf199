/* path_bounce.c: the bounce row of path.h: the writer's chunks come through landing slots of the
 * arena (credits asked per writer, the RECV_REQ sent with the first grants: gen_on_grant), and are
 * scattered into the pools by the request's executor (bounce_exec.h, bounce_land.c); the
 * context side gathers or puts them (bounce_stage.c). */
#include "engine_drive.h"
#include "engine_ctx.h"
#include "engine_gen.h"
#include "engine_share.h"
#include "path.h"

static void start(struct rxw *w)
{
    arena_resv_init(&w->resv, w->flow, w->flow, w->extent); /* quarantine key: the flow */
    if (w->rx->marks.below && w->ctx_rank < w->rx->marks.n_ctx) /* arena.cut_at_layers */
        arena_resv_set_cuts(&w->resv, w->rx->marks.below + (size_t)w->ctx_rank *
                                          (LAYOUT_MAX_LAYERS + 1), LAYOUT_MAX_LAYERS + 1);
    arena_resv_set_owner(&w->resv, share_key(w->peer));     /* arena.peer_share */
    w->resv.data = w;
    if (!w->rx->e->drive->rxw_set_state(w, RXW_CREDIT))
        return;
    engine_kick_tick(w->rx->e);
    w->rx->e->drive->rx_ask(w);
}

const struct path_row path_bounce_row = {
    .name = "bounce",
    .kind = PATH_BOUNCE,
    .wire = WIRE_PATH_BOUNCE,
    .landing = true,
    .start = start,
    .serve = bstage_pump,
};
