/* wraw.h: helpers for worker-socket suites (header-only, static inline): in-process ranks with
 * sealed memfd pools, waiting for a libkvferry event, and raw clients that speak the frame
 * protocol by hand (hostile or precise ones). Include after wtest.h. */
#ifndef KVF_WRAW_H
#define KVF_WRAW_H

#include <sys/mman.h>

#include "copy.h"
#include "fdpass.h"
#include "kvferry.h"
#include "preset.h"
#include "proto.h"

/* A tiny context rank 0 of instance `inst` with sealed memfd pools. */
struct rank {
    struct layout l;
    struct copy_mem mem;
    int fds[LAYOUT_MAX_POOLS];
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    char *json;
};

static inline void rank_make(struct rank *r, const char *spec, const char *inst, layout_role_t role,
                      unsigned seals)
{
    struct preset_spec ps;
    char err[256];
    ck_assert_int_eq(preset_parse(spec, &ps, err, sizeof err), 0);
    struct layout all[8];
    ck_assert_uint_le(preset_n_ranks(&ps), 8);
    ck_assert_int_eq(preset_build(&ps, inst, role, -1, all, err, sizeof err), 0);
    r->l = all[0];
    r->mem.n = r->l.n_pools;
    for (uint32_t i = 0; i < r->l.n_pools; i++) {
        r->fds[i] = memfd_create("t", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        ck_assert_int_eq(ftruncate(r->fds[i], (off_t)r->l.pools[i].bytes), 0);
        if (seals)
            ck_assert_int_eq(fcntl(r->fds[i], F_ADD_SEALS, seals), 0);
        r->mem.base[i] = mmap(NULL, r->l.pools[i].bytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                              r->fds[i], 0);
        r->mem.size[i] = r->l.pools[i].bytes;
        r->pools[i] = (struct kvf_pool){.kind = KVF_POOL_HOST, .device = -1,
                                        .bytes = r->l.pools[i].bytes, .fd = r->fds[i]};
    }
    r->json = layout_to_json(&r->l);
    ck_assert_ptr_nonnull(r->json);
}

static inline void rank_free(struct rank *r)
{
    for (uint32_t i = 0; i < r->l.n_pools; i++) {
        munmap(r->mem.base[i], r->mem.size[i]);
        close(r->fds[i]);
    }
    free(r->json);
}

/* Waits for an event matching (req_id, kind); fails the test after timeout_ms. */
static inline struct kvf_event wait_event(struct kvf_client *c, uint64_t req_id, int kind, int timeout_ms)
{
    int64_t end = wt_now_ms() + timeout_ms;
    struct kvf_event ev;
    while (wt_now_ms() < end) {
        int rc = kvf_poll(c, &ev, 50);
        ck_assert_int_ge(rc, 0);
        if (rc == 1 && ev.req_id == req_id && ev.kind == kind)
            return ev;
    }
    ck_abort_msg("no event kind %d for request %llu within %d ms", kind, (unsigned long long)req_id,
                 timeout_ms);
    return ev;
}

static inline int raw_connect(struct wenv *e)
{
    struct sockaddr_un sa = tu_sun(e->wsock);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

static inline void raw_send_msg(int fd, struct proto_msg *m, const int *fds, unsigned nfds)
{
    uint8_t *b;
    size_t len;
    ck_assert_int_eq(proto_encode(m, NULL, &b, &len), 0);
    ck_assert_int_eq(fdpass_send(fd, b, len, fds, nfds, 2000), 0);
    free(b);
}

/* Next frame's type (the message in msg for ERROR/REGISTERED, "version N" for WELCOME), or 0
 * at EOF. */
static inline uint32_t raw_next(int fd, char *msg, size_t msglen)
{
    struct proto_limits lim;
    proto_limits_init(&lim, 0, 0);
    uint8_t hdr[PROTO_HDR_SIZE], body[4096];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    ck_assert_int_eq(poll(&p, 1, 5000), 1);
    ssize_t n = recv(fd, hdr, sizeof hdr, MSG_WAITALL);
    if (n == 0)
        return 0;
    ck_assert_int_eq(n, PROTO_HDR_SIZE);
    struct proto_hdr h;
    ck_assert_int_eq(proto_hdr_decode(hdr, sizeof hdr, &lim, &h, NULL, 0), 0);
    ck_assert_uint_le(h.length, sizeof body - PROTO_HDR_SIZE);
    memcpy(body, hdr, sizeof hdr);
    if (h.length)
        ck_assert_int_eq(recv(fd, body + PROTO_HDR_SIZE, h.length, MSG_WAITALL), (ssize_t)h.length);
    struct proto_msg m;
    ck_assert_int_eq(proto_decode(body, PROTO_HDR_SIZE + h.length, &lim, &m, NULL, 0), 0);
    if (msg && m.type == PROTO_ERROR)
        snprintf(msg, msglen, "%s", m.u.error.message);
    if (msg && m.type == PROTO_WELCOME)
        snprintf(msg, msglen, "version %u", m.u.welcome.version);
    if (msg && m.type == PROTO_REGISTERED)
        snprintf(msg, msglen, "%s: %s", kvf_error_to_string(m.u.registered.status),
                 m.u.registered.message);
    proto_msg_done(&m);
    return m.type;
}

/* HELLO on a connected fd, WELCOME expected; returns fd. */
static inline int raw_hello_on(int fd)
{
    struct proto_msg m = {.type = PROTO_HELLO};
    m.u.hello.version_min = m.u.hello.version_max = PROTO_VERSION;
    strcpy(m.u.hello.name, "hostile");
    raw_send_msg(fd, &m, NULL, 0);
    char msg[600] = "";
    uint32_t t = raw_next(fd, msg, sizeof msg);
    ck_assert_msg(t == PROTO_WELCOME, "HELLO answered with %s: %s", proto_type_to_string(t), msg);
    return fd;
}

static inline int raw_hello(struct wenv *e)
{
    return raw_hello_on(raw_connect(e));
}

/* Expects an ERROR frame whose message contains `words`, then EOF. */
static inline void expect_error_close(int fd, const char *words)
{
    char msg[600] = "";
    ck_assert_uint_eq(raw_next(fd, msg, sizeof msg), PROTO_ERROR);
    ck_assert_msg(strstr(msg, words), "ERROR '%s' lacks '%s'", msg, words);
    ck_assert_uint_eq(raw_next(fd, NULL, 0), 0);
    close(fd);
}

static inline void register_msg(struct proto_msg *m, const struct rank *r)
{
    memset(m, 0, sizeof *m);
    m->type = PROTO_REGISTER;
    static struct proto_pool pools[LAYOUT_MAX_POOLS]; /* borrowed by m: never proto_msg_done */
    memset(pools, 0, sizeof pools);
    m->u.reg.n_pools = r->l.n_pools;
    m->u.reg.pools = pools;
    for (uint32_t i = 0; i < r->l.n_pools; i++)
        m->u.reg.pools[i] = (struct proto_pool){.kind = POOL_HOST, .device = -1,
                                                .bytes = r->l.pools[i].bytes};
    m->u.reg.json = r->json;
    m->u.reg.json_len = (uint32_t)strlen(r->json);
}

/* result.workers[key] of a control command ("status" or "stats"), as an integer. */
static inline json_int_t wr_workers_int(struct wenv *e, const char *cmd, const char *key)
{
    json_t *st = wt_ctl(e, cmd);
    json_int_t v = json_integer_value(json_object_get(json_object_get(st, "workers"), key));
    json_decref(st);
    return v;
}

#endif
