/* gpu.c: discovery, lifetime and the status section of the daemon's CUDA plumbing (gpu.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "gpu_priv.h"
#include "gpu_progcache.h"
#include "gpu_tprog.h"
#include "kvf_kernels.h"
#include "log.h"

#ifdef KVF_HAVE_CUDA
#include <cuda_runtime_api.h>

static void destroy_streams(struct gpu *g)
{
    for (int d = 0; d < GPU_MAX_DEVICES; d++)
        for (int s = 0; s < GPU_STREAMS_PER_DEVICE; s++)
            if (g->streams[d][s]) {
                if (cudaSetDevice(d) == cudaSuccess)
                    cudaStreamDestroy(g->streams[d][s]);
                g->streams[d][s] = NULL;
            }
    (void)cudaGetLastError();
}

static int discover(struct gpu *g, char *err, size_t errlen)
{
    int n = 0, dev = -1, rc;

    cudaError_t cst = cudaGetDeviceCount(&n);
    if ((rc = cuda_err_check(cst, "cudaGetDeviceCount", dev, err, errlen)) < 0) {
        if (cst == cudaErrorInsufficientDriver) { /* what CUDA says when there is no driver */
            size_t used = strlen(err);
            snprintf(err + used, errlen - used,
                     " (no NVIDIA driver loaded, or one older than "
                     "this build's CUDA %d.%d runtime)",
                     CUDART_VERSION / 1000, CUDART_VERSION % 1000 / 10);
        }
        return rc;
    }
    if (n <= 0) {
        const char *vis = getenv("CUDA_VISIBLE_DEVICES");
        snprintf(err, errlen, "no CUDA device visible%s%s%s",
                 vis ? " (CUDA_VISIBLE_DEVICES=\"" : "", vis ? vis : "", vis ? "\")" : "");
        return -ENODEV;
    }
    if (n > GPU_MAX_DEVICES) {
        log_warn("gpu: %d devices visible, using the first %d", n, GPU_MAX_DEVICES);
        n = GPU_MAX_DEVICES;
    }
    for (dev = 0; dev < n; dev++) {
        struct gpu_device *d = &g->dev[dev];
        struct cudaDeviceProp prop;
        if ((rc = GPU_TRY(cudaGetDeviceProperties(&prop, dev))) < 0)
            return rc;
        d->ordinal = dev;
        snprintf(d->name, sizeof(d->name), "%s", prop.name);
        d->memory_bytes = prop.totalGlobalMem;
        d->cc_major = prop.major;
        d->cc_minor = prop.minor;
        if ((rc = GPU_TRY(cudaDeviceGetPCIBusId(d->pci_bus_id, (int)sizeof(d->pci_bus_id), dev))) <
            0)
            return rc;
        if ((rc = GPU_TRY(cudaSetDevice(dev))) < 0)
            return rc;
        for (int s = 0; s < GPU_STREAMS_PER_DEVICE; s++) {
            cudaStream_t st;
            if ((rc = GPU_TRY(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking))) < 0)
                return rc;
            g->streams[dev][s] = st;
        }
        /* the kernels load now, not inside the first request (lazy module loading) */
        if (kvk_warm(dev) < 0)
            log_warn("gpu: device %d: loading the copy kernels: %s (the first request loads "
                     "them)", dev, kvk_last_error());
    }
    g->n_devices = n;
    return gpu_peer_discover(g, err, errlen);
}

#else /* !KVF_HAVE_CUDA */

static void destroy_streams(struct gpu *g)
{
    (void)g;
}

static int discover(struct gpu *g, char *err, size_t errlen)
{
    (void)g;
    snprintf(err, errlen, "%s", CUDA_ERR_NO_CUDA);
    return -ENOTSUP;
}

#endif

int gpu_new(uv_loop_t *loop, struct gpu **ret)
{
    struct gpu *g = calloc(1, sizeof(*g));
    int rc;

    if (!g)
        return -ENOMEM;
    g->loop = loop;
    g->max_mappings = GPU_MAX_MAPPINGS;
    g->max_progs = GPU_PROGCACHE_MAX;
    if ((rc = gpu_done_init(g)) < 0) {
        if (g->handles_open == 0)
            free(g);
        return rc;
    }
    if (discover(g, g->cpu_reason, sizeof(g->cpu_reason)) < 0) {
        destroy_streams(g);
        memset(g->peer_can, 0, sizeof(g->peer_can));
        g->n_devices = 0;
        g->cpu_mode = true;
        log_info("gpu: CPU mode: %s", g->cpu_reason);
    } else {
        g->cpu_reason[0] = '\0';
        for (int i = 0; i < g->n_devices; i++)
            log_info("gpu: device %d: %s, %s, %llu MiB, sm_%d%d", i, g->dev[i].name,
                     g->dev[i].pci_bus_id, (unsigned long long)(g->dev[i].memory_bytes >> 20),
                     g->dev[i].cc_major, g->dev[i].cc_minor);
    }
    *ret = g;
    return 0;
}

void gpu_handle_closed(uv_handle_t *h)
{
    struct gpu *g = h->data;
    if (--g->handles_open == 0) {
        pthread_mutex_destroy(&g->done_mu);
        free(g);
    }
}

struct gpu *gpu_free(struct gpu *g)
{
    if (!g || g->freeing)
        return NULL;
    g->freeing = true;
    gpu_done_stop(g);
    gpu_tprog_detach_all(g); /* templates' programs into the retire list, flushed next */
    gpu_progcache_flush(g); /* the streams ended: no launch can use a program any more */
    gpu_ipc_close_all(g);
    gpu_pin_release_all(g);
    destroy_streams(g);
    /* a loop-wide close walk that ran first owns the handles now: leak g rather than abort */
    if (uv_is_closing((uv_handle_t *)&g->done_async) ||
        uv_is_closing((uv_handle_t *)&g->watch_timer) ||
        uv_is_closing((uv_handle_t *)&g->spin_idle)) {
        log_warn("gpu: handles closed by someone else before gpu_free; not freeing");
        return NULL;
    }
    uv_close((uv_handle_t *)&g->done_async, gpu_handle_closed);
    uv_close((uv_handle_t *)&g->watch_timer, gpu_handle_closed);
    uv_close((uv_handle_t *)&g->spin_idle, gpu_handle_closed);
    return NULL;
}

void gpu_device_fail(struct gpu *g, int ordinal, const char *why)
{
    if (ordinal < 0 || ordinal >= g->n_devices || g->dev[ordinal].failed)
        return;
    g->dev[ordinal].failed = true;
    snprintf(g->dev[ordinal].failed_reason, sizeof(g->dev[ordinal].failed_reason), "%s", why);
    log_error("gpu: device %d failed, new work on it is refused: %s", ordinal, why);
}

bool gpu_cpu_mode(const struct gpu *g)
{
    return g->cpu_mode;
}
const char *gpu_cpu_reason(const struct gpu *g)
{
    return g->cpu_reason;
}
int gpu_device_count(const struct gpu *g)
{
    return g->n_devices;
}

const struct gpu_device *gpu_device(const struct gpu *g, int ordinal)
{
    return ordinal >= 0 && ordinal < g->n_devices ? &g->dev[ordinal] : NULL;
}

int gpu_device_by_pci(const struct gpu *g, const char *pci_bus_id)
{
    for (int i = 0; pci_bus_id && i < g->n_devices; i++)
        if (strcasecmp(g->dev[i].pci_bus_id, pci_bus_id) == 0)
            return i;
    return -ENODEV;
}

struct CUstream_st *gpu_stream(const struct gpu *g, int device, unsigned idx)
{
    if (g->cpu_mode || device < 0 || device >= g->n_devices)
        return NULL;
    return g->streams[device][idx % GPU_STREAMS_PER_DEVICE];
}

/* status */

static int set(json_t *o, const char *k, json_t *v)
{
    return json_object_set_new(o, k, v);
}

/* Where program uploads spent host time (kvk_upload_steps): {"uploads": n, "<step>_ns": ...}. */
static json_t *upload_steps_json(void)
{
    uint64_t ns[KVK_UPLOAD_STEPS], n = kvk_upload_steps(ns);
    json_t *o = json_pack("{s:I}", "uploads", (json_int_t)n);
    for (int i = 0; o && i < KVK_UPLOAD_STEPS; i++) {
        char key[48];
        snprintf(key, sizeof key, "%s_ns", kvk_upload_step_name(i));
        if (json_object_set_new(o, key, json_integer((json_int_t)ns[i])) < 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}

static json_t *devices_json(const struct gpu *g)
{
    json_t *a = json_array();
    for (int i = 0; a && i < g->n_devices; i++) {
        const struct gpu_device *d = &g->dev[i];
        char cc[16];
        snprintf(cc, sizeof(cc), "%d.%d", d->cc_major, d->cc_minor);
        json_t *o = json_pack("{s:i, s:s, s:s, s:I, s:s, s:b, s:s}", "ordinal", d->ordinal, "name",
                              d->name, "pci_bus_id", d->pci_bus_id, "memory_bytes",
                              (json_int_t)d->memory_bytes, "compute_capability", cc, "ok",
                              !d->failed, "failed_reason", d->failed_reason);
        if (!o || json_array_append_new(a, o) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

static json_t *peers_json(const struct gpu *g)
{
    json_t *a = json_array();
    for (int i = 0; a && i < g->n_devices; i++)
        for (int j = 0; j < g->n_devices; j++) {
            if (i == j)
                continue;
            json_t *o = json_pack("{s:i, s:i, s:b, s:b, s:i}", "from", i, "to", j, "can_access",
                                  (int)g->peer_can[i][j], "enabled", (int)g->peer_on[i][j],
                                  "performance_rank", g->peer_rank[i][j]);
            if (!o || json_array_append_new(a, o) < 0) {
                json_decref(a);
                return NULL;
            }
        }
    return a;
}

int gpu_status(const struct gpu *g, json_t *ret)
{
    uint64_t pinned_bytes = 0;
    for (size_t i = 0; i < g->n_pinned; i++)
        pinned_bytes += g->pinned[i].bytes;

    json_t *arena =
        g->placement_decided
            ? json_pack("{s:s, s:s, s:b}", "placement",
                        g->placement_rc < 0 ? "refused" : gpu_place_to_string(g->placement), "why",
                        g->placement_why, "decided", 1)
            : json_pack("{s:n, s:s, s:b}", "placement", "why", "not decided yet", "decided", 0);
    int bad = 0;
    bad |= set(ret, "mode", json_string(g->cpu_mode ? "cpu" : "gpu"));
    bad |= set(ret, "reason", json_string(g->cpu_reason));
    bad |= set(ret, "device_count", json_integer(g->n_devices));
    bad |= set(ret, "devices", devices_json(g));
    bad |= set(ret, "peer_access", peers_json(g));
    bad |= set(ret, "arena", arena);
    bad |= set(ret, "pinned",
               json_pack("{s:I, s:I}", "count", (json_int_t)g->n_pinned, "bytes",
                         (json_int_t)pinned_bytes));
    bad |=
        set(ret, "mappings",
            json_pack("{s:I, s:I, s:I, s:I}", "count", (json_int_t)g->n_mappings, "bytes",
                      (json_int_t)g->mapped_bytes, "opened_total", (json_int_t)g->mappings_opened,
                      "close_errors", (json_int_t)g->mapping_close_errors));
    bad |= set(ret, "completions",
               json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "in_flight",
                         (json_int_t)g->outstanding, "ok", (json_int_t)g->completions_ok,
                         "failed", (json_int_t)g->completions_failed, "wake_ns_total",
                         (json_int_t)g->wake_ns_total, "wake_ns_max", (json_int_t)g->wake_ns_max,
                         "spin_us", (json_int_t)(g->spin_ns / 1000), "spin_fired",
                         (json_int_t)g->spin_fired, "spin_polls", (json_int_t)g->spin_polls));
    struct gpu_progcache_stats ps;
    gpu_progcache_stats(g, &ps);
    bad |= set(ret, "programs",
               json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "cached",
                         (json_int_t)ps.count, "max", (json_int_t)ps.max, "hits",
                         (json_int_t)ps.hits, "misses", (json_int_t)ps.misses, "evicted",
                         (json_int_t)ps.evicted, "uncached", (json_int_t)ps.uncached,
                         "uploads_waited", (json_int_t)ps.waited, "lookup_ns_total",
                         (json_int_t)ps.lookup_ns, "make_ns_total", (json_int_t)ps.make_ns,
                         "evict_ns_total", (json_int_t)ps.evict_ns));
    bad |= set(ret, "upload_steps", upload_steps_json());
    bad |= set(ret, "template_programs",
               json_pack("{s:I, s:I, s:I, s:I, s:I}", "live", (json_int_t)ps.tmpl_live, "made",
                         (json_int_t)ps.tmpl_made, "refused", (json_int_t)ps.tmpl_refused,
                         "requests_template", (json_int_t)ps.req_template, "requests_ops",
                         (json_int_t)ps.req_ops));
    return bad ? -ENOMEM : 0;
}
