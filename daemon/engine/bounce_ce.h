/* bounce_ce.h: the bounce path's GPU chunks with the copy engines crossing PCIe
 * (gpu.bounce_copy: engines, the default; issue 12). With `kernels` the copy kernels read or
 * write page-locked host memory themselves (kvk_gather into the landing slot's device alias,
 * kvk_scatter from it); here a kernel works device memory only (a gather into a device
 * scratch, a scatter from it) and cudaMemcpyAsync moves the chunk between the scratch and the
 * host slot on the same stream. Why: two daemons on one GPU are two CUDA contexts, whose
 * kernels the GPU time-slices (no overlap without MPS), while the copy engines run beside them:
 * on the one-H200 host kimi-k3 8k moved at 35.4 GB/s this way against 21.3 with kernels
 * (bench/results/h200x1-session7-gbounce.md; bench/bench_gpu_bounce.c measures both pipelines).
 * Scratch: one per daemon stream (gpu_stream: GPU_STREAMS_PER_DEVICE per device), shared by
 * every job on that stream, since the stream orders every use of it; it grows to the largest
 * chunk seen (arena.chunk, or a peer's larger grant) and is freed at engine stop, so the device
 * memory is bounded by streams x chunk (4 x 32 MiB per GPU by default). Loop thread only. */
#ifndef KVF_BOUNCE_CE_H
#define KVF_BOUNCE_CE_H

#include <stddef.h>
#include <stdint.h>

#include "exec_gpu.h"
#include "gpu.h"

struct bce_table; /* the scratches of one engine */

/* Extent bytes [lo, hi) of x's program from its source pools into host memory out (page-locked
 * in this process): gather into the stream's scratch, then a D2H copy; done(user, status) on
 * the loop. *t is made on first use. MOVE_STARTED, or -errno with msg. */
int bce_gather(struct bce_table **t, struct exec_gpu *x, uint64_t lo, uint64_t hi, uint8_t *out,
               gpu_done_cb done, void *user, char *msg, size_t len);
/* Extent bytes [lo, hi) from host memory in (page-locked here) into x's destination pools: an
 * H2D copy into the stream's scratch, then the scatter. */
int bce_scatter(struct bce_table **t, struct exec_gpu *x, const uint8_t *in, uint64_t lo,
                uint64_t hi, gpu_done_cb done, void *user, char *msg, size_t len);
/* Frees every scratch (in stream order on its stream, which must still exist); *t = NULL. */
void bce_free(struct bce_table **t, struct gpu *g);

#endif
