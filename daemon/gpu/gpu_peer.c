/* gpu_peer.c: peer access between the node's devices, for the same-node path (gpu.h). */
#include <errno.h>
#include <stdio.h>

#include "gpu_priv.h"
#include "log.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>
#endif

bool gpu_peer_can_access(const struct gpu *g, int a, int b)
{
    return a >= 0 && b >= 0 && a < g->n_devices && b < g->n_devices && a != b && g->peer_can[a][b];
}

bool gpu_peer_enabled(const struct gpu *g, int a, int b)
{
    return gpu_peer_can_access(g, a, b) && g->peer_on[a][b];
}

static int check_pair(const struct gpu *g, int a, int b, char *err, size_t errlen)
{
    if (g->cpu_mode) {
        snprintf(err, errlen, "peer access: CPU mode (%s)", g->cpu_reason);
        return -ENODEV;
    }
    if (a < 0 || b < 0 || a >= g->n_devices || b >= g->n_devices || a == b) {
        snprintf(err, errlen, "peer access %d <-> %d: need two different devices of 0..%d", a, b,
                 g->n_devices - 1);
        return -ENODEV;
    }
    if (!g->peer_can[a][b] || !g->peer_can[b][a]) {
        snprintf(err, errlen,
                 "peer access %d <-> %d: not supported between these devices "
                 "(cudaDeviceCanAccessPeer says %d -> %d: %s, %d -> %d: %s)",
                 a, b, a, b, g->peer_can[a][b] ? "yes" : "no", b, a,
                 g->peer_can[b][a] ? "yes" : "no");
        return -ENOTSUP;
    }
    return 0;
}

#ifdef KVF_HAVE_CUDA

int gpu_peer_discover(struct gpu *g, char *err, size_t errlen)
{
    int rc;
    for (int dev = 0; dev < g->n_devices; dev++)
        for (int b = 0; b < g->n_devices; b++) {
            int can = 0, rank = 0;
            if (b == dev)
                continue;
            if ((rc = GPU_TRY(cudaDeviceCanAccessPeer(&can, dev, b))) < 0)
                return rc;
            g->peer_can[dev][b] = can ? 1 : 0;
            if (can && (rc = GPU_TRY(cudaDeviceGetP2PAttribute(&rank, cudaDevP2PAttrPerformanceRank,
                                                               dev, b))) < 0)
                return rc;
            g->peer_rank[dev][b] = rank;
        }
    return 0;
}

/* Lets `dev` reach `peer`; already enabled (by us or by a lazy IPC open) counts as done. */
static int enable_one(struct gpu *g, int dev, int peer, char *err, size_t errlen)
{
    int rc;
    if (g->peer_on[dev][peer])
        return 0;
    if ((rc = GPU_TRY(cudaSetDevice(dev))) < 0)
        return rc;
    rc = GPU_TRY(cudaDeviceEnablePeerAccess(peer, 0));
    if (rc < 0 && rc != -EALREADY)
        return rc;
    g->peer_on[dev][peer] = 1;
    return 0;
}

int gpu_peer_enable(struct gpu *g, int a, int b, char *err, size_t errlen)
{
    int rc;
    if ((rc = check_pair(g, a, b, err, errlen)) < 0)
        return rc;
    if (g->dev[a].failed || g->dev[b].failed) {
        snprintf(err, errlen, "peer access %d <-> %d: device %d failed earlier", a, b,
                 g->dev[a].failed ? a : b);
        return -ENODEV;
    }
    if ((rc = enable_one(g, a, b, err, errlen)) < 0 || (rc = enable_one(g, b, a, err, errlen)) < 0)
        return rc;
    log_debug("gpu: peer access %d <-> %d enabled", a, b);
    return 0;
}

#else /* !KVF_HAVE_CUDA: discovery never succeeds, so g is in CPU mode */

int gpu_peer_discover(struct gpu *g, char *err, size_t errlen)
{
    (void)g;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

int gpu_peer_enable(struct gpu *g, int a, int b, char *err, size_t errlen)
{
    int rc = check_pair(g, a, b, err, errlen);
    if (rc < 0)
        return rc;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

#endif

int gpu_peer_enable_all(struct gpu *g, char *err, size_t errlen)
{
    int n = 0, rc;
    if (g->cpu_mode) {
        snprintf(err, errlen, "peer access: CPU mode (%s)", g->cpu_reason);
        return -ENODEV;
    }
    for (int a = 0; a < g->n_devices; a++)
        for (int b = a + 1; b < g->n_devices; b++) {
            if (!g->peer_can[a][b] || !g->peer_can[b][a])
                continue;
            if ((rc = gpu_peer_enable(g, a, b, err, errlen)) < 0)
                return rc;
            n++;
        }
    return n;
}
