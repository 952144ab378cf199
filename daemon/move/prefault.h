/* prefault.h: maps the pages of a pool mapping in ahead of the copies that will touch them, so a
 * copy thread does not take a minor fault per 4 KiB page of a mapping the daemon just made
 * (REGISTER maps worker pools without MAP_POPULATE: on the loop it stalled whole seconds).
 * Runs on a copy thread (copyeng.h, COPYENG_PREFAULT). Only pages the owner already holds in
 * memory (mincore) are populated: a hole in a worker's memfd stays a hole, so the daemon never
 * allocates (nor is charged for) a worker's memory. Kernels without MADV_POPULATE_READ/WRITE
 * (before 5.14) get a read of one byte per page instead (the destination's first write then
 * takes a cheaper write-protect fault). Touches no state of its own: thread-safe. */
#ifndef KVF_PREFAULT_H
#define KVF_PREFAULT_H

#include <stdbool.h>
#include <stdint.h>

#include "copy.h"

/* The runs of extent bytes [lo, hi) of ops in mem (their src_pool/src_off/src_stride, the
 * pools to map in): populated writable (write: MADV_POPULATE_WRITE) or readable. Returns the
 * bytes of resident pages it populated. */
uint64_t prefault_range(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *mem,
                        uint64_t lo, uint64_t hi, bool write);

#endif
