/* bounce_exec.c: the table of bounce executors (bounce_exec.h) and the rows' adapters. */
#include "bounce_exec.h"

#include "bounce_host.h"
#include "engine_gpu.h"
#include "move_exec.h"
#include "registry.h"

/* The kernels always complete later (gpu_notify): a launch is MOVE_STARTED. */
static int gpu_scatter(struct rx *rx, uint32_t widx, const struct arena_grant *g, char *msg,
                       size_t len)
{
    int rc = egpu_scatter(rx, widx, g, msg, len);
    return rc < 0 ? rc : MOVE_STARTED;
}

static int gpu_gather(struct stage *st, char *msg, size_t len)
{
    int rc = egpu_gather(st, msg, len);
    return rc < 0 ? rc : MOVE_STARTED;
}

static const struct bounce_exec host_row = {
    .name = "host",
    .scatter = bh_scatter,
    .gather = bh_gather,
};

static const struct bounce_exec gpu_row = {
    .name = "gpu",
    .staging_only = true,
    .rx_start = egpu_rx_start,
    .tx_plan = egpu_tx_plan,
    .scatter = gpu_scatter,
    .gather = gpu_gather,
};

const struct bounce_exec *const bounce_execs[BEXEC__COUNT] = {
    [BEXEC_HOST] = &host_row,
    [BEXEC_GPU] = &gpu_row,
};

const struct bounce_exec *bexec_of(const struct reg_rank *rk)
{
    return bounce_execs[rk->gpu ? BEXEC_GPU : BEXEC_HOST]; /* mapped at REGISTER */
}
