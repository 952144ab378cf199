/* bounce_land.c: the generation side's landing of bounce chunks (docs/DESIGN.md §5, §6): every
 * CHUNK (put + CHUNK, eager, or rendezvous into the slot) is checked against its grant (slot,
 * generation, offset, length: else BOUND_VIOLATION and nothing scattered), reported to the arena
 * and handed to the scatter (GPU kernel, or the copy threads: bounce_host.c); bland_landed returns
 * its credit when the bytes are in the rank's pools and asks for the next. The CHUNK handler may
 * run inside a UCX callback (eager messages, docs/UCX.md trap 6): it copies nothing there but an
 * eager payload and only submits the scatter. Loop thread only. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "bounce_dev.h"
#include "engine_drive.h"
#include "bounce_host.h"
#include "bounce_tl.h"
#include "daemon.h"
#include "engine_gen.h"
#include "engine_gpu.h"
#include "engine_peer.h"
#include "move_exec.h"
#include "xfer.h"

static void land_fail(struct rx *rx, kvf_error_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void land_fail(struct rx *rx, kvf_error_t code, const char *fmt, ...)
{
    char msg[WIRE_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rx->e->drive->rx_fail(rx, code, msg);
}

/* The grant a chunk names, checked: 0 and its index, or BOUND_VIOLATION (request failed). */
static int match(struct rxw *w, const struct wire_chunk *c, size_t len, bool rndv, uint32_t *ret)
{
    for (uint32_t i = 0; i < w->n_out; i++) {
        const struct arena_grant *g = &w->out[i];
        if (g->slot != c->slot || g->generation != c->generation)
            continue;
        if (g->ext_off != c->ext_off || g->length != c->length || (len && len != c->length) ||
            (rndv && len != g->length)) {
            land_fail(w->rx, KVF_E_BOUND_VIOLATION,
                    "writer rank %u: chunk for slot %u gen %u says "
                    "extent [%llu, +%llu) with %zu bytes, the grant is [%llu, +%llu)",
                    w->ctx_rank, c->slot, c->generation, (unsigned long long)c->ext_off,
                    (unsigned long long)c->length, len, (unsigned long long)g->ext_off,
                    (unsigned long long)g->length);
            return -EBADMSG;
        }
        *ret = i;
        return 0;
    }
    land_fail(w->rx, KVF_E_BOUND_VIOLATION,
            "writer rank %u: chunk for slot %u generation %u, "
            "which is not granted to it (stale or foreign)",
            w->ctx_rank, c->slot, c->generation);
    return -EBADMSG;
}

void bland_landed(struct rxw *w, uint32_t i)
{
    struct rx *rx = w->rx;
    struct engine *e = rx->e;
    struct arena_grant g = w->out[i];
    arena_release(e->arena, &w->resv, g.slot, g.generation);
    w->out[i] = w->out[--w->n_out];
    w->scattered += g.length;
    if (rx->x)
        rx->x->bytes_done += g.length; /* progress for kvferryctl transfers */
    if (w->peer) {
        w->peer->chunks_recv++;
        w->peer->bytes_recv += g.length;
    }
    e->c.chunks_landed++;
    e->c.bytes_landed += g.length;
    if (e->tl) /* arena.timeline: off by default */
        btl_mark(e->tl, BTL_LANDED, rx->req_id, w->ctx_rank, g.ext_off);
    w->rx->e->drive->rx_ask(w);
    rx->e->drive->rx_check_done(rx);
}

int bland_on_rndv(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_chunk *c,
                size_t len, void **dest)
{
    struct rxw *w = p ? ix_w_find(e, p, flow, true) : NULL;
    uint32_t i;
    if (!w)
        return -ENOENT; /* the request ended: the link drops the bytes */
    if (match(w, c, len, true, &i) < 0) {
        e->drive->rx_sweep(e);
        return -EBADMSG;
    }
    *dest = (bdev_rx(e, p, w->rx, w->idx) ? bdev_at(e, 0) : e->arena_base) + w->out[i].offset;
    return 0;
}

void bland_on_chunk(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_chunk *c,
                  const void *data, size_t len)
{
    struct rxw *w = ix_w_find(e, p, flow, true);
    uint32_t i;
    if (!w || match(w, c, len, false, &i) < 0)
        return;
    struct rx *rx = w->rx;
    struct arena_grant g = w->out[i];
    if (e->tl) /* arena.timeline: off by default */
        btl_mark(e->tl, BTL_CHUNK_RX, rx->req_id, w->ctx_rank, c->ext_off);
    uint8_t *slot = e->arena_base + g.offset;
    bool dev = e->darena && len && data == bdev_at(e, g.offset); /* landed in its device twin */
    if (len && data != slot && !dev)
        memcpy(slot, data, len); /* eager: the bytes came inside the message */
    int rc = arena_report(e->arena, &w->resv, g.slot, g.generation, c->ext_off, c->length, NULL);
    if (rc < 0) {
        land_fail(rx, KVF_E_BOUND_VIOLATION, "writer rank %u: chunk report for slot %u refused: %s",
                w->ctx_rank, g.slot, strerror(-rc));
        return;
    }
    xfer_phase_mark(&rx->moving_ns);
    if (rx->x)
        rx->e->req.ops->copying(rx->t, rx->x);
    /* the slot stays FILLED (held) until its scatter read it: a kernel (engine_gpu.c) or the
     * copy threads (bounce_host.c); this may run inside a UCX callback: it only submits */
    char msg[WIRE_TEXT_MAX];
    if (e->tl) /* arena.timeline: off by default */
        btl_mark(e->tl, BTL_SCATTER_LAUNCH, rx->req_id, w->ctx_rank, g.ext_off);
    rx->scatter_dev = dev; /* egpu_scatter reads it during the call */
    e->c.chunks_landed_device += dev;
    rc = rx->bx->scatter(rx, w->idx, &g, msg, sizeof msg); /* bounce_exec.h */
    rx->scatter_dev = false;
    if (rc < 0)
        land_fail(rx, KVF_E_INTERNAL, "scatter of writer rank %u: %s", w->ctx_rank, msg);
    else if (rc == MOVE_DONE)
        bland_landed(w, i); /* inline (no copy threads); else bh_scatter_ended follows */
}
