/* proto_decode.c: the decoder of the local worker protocol (see proto.h). Every read is
 * bounds-checked against the frame; every count is checked before anything is allocated. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "proto_bytes.h"

static void seterr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void seterr(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* ---- reader: a cursor over the payload; the first failure sticks ---- */

struct rd {
    const uint8_t *p;
    size_t left;
    int rc;
    char *err;
    size_t errlen;
};

static bool rd_need(struct rd *r, size_t n, const char *field)
{
    if (r->rc)
        return false;
    if (r->left < n) {
        r->rc = -EINVAL;
        seterr(r->err, r->errlen, "truncated payload: %s needs %zu bytes, %zu left", field, n, r->left);
        return false;
    }
    return true;
}

static uint32_t rd32(struct rd *r, const char *field)
{
    if (!rd_need(r, 4, field))
        return 0;
    uint32_t v = proto__get32(r->p);
    r->p += 4;
    r->left -= 4;
    return v;
}

static uint64_t rd64(struct rd *r, const char *field)
{
    if (!rd_need(r, 8, field))
        return 0;
    uint64_t v = proto__get64(r->p);
    r->p += 8;
    r->left -= 8;
    return v;
}

static void rdbytes(struct rd *r, void *out, size_t n, const char *field)
{
    if (!rd_need(r, n, field))
        return;
    memcpy(out, r->p, n);
    r->p += n;
    r->left -= n;
}

static void rd_fail(struct rd *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rd_fail(struct rd *r, const char *fmt, ...)
{
    if (r->rc)
        return;
    r->rc = -EINVAL;
    if (r->err && r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
}

/* u16 length + bytes into out[cap] (cap includes the NUL); max = cap - 1. */
static void rdstr(struct rd *r, char *out, size_t cap, const char *field)
{
    if (!rd_need(r, 2, field))
        return;
    uint16_t n = proto__get16(r->p);
    r->p += 2;
    r->left -= 2;
    if (n > cap - 1) {
        rd_fail(r, "%s too long: %u bytes, at most %zu", field, n, cap - 1);
        return;
    }
    if (!rd_need(r, n, field))
        return;
    if (memchr(r->p, 0, n)) {
        rd_fail(r, "%s contains a NUL byte", field);
        return;
    }
    memcpy(out, r->p, n);
    out[n] = 0;
    r->p += n;
    r->left -= n;
}

static void rd_items(struct rd *r, const struct proto_limits *lim, struct proto_items *it)
{
    it->n_groups = rd32(r, "n_groups");
    if (r->rc)
        return;
    if (it->n_groups > LAYOUT_MAX_GROUPS) {
        rd_fail(r, "n_groups %u over the limit %u", it->n_groups, LAYOUT_MAX_GROUPS);
        return;
    }
    uint64_t total = 0;
    for (uint32_t g = 0; g < it->n_groups; g++) {
        it->counts[g] = rd32(r, "count");
        total += it->counts[g];
    }
    if (r->rc)
        return;
    if (total > lim->max_blocks) {
        rd_fail(r, "%llu item ids over the limit %u (workers.max_blocks)", (unsigned long long)total,
                lim->max_blocks);
        return;
    }
    if (r->left < total * 4) { /* what follows the ids is checked by the message's decoder */
        rd_fail(r, "item ids: counts say %llu bytes, payload has %zu", (unsigned long long)(total * 4),
                r->left);
        return;
    }
    if (total == 0)
        return;
    it->ids = malloc(total * sizeof(uint32_t));
    if (!it->ids) {
        r->rc = -ENOMEM;
        seterr(r->err, r->errlen, "out of memory for %llu ids", (unsigned long long)total);
        return;
    }
    for (uint64_t k = 0; k < total; k++)
        it->ids[k] = proto__get32(r->p + 4 * k);
    r->p += total * 4;
    r->left -= total * 4;
}

/* ---- header ---- */

int proto_hdr_decode(const uint8_t *buf, size_t len, const struct proto_limits *lim,
                     struct proto_hdr *ret, char *err, size_t errlen)
{
    if (!lim)
        lim = &proto__hard_limits;
    if (len < PROTO_HDR_SIZE) {
        seterr(err, errlen, "frame header truncated: %zu of %d bytes", len, PROTO_HDR_SIZE);
        return -EPROTO;
    }
    uint32_t magic = proto__get32(buf);
    if (magic != PROTO_MAGIC) {
        seterr(err, errlen, "bad magic 0x%08x (not a kvferry worker frame)", magic);
        return -EPROTO;
    }
    struct proto_hdr h = {
        .version = proto__get16(buf + 4),
        .type = proto__get16(buf + 6),
        .flags = proto__get32(buf + 8),
        .length = proto__get32(buf + 12),
        .seq = proto__get64(buf + 16),
    };
    if (h.version != PROTO_VERSION) {
        seterr(err, errlen, "protocol version %u not supported (this side speaks %d)", h.version,
               PROTO_VERSION);
        return -EPROTO;
    }
    if (h.type == 0 || h.type >= PROTO__TYPE_END) {
        seterr(err, errlen, "unknown frame type %u", h.type);
        return -EPROTO;
    }
    if (h.flags != 0) {
        seterr(err, errlen, "unknown flags 0x%x in %s", h.flags, proto_type_to_string(h.type));
        return -EPROTO;
    }
    if ((uint64_t)h.length + PROTO_HDR_SIZE > lim->max_frame) {
        seterr(err, errlen, "%s frame of %llu bytes over the limit %u (workers.max_frame)",
               proto_type_to_string(h.type), (unsigned long long)h.length + PROTO_HDR_SIZE,
               lim->max_frame);
        return -EMSGSIZE;
    }
    *ret = h;
    return 0;
}

/* ---- decode ---- */

static void dec_register(struct rd *r, struct proto_register *g)
{
    g->n_pools = rd32(r, "n_pools");
    if (r->rc)
        return;
    if (g->n_pools == 0 || g->n_pools > LAYOUT_MAX_POOLS) {
        rd_fail(r, "n_pools %u out of range [1, %u]", g->n_pools, LAYOUT_MAX_POOLS);
        return;
    }
    if (r->left / (4 + 4 + 8 + 8 + PROTO_IPC_HANDLE) < g->n_pools) {
        rd_fail(r, "n_pools %u: the payload holds fewer pools", g->n_pools);
        return;
    }
    g->pools = calloc(g->n_pools, sizeof(*g->pools));
    if (!g->pools) {
        r->rc = -ENOMEM;
        seterr(r->err, r->errlen, "out of memory for %u pools", g->n_pools);
        return;
    }
    for (uint32_t i = 0; i < g->n_pools && !r->rc; i++) {
        struct proto_pool *p = &g->pools[i];
        p->kind = rd32(r, "pool kind");
        p->device = (int32_t)rd32(r, "pool device");
        p->bytes = rd64(r, "pool bytes");
        p->offset = rd64(r, "pool offset");
        rdbytes(r, p->ipc_handle, PROTO_IPC_HANDLE, "pool ipc_handle");
        if (!r->rc && p->kind == PROTO_POOL_CUDA_VMM) {
            p->n_fds = rd32(r, "pool n_fds");
            p->chunk_bytes = rd64(r, "pool chunk_bytes");
            if (!r->rc && (p->n_fds == 0 || p->n_fds > PROTO_VMM_MAX_FDS || p->chunk_bytes == 0 ||
                           p->chunk_bytes > UINT64_MAX / p->n_fds || p->device < 0 ||
                           p->offset > p->chunk_bytes * p->n_fds ||
                           p->bytes > p->chunk_bytes * p->n_fds - p->offset)) {
                rd_fail(r, "pool %u: VMM pool of %u chunks of %llu bytes (1..%u chunks), device "
                        "%d, bytes [%llu, +%llu) must lie inside them", i, p->n_fds,
                        (unsigned long long)p->chunk_bytes, PROTO_VMM_MAX_FDS, p->device,
                        (unsigned long long)p->offset, (unsigned long long)p->bytes);
                return;
            }
        }
        if (r->rc)
            return;
        if (p->kind != POOL_HOST && p->kind != POOL_CUDA && p->kind != PROTO_POOL_CUDA_VMM) {
            rd_fail(r, "pool %u: unknown kind %u", i, p->kind);
            return;
        }
        /* a pool may be empty: a PP stage without layers of that group (uneven splits) */
        if (p->kind == POOL_HOST) {
            static const uint8_t zero[PROTO_IPC_HANDLE];
            if (p->device != -1 || p->offset != 0 || memcmp(p->ipc_handle, zero, PROTO_IPC_HANDLE)) {
                rd_fail(r, "pool %u: a host pool has device -1, offset 0 and no IPC handle", i);
                return;
            }
        } else if (p->device < 0 || p->offset > UINT64_MAX - p->bytes) {
            rd_fail(r, "pool %u: CUDA pool with device %d offset %llu", i, p->device,
                    (unsigned long long)p->offset);
            return;
        }
    }
    g->json_len = rd32(r, "json_len");
    if (r->rc)
        return;
    if (g->json_len == 0 || g->json_len > LAYOUT_JSON_MAX) {
        rd_fail(r, "layout JSON of %u bytes out of range [1, %u]", g->json_len, LAYOUT_JSON_MAX);
        return;
    }
    if (r->left < g->json_len) {
        rd_fail(r, "layout JSON: length says %u bytes, payload has %zu", g->json_len, r->left);
        return;
    }
    if (memchr(r->p, 0, g->json_len)) {
        rd_fail(r, "layout JSON contains a NUL byte");
        return;
    }
    g->json = malloc(g->json_len + 1);
    if (!g->json) {
        r->rc = -ENOMEM;
        seterr(r->err, r->errlen, "out of memory for the layout JSON");
        return;
    }
    memcpy(g->json, r->p, g->json_len);
    g->json[g->json_len] = 0;
    r->p += g->json_len;
    r->left -= g->json_len;
    g->home[0] = 0;
    if (r->left > 0) { /* optional trailing home "host:port" (engine, issue 5) */
        rdstr(r, g->home, sizeof g->home, "home");
        if (!r->rc && !g->home[0]) /* absent, never empty: the encoding stays canonical */
            rd_fail(r, "home present but empty");
    }
    if (!r->rc && r->left != 0)
        rd_fail(r, "REGISTER: %zu trailing bytes", r->left);
}

static void dec_payload(struct rd *r, const struct proto_limits *lim, struct proto_msg *m)
{
    switch (m->type) {
    case PROTO_HELLO:
        m->u.hello.version_min = rd32(r, "version_min");
        m->u.hello.version_max = rd32(r, "version_max");
        m->u.hello.pid = rd32(r, "pid");
        rdstr(r, m->u.hello.name, sizeof m->u.hello.name, "name");
        if (!r->rc && m->u.hello.version_min > m->u.hello.version_max)
            rd_fail(r, "version_min %u > version_max %u", m->u.hello.version_min,
                    m->u.hello.version_max);
        break;
    case PROTO_WELCOME:
        m->u.welcome.version = rd32(r, "version");
        m->u.welcome.max_frame = rd32(r, "max_frame");
        m->u.welcome.max_blocks = rd32(r, "max_blocks");
        m->u.welcome.max_inflight = rd32(r, "max_inflight");
        m->u.welcome.epoch = rd64(r, "epoch");
        rdstr(r, m->u.welcome.name, sizeof m->u.welcome.name, "name");
        break;
    case PROTO_REGISTER:
        dec_register(r, &m->u.reg);
        break;
    case PROTO_REGISTERED:
        m->u.registered.status = rd32(r, "status");
        m->u.registered.rank = rd32(r, "rank");
        m->u.registered.worker_id = rd64(r, "worker_id");
        rdstr(r, m->u.registered.message, sizeof m->u.registered.message, "message");
        if (!r->rc && m->u.registered.status >= KVF_E__COUNT)
            rd_fail(r, "unknown status %u", m->u.registered.status);
        break;
    case PROTO_SEND:
        m->u.send.req_id = rd64(r, "req_id");
        m->u.send.n_readers = rd32(r, "n_readers");
        if (!r->rc && m->u.send.n_readers > LAYOUT_MAX_TP * LAYOUT_MAX_PP)
            rd_fail(r, "n_readers %u over the limit %u", m->u.send.n_readers,
                    LAYOUT_MAX_TP * LAYOUT_MAX_PP);
        rd_items(r, lim, &m->u.send.items);
        m->u.send.stream = 0;
        if (!r->rc && r->left > 0) { /* optional trailing stream flag (issue 28) */
            m->u.send.stream = rd32(r, "stream");
            if (!r->rc && m->u.send.stream != 1)
                rd_fail(r, "stream %u: 1 streams, absent does not", m->u.send.stream);
        }
        break;
    case PROTO_RECV:
        m->u.recv.req_id = rd64(r, "req_id");
        m->u.recv.ctx_dp_rank = (int32_t)rd32(r, "ctx_dp_rank");
        m->u.recv.deadline_ms = rd32(r, "deadline_ms");
        rdstr(r, m->u.recv.ctx_instance, sizeof m->u.recv.ctx_instance, "ctx_instance");
        rdstr(r, m->u.recv.ctx_home, sizeof m->u.recv.ctx_home, "ctx_home");
        if (!r->rc && m->u.recv.ctx_instance[0] == 0)
            rd_fail(r, "ctx_instance is empty");
        if (!r->rc && (m->u.recv.ctx_dp_rank < -1 || m->u.recv.ctx_dp_rank >= LAYOUT_MAX_TP))
            rd_fail(r, "ctx_dp_rank %d out of range [-1, %d)", m->u.recv.ctx_dp_rank, LAYOUT_MAX_TP);
        rd_items(r, lim, &m->u.recv.items);
        m->u.recv.tokens = 0;
        if (!r->rc && r->left > 0) { /* optional trailing tokens (issue 9: block sizes differ) */
            m->u.recv.tokens = rd64(r, "tokens");
            if (!r->rc && (m->u.recv.tokens == 0 || m->u.recv.tokens > PROTO_TOKENS_MAX))
                rd_fail(r, "tokens %llu out of range [1, %llu] (absent when unknown)",
                        (unsigned long long)m->u.recv.tokens, (unsigned long long)PROTO_TOKENS_MAX);
        }
        break;
    case PROTO_FDS:
        m->u.fds.n = rd32(r, "n");
        if (!r->rc && (m->u.fds.n == 0 || m->u.fds.n > PROTO_FDS_MAX))
            rd_fail(r, "FDS: n %u out of range [1, %u]", m->u.fds.n, PROTO_FDS_MAX);
        break;
    case PROTO_CANCEL:
        m->u.cancel.req_id = rd64(r, "req_id");
        break;
    case PROTO_READY:
        m->u.ready.req_id = rd64(r, "req_id");
        m->u.ready.layers_upto = rd32(r, "layers_upto");
        if (!r->rc && m->u.ready.layers_upto > LAYOUT_MAX_LAYERS)
            rd_fail(r, "layers_upto %u over the limit %u", m->u.ready.layers_upto,
                    LAYOUT_MAX_LAYERS);
        m->u.ready.event = 0;
        if (!r->rc && r->left > 0) { /* optional trailing event (issue 28: CUDA events) */
            m->u.ready.event = rd32(r, "event");
            if (!r->rc && (m->u.ready.event == 0 || m->u.ready.event > PROTO_EVENTS_MAX))
                rd_fail(r, "event %u out of range [1, %u] (absent when none)", m->u.ready.event,
                        PROTO_EVENTS_MAX);
        }
        break;
    case PROTO_EVENTS:
        m->u.events.n = rd32(r, "n");
        m->u.events.handles = NULL;
        if (!r->rc && (m->u.events.n == 0 || m->u.events.n > PROTO_EVENTS_MAX))
            rd_fail(r, "EVENTS: %u events, the limit is %u per rank", m->u.events.n,
                    PROTO_EVENTS_MAX);
        if (!r->rc && r->left != (size_t)m->u.events.n * PROTO_IPC_HANDLE)
            rd_fail(r, "EVENTS: %u handles need %u bytes, payload has %zu", m->u.events.n,
                    m->u.events.n * PROTO_IPC_HANDLE, r->left);
        if (!r->rc && !(m->u.events.handles = malloc((size_t)m->u.events.n * PROTO_IPC_HANDLE))) {
            r->rc = -ENOMEM;
            seterr(r->err, r->errlen, "out of memory for EVENTS");
        }
        if (!r->rc)
            rdbytes(r, m->u.events.handles, (size_t)m->u.events.n * PROTO_IPC_HANDLE, "handles");
        break;
    case PROTO_EVENT:
        m->u.event.req_id = rd64(r, "req_id");
        m->u.event.kind = rd32(r, "kind");
        m->u.event.error = rd32(r, "error");
        m->u.event.bytes = rd64(r, "bytes");
        rdstr(r, m->u.event.message, sizeof m->u.event.message, "message");
        m->u.event.flags = 0;
        if (!r->rc && r->left > 0) { /* optional trailing flags (conversation 2) */
            m->u.event.flags = rd32(r, "flags");
            if (!r->rc && (m->u.event.flags == 0 || m->u.event.flags & ~PROTO_EVF_HELD))
                rd_fail(r, "event flags 0x%x unknown (absent when 0)", m->u.event.flags);
            if (!r->rc && m->u.event.kind != PROTO_EV_FAILED)
                rd_fail(r, "event flags on a kind %u event (FAILED only)", m->u.event.kind);
        }
        if (!r->rc && (m->u.event.kind == 0 || m->u.event.kind >= PROTO__EV_END ||
                       m->u.event.kind == 4 || m->u.event.kind == 5))
            rd_fail(r, "unknown event kind %u", m->u.event.kind);
        if (!r->rc && m->u.event.error >= KVF_E__COUNT)
            rd_fail(r, "unknown error code %u", m->u.event.error);
        if (!r->rc && (m->u.event.kind == PROTO_EV_FAILED) != (m->u.event.error != KVF_OK))
            rd_fail(r, "event kind %u with error %u", m->u.event.kind, m->u.event.error);
        break;
    case PROTO_ERROR:
        m->u.error.error = rd32(r, "error");
        rdstr(r, m->u.error.message, sizeof m->u.error.message, "message");
        if (!r->rc && m->u.error.error >= KVF_E__COUNT)
            rd_fail(r, "unknown error code %u", m->u.error.error);
        break;
    case PROTO_PING:
    case PROTO_PONG:
        break;
    default:
        rd_fail(r, "unknown frame type %u", m->type);
        break;
    }
    if (!r->rc && r->left != 0)
        rd_fail(r, "%zu trailing bytes after %s", r->left, proto_type_to_string(m->type));
}

int proto_decode(const uint8_t *frame, size_t len, const struct proto_limits *lim,
                 struct proto_msg *ret, char *err, size_t errlen)
{
    if (!lim)
        lim = &proto__hard_limits;
    struct proto_hdr h;
    int rc = proto_hdr_decode(frame, len, lim, &h, err, errlen);
    if (rc)
        return rc;
    if (len != (size_t)PROTO_HDR_SIZE + h.length) {
        seterr(err, errlen, "%s frame: header says %u payload bytes, got %zu",
               proto_type_to_string(h.type), h.length, len - PROTO_HDR_SIZE);
        return -EINVAL;
    }
    struct proto_msg m;
    memset(&m, 0, sizeof m);
    m.type = h.type;
    m.seq = h.seq;
    struct rd r = {.p = frame + PROTO_HDR_SIZE, .left = h.length, .err = err, .errlen = errlen};
    dec_payload(&r, lim, &m);
    if (r.rc) {
        proto_msg_done(&m);
        return r.rc;
    }
    *ret = m;
    return 0;
}
