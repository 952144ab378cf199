/* link_rma.c: the UCX-allocated arena, puts into a peer's arena or into a registration the peer
 * described by an rkey blob, flushes, and registrations of existing memory.
 *
 * The arena comes from ucp_mem_map(UCP_MEM_MAP_ALLOCATE): same-host shared-memory puts reach
 * 10 GB/s only into UCX-allocated memory. Its packed rkey is sent in the handshake; the peer's
 * is unpacked once per endpoint (struct link_peer owns it). A put completes locally; only a
 * flush (ucp_ep_flush_nbx) says it landed remotely: flush before the message that reports the
 * data (trap 8). Loop thread only. */
#include "link_int.h"

#include "log.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

struct link_mreg {
    ucp_mem_h memh;
    void *rkey;      /* packed, released with ucp_rkey_buffer_release */
    size_t rkey_len;
};

struct rma_req {
    struct link *link;
    link_done_cb cb;
    void *arg;
    ucp_rkey_h rkey; /* owned when the put unpacked its own rkey */
};

/* Faults the arena in (page tables only: MADV_POPULATE_WRITE never changes its bytes, so it may
 * run while puts and copies already use the arena) on a thread of its own, so the start is not
 * delayed (512 MiB took 0.8 s on a loaded machine) and the loop takes no first-touch faults later.
 * The thread owns nothing but the range it was given and reads the link's prefault_stop between
 * steps: link_arena_done sets it and joins, so a stop never waits for the whole arena.
 * It runs at the daemon's own priority, yielding between steps. Not nice 19: on a loaded machine
 * such a thread crawled (an 8 MiB arena not done seconds after start at load 10 on 2 cores), and
 * when the daemon is killed its last live thread tears the process down, closing its sockets: the
 * peers learned of a SIGKILL from the reset only 1.5-17 s later, when that thread got the CPU
 * (issue 26, bench/results/load-2core-session10.md).
 * Pools are mapped without populating (wconn.c). Kernels before 5.14: no prefault.
 * (512 MiB: 1.3 s of that thread's time on the loaded 2-core build machine.) */
#define PREFAULT_STEP (2u << 20)

struct prefault_job {
    void *base;
    size_t len;
    atomic_bool *stop; /* borrowed: the link outlives the thread (joined in link_arena_done) */
};

static void *prefault_main(void *arg)
{
    struct prefault_job j = *(struct prefault_job *)arg;
    free(arg);
#ifdef MADV_POPULATE_WRITE
    /* in small steps: each call holds the process's mmap lock, which the loop needs for any
     * mmap (UCX endpoints, large mallocs); one 512 MiB call stalled peer handshakes ~300 ms */
    for (size_t off = 0; off < j.len && !atomic_load(j.stop); off += PREFAULT_STEP) {
        size_t n = j.len - off < PREFAULT_STEP ? j.len - off : PREFAULT_STEP;
        if (madvise((uint8_t *)j.base + off, n, MADV_POPULATE_WRITE) < 0)
            break; /* best effort; no logging off the loop */
        sched_yield();
    }
#else
    (void)j;
#endif
    return NULL;
}

static void link_prefault_start(struct link *l)
{
    struct prefault_job *j = malloc(sizeof *j);
    if (!j)
        return;
    atomic_store(&l->prefault_stop, false);
    *j = (struct prefault_job){l->arena, l->arena_len, &l->prefault_stop};
    if (pthread_create(&l->prefault, NULL, prefault_main, j) == 0)
        l->prefaulting = true;
    else
        free(j);
}

int link_arena_init(struct link *l)
{
    if (!l->cfg.arena_bytes)
        return 0;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS,
        .length = l->cfg.arena_bytes,
        .flags = UCP_MEM_MAP_ALLOCATE,
    };
    ucs_status_t s = ucp_mem_map(l->ctx, &mp, &l->arena_memh);
    if (s != UCS_OK) {
        log_error("link: arena of %zu bytes: %s", l->cfg.arena_bytes, ucs_status_string(s));
        return link_err_from_ucs(s);
    }
    ucp_mem_attr_t ma = {.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH};
    if ((s = ucp_mem_query(l->arena_memh, &ma)) != UCS_OK ||
        (s = ucp_rkey_pack(l->ctx, l->arena_memh, &l->arena_rkey, &l->arena_rkey_len)) != UCS_OK)
        return link_err_from_ucs(s);
    if (l->arena_rkey_len > LINK_RKEY_MAX) {
        log_error("link: arena rkey of %zu bytes is over %d", l->arena_rkey_len, LINK_RKEY_MAX);
        return -EMSGSIZE;
    }
    l->arena = ma.address;
    l->arena_len = l->cfg.arena_bytes; /* ma.length may be rounded up; we promise what we asked */
    if (l->cfg.arena_prefault)
        link_prefault_start(l);
    return 0;
}

void link_arena_done(struct link *l)
{
    if (l->prefaulting) {
        atomic_store(&l->prefault_stop, true);
        pthread_join(l->prefault, NULL);
    }
    l->prefaulting = false;
    if (l->arena_rkey)
        ucp_rkey_buffer_release(l->arena_rkey);
    if (l->arena_memh)
        ucp_mem_unmap(l->ctx, l->arena_memh);
    l->arena_rkey = NULL;
    l->arena_memh = NULL;
    l->arena = NULL;
    l->arena_len = 0;
}

void *link_arena(const struct link *l, size_t *len_ret)
{
    if (len_ret)
        *len_ret = l->arena_len;
    return l->arena;
}

int link_peer_set_rkey(struct link_peer *p, const void *blob, size_t len, uint64_t addr,
                       uint64_t alen)
{
    if (!p->ep || !len || len > LINK_RKEY_MAX || !alen || addr + alen < addr)
        return -EINVAL;
    ucs_status_t s = ucp_ep_rkey_unpack(p->ep, blob, &p->arena_rkey);
    if (s != UCS_OK)
        return link_err_from_ucs(s);
    p->arena_addr = addr;
    p->arena_len = alen;
    return 0;
}

int link_peer_arena_map(struct link_peer *p, uint8_t **base_ret)
{
    if (p->state != LINK_PEER_READY || !p->arena_rkey)
        return -ENOTCONN;
    if (!p->arena_map_tried && link_peer_put_fast(p)) {
        /* the rkey was unpacked before the lanes settled; each tl rkey maps the whole arena, so
         * its last byte must come out at base + len - 1 */
        void *b = NULL, *last = NULL;
        p->arena_map_tried = 1;
        if (ucp_rkey_ptr(p->arena_rkey, p->arena_addr, &b) == UCS_OK &&
            ucp_rkey_ptr(p->arena_rkey, p->arena_addr + p->arena_len - 1, &last) == UCS_OK &&
            (uint8_t *)last == (uint8_t *)b + p->arena_len - 1)
            p->arena_map = b;
        log_info("link peer %llu (%s): its arena is %smapped here%s",
                 (unsigned long long)p->serial, p->remote_id, p->arena_map ? "" : "not ",
                 p->arena_map ? ": copy threads write its landing slots" : ": puts");
    }
    if (!p->arena_map)
        return -ENOTSUP;
    *base_ret = p->arena_map;
    return 0;
}

void link_peer_hold(struct link_peer *p)
{
    p->refs++;
}

void link_peer_release(struct link_peer *p)
{
    link_peer_unref(p);
}

static void rma_done(void *request, ucs_status_t status, void *user_data)
{
    struct rma_req *r = user_data;
    r->link->inflight--;
    if (r->rkey)
        ucp_rkey_destroy(r->rkey);
    if (r->cb)
        r->cb(r->arg, link_err_from_ucs(status));
    free(r);
    if (request)
        ucp_request_free(request);
}

/* Issues a put or a flush and maps its three outcomes (pending, immediate, error). */
static int rma_finish(struct link *l, ucs_status_ptr_t s, struct rma_req *r)
{
    link_kick(l);
    if (s != NULL && !UCS_PTR_IS_ERR(s)) {
        l->inflight++;
        return 0;
    }
    if (r->rkey)
        ucp_rkey_destroy(r->rkey);
    int rc = s == NULL ? link_defer_done(l, r->cb, r->arg) : link_err_from_ucs(UCS_PTR_STATUS(s));
    free(r);
    return rc;
}

static int rma_put(struct link_peer *p, const void *local, ucp_mem_h memh, size_t len,
                   uint64_t raddr, ucp_rkey_h rkey, int own_rkey, link_done_cb cb, void *arg)
{
    struct link *l = p->link;
    struct rma_req *r = malloc(sizeof(*r));
    if (!r) {
        if (own_rkey)
            ucp_rkey_destroy(rkey);
        return -ENOMEM;
    }
    r->link = l;
    r->cb = cb;
    r->arg = arg;
    r->rkey = own_rkey ? rkey : NULL;
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = rma_done,
        .user_data = r,
    };
    const char *lb = local, *ab = l->arena;
    if (!memh && l->arena_memh && lb >= ab && lb + len <= ab + l->arena_len)
        memh = l->arena_memh;
    if (memh) {
        rp.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        rp.memh = memh;
    }
    ucs_status_ptr_t s = ucp_put_nbx(p->ep, local, len, raddr, rkey, &rp);
    int rc = rma_finish(l, s, r);
    if (rc == 0) {
        p->bytes_put += len;
        l->st.puts++;
        l->st.bytes_put += len;
    }
    return rc;
}

int link_put(struct link_peer *p, const void *local, size_t len, uint64_t remote_offset,
             link_done_cb cb, void *arg)
{
    if (p->state != LINK_PEER_READY)
        return -ENOTCONN;
    if (!p->arena_rkey || remote_offset > p->arena_len || len > p->arena_len - remote_offset)
        return -ERANGE;
    return rma_put(p, local, NULL, len, p->arena_addr + remote_offset, p->arena_rkey, 0, cb, arg);
}

int link_put_from(struct link_peer *p, const void *local, const struct link_mreg *m, size_t len,
                  uint64_t remote_offset, link_done_cb cb, void *arg)
{
    if (p->state != LINK_PEER_READY)
        return -ENOTCONN;
    if (!p->arena_rkey || remote_offset > p->arena_len || len > p->arena_len - remote_offset)
        return -ERANGE;
    return rma_put(p, local, m ? m->memh : NULL, len, p->arena_addr + remote_offset,
                   p->arena_rkey, 0, cb, arg);
}

int link_put_rkey(struct link_peer *p, const void *local, size_t len, const void *rkey,
                  size_t rkey_len, uint64_t remote_addr, link_done_cb cb, void *arg)
{
    if (p->state != LINK_PEER_READY)
        return -ENOTCONN;
    if (!rkey || !rkey_len || rkey_len > LINK_RKEY_MAX)
        return -EINVAL;
    ucp_rkey_h rk;
    ucs_status_t s = ucp_ep_rkey_unpack(p->ep, rkey, &rk);
    if (s != UCS_OK)
        return link_err_from_ucs(s);
    return rma_put(p, local, NULL, len, remote_addr, rk, 1, cb, arg);
}

int link_flush(struct link_peer *p, link_done_cb cb, void *arg)
{
    if (p->state != LINK_PEER_READY)
        return -ENOTCONN;
    struct rma_req *r = malloc(sizeof(*r));
    if (!r)
        return -ENOMEM;
    *r = (struct rma_req){.link = p->link, .cb = cb, .arg = arg};
    ucp_request_param_t rp = {
        .op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA,
        .cb.send = rma_done,
        .user_data = r,
    };
    return rma_finish(p->link, ucp_ep_flush_nbx(p->ep, &rp), r);
}

int link_mem_register(struct link *l, void *ptr, size_t len, struct link_mreg **ret)
{
    if (!ptr || !len)
        return -EINVAL;
    struct link_mreg *m = calloc(1, sizeof(*m));
    if (!m)
        return -ENOMEM;
    ucp_mem_map_params_t mp = {
        .field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH,
        .address = ptr,
        .length = len,
    };
    ucs_status_t s = ucp_mem_map(l->ctx, &mp, &m->memh);
    if (s != UCS_OK) {
        free(m);
        return link_err_from_ucs(s);
    }
    if ((s = ucp_rkey_pack(l->ctx, m->memh, &m->rkey, &m->rkey_len)) != UCS_OK) {
        ucp_mem_unmap(l->ctx, m->memh);
        free(m);
        return link_err_from_ucs(s);
    }
    *ret = m;
    return 0;
}

const void *link_mreg_rkey(const struct link_mreg *m, size_t *len_ret)
{
    *len_ret = m->rkey_len;
    return m->rkey;
}

struct link_mreg *link_mreg_free(struct link *l, struct link_mreg *m)
{
    if (!m)
        return NULL;
    if (m->rkey)
        ucp_rkey_buffer_release(m->rkey);
    if (m->memh)
        ucp_mem_unmap(l->ctx, m->memh);
    free(m);
    return NULL;
}
