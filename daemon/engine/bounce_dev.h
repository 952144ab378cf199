/* bounce_dev.h: the device arena of the bounce path (issue 30). Where the link's UCX handles
 * CUDA memory (link_cuda.c) and arena.placement is auto, the engine asks the link for a device
 * arena (CUDA memory UCX allocates on GPU dev 0) of the host arena's size, the same slots at the
 * same offsets. A GPU writer's chunk to a gpu_direct peer is gathered by the kernel into its
 * staging slot's device twin and sent as a rendezvous message from there; a GPU reader's
 * chunk from a gpu_direct peer lands in its landing slot's device twin and is scattered from
 * there: device to device (cuda_ipc on one host, GPUDirect RDMA across hosts), no PCIe
 * crossing, no host memory. Puts are never used for these chunks (UCX 1.13.1 crashes putting
 * device memory). Everything else stays as it was: host staging with Debian's UCX, with peers
 * whose UCX is host-only, for host ranks, for ranks on another GPU. Loop thread only. */
#ifndef KVF_BOUNCE_DEV_H
#define KVF_BOUNCE_DEV_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

struct engine;
struct epeer;
struct rx;
struct stage;

/* At the arena's start (egpu_arena_init, the host arena page-locked): the device arena when
 * the link's UCX handles CUDA memory and arena.placement is not host; the reason either way. */
void bdev_init(struct engine *e);
/* The choose of the way device_am (bounce_way.h): 0 when st's chunk goes device to device (a
 * GPU writer on the arena's GPU, a gpu_direct peer), else why not; BDEV_NO_SLOT is its run's
 * (no staging slot for the device twin now: the next ways try). */
enum { BDEV_NO_ARENA = 1, BDEV_NOT_ITS_GPU, BDEV_PEER_HOST_ONLY, BDEV_NO_SLOT };
int bdev_choose(const struct stage *st);
/* Writer widx's chunks of rx from peer p land in device memory (the same on the reader's side). */
bool bdev_rx(const struct engine *e, const struct epeer *p, const struct rx *rx, uint32_t widx);
/* The device twin of arena offset off. */
uint8_t *bdev_at(const struct engine *e, uint64_t off);
/* For status: device_arena_bytes and device_arena_why (its chunks: the engine's counters). */
void bdev_json(const struct engine *e, json_t *o);

#endif
