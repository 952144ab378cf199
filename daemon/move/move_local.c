/* move_local.c: the same-daemon path's copy, inline or on the copy threads (move_local.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "move_exec.h"
#include "move_local.h"

static int threads(struct copyeng *ce, const struct move_local_part *parts, uint32_t n,
                   const struct copy_mem *dst, copyeng_done_cb cb, void *user,
                   struct copyeng_job **job, char *msg, size_t len)
{
    struct copyeng_part *cp = calloc(n ? n : 1, sizeof *cp);
    if (!cp) {
        snprintf(msg, len, "out of memory");
        return -ENOMEM;
    }
    for (uint32_t w = 0; w < n; w++)
        cp[w] = (struct copyeng_part){.kind = COPYENG_DIRECT, .ops = parts[w].ops,
                                      .n_ops = parts[w].n_ops, .src = parts[w].src, .dst = dst};
    int rc = copyeng_submit(ce, cp, n, cb, user, job);
    free(cp);
    if (rc < 0) {
        snprintf(msg, len, "copy threads refused the copy: %s", strerror(-rc));
        return rc;
    }
    return MOVE_STARTED;
}

int move_local_run(struct copyeng *ce, const struct move_local_part *parts, uint32_t n,
                   const struct copy_mem *dst, uint64_t bytes, copyeng_done_cb cb, void *user,
                   struct copyeng_job **job, uint64_t *busy_ns, char *msg, size_t len)
{
    if (ce && bytes >= MOVE_LOCAL_INLINE_MAX)
        return threads(ce, parts, n, dst, cb, user, job, msg, len);
    const struct move_exec *ex = move_exec_of(MOVE_EXEC_HOST); /* inline: MOVE_DONE */
    uint64_t t0 = uv_hrtime();
    for (uint32_t w = 0; w < n; w++) {
        struct move_prog mp = {parts[w].ops, parts[w].n_ops, parts[w].src, dst};
        int rc = ex->direct(&mp, NULL, NULL, msg, len);
        if (rc < 0)
            return rc;
    }
    *busy_ns = uv_hrtime() - t0;
    return MOVE_DONE;
}
