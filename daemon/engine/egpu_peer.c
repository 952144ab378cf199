/* egpu_peer.c: peers' arenas page-locked for the GPU gathers that write straight into them
 * (egpu_peer.h). */
#include <stdio.h>
#include <stdlib.h>

#include "daemon.h"
#include "egpu_peer.h"
#include "gpu.h"
#include "log.h"
#include "monotonic.h"

struct egpu_ppin {
    struct link_peer *lp; /* held */
    uint8_t *base;        /* the mapping's byte 0 here */
    size_t len;
    void *dev;      /* its device alias; NULL: CUDA refused it (staging for this peer) */
    unsigned users; /* stages whose kernel writes through it */
    struct egpu_ppin *next;
};

static void drop(struct engine *e, struct egpu_ppin *p)
{
    for (struct egpu_ppin **pp = &e->peer_pins; *pp; pp = &(*pp)->next)
        if (*pp == p) {
            *pp = p->next;
            break;
        }
    if (p->dev) {
        char err[GPU_REASON_MAX + 64];
        if (gpu_host_unregister(e->gpu, p->base, err, sizeof err) < 0)
            log_warn("engine: unpinning peer %s's arena: %s", link_peer_id(p->lp), err);
        else
            e->c.peer_arenas_unpinned++;
    }
    link_peer_release(p->lp);
    free(p);
}

/* Whether the link still offers p's mapping (the same peer, up, the same address). */
static bool offered(struct egpu_ppin *p)
{
    uint8_t *b = NULL;
    return link_peer_arena_map(p->lp, &b) == 0 && b == p->base;
}

struct egpu_ppin *egpu_peer_use(struct engine *e, struct link_peer *lp, uint8_t *base, size_t len)
{
    if (!e->gpu || !e->arena_dev) /* no GPU path here at all */
        return NULL;
    struct egpu_ppin *p = e->peer_pins;
    while (p && (p->lp != lp || p->base != base))
        p = p->next;
    if (!p) {
        if (!(p = calloc(1, sizeof *p)))
            return NULL;
        *p = (struct egpu_ppin){.lp = lp, .base = base, .len = len, .next = e->peer_pins};
        link_peer_hold(lp); /* the pointer stays this peer's (a key) until the pin drops */
        e->peer_pins = p;
        char err[GPU_REASON_MAX + 64];
        uint64_t t0 = mono_now_ns();
        if (gpu_host_register(e->gpu, base, len, &p->dev, err, sizeof err) < 0) {
            p->dev = NULL;
            e->c.peer_arena_pin_failures++;
            log_warn("engine: page-locking peer %s's arena (%zu bytes mapped here) for CUDA: %s: "
                     "its GPU chunks go through staging slots and puts",
                     link_peer_id(lp), len, err);
        } else {
            e->c.peer_arenas_pinned++;
            log_info("engine: peer %s's arena (%zu bytes mapped here) page-locked for CUDA in "
                     "%.1f ms: GPU gathers write its landing slots",
                     link_peer_id(lp), len, (mono_now_ns() - t0) / 1e6);
        }
    }
    if (!p->dev)
        return NULL;
    p->users++;
    return p;
}

void egpu_peer_unuse(struct engine *e, struct egpu_ppin *p)
{
    if (--p->users == 0 && !offered(p))
        drop(e, p);
}

void *egpu_peer_dev(const struct egpu_ppin *p, const uint8_t *h)
{
    return (uint8_t *)p->dev + (h - p->base);
}

void egpu_peer_down(struct engine *e, struct link_peer *lp)
{
    struct egpu_ppin *p = e->peer_pins, *next;
    for (; p; p = next) {
        next = p->next;
        if (p->lp == lp && p->users == 0)
            drop(e, p);
    }
}

void egpu_peer_free_all(struct engine *e)
{
    while (e->peer_pins)
        drop(e, e->peer_pins);
}
