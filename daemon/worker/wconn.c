/* wconn.c: one worker connection: frames in (reassembled and decoded with the limits of
 * workers.*), dispatch by type, REGISTER (layout JSON + pools: memfds mapped once here), events
 * out. Every frame is distrusted: a frame that does not decode, comes in the wrong state, or
 * brings fds it should not, gets an ERROR frame and the connection is closed; a registration the
 * daemon cannot accept gets REGISTERED with a typed error and the connection stays (also when
 * the daemon itself had no descriptor left for the pools' fds: INTERNAL, naming the limit). */
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon.h"
#include "engine.h"
#include "registry_gpu.h"
#include "stream.h"
#include "workers.h"

#define WCONN_READS_PER_WAKEUP 16 /* so one busy worker cannot starve the loop */

static void wsend(struct wconn *c, struct proto_msg *m)
{
    if (c->xc.closing || c->broken)
        return;
    m->seq = ++c->seq;
    uint8_t *buf;
    size_t len;
    if (proto_encode(m, NULL, &buf, &len)) {
        log_error("worker %llu: cannot encode %s", (unsigned long long)c->xc.id, proto_type_to_string(m->type));
        return;
    }
    wconn_send_frame(c, buf, len); /* queued while the socket is full (wconn_send.c) */
}

void wconn_event(struct wconn *c, uint64_t req_id, uint32_t kind, kvf_error_t error,
                 uint64_t bytes, const char *message)
{
    wconn_event_flags(c, req_id, kind, error, bytes, message, 0);
}

void wconn_event_flags(struct wconn *c, uint64_t req_id, uint32_t kind, kvf_error_t error,
                       uint64_t bytes, const char *message, uint32_t flags)
{
    struct proto_msg m = {.type = PROTO_EVENT};
    m.u.event.flags = flags;
    m.u.event.req_id = req_id;
    m.u.event.kind = kind;
    m.u.event.error = error;
    m.u.event.bytes = bytes;
    snprintf(m.u.event.message, sizeof m.u.event.message, "%s", message ? message : "");
    wsend(c, &m);
}

/* A protocol violation: ERROR frame, then close. */
static void violation(struct wconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void violation(struct wconn *c, const char *fmt, ...)
{
    struct proto_msg m = {.type = PROTO_ERROR};
    m.u.error.error = KVF_E_BAD_REQUEST;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m.u.error.message, sizeof m.u.error.message, fmt, ap);
    va_end(ap);
    c->w->counters.bad_frames++;
    log_warn("worker %llu (pid %d uid %u): %s: closing", (unsigned long long)c->xc.id, (int)c->peer.pid,
             (unsigned)c->peer.uid, m.u.error.message);
    wsend(c, &m);
    wconn_close(c, m.u.error.message);
}

static void on_close(uv_handle_t *h)
{
    struct wconn *c = h->data;
    struct workers *w = c->w;
    close(c->fd);
    frame_reader_done(&c->rd);
    outq_done(&c->outq);
    fdpass_close_all(c->fds_ahead, c->n_fds_ahead);
    free(c->fds_ahead);
    for (struct wconn **pp = &w->conns; *pp; pp = &(*pp)->next)
        if (*pp == c) {
            *pp = c->next;
            break;
        }
    w->n_conns--;
    free(c);
}

void wconn_close(struct wconn *c, const char *why)
{
    if (c->xc.closing)
        return;
    c->xc.closing = true;
    log_info("worker %llu (pid %d%s%s): closed: %s", (unsigned long long)c->xc.id, (int)c->peer.pid,
             c->xc.rank ? ", " : "", c->xc.rank ? c->xc.rank->layout.instance : "", why);
    transfers_conn_gone(&c->w->xt, &c->xc);
    wprefault_cancel(c); /* before its rank (the job's pins keep the pools mapped till it ends) */
    if (c->xc.rank) {
        engine_rank_removed(c->w->d->engine, c->xc.rank);
        registry_remove(&c->w->reg, c->xc.rank);
        c->xc.rank = NULL;
    }
    wlimits_conn_gone(c);
    wconn_send_final(c); /* what was owed, and why it closes, as far as the socket takes it */
    uv_poll_stop(&c->poll);
    uv_close((uv_handle_t *)&c->poll, on_close);
}

void wconn_close_later(struct wconn *c)
{
    c->broken = true;
    workers_reap_soon(c->w);
}

/* ---- REGISTER ---- */

static void registered(struct wconn *c, kvf_error_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void registered(struct wconn *c, kvf_error_t status, const char *fmt, ...)
{
    struct proto_msg m = {.type = PROTO_REGISTERED};
    m.u.registered.status = status;
    if (c->xc.rank) {
        m.u.registered.rank = layout_rank(&c->xc.rank->layout);
        m.u.registered.worker_id = c->xc.rank->worker_id;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m.u.registered.message, sizeof m.u.registered.message, fmt, ap);
    va_end(ap);
    if (status != KVF_OK) {
        c->w->counters.register_refused++;
        log_warn("worker %llu (pid %d): registration refused: %s", (unsigned long long)c->xc.id,
                 (int)c->peer.pid, m.u.registered.message);
    }
    wsend(c, &m);
}

/* A GPU rank's CUDA events: refused BAD_REQUEST naming why; the connection stays. */
static void on_events(struct wconn *c, const struct proto_events *ev)
{
    char msg[PROTO_MSG_MAX + 1];
    struct reg_rank *rk = c->xc.rank;
    if (!rk) {
        registered(c, KVF_E_BAD_REQUEST, "EVENTS before REGISTER: events belong to a rank");
        return;
    }
    if (reg_gpu_events(rk->gpu, layout_rank(&rk->layout), ev, msg, sizeof msg) < 0) {
        registered(c, KVF_E_BAD_REQUEST, "%s", msg);
        return;
    }
    log_info("worker %llu (pid %d): %s", (unsigned long long)c->xc.id, (int)c->peer.pid, msg);
    registered(c, KVF_OK, "%s", msg);
}

/* Maps the host pools; 0 or -EINVAL with a message. */
static int map_pools(const struct layout *l, const struct proto_register *g, const int *fds,
                     struct copy_mem *mem, char *msg, size_t len)
{
    memset(mem, 0, sizeof *mem);
    mem->n = l->n_pools;
    unsigned k = 0;
    for (uint32_t i = 0; i < l->n_pools; i++) {
        const struct proto_pool *p = &g->pools[i];
        if (p->kind == POOL_CUDA)
            continue; /* GPU pools: opened from their IPC handles (registry_gpu.c) */
        if (p->kind == PROTO_POOL_CUDA_VMM) {
            k += p->n_fds; /* imported by registry_gpu.c from g->pools[i].fds */
            continue;
        }
        int fd = fds[k++];
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
            snprintf(msg, len, "pool %u: the fd is not a memfd", i);
            return -EINVAL;
        }
        if ((uint64_t)st.st_size < p->bytes) {
            snprintf(msg, len, "pool %u: memfd of %lld bytes, the layout needs %llu", i,
                     (long long)st.st_size, (unsigned long long)p->bytes);
            return -EINVAL;
        }
        int seals = fcntl(fd, F_GET_SEALS);
        if (seals < 0 || !(seals & F_SEAL_SHRINK)) {
            snprintf(msg, len, "pool %u: the memfd must be sealed with F_SEAL_SHRINK (a pool that "
                     "can shrink under the daemon is refused)", i);
            return -EINVAL;
        }
        if (p->bytes == 0)
            continue; /* an empty pool (a stage without layers of its group): nothing to map */
        int prot = l->role == ROLE_GENERATION ? PROT_READ | PROT_WRITE : PROT_READ;
        /* mapped once (DESIGN §3), not populated: MAP_POPULATE here stalled the loop ~1 s per
         * 2.7 GiB (bench_register_stall); the pages the worker holds are mapped in after
         * REGISTER on the copy threads instead (wprefault.c) */
        void *b = mmap(NULL, p->bytes, prot, MAP_SHARED, fd, 0);
        if (b == MAP_FAILED) {
            snprintf(msg, len, "pool %u: mmap of %llu bytes: %s", i, (unsigned long long)p->bytes,
                     strerror(errno));
            return -EINVAL;
        }
        mem->base[i] = b;
        mem->size[i] = p->bytes;
    }
    return 0;
}

/* The fds of this frame (or of an FDS frame ahead of it) could not be received: the daemon is
 * at its own RLIMIT_NOFILE. The worker did nothing wrong; its connection stays. */
static bool fds_lost(struct wconn *c)
{
    return c->fds_lost || frame_reader_frame_lost_fds(&c->rd);
}

static void refuse_fds_lost(struct wconn *c)
{
    struct rlimit rl = {0};
    getrlimit(RLIMIT_NOFILE, &rl);
    registered(c, KVF_E_INTERNAL,
               "the daemon is out of file descriptors (its RLIMIT_NOFILE %llu is reached): the "
               "pools' fds could not be received; register again later, or raise the daemon's "
               "LimitNOFILE", (unsigned long long)rl.rlim_cur);
}

/* FDS: up to PROTO_FDS_MAX fds sent ahead of a REGISTER with more host pools (proto.h). */
static void on_fds(struct wconn *c, const struct proto_fds *f)
{
    int fds[FDPASS_MAX_FDS];
    unsigned n = frame_reader_frame_has_fds(&c->rd)
                     ? frame_reader_take_fds(&c->rd, fds, FDPASS_MAX_FDS) : 0;
    if (fds_lost(c) && !c->xc.rank) { /* the REGISTER that follows is refused */
        fdpass_close_all(fds, n);
        c->fds_lost = true;
        return;
    }
    if (n != f->n || c->xc.rank || c->n_fds_ahead + n > LAYOUT_MAX_POOLS) {
        fdpass_close_all(fds, n);
        violation(c, "FDS frame with %u fds (it says %u; %u held ahead, limit %d)%s", n, f->n,
                  c->n_fds_ahead, LAYOUT_MAX_POOLS, c->xc.rank ? " after REGISTER" : "");
        return;
    }
    if (!c->fds_ahead && !(c->fds_ahead = malloc(LAYOUT_MAX_POOLS * sizeof(int)))) {
        fdpass_close_all(fds, n);
        violation(c, "out of memory holding fds");
        return;
    }
    memcpy(c->fds_ahead + c->n_fds_ahead, fds, n * sizeof(int));
    c->n_fds_ahead += n;
}

/* A REGISTER's layout, checked against the pools it lists (count, kind, bytes, device); each
 * VMM pool gets its fds. False: refused, the worker told (registered). */
static bool register_layout(struct wconn *c, struct proto_register *g, int *fds, struct layout *l)
{
    char err[PROTO_MSG_MAX + 1] = "";
    if (c->xc.rank) {
        registered(c, KVF_E_BAD_REQUEST, "this connection is already registered");
        return false;
    }
    if (layout_from_json(g->json, g->json_len, l, err, sizeof err)) {
        registered(c, KVF_E_BAD_REQUEST, "layout: %.480s", err);
        return false;
    }
    if (l->n_pools != g->n_pools) {
        registered(c, KVF_E_BAD_REQUEST, "REGISTER lists %u pools, the layout %u", g->n_pools,
                   l->n_pools);
        return false;
    }
    for (uint32_t i = 0, k = 0; i < g->n_pools; i++) { /* the VMM pools' fds, in pool order */
        g->pools[i].fds = g->pools[i].kind == PROTO_POOL_CUDA_VMM ? fds + k : NULL;
        k += g->pools[i].kind == POOL_HOST ? 1 : g->pools[i].fds ? g->pools[i].n_fds : 0;
    }
    for (uint32_t i = 0; i < l->n_pools; i++)
        if (l->pools[i].kind != proto_pool_layout_kind(&g->pools[i]) ||
            l->pools[i].bytes != g->pools[i].bytes ||
            (l->pools[i].kind == POOL_CUDA && l->pools[i].device != g->pools[i].device)) {
            registered(c, KVF_E_BAD_REQUEST, "pool %u: REGISTER says %s %llu bytes, the layout %s "
                       "%llu bytes", i,
                       proto_pool_layout_kind(&g->pools[i]) == POOL_CUDA ? "cuda" : "host",
                       (unsigned long long)g->pools[i].bytes,
                       l->pools[i].kind == POOL_CUDA ? "cuda" : "host",
                       (unsigned long long)l->pools[i].bytes);
            return false;
        }
    return true;
}

/* The checked rank: its pools mapped (GPU pools opened), added to the registry, told to the
 * engine and its worker, its pools prefaulted. A refusal is told to the worker. */
static void register_rank(struct wconn *c, struct proto_register *g, const struct layout *l,
                          int *fds)
{
    char err[PROTO_MSG_MAX + 1] = "";
    struct copy_mem mem = {0};
    if (map_pools(l, g, fds, &mem, err, sizeof err)) {
        registry_unmap(c->w->reg.um, &mem);
        registered(c, KVF_E_BAD_REQUEST, "%s", err);
        return;
    }
    struct reg_gpu *rg = NULL;
    if (reg_gpu_wanted(l) && reg_gpu_open(c->w->d->gpu, l, g, &rg, err, sizeof err)) {
        registry_unmap(c->w->reg.um, &mem);
        registered(c, KVF_E_BAD_REQUEST, "%s", err);
        return;
    }
    struct reg_rank *rk;
    int rc = registry_add(&c->w->reg, l, &mem, &c->xc, uv_now(&c->w->d->loop), &rk, err, sizeof err);
    if (rc) {
        registry_unmap(c->w->reg.um, &mem);
        reg_gpu_unref(rg);
        registered(c, rc == -ENOMEM ? KVF_E_INTERNAL : KVF_E_BAD_REQUEST, "%s", err);
        return;
    }
    rk->gpu = rg;
    c->xc.rank = rk;
    snprintf(rk->home, sizeof rk->home, "%s", g->home);
    engine_rank_registered(c->w->d->engine, rk);
    c->w->counters.registered++;
    log_req(LOG_LVL_INFO, 0, NULL, l->instance,
            "worker %llu (pid %d): registered %s rank %u (%s, tp %u/%u pp %u/%u, instance "
            "epoch %llu%s)", (unsigned long long)c->xc.id, (int)c->peer.pid, l->instance,
            layout_rank(l), layout_role_to_string(l->role), l->tp_rank, l->tp_size, l->pp_rank,
            l->pp_size, (unsigned long long)rk->inst->inst_epoch,
            rk->inst->n_registered == 1 ? ", new" : "");
    registered(c, KVF_OK, "registered");
    wprefault_start(c);
    transfers_registered(&c->w->xt, l->instance);
}

static void on_register(struct wconn *c, struct proto_register *g)
{
    int *fds = c->fds_ahead ? c->fds_ahead : malloc(LAYOUT_MAX_POOLS * sizeof(int));
    unsigned nfds = c->n_fds_ahead;
    c->fds_ahead = NULL;
    c->n_fds_ahead = 0;
    if (!fds) {
        violation(c, "out of memory holding fds");
        return;
    }
    if (frame_reader_frame_has_fds(&c->rd))
        nfds += frame_reader_take_fds(&c->rd, fds + nfds, LAYOUT_MAX_POOLS - nfds);
    if (fds_lost(c) && !c->xc.rank) {
        c->fds_lost = false;
        refuse_fds_lost(c);
        goto out;
    }
    uint32_t want = proto_register_fds(g);
    if (nfds != want) {
        fdpass_close_all(fds, nfds);
        free(fds);
        violation(c, "REGISTER came with %u fds for %u pool fds (memfds, VMM chunks)", nfds,
                  want);
        return;
    }
    struct layout l;
    if (register_layout(c, g, fds, &l))
        register_rank(c, g, &l, fds);
out:
    fdpass_close_all(fds, nfds); /* mapped or refused: the daemon keeps no fds */
    free(fds);
}

/* ---- dispatch ---- */

/* The conversation (proto.h PROTO_CONV_*): the highest both speak; false: none, refused. */
static bool agree_conv(struct wconn *c, const struct proto_hello *h)
{
    if (h->version_min > PROTO_CONV_MAX || h->version_max < PROTO_CONV_MIN) {
        violation(c, "protocol versions %u..%u not supported (this daemon speaks %d..%d)",
                  h->version_min, h->version_max, PROTO_CONV_MIN, PROTO_CONV_MAX);
        return false;
    }
    c->xc.conv = h->version_max < PROTO_CONV_MAX ? h->version_max : PROTO_CONV_MAX;
    return true;
}

static void on_frame(struct wconn *c, const uint8_t *f, size_t len)
{
    struct proto_msg m;
    char err[256];
    c->w->xt.frame_ns = uv_hrtime(); /* the same-daemon timeline (xfer_phases.h) */
    if (!wlimits_access(c)) /* per frame: a reload may have revoked it (one compare if not) */
        return;
    int rc = proto_decode(f, len, &c->w->lim, &m, err, sizeof err);
    if (rc) {
        violation(c, "bad frame: %s", err);
        return;
    }
    if (m.type != PROTO_REGISTER && m.type != PROTO_FDS && frame_reader_frame_has_fds(&c->rd)) {
        violation(c, "%s frame came with %u fds", proto_type_to_string(m.type), c->rd.nfds);
        goto out;
    }
    if (c->n_fds_ahead && m.type != PROTO_REGISTER && m.type != PROTO_FDS) {
        violation(c, "%s frame after FDS frames (they must be followed by REGISTER)",
                  proto_type_to_string(m.type));
        goto out;
    }
    if (!c->hello && m.type != PROTO_HELLO) {
        violation(c, "%s before HELLO", proto_type_to_string(m.type));
        goto out;
    }
    switch (m.type) {
    case PROTO_HELLO: {
        if (c->hello) {
            violation(c, "second HELLO");
            break;
        }
        if (!agree_conv(c, &m.u.hello))
            break;
        c->hello = true;
        c->rd.lim.max_frame = c->w->lim.max_frame; /* past HELLO: frames up to workers.max_frame */
        c->xc.pid = m.u.hello.pid;
        snprintf(c->name, sizeof c->name, "%s", m.u.hello.name);
        struct proto_msg wm = {.type = PROTO_WELCOME};
        wm.u.welcome.version = c->xc.conv;
        wm.u.welcome.max_frame = c->w->lim.max_frame;
        wm.u.welcome.max_blocks = c->w->lim.max_blocks;
        wm.u.welcome.max_inflight = (uint32_t)c->w->d->cfg.workers_max_inflight;
        wm.u.welcome.epoch = c->w->epoch;
        snprintf(wm.u.welcome.name, sizeof wm.u.welcome.name, "kvferryd %s", KVF_VERSION);
        wsend(c, &wm);
        break;
    }
    case PROTO_FDS:
        on_fds(c, &m.u.fds);
        break;
    case PROTO_REGISTER:
        on_register(c, &m.u.reg);
        break;
    case PROTO_SEND:
        transfers_send(&c->w->xt, &c->xc, &m.u.send);
        break;
    case PROTO_RECV:
        transfers_recv(&c->w->xt, &c->xc, &m.u.recv);
        break;
    case PROTO_CANCEL:
        transfers_cancel(&c->w->xt, &c->xc, m.u.cancel.req_id);
        break;
    case PROTO_READY:
        stream_send_ready(&c->w->xt, &c->xc, &m.u.ready);
        break;
    case PROTO_EVENTS:
        on_events(c, &m.u.events);
        break;
    case PROTO_PING:
        wsend(c, &(struct proto_msg){.type = PROTO_PONG});
        break;
    case PROTO_PONG:
        break;
    default:
        violation(c, "a worker does not send %s", proto_type_to_string(m.type));
        break;
    }
out:
    proto_msg_done(&m);
}

void wconn_readable(uv_poll_t *p, int status, int events)
{
    struct wconn *c = p->data;
    if (c->xc.closing)
        return;
    if (status < 0) {
        wconn_close(c, uv_strerror(status));
        return;
    }
    if (events & UV_WRITABLE) {
        wconn_writable(c);
        if (c->xc.closing || !(events & UV_READABLE))
            return;
    }
    for (int round = 0; round < WCONN_READS_PER_WAKEUP && !c->xc.closing && !c->broken; round++) {
        if (!wlimits_frame_room(c))
            return;
        c->w->xt.read_ns = uv_hrtime();
        ssize_t n = frame_reader_fill(&c->rd, c->fd, MSG_DONTWAIT);
        if (n == -EAGAIN)
            return;
        /* a read that left room took all there was: the poll (level-triggered) says when more
         * comes, so no second read just to hear EAGAIN */
        bool drained = n > 0 && c->rd.len < c->rd.cap;
        if (n == 0) {
            if (c->xc.rank)
                c->w->counters.lost++; /* a registered worker that left without a word */
            wconn_close(c, "the worker closed the connection");
            return;
        }
        if (n < 0) {
            if (n == -EBADMSG || n == -EMSGSIZE)
                violation(c, "bad file descriptors attached (%s)", strerror((int)-n));
            else
                wconn_close(c, strerror((int)-n));
            return;
        }
        const uint8_t *f;
        size_t len;
        char err[256];
        int rc = 0;
        while (!c->xc.closing && (rc = frame_reader_next(&c->rd, &f, &len, err, sizeof err)) == 1)
            on_frame(c, f, len);
        if (!c->xc.closing && rc < 0) {
            violation(c, "%s%s", c->hello ? "" : "the first frame must be a HELLO: ", err);
            return;
        }
        if (!c->xc.closing)
            wlimits_frame_after(c);
        if (drained)
            return;
    }
}
