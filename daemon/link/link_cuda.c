/* link_cuda.c: what memory the link's UCX moves, and the device arena (issue 30).
 *
 * At start the link asks its UCP context which memory types it handles (ucp_context_query,
 * UCP_ATTR_FIELD_MEMORY_TYPES). Debian's UCX handles host memory only; a CUDA-aware one
 * (scripts/build-ucx-cuda) also handles CUDA device memory: a rendezvous whose source and
 * target are device memory then moves device to device (cuda_ipc between two processes of one
 * host: 0.98 of cudaMemcpy D2D measured with ucx_perftest ucp_am_bw, bench/results/
 * ucx-cuda-h100-session10.md; GPUDirect RDMA across hosts). One-sided puts and gets of device
 * memory do not work in UCX 1.13.1 (no RMA lane reaches CUDA memory: the put is emulated and
 * the emulation memcpys device memory on the CPU, SIGSEGV), so device memory travels only as
 * active-message rendezvous (link_send + on_rndv), which the link already uses where puts are
 * not fast.
 *
 * Per peer, chosen at the handshake: HELLO and CHALLENGE carry HS_CAP_CUDA when our UCX
 * handles CUDA memory and cfg.gpu_direct_off is not set; a peer is `gpu_direct` when both
 * offered it. The bit travels outside the MAC (as HS_CAP_PROC): someone on the path can only
 * make a peer fall back to host staging, or claim a capability the UCX of the other side then
 * refuses at the first transfer (the request fails, the daemon stays up). Counted by reason.
 *
 * The device arena: memory UCX allocates on the current CUDA context (ucp_mem_map ALLOCATE with
 * UCS_MEMORY_TYPE_CUDA: cuMemAlloc, so the caller makes a context current first: the GPU module
 * does, and bench_link does). Staging and landing slots of chunks that go device to device.
 * Loop thread only. */
#include "link_int.h"

#include "log.h"

#include <errno.h>
#include <string.h>

void link_cuda_init(struct link *l)
{
    ucp_context_attr_t ca = {.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES};
    if (ucp_context_query(l->ctx, &ca) == UCS_OK)
        l->mem_types = ca.memory_types;
    l->mem_cuda = (l->mem_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA)) != 0;
    if (l->mem_cuda)
        log_info("link: UCX handles CUDA device memory%s", l->cfg.gpu_direct_off
                 ? ", but transport.gpu_direct is off: host staging with every peer"
                 : ": chunks may go device to device with peers whose UCX does too");
}

/* Our side of the choice: UCX handles CUDA memory (or a test says so), and it is not off. */
int link_cuda_offer(const struct link *l)
{
    return (l->mem_cuda || l->cfg.cuda_claim_test) && !l->cfg.gpu_direct_off;
}

bool link_cuda(const struct link *l)
{
    return l->mem_cuda;
}

/* At READY: both sides offered CUDA, or why not (static strings), counted. */
void link_cuda_peer_decide(struct link_peer *p)
{
    struct link *l = p->link;
    p->gpu_direct = 0;
    if (l->cfg.gpu_direct_off) {
        p->gpu_why = "transport.gpu_direct is off here";
        l->st.peers_host_staged_off++;
    } else if (!l->mem_cuda && !l->cfg.cuda_claim_test) {
        p->gpu_why = "this daemon's UCX handles host memory only"; /* or UCX_TLS left cuda out */
        l->st.peers_host_staged_local++;
    } else if (!p->remote_cuda) {
        p->gpu_why = "the peer's UCX handles host memory only (or it is off there, or the peer "
                     "is older)";
        l->st.peers_host_staged_peer++;
    } else {
        p->gpu_direct = 1;
        p->gpu_why = "both UCXs handle CUDA memory";
        l->st.peers_gpu_direct++;
    }
}

int link_peer_gpu_direct(const struct link_peer *p, const char **why)
{
    if (why)
        *why = p->gpu_why ? p->gpu_why : "not decided before the handshake";
    return p->gpu_direct;
}

int link_device_arena_map(struct link *l, size_t bytes, void **base_ret)
{
    if (!bytes || !base_ret)
        return -EINVAL;
    if (l->darena)
        return -EALREADY;
    if (!l->mem_cuda)
        return -ENOTSUP;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS |
                      UCP_MEM_MAP_PARAM_FIELD_MEMORY_TYPE,
        .length = bytes,
        .flags = UCP_MEM_MAP_ALLOCATE,
        .memory_type = UCS_MEMORY_TYPE_CUDA,
    };
    ucs_status_t s = ucp_mem_map(l->ctx, &mp, &l->darena_memh);
    if (s != UCS_OK) {
        log_warn("link: device arena of %zu bytes: ucp_mem_map: %s (is a CUDA context current?)",
                 bytes, ucs_status_string(s));
        l->darena_memh = NULL;
        return link_err_from_ucs(s);
    }
    ucp_mem_attr_t ma = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH |
                                       UCP_MEM_ATTR_FIELD_MEM_TYPE};
    if ((s = ucp_mem_query(l->darena_memh, &ma)) != UCS_OK ||
        ma.mem_type != UCS_MEMORY_TYPE_CUDA || ma.length < bytes) {
        log_warn("link: device arena: UCX gave %s memory, %zu bytes",
                 s == UCS_OK ? ucs_memory_type_names[ma.mem_type] : "unknown", ma.length);
        ucp_mem_unmap(l->ctx, l->darena_memh);
        l->darena_memh = NULL;
        return -ENOTSUP;
    }
    l->darena = ma.address;
    l->darena_len = bytes;
    *base_ret = l->darena;
    log_info("link: device arena of %zu bytes at %p (CUDA memory allocated by UCX)", bytes,
             l->darena);
    return 0;
}

void *link_device_arena(const struct link *l, size_t *len_ret)
{
    if (len_ret)
        *len_ret = l->darena ? l->darena_len : 0;
    return l->darena;
}

void link_cuda_done(struct link *l)
{
    if (l->darena_memh && l->ctx)
        ucp_mem_unmap(l->ctx, l->darena_memh);
    l->darena_memh = NULL;
    l->darena = NULL;
    l->darena_len = 0;
}

void link_cuda_status(const struct link *l, json_t *o)
{
    json_object_set_new(o, "cuda_memory", json_boolean(l->mem_cuda));
    json_object_set_new(o, "gpu_direct", json_string(!l->mem_cuda ? "no: UCX handles host memory only"
                                                     : l->cfg.gpu_direct_off
                                                         ? "off: transport.gpu_direct"
                                                         : "offered to peers"));
    json_object_set_new(o, "device_arena_bytes", json_integer((json_int_t)l->darena_len));
}

void link_cuda_peer_status(const struct link_peer *p, json_t *o)
{
    const char *why;
    json_object_set_new(o, "gpu_direct", json_boolean(link_peer_gpu_direct(p, &why)));
    json_object_set_new(o, "gpu_direct_why", json_string(why));
}
