/* proto_encode.c: the encoder of the local worker protocol (see proto.h): it refuses what the
 * decoder (proto_decode.c) would. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "proto_bytes.h"

/* ---- encode: size first, then write; the encoder refuses what the decoder would ---- */

struct wr {
    uint8_t *p;  /* NULL while sizing */
    size_t len;
};

static void w32(struct wr *w, uint32_t v)
{
    if (w->p)
        proto__put32(w->p + w->len, v);
    w->len += 4;
}
static void w64(struct wr *w, uint64_t v)
{
    if (w->p)
        proto__put64(w->p + w->len, v);
    w->len += 8;
}
static void wbytes(struct wr *w, const void *b, size_t n)
{
    if (w->p && n)
        memcpy(w->p + w->len, b, n);
    w->len += n;
}
static void wstr(struct wr *w, const char *s)
{
    size_t n = strlen(s);
    if (w->p)
        proto__put16(w->p + w->len, (uint16_t)n);
    w->len += 2;
    wbytes(w, s, n);
}
static void witems(struct wr *w, const struct proto_items *it)
{
    w32(w, it->n_groups);
    uint64_t total = 0;
    for (uint32_t g = 0; g < it->n_groups; g++) {
        w32(w, it->counts[g]);
        total += it->counts[g];
    }
    for (uint64_t k = 0; k < total; k++)
        w32(w, it->ids[k]);
}

static bool str_ok(const char *s, size_t max) { return strnlen(s, max + 1) <= max; }

static int enc_check(const struct proto_msg *m, const struct proto_limits *lim)
{
    const struct proto_items *it = NULL;
    switch (m->type) {
    case PROTO_HELLO:
        return str_ok(m->u.hello.name, PROTO_NAME_MAX) ? 0 : -EINVAL;
    case PROTO_WELCOME:
        return str_ok(m->u.welcome.name, PROTO_NAME_MAX) ? 0 : -EINVAL;
    case PROTO_REGISTER:
        if (m->u.reg.n_pools == 0 || m->u.reg.n_pools > LAYOUT_MAX_POOLS || !m->u.reg.pools ||
            !m->u.reg.json ||
            m->u.reg.json_len == 0 || m->u.reg.json_len > LAYOUT_JSON_MAX)
            return -EINVAL;
        return str_ok(m->u.reg.home, PROTO_HOME_MAX) ? 0 : -EINVAL;
    case PROTO_REGISTERED:
        return str_ok(m->u.registered.message, PROTO_MSG_MAX) ? 0 : -EINVAL;
    case PROTO_SEND:
        if (m->u.send.stream > 1)
            return -EINVAL;
        it = &m->u.send.items;
        break;
    case PROTO_READY:
        return m->u.ready.layers_upto <= LAYOUT_MAX_LAYERS && m->u.ready.event <= PROTO_EVENTS_MAX
                   ? 0 : -EINVAL;
    case PROTO_EVENTS:
        return m->u.events.n >= 1 && m->u.events.n <= PROTO_EVENTS_MAX && m->u.events.handles
                   ? 0 : -EINVAL;
    case PROTO_RECV:
        if (!str_ok(m->u.recv.ctx_instance, LAYOUT_NAME_MAX - 1) ||
            !str_ok(m->u.recv.ctx_home, PROTO_HOME_MAX) || !m->u.recv.ctx_instance[0] ||
            m->u.recv.tokens > PROTO_TOKENS_MAX)
            return -EINVAL;
        it = &m->u.recv.items;
        break;
    case PROTO_EVENT:
        if (m->u.event.flags & ~PROTO_EVF_HELD ||
            (m->u.event.flags && m->u.event.kind != PROTO_EV_FAILED))
            return -EINVAL;
        return str_ok(m->u.event.message, PROTO_MSG_MAX) ? 0 : -EINVAL;
    case PROTO_ERROR:
        return str_ok(m->u.error.message, PROTO_MSG_MAX) ? 0 : -EINVAL;
    case PROTO_FDS:
        return m->u.fds.n >= 1 && m->u.fds.n <= PROTO_FDS_MAX ? 0 : -EINVAL;
    case PROTO_CANCEL:
    case PROTO_PING:
    case PROTO_PONG:
        return 0;
    default:
        return -EINVAL;
    }
    if (it->n_groups > LAYOUT_MAX_GROUPS)
        return -EINVAL;
    uint64_t total = proto_items_total(it);
    if (total > lim->max_blocks)
        return -EMSGSIZE;
    if (total && !it->ids)
        return -EINVAL;
    return 0;
}

static void enc_payload(struct wr *w, const struct proto_msg *m)
{
    switch (m->type) {
    case PROTO_HELLO:
        w32(w, m->u.hello.version_min);
        w32(w, m->u.hello.version_max);
        w32(w, m->u.hello.pid);
        wstr(w, m->u.hello.name);
        break;
    case PROTO_WELCOME:
        w32(w, m->u.welcome.version);
        w32(w, m->u.welcome.max_frame);
        w32(w, m->u.welcome.max_blocks);
        w32(w, m->u.welcome.max_inflight);
        w64(w, m->u.welcome.epoch);
        wstr(w, m->u.welcome.name);
        break;
    case PROTO_REGISTER:
        w32(w, m->u.reg.n_pools);
        for (uint32_t i = 0; i < m->u.reg.n_pools; i++) {
            const struct proto_pool *p = &m->u.reg.pools[i];
            w32(w, p->kind);
            w32(w, (uint32_t)p->device);
            w64(w, p->bytes);
            w64(w, p->offset);
            wbytes(w, p->ipc_handle, PROTO_IPC_HANDLE);
            if (p->kind == PROTO_POOL_CUDA_VMM) {
                w32(w, p->n_fds);
                w64(w, p->chunk_bytes);
            }
        }
        w32(w, m->u.reg.json_len);
        wbytes(w, m->u.reg.json, m->u.reg.json_len);
        if (m->u.reg.home[0])
            wstr(w, m->u.reg.home);
        break;
    case PROTO_REGISTERED:
        w32(w, m->u.registered.status);
        w32(w, m->u.registered.rank);
        w64(w, m->u.registered.worker_id);
        wstr(w, m->u.registered.message);
        break;
    case PROTO_SEND:
        w64(w, m->u.send.req_id);
        w32(w, m->u.send.n_readers);
        witems(w, &m->u.send.items);
        if (m->u.send.stream) /* absent for a plain SEND: the encoding stays canonical */
            w32(w, m->u.send.stream);
        break;
    case PROTO_RECV:
        w64(w, m->u.recv.req_id);
        w32(w, (uint32_t)m->u.recv.ctx_dp_rank);
        w32(w, m->u.recv.deadline_ms);
        wstr(w, m->u.recv.ctx_instance);
        wstr(w, m->u.recv.ctx_home);
        witems(w, &m->u.recv.items);
        if (m->u.recv.tokens) /* absent when unknown: the encoding stays canonical */
            w64(w, m->u.recv.tokens);
        break;
    case PROTO_FDS:
        w32(w, m->u.fds.n);
        break;
    case PROTO_CANCEL:
        w64(w, m->u.cancel.req_id);
        break;
    case PROTO_READY:
        w64(w, m->u.ready.req_id);
        w32(w, m->u.ready.layers_upto);
        if (m->u.ready.event) /* absent without an event: the encoding stays canonical */
            w32(w, m->u.ready.event);
        break;
    case PROTO_EVENTS:
        w32(w, m->u.events.n);
        wbytes(w, m->u.events.handles, (size_t)m->u.events.n * PROTO_IPC_HANDLE);
        break;
    case PROTO_EVENT:
        w64(w, m->u.event.req_id);
        w32(w, m->u.event.kind);
        w32(w, m->u.event.error);
        w64(w, m->u.event.bytes);
        wstr(w, m->u.event.message);
        if (m->u.event.flags) /* absent when 0: what a conversation 1 library reads */
            w32(w, m->u.event.flags);
        break;
    case PROTO_ERROR:
        w32(w, m->u.error.error);
        wstr(w, m->u.error.message);
        break;
    default:
        break;
    }
}

int proto_encode(const struct proto_msg *m, const struct proto_limits *lim, uint8_t **ret,
                 size_t *retlen)
{
    if (!lim)
        lim = &proto__hard_limits;
    int rc = enc_check(m, lim);
    if (rc)
        return rc;
    struct wr w = {.p = NULL, .len = PROTO_HDR_SIZE};
    enc_payload(&w, m);
    if (w.len > lim->max_frame)
        return -EMSGSIZE;
    uint8_t *buf = malloc(w.len);
    if (!buf)
        return -ENOMEM;
    proto__put32(buf, PROTO_MAGIC);
    proto__put16(buf + 4, PROTO_VERSION);
    proto__put16(buf + 6, (uint16_t)m->type);
    proto__put32(buf + 8, 0);
    proto__put32(buf + 12, (uint32_t)(w.len - PROTO_HDR_SIZE));
    proto__put64(buf + 16, m->seq);
    size_t total = w.len;
    w.p = buf;
    w.len = PROTO_HDR_SIZE;
    enc_payload(&w, m);
    *ret = buf;
    *retlen = total;
    return 0;
}
