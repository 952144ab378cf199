/* copy.h: the CPU copy executor: runs a plan writer's copy program between in-memory pools and
 * extent bytes. The twin of the CUDA kernels (kernels/kvf_kernels.h) and their reference.
 * Gather and scatter take any byte sub-range [lo, hi) of the extent, so chunks cut anywhere.
 * Runs go through memcpy, or in programs of 8 MiB and more the runs of 4 KiB and more through
 * the streaming kernel of copy_stream.h. Thread-safe. */
#ifndef KVF_COPY_H
#define KVF_COPY_H

#include <stdint.h>

#include "layout.h"
#include "plan.h"

/* Base address and size of each pool of one side, by pool index. */
struct copy_mem {
    uint32_t n;
    uint8_t *base[LAYOUT_MAX_POOLS];
    uint64_t size[LAYOUT_MAX_POOLS];
};

/* Checks every op of the program lies inside the given pools (side: 's' source, 'd' dest).
 * Returns 0 or -ERANGE. Run once per plan before executing with trusted programs. */
int copy_check(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *mem, char side);

/* Extent bytes [lo, hi) from the source pools into out (out[0] is extent byte lo). */
void copy_gather(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                 uint64_t lo, uint64_t hi, uint8_t *out);
/* Extent bytes [lo, hi) from in (in[0] is extent byte lo) into the destination pools. */
void copy_scatter(const struct copy_op *ops, uint32_t n_ops, const uint8_t *in, uint64_t lo,
                  uint64_t hi, const struct copy_mem *dst);
/* Source pools straight into destination pools (the local path). */
void copy_direct(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                 const struct copy_mem *dst);
/* Extent bytes [lo, hi) of copy_direct's program: a piece of it, so several threads can share
 * one program. Streaming stores are chosen by the whole program's size, as copy_direct does. */
void copy_direct_range(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                       uint64_t lo, uint64_t hi, const struct copy_mem *dst);

/* One run of source bytes: pool index, its address, the extent position of its first byte, its
 * length. A negative return stops the walk and is returned. */
typedef int (*copy_run_cb)(void *arg, uint32_t pool, const uint8_t *src, uint64_t ext_pos,
                           uint64_t len);
/* Walks the source runs of extent bytes [lo, hi) in extent order, runs that follow each other in
 * the same pool merged into one (so a put per run is as few puts as the memory allows). 0, or
 * the first negative cb return. */
int copy_src_runs(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                  uint64_t lo, uint64_t hi, copy_run_cb cb, void *arg);

/* One run of a direct copy: its source address, its destination as an address (which may be
 * another process's: it is never dereferenced here), its length. Negative stops the walk. */
typedef int (*copy_pair_cb)(void *arg, const uint8_t *src, uint64_t dst, uint64_t len);
/* Walks the runs of extent bytes [lo, hi) of a direct copy in extent order, each with its source
 * in src and its destination in dst (dst's bases are taken as addresses only). 0, or the first
 * negative cb return. */
int copy_pair_runs(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                   const struct copy_mem *dst, uint64_t lo, uint64_t hi, copy_pair_cb cb,
                   void *arg);

#endif
