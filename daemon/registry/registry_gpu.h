/* registry_gpu.h: a registered rank's GPU pools (docs/DESIGN.md §3): the CUDA IPC handles of its
 * REGISTER opened once, at registration, on the device the worker declared (gpu_ipc_open),
 * and closed when the last reference goes; kernels of another device use views of them
 * (reg_gpu_mem_on), since an IPC mapping serves only the device it was opened on. The rank holds one reference; every copy in flight
 * that touches the pools holds another, so a worker that dies mid-copy has its mappings closed
 * only after the stream work on them ended (CUDA forbids closing a mapping still in use).
 * Rules for a GPU rank: every non-empty pool is GPU memory (a rank mixing host and GPU pools
 * is refused), all on one device; empty pools (a stage without layers of a group) are not
 * mapped. Its CUDA interprocess events (EVENTS) are opened once and closed with it. Owns its
 * mappings; the struct gpu is borrowed and must outlive it (daemon teardown stops the workers,
 * which drops every rank, before gpu_free). Loop thread only. */
#ifndef KVF_REGISTRY_GPU_H
#define KVF_REGISTRY_GPU_H

#include <stdbool.h>
#include <stddef.h>

#include "copy.h"
#include "gpu.h"
#include "layout.h"
#include "proto.h"

/* The pools as seen by kernels of another device (gpu_ipc_view). */
struct reg_gpu_view {
    struct copy_mem mem;                       /* addresses valid on that device */
    struct gpu_mapping *map[LAYOUT_MAX_POOLS]; /* owned references */
};

struct reg_gpu {
    struct gpu *g;                               /* borrowed: must outlive us */
    unsigned refs;                               /* the rank's + one per copy in flight */
    int device;                                  /* this daemon's ordinal of the pools' GPU */
    struct copy_mem mem;                         /* device addresses for kernels on `device`
                                                    (NULL: empty pool) */
    struct gpu_mapping *map[LAYOUT_MAX_POOLS];   /* owned references */
    uint64_t offset[LAYOUT_MAX_POOLS];           /* of each pool in its allocation */
    struct reg_gpu_view *view[GPU_MAX_DEVICES];  /* owned, made on first use */
    struct gpu_events *events;                    /* owned: its CUDA events (EVENTS), or NULL */
};

/* Does the registration declare any GPU pool? */
bool reg_gpu_wanted(const struct layout *l);
/* Opens the rank's GPU pools from the REGISTER's handles (pool kinds and sizes already agree
 * with the layout). g may be NULL (no GPU module): refused like CPU mode. Returns 0 and *ret
 * (one reference), or -errno with a message that names the pool and says what to change. */
int reg_gpu_open(struct gpu *g, const struct layout *l, const struct proto_register *reg,
                 struct reg_gpu **ret, char *err, size_t errlen);
struct reg_gpu *reg_gpu_ref(struct reg_gpu *r);
/* The pools' addresses for a kernel running on `device`: r->mem on r->device, else a view of
 * every pool opened on `device` (made once, kept until the last reference goes). An address is
 * only valid on the device its mapping was opened on: never hand r->mem to a kernel elsewhere.
 * 0 and *ret (owned by r), or -errno with a message naming the pool. */
int reg_gpu_mem_on(struct reg_gpu *r, int device, const struct copy_mem **ret, char *err,
                   size_t errlen);
/* The rank's CUDA interprocess events (an EVENTS frame, issue 28), opened once on its device
 * and closed with the last reference. r NULL (host pools) or events open already: refused.
 * 0 with what was opened in msg, or -errno with why (the event that does not open). */
int reg_gpu_events(struct reg_gpu *r, uint32_t rank, const struct proto_events *ev, char *msg,
                   size_t len);
/* Drops one reference; the last closes the mappings and frees. Accepts NULL; returns NULL. */
struct reg_gpu *reg_gpu_unref(struct reg_gpu *r);

#endif
