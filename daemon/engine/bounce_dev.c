/* bounce_dev.c: the device arena of the bounce path (bounce_dev.h, issue 30). */
#include "bounce_dev.h"

#include "daemon.h"
#include "engine_ctx.h"
#include "engine_gen.h"
#include "engine_gpu.h"
#include "engine_int.h"
#include "engine_peer.h"
#include "gpu.h"
#include "link.h"
#include "log.h"

#include <stdio.h>

#define BDEV_DEVICE 0 /* one device arena, on GPU 0; ranks on other GPUs stage through host */

void bdev_init(struct engine *e)
{
    char err[GPU_REASON_MAX];
    e->darena = NULL;
    if (!link_cuda(e->link)) {
        snprintf(e->darena_why, sizeof e->darena_why,
                 "none: the link's UCX handles host memory only (built without CUDA, or "
                 "UCX_TLS / transport.ucx_tls leaves cuda_copy out): GPU chunks stage through "
                 "host");
        return;
    }
    if (e->d->cfg.arena_placement == CFG_PLACEMENT_HOST) {
        snprintf(e->darena_why, sizeof e->darena_why, "none: arena.placement is host");
        return;
    }
    void *base = NULL;
    int rc = gpu_make_current(e->gpu, BDEV_DEVICE, err, sizeof err);
    if (rc == 0 && (rc = link_device_arena_map(e->link, e->arena_len, &base)) < 0)
        snprintf(err, sizeof err, "UCX allocated no %zu bytes of CUDA memory (%d)",
                 e->arena_len, rc);
    if (rc < 0) {
        snprintf(e->darena_why, sizeof e->darena_why, "none: %.256s (GPU chunks stage through host)",
                 err);
        log_warn("engine: device arena: %s: GPU chunks stage through host memory", err);
        return;
    }
    e->darena = base;
    snprintf(e->darena_why, sizeof e->darena_why,
             "%zu bytes of CUDA memory on GPU %d, allocated by UCX: chunks of GPU ranks on it "
             "go device to device with gpu_direct peers",
             e->arena_len, BDEV_DEVICE);
    log_info("engine: device arena: %s", e->darena_why);
}

int bdev_choose(const struct stage *st)
{
    const struct tx *tx = st->tx;
    if (!st->e->darena)
        return BDEV_NO_ARENA;
    if (egpu_tx_device(tx) != BDEV_DEVICE) /* host pools, or a rank on another GPU */
        return BDEV_NOT_ITS_GPU;
    if (!tx->peer || !tx->peer->lp || !link_peer_gpu_direct(tx->peer->lp, NULL))
        return BDEV_PEER_HOST_ONLY;
    return 0;
}

bool bdev_rx(const struct engine *e, const struct epeer *p, const struct rx *rx, uint32_t widx)
{
    return e->darena && p && p->lp && egpu_rx_device(rx, widx) == BDEV_DEVICE &&
           link_peer_gpu_direct(p->lp, NULL);
}

uint8_t *bdev_at(const struct engine *e, uint64_t off)
{
    return e->darena + off;
}

void bdev_json(const struct engine *e, json_t *o)
{
    json_object_set_new(o, "device_arena_bytes", json_integer(e->darena ? (json_int_t)e->arena_len : 0));
    json_object_set_new(o, "device_arena_why",
                        json_string(e->darena_why[0] ? e->darena_why : "none: no GPU"));
}
