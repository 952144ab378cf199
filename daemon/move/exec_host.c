/* exec_host.c: the host executor (move_exec.h): copy programs over mapped host pools with
 * lib/copy.c, inline on the calling (loop) thread, so every copy returns MOVE_DONE. The copy
 * threads of the data-plane issue are the threaded twin of this row: same table, MOVE_STARTED
 * and a completion on the loop. */
#include <errno.h>
#include <stdio.h>

#include "move_exec.h"

static int host_check(const struct move_prog *p, char side, char *msg, size_t len)
{
    const struct copy_mem *m = side == 's' ? p->src : p->dst;
    if (!m || copy_check(p->ops, p->n_ops, m, side) < 0) {
        snprintf(msg, len, "copy program leaves the mapped %s pools",
                 side == 's' ? "source" : "destination");
        return -ERANGE;
    }
    return 0;
}

static int host_gather(const struct move_prog *p, uint64_t lo, uint64_t hi, uint8_t *out,
                       move_done_cb done, void *user, char *msg, size_t len)
{
    (void)done, (void)user, (void)msg, (void)len;
    copy_gather(p->ops, p->n_ops, p->src, lo, hi, out);
    return MOVE_DONE;
}

static int host_scatter(const struct move_prog *p, const uint8_t *in, uint64_t lo, uint64_t hi,
                        move_done_cb done, void *user, char *msg, size_t len)
{
    (void)done, (void)user, (void)msg, (void)len;
    copy_scatter(p->ops, p->n_ops, in, lo, hi, p->dst);
    return MOVE_DONE;
}

static int host_direct(const struct move_prog *p, move_done_cb done, void *user, char *msg,
                       size_t len)
{
    (void)done, (void)user, (void)msg, (void)len;
    copy_direct(p->ops, p->n_ops, p->src, p->dst);
    return MOVE_DONE;
}

const struct move_exec move_exec_host = {
    .name = "host",
    .check = host_check,
    .gather = host_gather,
    .scatter = host_scatter,
    .direct = host_direct,
};
