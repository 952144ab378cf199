/* copy_remote.c: copies into another process's memory with process_vm_writev (copy_remote.h).
 * A gather: the runs come from copy_src_runs (neighbouring runs of one pool merged) and tile
 * [lo, hi) in extent order, so each batch's remote side is one contiguous range. A direct copy:
 * each run has its own remote range (copy_pair_runs), so a batch pairs local and remote iovecs. */
#include <errno.h>
#include <stdbool.h>
#include <sys/uio.h>

#include "copy_remote.h"

#define REMOTE_BATCH 1024 /* IOV_MAX: local iovecs per call */

struct batch {
    uint32_t pid;
    uint64_t remote, lo; /* remote address of extent byte lo */
    uint64_t pos;        /* extent position of the batch's first byte */
    uint64_t bytes;
    unsigned n;
    struct iovec l[REMOTE_BATCH];
};

static int flush(struct batch *b)
{
    if (b->n == 0)
        return 0;
    struct iovec r = {.iov_base = (void *)(uintptr_t)(b->remote + (b->pos - b->lo)),
                      .iov_len = b->bytes};
    ssize_t n = process_vm_writev((pid_t)b->pid, b->l, b->n, &r, 1, 0);
    bool whole = n >= 0 && (uint64_t)n == b->bytes;
    b->n = 0;
    b->bytes = 0;
    return whole ? 0 : n < 0 ? -errno : -EFAULT; /* short: the rest of the range is not mapped */
}

static int on_run(void *arg, uint32_t pool, const uint8_t *src, uint64_t pos, uint64_t len)
{
    (void)pool;
    struct batch *b = arg;
    if (b->n == REMOTE_BATCH) {
        int rc = flush(b);
        if (rc < 0)
            return rc;
    }
    if (b->n == 0)
        b->pos = pos;
    b->l[b->n++] = (struct iovec){.iov_base = (void *)src, .iov_len = len};
    b->bytes += len;
    return 0;
}

int copy_gather_remote(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                       uint64_t lo, uint64_t hi, uint32_t pid, uint64_t remote)
{
    static __thread struct batch b; /* 16 KiB of iovecs: off the copy thread's stack */
    b.pid = pid;
    b.remote = remote;
    b.lo = lo;
    b.n = 0;
    b.bytes = 0;
    int rc = copy_src_runs(ops, n_ops, src, lo, hi, on_run, &b);
    return rc < 0 ? rc : flush(&b);
}

struct pairs {
    uint32_t pid;
    unsigned n;
    uint64_t bytes;
    struct iovec l[REMOTE_BATCH], r[REMOTE_BATCH];
};

static int flush_pairs(struct pairs *b)
{
    if (b->n == 0)
        return 0;
    ssize_t n = process_vm_writev((pid_t)b->pid, b->l, b->n, b->r, b->n, 0);
    bool whole = n >= 0 && (uint64_t)n == b->bytes;
    b->n = 0;
    b->bytes = 0;
    return whole ? 0 : n < 0 ? -errno : -EFAULT;
}

static int on_pair(void *arg, const uint8_t *src, uint64_t dst, uint64_t len)
{
    struct pairs *b = arg;
    if (b->n > 0) { /* both sides follow on from the last run: one iovec pair */
        struct iovec *l = &b->l[b->n - 1], *r = &b->r[b->n - 1];
        if ((const uint8_t *)l->iov_base + l->iov_len == src &&
            (uint64_t)(uintptr_t)r->iov_base + r->iov_len == dst) {
            l->iov_len += len;
            r->iov_len += len;
            b->bytes += len;
            return 0;
        }
    }
    if (b->n == REMOTE_BATCH) {
        int rc = flush_pairs(b);
        if (rc < 0)
            return rc;
    }
    b->l[b->n] = (struct iovec){.iov_base = (void *)src, .iov_len = len};
    b->r[b->n] = (struct iovec){.iov_base = (void *)(uintptr_t)dst, .iov_len = len};
    b->n++;
    b->bytes += len;
    return 0;
}

int copy_direct_remote(const struct copy_op *ops, uint32_t n_ops, const struct copy_mem *src,
                       uint64_t lo, uint64_t hi, uint32_t pid, const struct copy_mem *dst)
{
    static __thread struct pairs b; /* 32 KiB of iovecs: off the copy thread's stack */
    b.pid = pid;
    b.n = 0;
    b.bytes = 0;
    int rc = copy_pair_runs(ops, n_ops, src, dst, lo, hi, on_pair, &b);
    return rc < 0 ? rc : flush_pairs(&b);
}
