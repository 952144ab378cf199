/* bounce_ce.h: the bounce path's GPU chunks with the copy engines crossing PCIe (issue 12,
 * experimental: KVF_BOUNCE_CE=1 in the daemon's environment). The default has the copy kernels
 * read or write page-locked host memory themselves (kvk_gather into the landing slot's device
 * alias, kvk_scatter from it); here a kernel works device memory only (a gather into a device
 * scratch of the job, a scatter from it) and cudaMemcpyAsync moves the chunk between the
 * scratch and the host slot on the same stream. Why: two daemons on one GPU are two CUDA
 * contexts, whose kernels the GPU time-slices (no overlap without MPS), while copy engines run
 * their own queues; bench/bench_gpu_bounce.c measures both ways ("ce" rows).
 * The scratch is one per job (its stream orders every use), grown to the largest chunk, freed
 * stream-ordered with the job. Loop thread only. */
#ifndef KVF_BOUNCE_CE_H
#define KVF_BOUNCE_CE_H

#include <stddef.h>
#include <stdint.h>

#include "exec_gpu.h"
#include "gpu.h"

struct bce_scratch {
    void *dev;    /* device memory of the binding's device, stream-ordered; NULL: none yet */
    uint64_t len;
};

/* Extent bytes [lo, hi) of x's program from its source pools into host memory out (page-locked
 * in this process): gather into the scratch, then a D2H copy; done(user, status) on the loop.
 * MOVE_STARTED, or -errno with msg (nothing queued). */
int bce_gather(struct exec_gpu *x, struct bce_scratch *s, uint64_t lo, uint64_t hi, uint8_t *out,
               gpu_done_cb done, void *user, char *msg, size_t len);
/* Extent bytes [lo, hi) from host memory in (page-locked here) into x's destination pools: an
 * H2D copy into the scratch, then the scatter. */
int bce_scatter(struct exec_gpu *x, struct bce_scratch *s, const uint8_t *in, uint64_t lo,
                uint64_t hi, gpu_done_cb done, void *user, char *msg, size_t len);
/* Frees the scratch after every use queued on x's stream (the stream still exists). */
void bce_scratch_free(struct exec_gpu *x, struct bce_scratch *s);
/* Whether the environment asks for this path (KVF_BOUNCE_CE=1). */
int bce_wanted(void);

#endif
