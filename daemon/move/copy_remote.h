/* copy_remote.h: copies whose destination lies in another process. A gather whose extent buffer lies in another process (the peer daemon's landing
 * slot across network namespaces of one host, docs/UCX.md "Copies into the peer's arena over
 * cma"): the source runs of extent bytes [lo, hi) go straight from our pools into the remote
 * buffer with process_vm_writev, batches of up to 1024 runs per call. Thread-safe (a copy
 * thread runs it). */
#ifndef KVF_COPY_REMOTE_H
#define KVF_COPY_REMOTE_H

#include <stdint.h>

#include "copy.h"

/* Extent bytes [lo, hi) from the source pools to remote (its byte 0 is extent byte lo) in
 * process pid. 0, or -errno of the failed call (-ESRCH: the process exited, -EPERM: not ours
 * to write, -EFAULT: the range is not mapped there or a call wrote short). */
int copy_gather_remote(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                       uint64_t lo, uint64_t hi, uint32_t pid, uint64_t remote);

/* The direct copy of extent bytes [lo, hi) from the source pools into pools of process pid whose
 * bases there are dst's (the fragment path into the generation pools, one host, docs/UCX.md):
 * runs whose source and destination both follow on are merged, up to 1024 of them a call. The
 * caller bounded every destination range by the pools' sizes (copy_check). 0 or -errno as
 * copy_gather_remote. */
int copy_direct_remote(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                       uint64_t lo, uint64_t hi, uint32_t pid, const struct copy_mem *dst);

#endif
