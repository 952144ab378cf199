/* bounce_way.c: the chooses of the ways a bounce chunk may take that have no file of their own
 * (bounce_way.h): copies into the peer's landing slot, mapped here or over cma, and the
 * gathered chunk's put or active message. Decisions only: nothing here moves a byte. */
#include "bounce_way.h"

#include "bounce_exec.h"
#include "daemon.h"
#include "egpu_peer.h"
#include "engine_ctx.h"
#include "engine_peer.h"

/* Whether grant g lies inside the peer's arena (the grant is the peer's word: never trusted). */
static bool in_peer_arena(struct link_peer *lp, const struct wire_grant *g)
{
    uint64_t n = link_peer_arena_bytes(lp);
    return g->offset <= n && g->length <= n - g->offset;
}

static struct link_peer *lp_of(const struct stage *st)
{
    return st->tx->peer ? st->tx->peer->lp : NULL;
}

/* The landing slot of st's grant in the peer's arena mapped here, when this side is to write
 * it itself (shared-memory lanes, arena.shm_write copy). The grant comes from the peer: a slot
 * outside its arena is never written here (its put fails -ERANGE). */
static int peer_slot(struct stage *st, bool gpu, uint8_t **ret)
{
    struct link_peer *lp = lp_of(st);
    uint8_t *base;
    if (st->tx->bx->staging_only != gpu)
        return BWAY_PEER_EXEC; /* the other executor's row */
    if (st->e->d->cfg.arena_shm_write != CFG_SHM_WRITE_COPY)
        return BWAY_PEER_SHM_PUT;
    if (!lp || link_peer_arena_map(lp, &base) < 0)
        return BWAY_PEER_UNMAPPED;
    if (!in_peer_arena(lp, &st->g))
        return BWAY_PEER_OUTSIDE;
    *ret = base;
    return 0;
}

int bway_gpu_to_peer(struct stage *st)
{
    uint8_t *base = NULL;
    int why = peer_slot(st, true, &base);
    if (why)
        return why;
    struct link_peer *lp = lp_of(st);
    /* kernels write page-locked memory only: the mapping is pinned here, one use per chunk */
    if (!(st->ppin = egpu_peer_use(st->e, lp, base, link_peer_arena_bytes(lp))))
        return BWAY_PEER_PIN;
    st->buf = base + st->g.offset;
    return 0;
}

int bway_copy_to_peer(struct stage *st)
{
    uint8_t *base = NULL;
    int why = peer_slot(st, false, &base);
    if (why)
        return why;
    st->buf = base + st->g.offset;
    return 0;
}

/* Host pools, the peer reachable over cma but its arena not mapped here (arena.cma_write copy;
 * copy threads: the inline gather cannot write another process). Bounded by the peer's arena
 * as peer_slot is. */
int bway_cma_to_peer(struct stage *st)
{
    struct link_peer *lp = lp_of(st);
    uint32_t pid = 0;
    uint64_t base;
    if (st->tx->bx->staging_only)
        return BWAY_CMA_GPU;
    if (!st->e->d->copy)
        return BWAY_CMA_NO_THREADS;
    if (st->e->d->cfg.arena_cma_write != CFG_CMA_WRITE_COPY)
        return BWAY_CMA_AM;
    if (!lp || link_peer_arena_cma(lp, &pid, &base) < 0)
        return BWAY_CMA_NO_LANE;
    if (!in_peer_arena(lp, &st->g))
        return BWAY_CMA_OUTSIDE;
    st->buf = (uint8_t *)(uintptr_t)(base + st->g.offset);
    st->buf_pid = pid;
    return 0;
}

int bway_gather_put(struct stage *st)
{
    struct link_peer *lp = lp_of(st);
    if (!lp || !link_peer_put_fast(lp))
        return BWAY_PUT_NO_LANES;
    return in_peer_arena(lp, &st->g) ? 0 : BWAY_PUT_OUTSIDE;
}

int bway_gather_am(struct stage *st)
{
    (void)st;
    return 0;
}
