/* check_proto.c: the worker protocol codec: every message round-trips; every truncation, bad
 * header field, bad count, over-long string and trailing byte is refused. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"
#include "testutil.h"

static const uint32_t ids_a[] = {7, 8, 9, 100, 3};

/* One sample of every message type, filled with distinctive values. */
static int sample(uint32_t type, struct proto_msg *m)
{
    memset(m, 0, sizeof *m);
    m->type = type;
    m->seq = 0x1122334455667788ull + type;
    switch (type) {
    case PROTO_HELLO:
        m->u.hello = (struct proto_hello){.version_min = 1, .version_max = 1, .pid = 4242};
        strcpy(m->u.hello.name, "sim ctx0 r1");
        break;
    case PROTO_WELCOME:
        m->u.welcome = (struct proto_welcome){.version = 1, .max_frame = 1 << 20,
                                              .max_blocks = 65536, .max_inflight = 1024,
                                              .epoch = 0xdeadbeefcafeull};
        strcpy(m->u.welcome.name, "kvferryd 0.1.0");
        break;
    case PROTO_REGISTER:
        m->u.reg.n_pools = 2;
        m->u.reg.pools = calloc(2, sizeof(*m->u.reg.pools)); /* freed by proto_msg_done */
        m->u.reg.pools[0] = (struct proto_pool){.kind = POOL_HOST, .device = -1, .bytes = 1 << 20};
        m->u.reg.pools[1] = (struct proto_pool){.kind = POOL_CUDA, .device = 3, .bytes = 4096,
                                                .offset = 512};
        for (int i = 0; i < PROTO_IPC_HANDLE; i++)
            m->u.reg.pools[1].ipc_handle[i] = (uint8_t)(i * 7 + 1);
        m->u.reg.json = strdup("{\"instance\":\"ctx0\"}");
        m->u.reg.json_len = (uint32_t)strlen(m->u.reg.json);
        break;
    case PROTO_REGISTERED:
        m->u.registered = (struct proto_registered){.status = KVF_E_BAD_REQUEST, .rank = 3,
                                                    .worker_id = 99};
        strcpy(m->u.registered.message, "pool 0: memfd of 4096 bytes, layout needs 8192");
        break;
    case PROTO_SEND:
    case PROTO_RECV: {
        struct proto_items *it = type == PROTO_SEND ? &m->u.send.items : &m->u.recv.items;
        it->n_groups = 3;
        it->counts[0] = 4;
        it->counts[1] = 0;
        it->counts[2] = 1;
        it->ids = malloc(sizeof ids_a);
        memcpy(it->ids, ids_a, sizeof ids_a);
        if (type == PROTO_SEND) {
            m->u.send.req_id = UINT64_MAX - 5;
            m->u.send.n_readers = 4;
        } else {
            m->u.recv.req_id = 12345678901ull;
            m->u.recv.ctx_dp_rank = 1;
            m->u.recv.deadline_ms = 2500;
            strcpy(m->u.recv.ctx_instance, "ctx-instance-A");
            strcpy(m->u.recv.ctx_home, "10.0.0.7:7070");
        }
        break;
    }
    case PROTO_CANCEL:
        m->u.cancel.req_id = 77;
        break;
    case PROTO_READY:
        m->u.ready = (struct proto_ready){.req_id = 78, .layers_upto = LAYOUT_MAX_LAYERS};
        break;
    case PROTO_EVENTS:
        m->u.events.n = 3;
        m->u.events.handles = malloc(3 * PROTO_IPC_HANDLE); /* freed by proto_msg_done */
        for (int i = 0; i < 3 * PROTO_IPC_HANDLE; i++)
            m->u.events.handles[i] = (uint8_t)(i * 13 + 5);
        break;
    case PROTO_FDS:
        m->u.fds.n = PROTO_FDS_MAX;
        break;
    case PROTO_EVENT:
        m->u.event = (struct proto_event){.req_id = 5, .kind = PROTO_EV_FAILED,
                                          .error = KVF_E_PEER_INCOMPATIBLE, .bytes = 1ull << 40};
        strcpy(m->u.event.message, "head geometry: inner 256 vs 128 (gen rank 0, ctx rank 1)");
        break;
    case PROTO_ERROR:
        m->u.error.error = KVF_E_BAD_REQUEST;
        strcpy(m->u.error.message, "unexpected fds");
        break;
    case PROTO_PING:
    case PROTO_PONG:
        break;
    default:
        return -1;
    }
    return 0;
}

static void assert_items_eq(const struct proto_items *a, const struct proto_items *b)
{
    ck_assert_uint_eq(a->n_groups, b->n_groups);
    for (uint32_t g = 0; g < a->n_groups; g++)
        ck_assert_uint_eq(a->counts[g], b->counts[g]);
    uint64_t n = proto_items_total(a);
    ck_assert(n == 0 || memcmp(a->ids, b->ids, n * 4) == 0);
}

static void assert_msg_eq(const struct proto_msg *a, const struct proto_msg *b)
{
    ck_assert_uint_eq(a->type, b->type);
    ck_assert(a->seq == b->seq);
    switch (a->type) {
    case PROTO_REGISTER:
        ck_assert_uint_eq(a->u.reg.n_pools, b->u.reg.n_pools);
        ck_assert_mem_eq(a->u.reg.pools, b->u.reg.pools, sizeof(struct proto_pool) * a->u.reg.n_pools);
        ck_assert_uint_eq(a->u.reg.json_len, b->u.reg.json_len);
        ck_assert_str_eq(a->u.reg.json, b->u.reg.json);
        break;
    case PROTO_SEND:
        ck_assert(a->u.send.req_id == b->u.send.req_id);
        ck_assert_uint_eq(a->u.send.n_readers, b->u.send.n_readers);
        ck_assert_uint_eq(a->u.send.stream, b->u.send.stream);
        assert_items_eq(&a->u.send.items, &b->u.send.items);
        break;
    case PROTO_RECV:
        ck_assert(a->u.recv.req_id == b->u.recv.req_id);
        ck_assert_int_eq(a->u.recv.ctx_dp_rank, b->u.recv.ctx_dp_rank);
        ck_assert_uint_eq(a->u.recv.deadline_ms, b->u.recv.deadline_ms);
        ck_assert_str_eq(a->u.recv.ctx_instance, b->u.recv.ctx_instance);
        ck_assert_str_eq(a->u.recv.ctx_home, b->u.recv.ctx_home);
        assert_items_eq(&a->u.recv.items, &b->u.recv.items);
        ck_assert_uint_eq(a->u.recv.tokens, b->u.recv.tokens);
        break;
    case PROTO_EVENTS:
        ck_assert_uint_eq(a->u.events.n, b->u.events.n);
        ck_assert_mem_eq(a->u.events.handles, b->u.events.handles,
                         (size_t)a->u.events.n * PROTO_IPC_HANDLE);
        break;
    default:
        /* plain structs: compare whole */
        ck_assert_mem_eq(&a->u, &b->u, sizeof a->u);
        break;
    }
}

static struct proto_limits lim(void)
{
    struct proto_limits l;
    proto_limits_init(&l, 0, 0);
    return l;
}

/* ---- round trips ---- */

/* issue 28: READY's layers_upto and SEND's stream flag are bounded on both ends */
START_TEST(proto_ready_and_stream_flag_are_bounded)
{
    struct proto_limits l = lim();
    struct proto_msg m = {.type = PROTO_READY}, d;
    m.u.ready = (struct proto_ready){.req_id = 9, .layers_upto = LAYOUT_MAX_LAYERS + 1};
    uint8_t *buf;
    size_t len;
    char err[256] = "";
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), -EINVAL);
    m.u.ready.layers_upto = LAYOUT_MAX_LAYERS;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
    buf[len - 4] = (uint8_t)(LAYOUT_MAX_LAYERS + 1); /* little-endian u32 257 */
    buf[len - 3] = 1;
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "layers_upto 257 over the limit 256"), "%s", err);
    free(buf);
    struct proto_msg s = {.type = PROTO_SEND};
    s.u.send.req_id = 3;
    s.u.send.stream = 2;
    ck_assert_int_eq(proto_encode(&s, &l, &buf, &len), -EINVAL);
    s.u.send.stream = 1;
    ck_assert_int_eq(proto_encode(&s, &l, &buf, &len), 0);
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), 0);
    ck_assert_uint_eq(d.u.send.stream, 1);
    proto_msg_done(&d);
    buf[len - 4] = 2;
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "stream 2"), "%s", err);
    free(buf);
    s.u.send.stream = 0; /* a plain SEND keeps its old encoding: no trailing flag */
    ck_assert_int_eq(proto_encode(&s, &l, &buf, &len), 0);
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), 0);
    ck_assert_uint_eq(d.u.send.stream, 0);
    ck_assert_uint_eq(len, PROTO_HDR_SIZE + 8 + 4 + 4);
    proto_msg_done(&d);
    free(buf);
}
END_TEST

/* issue 28: a rank's CUDA events (EVENTS) and READY's event are bounded on both ends; a
 * READY without an event keeps its old encoding */
START_TEST(proto_events_and_ready_event_are_bounded)
{
    struct proto_limits l = lim();
    uint8_t *buf, h[(PROTO_EVENTS_MAX + 1) * PROTO_IPC_HANDLE];
    size_t len;
    char err[256] = "";
    struct proto_msg m = {.type = PROTO_EVENTS}, d;
    memset(h, 0xab, sizeof h);
    m.u.events = (struct proto_events){.n = PROTO_EVENTS_MAX + 1, .handles = h};
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), -EINVAL);
    m.u.events.n = 0;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), -EINVAL);
    m.u.events.n = PROTO_EVENTS_MAX;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), 0);
    ck_assert_uint_eq(d.u.events.n, PROTO_EVENTS_MAX);
    proto_msg_done(&d);
    buf[PROTO_HDR_SIZE] = (uint8_t)(PROTO_EVENTS_MAX + 1); /* n = 257, little-endian */
    buf[PROTO_HDR_SIZE + 1] = 1;
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "257 events, the limit is 256 per rank"), "%s", err);
    buf[PROTO_HDR_SIZE] = 2; /* n = 2 with 256 handles' bytes: the length must match */
    buf[PROTO_HDR_SIZE + 1] = 0;
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "2 handles need 128 bytes"), "%s", err);
    free(buf);
    struct proto_msg r = {.type = PROTO_READY};
    r.u.ready = (struct proto_ready){.req_id = 9, .layers_upto = 3, .event = PROTO_EVENTS_MAX + 1};
    ck_assert_int_eq(proto_encode(&r, &l, &buf, &len), -EINVAL);
    r.u.ready.event = 0; /* none: absent on the wire */
    ck_assert_int_eq(proto_encode(&r, &l, &buf, &len), 0);
    ck_assert_uint_eq(len, PROTO_HDR_SIZE + 8 + 4);
    free(buf);
    r.u.ready.event = PROTO_EVENTS_MAX;
    ck_assert_int_eq(proto_encode(&r, &l, &buf, &len), 0);
    ck_assert_uint_eq(len, PROTO_HDR_SIZE + 8 + 4 + 4);
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), 0);
    ck_assert_uint_eq(d.u.ready.event, PROTO_EVENTS_MAX);
    ck_assert_uint_eq(d.u.ready.layers_upto, 3);
    free(buf);
    r.u.ready.event = 1;
    ck_assert_int_eq(proto_encode(&r, &l, &buf, &len), 0);
    buf[len - 4] = 0; /* present but 0: refused, the encoding stays canonical */
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "event 0 out of range"), "%s", err);
    free(buf);
}
END_TEST

START_TEST(proto_fds_frame_counts_are_bounded)
{
    struct proto_limits l;
    proto_limits_init(&l, 0, 0);
    struct proto_msg m = {.type = PROTO_FDS, .u.fds.n = 0}, d;
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), -EINVAL);
    m.u.fds.n = PROTO_FDS_MAX + 1;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), -EINVAL);
    m.u.fds.n = PROTO_FDS_MAX;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
    buf[PROTO_HDR_SIZE] = PROTO_FDS_MAX + 1; /* little-endian u32 17 */
    char err[256] = "";
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "FDS: n 17 out of range [1, 16]"), "%s", err);
    free(buf);
}
END_TEST

START_TEST(proto_every_message_round_trips)
{
    struct proto_limits l = lim();
    for (uint32_t t = PROTO_HELLO; t < PROTO__TYPE_END; t++) {
        struct proto_msg m, d;
        ck_assert_int_eq(sample(t, &m), 0);
        memset(&d, 0, sizeof d);
        uint8_t *buf;
        size_t len;
        ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
        char err[256] = "";
        int rc = proto_decode(buf, len, &l, &d, err, sizeof err);
        ck_assert_msg(rc == 0, "%s: %s", proto_type_to_string(t), err);
        assert_msg_eq(&m, &d);
        /* and re-encoding the decoded message gives the same bytes */
        uint8_t *buf2;
        size_t len2;
        ck_assert_int_eq(proto_encode(&d, &l, &buf2, &len2), 0);
        ck_assert_uint_eq(len, len2);
        ck_assert_mem_eq(buf, buf2, len);
        free(buf);
        free(buf2);
        proto_msg_done(&m);
        proto_msg_done(&d);
    }
}
END_TEST

START_TEST(proto_header_is_little_endian_kvfw)
{
    struct proto_msg m;
    sample(PROTO_CANCEL, &m);
    uint8_t *buf;
    size_t len;
    ck_assert_int_eq(proto_encode(&m, NULL, &buf, &len), 0);
    ck_assert_uint_eq(len, PROTO_HDR_SIZE + 8);
    ck_assert_mem_eq(buf, "KVFW", 4);
    ck_assert_uint_eq(buf[4], PROTO_VERSION);
    ck_assert_uint_eq(buf[6], PROTO_CANCEL);
    ck_assert_uint_eq(buf[12], 8); /* length */
    ck_assert_uint_eq(buf[16], 0x88 + PROTO_CANCEL); /* seq, low byte first */
    ck_assert_uint_eq(buf[PROTO_HDR_SIZE], 77);
    free(buf);
}
END_TEST

/* ---- refusals ---- */

START_TEST(proto_every_truncation_is_refused)
{
    struct proto_limits l = lim();
    for (uint32_t t = PROTO_HELLO; t < PROTO__TYPE_END; t++) {
        struct proto_msg m, d;
        sample(t, &m);
        uint8_t *buf;
        size_t len;
        ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
        /* cut anywhere, header length unchanged: refused */
        for (size_t cut = 0; cut < len; cut++) {
            char err[256] = "";
            ck_assert_msg(proto_decode(buf, cut, &l, &d, err, sizeof err) < 0, "%s cut %zu",
                          proto_type_to_string(t), cut);
            ck_assert(err[0] != 0);
        }
        /* cut anywhere with the header length rewritten to match: the payload check refuses */
        for (size_t cut = PROTO_HDR_SIZE; cut < len; cut++) {
            uint8_t *c = malloc(len);
            memcpy(c, buf, len);
            uint32_t pl = (uint32_t)(cut - PROTO_HDR_SIZE);
            memcpy(c + 12, &pl, 4); /* little-endian host assumed by this test (x86, arm) */
            char err[256] = "";
            ck_assert_msg(proto_decode(c, cut, &l, &d, err, sizeof err) == -EINVAL, "%s cut %zu",
                          proto_type_to_string(t), cut);
            free(c);
        }
        free(buf);
        proto_msg_done(&m);
    }
}
END_TEST

START_TEST(proto_trailing_bytes_are_refused)
{
    struct proto_limits l = lim();
    for (uint32_t t = PROTO_HELLO; t < PROTO__TYPE_END; t++) {
        struct proto_msg m, d;
        sample(t, &m);
        uint8_t *buf;
        size_t len;
        ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
        uint8_t *c = calloc(1, len + 4);
        memcpy(c, buf, len);
        uint32_t pl = (uint32_t)(len + 4 - PROTO_HDR_SIZE);
        memcpy(c + 12, &pl, 4);
        char err[256] = "";
        ck_assert_msg(proto_decode(c, len + 4, &l, &d, err, sizeof err) == -EINVAL, "%s",
                      proto_type_to_string(t));
        free(c);
        free(buf);
        proto_msg_done(&m);
    }
}
END_TEST

/* RECV's optional trailing tokens: absent when 0 (the old encoding, byte for byte), present as
 * 8 bytes that round-trip; 0 on the wire (not canonical) and over the limit are refused. */
START_TEST(proto_recv_tokens_are_optional_and_bounded)
{
    struct proto_limits l = lim();
    struct proto_msg m, d;
    sample(PROTO_RECV, &m);
    uint8_t *old, *buf;
    size_t old_len, len;
    ck_assert_int_eq(proto_encode(&m, &l, &old, &old_len), 0);
    m.u.recv.tokens = 77;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
    ck_assert_uint_eq(len, old_len + 8);
    ck_assert_mem_eq(buf + PROTO_HDR_SIZE, old + PROTO_HDR_SIZE, old_len - PROTO_HDR_SIZE);
    char err[256] = "";
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), 0);
    assert_msg_eq(&m, &d);
    proto_msg_done(&d);
    ck_assert_int_eq(proto_decode(old, old_len, &l, &d, err, sizeof err), 0);
    ck_assert_uint_eq(d.u.recv.tokens, 0);
    proto_msg_done(&d);
    memset(buf + len - 8, 0, 8);
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "tokens 0 out of range"), "%s", err);
    uint64_t over = PROTO_TOKENS_MAX + 1;
    for (int i = 0; i < 8; i++)
        buf[len - 8 + i] = (uint8_t)(over >> (8 * i));
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "out of range"), "%s", err);
    free(buf);
    m.u.recv.tokens = PROTO_TOKENS_MAX + 1;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), -EINVAL);
    free(old);
    proto_msg_done(&m);
}
END_TEST

/* Conversation 2 (PROTO_CONV_HELD): FAILED may carry PROTO_EVF_HELD as a trailing u32, absent
 * when 0 (what a conversation 1 library reads); RELEASED is kind 6; 4 and 5 stay the library's. */
START_TEST(proto_event_held_flag_is_optional_and_checked)
{
    struct proto_limits l = lim();
    struct proto_msg m, d;
    char err[256] = "";
    uint8_t *old, *buf;
    size_t old_len, len;
    sample(PROTO_EVENT, &m);
    ck_assert_int_eq(proto_encode(&m, &l, &old, &old_len), 0);
    m.u.event.flags = PROTO_EVF_HELD;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
    ck_assert_uint_eq(len, old_len + 4);
    ck_assert_mem_eq(buf + PROTO_HDR_SIZE, old + PROTO_HDR_SIZE, old_len - PROTO_HDR_SIZE);
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), 0);
    assert_msg_eq(&m, &d);
    ck_assert_int_eq(proto_decode(old, old_len, &l, &d, err, sizeof err), 0);
    ck_assert_uint_eq(d.u.event.flags, 0);
    buf[len - 4] = 0; /* present but 0: not canonical */
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "flags 0x0 unknown"), "%s", err);
    buf[len - 4] = 2; /* a flag nobody defined */
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    free(buf);
    free(old);
    /* RELEASED: no error, no flags */
    m.u.event = (struct proto_event){.req_id = 9, .kind = PROTO_EV_RELEASED};
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), 0);
    assert_msg_eq(&m, &d);
    free(buf);
    m.u.event.flags = PROTO_EVF_HELD; /* flags on a kind other than FAILED */
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), -EINVAL);
    m.u.event.kind = PROTO_EV_DONE;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), -EINVAL);
    m.u.event.flags = 0;
    for (uint32_t k = 4; k <= 5; k++) { /* the library's own kinds never travel */
        m.u.event.kind = k;
        ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
        ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
        ck_assert_msg(strstr(err, "unknown event kind"), "%s", err);
        free(buf);
    }
}
END_TEST

static uint8_t *encode_sample(uint32_t t, size_t *len)
{
    struct proto_msg m;
    sample(t, &m);
    uint8_t *buf;
    ck_assert_int_eq(proto_encode(&m, NULL, &buf, len), 0);
    proto_msg_done(&m);
    return buf;
}

START_TEST(proto_bad_magic_version_type_flags_are_refused)
{
    struct proto_limits l = lim();
    size_t len;
    uint8_t *buf = encode_sample(PROTO_SEND, &len);
    struct proto_msg d;
    char err[256];
    struct {
        size_t off;
        uint8_t val;
        int rc;
        const char *words;
    } cases[] = {
        {0, 'X', -EPROTO, "magic"},   {3, 'w', -EPROTO, "magic"},
        {4, 2, -EPROTO, "version"},   {4, 0, -EPROTO, "version"},
        {6, 0, -EPROTO, "type"},      {6, PROTO__TYPE_END, -EPROTO, "type"},
        {7, 1, -EPROTO, "type"},      {8, 1, -EPROTO, "flags"},
        {11, 0x80, -EPROTO, "flags"}, {15, 0x10, -EMSGSIZE, "limit"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint8_t *c = malloc(len);
        memcpy(c, buf, len);
        c[cases[i].off] = cases[i].val;
        err[0] = 0;
        ck_assert_int_eq(proto_decode(c, len, &l, &d, err, sizeof err), cases[i].rc);
        ck_assert_msg(strstr(err, cases[i].words), "case %zu: %s", i, err);
        free(c);
    }
    /* header length disagreeing with the frame */
    uint8_t *c = malloc(len);
    memcpy(c, buf, len);
    c[12]++;
    ck_assert_int_eq(proto_decode(c, len, &l, &d, err, sizeof err), -EINVAL);
    free(c);
    free(buf);
}
END_TEST

START_TEST(proto_frame_over_max_frame_is_refused_from_the_header)
{
    struct proto_limits l;
    proto_limits_init(&l, 4096, 0);
    ck_assert_uint_eq(l.max_frame, 4096);
    uint8_t hdr[PROTO_HDR_SIZE] = {'K', 'V', 'F', 'W', 1, 0, PROTO_SEND, 0, 0, 0, 0, 0};
    uint32_t pl = 4096 - PROTO_HDR_SIZE;
    memcpy(hdr + 12, &pl, 4);
    struct proto_hdr h;
    char err[256];
    ck_assert_int_eq(proto_hdr_decode(hdr, sizeof hdr, &l, &h, err, sizeof err), 0);
    pl++;
    memcpy(hdr + 12, &pl, 4);
    ck_assert_int_eq(proto_hdr_decode(hdr, sizeof hdr, &l, &h, err, sizeof err), -EMSGSIZE);
    ck_assert_ptr_nonnull(strstr(err, "workers.max_frame"));
    pl = UINT32_MAX;
    memcpy(hdr + 12, &pl, 4);
    ck_assert_int_eq(proto_hdr_decode(hdr, sizeof hdr, &l, &h, err, sizeof err), -EMSGSIZE);
    ck_assert_int_eq(proto_hdr_decode(hdr, PROTO_HDR_SIZE - 1, &l, &h, err, sizeof err), -EPROTO);
    /* limits are clamped */
    proto_limits_init(&l, 1, UINT64_MAX);
    ck_assert_uint_eq(l.max_frame, PROTO_FRAME_MIN);
    ck_assert_uint_eq(l.max_blocks, PROTO_BLOCKS_HARD_MAX);
}
END_TEST

/* A SEND with a hand-written item list. */
static uint8_t *send_frame(uint32_t n_groups, const uint32_t *counts, uint32_t n_counts,
                           uint32_t n_ids, size_t *len)
{
    size_t pl = 8 + 4 + 4 + 4 * (size_t)n_counts + 4 * (size_t)n_ids;
    uint8_t *b = calloc(1, PROTO_HDR_SIZE + pl);
    memcpy(b, "KVFW", 4);
    b[4] = 1;
    b[6] = PROTO_SEND;
    uint32_t pl32 = (uint32_t)pl;
    memcpy(b + 12, &pl32, 4);
    uint8_t *p = b + PROTO_HDR_SIZE + 12;
    memcpy(p, &n_groups, 4);
    memcpy(p + 4, counts, 4 * n_counts);
    *len = PROTO_HDR_SIZE + pl;
    return b;
}

START_TEST(proto_oversized_counts_are_refused)
{
    struct proto_limits l;
    proto_limits_init(&l, 1 << 20, 16);
    struct proto_msg d;
    char err[256];
    size_t len;
    uint32_t c1[] = {10, 6};
    uint8_t *b = send_frame(2, c1, 2, 16, &len);
    ck_assert_int_eq(proto_decode(b, len, &l, &d, err, sizeof err), 0);
    ck_assert_uint_eq(proto_items_total(&d.u.send.items), 16);
    proto_msg_done(&d);
    free(b);
    /* one id over max_blocks */
    uint32_t c2[] = {10, 7};
    b = send_frame(2, c2, 2, 17, &len);
    ck_assert_int_eq(proto_decode(b, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "workers.max_blocks"));
    free(b);
    /* counts that wrap 32 bits */
    uint32_t c3[] = {0xffffffffu, 2};
    b = send_frame(2, c3, 2, 1, &len);
    ck_assert_int_eq(proto_decode(b, len, &l, &d, err, sizeof err), -EINVAL);
    free(b);
    /* too many groups */
    uint32_t c4[LAYOUT_MAX_GROUPS + 1] = {0};
    b = send_frame(LAYOUT_MAX_GROUPS + 1, c4, LAYOUT_MAX_GROUPS + 1, 0, &len);
    ck_assert_int_eq(proto_decode(b, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "n_groups"));
    free(b);
    /* counts promise more ids than the payload has */
    uint32_t c5[] = {4};
    b = send_frame(1, c5, 1, 3, &len);
    ck_assert_int_eq(proto_decode(b, len, &l, &d, err, sizeof err), -EINVAL);
    free(b);
    /* the encoder refuses the same */
    struct proto_msg m;
    sample(PROTO_SEND, &m);
    struct proto_limits small;
    proto_limits_init(&small, 0, 4);
    uint8_t *out;
    size_t outlen;
    ck_assert_int_eq(proto_encode(&m, &small, &out, &outlen), -EMSGSIZE);
    proto_msg_done(&m);
}
END_TEST

START_TEST(proto_bad_strings_and_fields_are_refused)
{
    struct proto_limits l = lim();
    struct proto_msg m, d;
    char err[256];
    uint8_t *buf;
    size_t len;

    /* a NUL inside a string */
    sample(PROTO_HELLO, &m);
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
    buf[PROTO_HDR_SIZE + 12 + 2 + 3] = 0;
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "NUL"));
    free(buf);

    /* a string length over its field's bound (the bytes are there) */
    size_t pl = 12 + 2 + 100;
    buf = calloc(1, PROTO_HDR_SIZE + pl);
    memcpy(buf, "KVFW", 4);
    buf[4] = 1;
    buf[6] = PROTO_HELLO;
    uint32_t pl32 = (uint32_t)pl;
    memcpy(buf + 12, &pl32, 4);
    buf[PROTO_HDR_SIZE + 12] = 100;
    memset(buf + PROTO_HDR_SIZE + 14, 'a', 100);
    ck_assert_int_eq(proto_decode(buf, PROTO_HDR_SIZE + pl, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "too long"));
    free(buf);

    /* the encoder refuses an empty ctx_instance, the decoder too */
    sample(PROTO_RECV, &m);
    m.u.recv.ctx_instance[0] = 0;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), -EINVAL);
    strcpy(m.u.recv.ctx_instance, "x");
    m.u.recv.ctx_dp_rank = -2;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "ctx_dp_rank"));
    free(buf);
    proto_msg_done(&m);

    /* events: unknown kind, unknown error, FAILED without an error */
    uint32_t kinds[][2] = {{0, 0}, {PROTO__EV_END, 0}, {PROTO_EV_DONE, KVF_E__COUNT},
                           {PROTO_EV_FAILED, KVF_OK}, {PROTO_EV_DONE, KVF_E_TIMEOUT}};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        sample(PROTO_EVENT, &m);
        m.u.event.kind = kinds[i][0];
        m.u.event.error = kinds[i][1];
        ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
        ck_assert_msg(proto_decode(buf, len, &l, &d, err, sizeof err) == -EINVAL, "case %zu", i);
        free(buf);
    }
}
END_TEST

START_TEST(proto_bad_register_pools_are_refused)
{
    struct proto_limits l = lim();
    struct proto_msg m, d;
    char err[256];
    uint8_t *buf;
    size_t len;
    for (int i = 0; i < 7; i++) {
        sample(PROTO_REGISTER, &m);
        struct proto_register *g = &m.u.reg;
        const char *words = "pool";
        switch (i) {
        case 0: g->pools[0].kind = 7; break;
        case 1: g->pools[0].offset = 4096; break;
        case 2: g->pools[0].device = 0; break;
        case 3: g->pools[0].ipc_handle[5] = 1; break;
        case 4: g->pools[1].device = -1; break;
        case 5: g->pools[1].offset = UINT64_MAX; break;
        case 6: g->n_pools = LAYOUT_MAX_POOLS + 1; words = NULL; break;
        }
        int erc = proto_encode(&m, &l, &buf, &len);
        if (i == 6) {
            ck_assert_int_eq(erc, -EINVAL);
            proto_msg_done(&m);
            continue;
        }
        ck_assert_int_eq(erc, 0);
        ck_assert_msg(proto_decode(buf, len, &l, &d, err, sizeof err) == -EINVAL, "case %d", i);
        ck_assert_msg(strstr(err, words), "case %d: %s", i, err);
        free(buf);
        proto_msg_done(&m);
    }
    /* n_pools over the limit on the wire */
    sample(PROTO_REGISTER, &m);
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
    uint32_t over = LAYOUT_MAX_POOLS + 1;
    for (int k = 0; k < 4; k++)
        buf[PROTO_HDR_SIZE + k] = (uint8_t)(over >> (8 * k)); /* little-endian u32 */
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    ck_assert_ptr_nonnull(strstr(err, "n_pools"));
    memset(buf + PROTO_HDR_SIZE, 0, 4);
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), -EINVAL);
    free(buf);
    /* the host pool count gives the fds expected */
    ck_assert_uint_eq(proto_register_fds(&m.u.reg), 1);
    proto_msg_done(&m);
}
END_TEST

/* A VMM pool carries its chunk count and size; the fds expected follow; bad ranges refused. */
START_TEST(proto_vmm_pool_round_trips_and_is_bounded)
{
    struct proto_limits l = lim();
    struct proto_msg m, d;
    char err[256];
    uint8_t *buf;
    size_t len;
    for (int i = 0; i < 6; i++) {
        sample(PROTO_REGISTER, &m);
        struct proto_pool *p = &m.u.reg.pools[1];
        memset(p->ipc_handle, 0, sizeof p->ipc_handle);
        p->kind = PROTO_POOL_CUDA_VMM;
        p->n_fds = 3;
        p->chunk_bytes = 2 << 20;
        p->offset = (2 << 20) + 4096;
        p->bytes = (4 << 20) - 4096; /* exactly to the end of chunk 3 */
        switch (i) {
        case 1: p->n_fds = 0; break;
        case 2: p->n_fds = PROTO_VMM_MAX_FDS + 1; break;
        case 3: p->bytes += 1; break;
        case 4: p->chunk_bytes = 0; break;
        case 5: p->offset = UINT64_MAX; break;
        }
        ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
        int rc = proto_decode(buf, len, &l, &d, err, sizeof err);
        if (i == 0) {
            ck_assert_int_eq(rc, 0);
            assert_msg_eq(&m, &d);
            ck_assert_uint_eq(proto_register_fds(&d.u.reg), 1 + 3);
            ck_assert_uint_eq(proto_pool_layout_kind(&d.u.reg.pools[1]), POOL_CUDA);
            proto_msg_done(&d);
        } else {
            ck_assert_msg(rc == -EINVAL, "case %d", i);
            ck_assert_msg(strstr(err, "VMM pool"), "case %d: %s", i, err);
        }
        free(buf);
        proto_msg_done(&m);
    }
}
END_TEST

START_TEST(proto_register_json_bounds)
{
    struct proto_limits l;
    proto_limits_init(&l, PROTO_FRAME_HARD_MAX, 0);
    struct proto_msg m, d;
    char err[256];
    uint8_t *buf;
    size_t len;
    sample(PROTO_REGISTER, &m);
    free(m.u.reg.json);
    m.u.reg.json_len = LAYOUT_JSON_MAX;
    m.u.reg.json = malloc(LAYOUT_JSON_MAX + 2);
    memset(m.u.reg.json, ' ', LAYOUT_JSON_MAX + 1);
    m.u.reg.json[LAYOUT_JSON_MAX + 1] = 0;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), 0);
    ck_assert_int_eq(proto_decode(buf, len, &l, &d, err, sizeof err), 0);
    ck_assert_uint_eq(d.u.reg.json_len, LAYOUT_JSON_MAX);
    proto_msg_done(&d);
    free(buf);
    m.u.reg.json_len = LAYOUT_JSON_MAX + 1;
    ck_assert_int_eq(proto_encode(&m, &l, &buf, &len), -EINVAL);
    proto_msg_done(&m);
    ck_assert_str_eq(proto_type_to_string(PROTO_REGISTERED), "REGISTERED");
    ck_assert_str_eq(proto_type_to_string(0), "UNKNOWN");
    ck_assert_str_eq(proto_type_to_string(999), "UNKNOWN");
    proto_msg_done(NULL);
}
END_TEST

static Suite *proto_suite(void)
{
    Suite *s = suite_create("proto");
    TCase *rt = tcase_create("roundtrip");
    tcase_add_test(rt, proto_every_message_round_trips);
    tcase_add_test(rt, proto_header_is_little_endian_kvfw);
    suite_add_tcase(s, rt);
    TCase *bad = tcase_create("refusals");
    tcase_add_test(bad, proto_every_truncation_is_refused);
    tcase_add_test(bad, proto_fds_frame_counts_are_bounded);
    tcase_add_test(bad, proto_ready_and_stream_flag_are_bounded);
    tcase_add_test(bad, proto_events_and_ready_event_are_bounded);
    tcase_add_test(bad, proto_trailing_bytes_are_refused);
    tcase_add_test(bad, proto_recv_tokens_are_optional_and_bounded);
    tcase_add_test(bad, proto_event_held_flag_is_optional_and_checked);
    tcase_add_test(bad, proto_bad_magic_version_type_flags_are_refused);
    tcase_add_test(bad, proto_frame_over_max_frame_is_refused_from_the_header);
    tcase_add_test(bad, proto_oversized_counts_are_refused);
    tcase_add_test(bad, proto_bad_strings_and_fields_are_refused);
    tcase_add_test(bad, proto_bad_register_pools_are_refused);
    tcase_add_test(bad, proto_register_json_bounds);
    tcase_add_test(bad, proto_vmm_pool_round_trips_and_is_bounded);
    suite_add_tcase(s, bad);
    return s;
}

int main(void) { return tu_run(proto_suite()); }
