/* check_wire.c: the daemon-to-daemon codec: every message round-trips byte for byte; every
 * truncation, bad header, over-limit count, over-long string and out-of-domain value is refused. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "testutil.h"
#include "wire.h"

static const char LAYOUT_A[] = "{\"instance\":\"ctx-a\",\"tp_size\":2}";
static const char LAYOUT_B[] = "{\"instance\":\"ctx-a\",\"tp_size\":2,\"tp_rank\":1}";
static const uint32_t IDS0[] = {7, 8, 9, 0xfffffffeu};
static const uint32_t IDS2[] = {3};
static const uint8_t RKEY0[] = {1, 2, 3, 4, 5};
static const uint8_t RKEY3[] = {0xff, 0, 0xaa};
static const struct wire_rank RANKS[2] = {
    {.addr = "10.0.0.1:7400", .json = LAYOUT_A, .json_len = sizeof(LAYOUT_A) - 1},
    {.addr = "[fe80::1]:7401", .json = LAYOUT_B, .json_len = sizeof(LAYOUT_B) - 1},
};

/* One valid sample of each type (index = wire_type_t). */
static struct wire_msg sample(wire_type_t t)
{
    struct wire_msg m;
    memset(&m, 0, sizeof(m));
    m.type = t;
    switch (t) {
    case WIRE_LAYOUT_FORWARD:
        strcpy(m.u.layout_forward.addr, "node-7.example:7400");
        m.u.layout_forward.json = LAYOUT_A;
        m.u.layout_forward.json_len = sizeof(LAYOUT_A) - 1;
        break;
    case WIRE_TABLE_REQ:
        strcpy(m.u.table_req.instance, "ctx-a");
        break;
    case WIRE_TABLE:
        strcpy(m.u.table.instance, "ctx-a");
        m.u.table.epoch = 0x1122334455667788ull;
        m.u.table.n_ranks = 2;
        m.u.table.ranks = RANKS;
        break;
    case WIRE_TABLE_NACK:
        strcpy(m.u.table_nack.instance, "ctx-b");
        m.u.table_nack.code = KVF_E_UNKNOWN_INSTANCE;
        strcpy(m.u.table_nack.message, "instance ctx-b: no rank 0 registered here");
        break;
    case WIRE_RECV_REQ: {
        struct wire_recv_req *q = &m.u.recv_req;
        q->req_id = 0xdeadbeefcafef00dull;
        strcpy(q->ctx_instance, "ctx-a");
        q->table_epoch = 42;
        q->ctx_dp_rank = -1;
        q->writer = 3;
        q->gen_json = LAYOUT_B;
        q->gen_json_len = sizeof(LAYOUT_B) - 1;
        q->layout_id = 77;
        q->layout_slot = WIRE_LAYOUT_SLOTS - 1;
        q->n_groups = 3;
        q->n_ids[0] = 4;
        q->ids[0] = IDS0;
        q->n_ids[1] = 0; /* an empty group */
        q->n_ids[2] = 1;
        q->ids[2] = IDS2;
        q->path = WIRE_PATH_BOUNCE;
        q->extent_bytes = 96ull << 20;
        q->n_grants = 2;
        q->grants[0] = (struct wire_grant){.slot = 0, .generation = 1, .offset = 0, .length = 32 << 20, .ext_off = 0};
        q->grants[1] = (struct wire_grant){
            .slot = 5, .generation = 9, .offset = 5ull << 25, .length = 32 << 20, .ext_off = 32 << 20};
        break;
    }
    case WIRE_GRANT:
        m.u.grant.req_id = 77;
        m.u.grant.writer = 4095;
        m.u.grant.n_grants = 1;
        m.u.grant.grants[0] =
            (struct wire_grant){.slot = 2, .generation = 0xffffffffu, .offset = 1ull << 40, .length = 4096, .ext_off = 123};
        break;
    case WIRE_CHUNK:
        m.u.chunk = (struct wire_chunk){.req_id = 0x0102030405060708ull, .writer = 1, .slot = 2,
                                        .generation = 3, .ext_off = 4, .length = 5};
        break;
    case WIRE_WRITER_DONE:
        m.u.writer_done = (struct wire_writer_done){.req_id = 1, .writer = 0, .bytes = 0};
        break;
    case WIRE_NACK:
        m.u.nack.req_id = 9;
        m.u.nack.writer = 2;
        m.u.nack.code = KVF_E_BOUND_VIOLATION;
        strcpy(m.u.nack.message, "chunk at 0+33554433 exceeds its 33554432-byte grant");
        break;
    case WIRE_CANCEL:
        m.u.cancel = (struct wire_cancel){.req_id = UINT64_MAX, .writer = 7};
        break;
    case WIRE_READER_NACK:
        m.u.reader_nack.req_id = 42;
        strcpy(m.u.reader_nack.ctx_instance, "ctx-a");
        m.u.reader_nack.writer = WIRE_ALL_WRITERS;
        m.u.reader_nack.code = KVF_E_PEER_INCOMPATIBLE;
        strcpy(m.u.reader_nack.message, "head inner bytes differ");
        break;
    case WIRE_FENCE:
    case WIRE_FENCE_DONE:
        m.u.fence.serial = 0x8877665544332211ull;
        break;
    default:
        break;
    }
    return m;
}

static struct wire_msg fragment_sample(void)
{
    struct wire_msg m = sample(WIRE_RECV_REQ);
    struct wire_recv_req *q = &m.u.recv_req;
    q->path = WIRE_PATH_FRAGMENT;
    q->n_grants = 0;
    q->ctx_dp_rank = 3;
    q->n_rkeys = 2;
    q->rkeys[0] = (struct wire_rkey){.pool = 0, .remote_base = 0x7f0000001000ull, .blob = RKEY0, .blob_len = sizeof(RKEY0)};
    q->rkeys[1] = (struct wire_rkey){.pool = 3, .remote_base = 0x7f1000000000ull, .blob = RKEY3, .blob_len = sizeof(RKEY3)};
    return m;
}

/* Encode, decode, re-encode: byte-identical. Returns the decoded message (caller frees). */
static struct wire_msg roundtrip(const struct wire_msg *m, uint8_t **ret_buf, size_t *ret_len)
{
    void *buf = NULL;
    size_t len = 0, sz = 0;
    ck_assert_int_eq(wire_encode(m, &buf, &len), 0);
    ck_assert_int_eq(wire_encoded_size(m, &sz), 0);
    ck_assert_uint_eq(sz, len);
    struct wire_msg d;
    ck_assert_int_eq(wire_decode(buf, len, &d), 0);
    ck_assert_int_eq(d.type, m->type);
    void *buf2 = NULL;
    size_t len2 = 0;
    ck_assert_int_eq(wire_encode(&d, &buf2, &len2), 0);
    ck_assert_uint_eq(len2, len);
    ck_assert_mem_eq(buf2, buf, len);
    free(buf2);
    *ret_buf = buf;
    *ret_len = len;
    return d;
}

/* RECV_REQ's optional trailing tokens: absent when 0 (the old bytes), else 8 more that
 * round-trip; 0 on the wire and over the limit refused. */
START_TEST(wire_recv_req_tokens_are_optional_and_bounded)
{
    struct wire_msg m = sample(WIRE_RECV_REQ);
    void *old, *buf;
    size_t old_len, len;
    ck_assert_int_eq(wire_encode(&m, &old, &old_len), 0);
    m.u.recv_req.tokens = 80;
    uint8_t *rb;
    size_t rl;
    struct wire_msg d = roundtrip(&m, &rb, &rl);
    ck_assert_uint_eq(rl, old_len + 8);
    ck_assert_uint_eq(d.u.recv_req.tokens, 80);
    wire_msg_done(&d);
    ck_assert_int_eq(wire_decode(old, old_len, &d), 0);
    ck_assert_uint_eq(d.u.recv_req.tokens, 0);
    wire_msg_done(&d);
    memset(rb + rl - 8, 0, 8);
    ck_assert_int_eq(wire_decode(rb, rl, &d), -EBADMSG);
    uint64_t over = PLAN_MAX_TOKENS + 1;
    for (int i = 0; i < 8; i++)
        rb[rl - 8 + i] = (uint8_t)(over >> (8 * i));
    ck_assert_int_eq(wire_decode(rb, rl, &d), -EBADMSG);
    m.u.recv_req.tokens = PLAN_MAX_TOKENS + 1;
    ck_assert_int_eq(wire_encode(&m, &buf, &len), -EINVAL);
    free(rb);
    free(old);
}
END_TEST

/* NACK's optional trailing reason: absent when plain (the old bytes), else one byte naming a
 * reason that round-trips (1 was not_reader's byte before reasons, and keeps that meaning); any
 * other byte there is refused, and so is a reason out of range at encode. */
START_TEST(wire_nack_reason_is_optional_typed_and_bounded)
{
    struct wire_msg m = sample(WIRE_NACK), d;
    void *old;
    size_t old_len;
    ck_assert_int_eq(wire_encode(&m, &old, &old_len), 0);
    ck_assert_int_eq(wire_decode(old, old_len, &d), 0);
    ck_assert_int_eq(d.u.nack.reason, WIRE_NACK_PLAIN);
    wire_msg_done(&d);
    uint8_t *rb = NULL;
    size_t rl = 0;
    for (int why = WIRE_NACK_NOT_READER; why < WIRE_NACK__COUNT; why++) {
        free(rb);
        m.u.nack.reason = (wire_nack_reason_t)why;
        d = roundtrip(&m, &rb, &rl);
        ck_assert_uint_eq(rl, old_len + 1);
        ck_assert_uint_eq(rb[rl - 1], (unsigned)why);
        ck_assert_int_eq(d.u.nack.reason, why);
        ck_assert_str_eq(d.u.nack.message, m.u.nack.message);
        wire_msg_done(&d);
    }
    for (unsigned v = 0; v < 256; v++) { /* 0 and every byte past the last reason: refused */
        if (v != WIRE_NACK_PLAIN && v < WIRE_NACK__COUNT)
            continue;
        rb[rl - 1] = (uint8_t)v;
        ck_assert_int_eq(wire_decode(rb, rl, &d), -EBADMSG);
    }
    void *bad;
    size_t bad_len;
    m.u.nack.reason = WIRE_NACK__COUNT;
    ck_assert_int_eq(wire_encode(&m, &bad, &bad_len), -EINVAL);
    free(rb);
    free(old);
}
END_TEST

/* READER_NACK's optional trailing epoch: absent when unknown (the old bytes), else 8 bytes that
 * round-trip; present as 0 (not canonical) or cut short is refused. */
START_TEST(wire_reader_nack_epoch_is_optional_and_not_zero)
{
    struct wire_msg m = sample(WIRE_READER_NACK), d;
    void *old;
    size_t old_len;
    ck_assert_int_eq(wire_encode(&m, &old, &old_len), 0);
    ck_assert_int_eq(wire_decode(old, old_len, &d), 0);
    ck_assert_uint_eq(d.u.reader_nack.epoch, 0);
    wire_msg_done(&d);
    uint8_t *rb;
    size_t rl;
    m.u.reader_nack.epoch = 0x8badf00d12345677ull;
    d = roundtrip(&m, &rb, &rl);
    ck_assert_uint_eq(rl, old_len + 8);
    ck_assert_uint_eq(d.u.reader_nack.epoch, m.u.reader_nack.epoch);
    ck_assert_str_eq(d.u.reader_nack.message, m.u.reader_nack.message);
    wire_msg_done(&d);
    memset(rb + old_len, 0, 8);
    ck_assert_int_eq(wire_decode(rb, rl, &d), -EBADMSG);
    free(rb);
    free(old);
}
END_TEST

START_TEST(wire_every_message_roundtrips_byte_for_byte)
{
    for (int t = 1; t < WIRE__TYPE_END; t++) {
        struct wire_msg m = sample((wire_type_t)t), d;
        uint8_t *buf;
        size_t len;
        d = roundtrip(&m, &buf, &len);
        wire_type_t pt;
        size_t total;
        ck_assert_int_eq(wire_peek(buf, len, &pt, &total), 0);
        ck_assert_int_eq(pt, t);
        ck_assert_uint_eq(total, len);
        ck_assert_str_ne(wire_type_to_string((wire_type_t)t), "UNKNOWN");
        wire_msg_done(&d);
        free(buf);
    }
    ck_assert_str_eq(wire_type_to_string(WIRE__TYPE_END), "UNKNOWN");
    wire_msg_done(NULL);
}
END_TEST

/* tests/fuzz/corpus/fuzz_wire holds one seed per message at this wire version: fuzz_wire starts
 * from messages that decode, not from headers every version bump refuses. A changed encoding
 * fails here; KVF_WIRE_SEEDS_WRITE=1 rewrites the seeds from sample(). */
static void seed_path(char *buf, size_t len, const char *name)
{
    snprintf(buf, len, "%s", __FILE__);
    char *slash = strrchr(buf, '/');
    size_t at = slash ? (size_t)(slash + 1 - buf) : 0;
    snprintf(buf + at, len - at, "fuzz/corpus/fuzz_wire/%s", name);
}

static void seed_check(const struct wire_msg *m, const char *name)
{
    char path[1024];
    uint8_t *buf = NULL, file[WIRE_MSG_MAX > 65536 ? 65536 : WIRE_MSG_MAX];
    size_t len = 0;
    ck_assert_int_eq(wire_encode(m, (void **)&buf, &len), 0);
    seed_path(path, sizeof path, name);
    const char *w = getenv("KVF_WIRE_SEEDS_WRITE");
    FILE *f = fopen(path, w && *w == '1' ? "wb" : "rb");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    if (w && *w == '1') {
        ck_assert_uint_eq(fwrite(buf, 1, len, f), len);
    } else {
        size_t n = fread(file, 1, sizeof file, f);
        ck_assert_msg(n == len && memcmp(file, buf, len) == 0,
                      "%s is not this wire version's %s (%zu bytes, now %zu): rewrite the seeds "
                      "with KVF_WIRE_SEEDS_WRITE=1 build/tests/check_wire",
                      path, name, n, len);
    }
    fclose(f);
    free(buf);
}

START_TEST(wire_fuzz_seeds_are_this_versions_messages)
{
    char name[64];
    for (int t = 1; t < WIRE__TYPE_END; t++) {
        struct wire_msg m = sample((wire_type_t)t);
        const char *tn = wire_type_to_string((wire_type_t)t);
        size_t i = 0;
        for (; tn[i] && i < sizeof name - 1; i++)
            name[i] = (char)(tn[i] >= 'A' && tn[i] <= 'Z' ? tn[i] - 'A' + 'a' : tn[i]);
        name[i] = '\0';
        if (t == WIRE_RECV_REQ)
            snprintf(name, sizeof name, "recv_req_bounce");
        seed_check(&m, name);
    }
    struct wire_msg f = fragment_sample();
    seed_check(&f, "recv_req_fragment");
}
END_TEST

START_TEST(wire_decoded_fields_equal_the_sent_ones)
{
    uint8_t *buf;
    size_t len;
    struct wire_msg m = sample(WIRE_TABLE);
    struct wire_msg d = roundtrip(&m, &buf, &len);
    ck_assert_str_eq(d.u.table.instance, "ctx-a");
    ck_assert_uint_eq(d.u.table.epoch, 0x1122334455667788ull);
    ck_assert_uint_eq(d.u.table.n_ranks, 2);
    ck_assert_str_eq(d.u.table.ranks[1].addr, "[fe80::1]:7401");
    ck_assert_uint_eq(d.u.table.ranks[1].json_len, strlen(LAYOUT_B));
    ck_assert_str_eq(d.u.table.ranks[1].json, LAYOUT_B); /* decoded copies are NUL-terminated */
    ck_assert_ptr_ne(d.u.table.ranks, RANKS);
    wire_msg_done(&d);
    free(buf);

    m = fragment_sample();
    d = roundtrip(&m, &buf, &len);
    const struct wire_recv_req *q = &d.u.recv_req;
    ck_assert_uint_eq(q->req_id, 0xdeadbeefcafef00dull);
    ck_assert_str_eq(q->ctx_instance, "ctx-a");
    ck_assert_int_eq(q->ctx_dp_rank, 3);
    ck_assert_uint_eq(q->writer, 3);
    ck_assert_str_eq(q->gen_json, LAYOUT_B);
    ck_assert_uint_eq(q->n_groups, 3);
    ck_assert_uint_eq(q->n_ids[0], 4);
    ck_assert_mem_eq(q->ids[0], IDS0, sizeof(IDS0));
    ck_assert_uint_eq(q->n_ids[1], 0);
    ck_assert_uint_eq(q->ids[2][0], 3);
    ck_assert_int_eq(q->path, WIRE_PATH_FRAGMENT);
    ck_assert_uint_eq(q->extent_bytes, 96ull << 20);
    ck_assert_uint_eq(q->n_rkeys, 2);
    ck_assert_uint_eq(q->rkeys[1].pool, 3);
    ck_assert_uint_eq(q->rkeys[1].remote_base, 0x7f1000000000ull);
    ck_assert_uint_eq(q->rkeys[1].blob_len, 3);
    ck_assert_mem_eq(q->rkeys[1].blob, RKEY3, 3);
    ck_assert_str_eq(wire_path_to_string(q->path), "fragment");
    wire_msg_done(&d);
    free(buf);

    m = sample(WIRE_RECV_REQ);
    d = roundtrip(&m, &buf, &len);
    ck_assert_int_eq(d.u.recv_req.ctx_dp_rank, -1);
    ck_assert_uint_eq(d.u.recv_req.n_grants, 2);
    ck_assert_uint_eq(d.u.recv_req.grants[1].generation, 9);
    ck_assert_uint_eq(d.u.recv_req.grants[1].offset, 5ull << 25);
    ck_assert_uint_eq(d.u.recv_req.grants[1].ext_off, 32 << 20);
    /* the sender checks its chunk against the grant it received before it puts */
    const struct wire_grant *g = &d.u.recv_req.grants[1];
    ck_assert_int_eq(wire_grant_check(g, 32 << 20, 32 << 20), 0);
    ck_assert_int_eq(wire_grant_check(g, 32 << 20, (32 << 20) + 1), -ERANGE);
    ck_assert_int_eq(wire_grant_check(g, 0, 32 << 20), -ERANGE);
    ck_assert_int_eq(wire_grant_check(NULL, 0, 0), -ERANGE);
    wire_msg_done(&d);
    free(buf);
}
END_TEST

START_TEST(wire_chunk_is_explicit_little_endian)
{
    struct wire_msg m = sample(WIRE_CHUNK);
    uint8_t buf[64];
    size_t len = 0;
    ck_assert_int_eq(wire_encode_into(&m, buf, 11, &len), -ENOBUFS);
    ck_assert_int_eq(wire_encode_into(&m, buf, sizeof(buf), &len), 0);
    const uint8_t want[] = {
        0x46, 0x4b, 3, WIRE_CHUNK, 0, 0, 0, 0, 36, 0, 0, 0, /* header (v3), body 36 bytes */
        8, 7, 6, 5, 4, 3, 2, 1,                              /* req_id */
        1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0,                  /* writer, slot, generation */
        4, 0, 0, 0, 0, 0, 0, 0, 5, 0, 0, 0, 0, 0, 0, 0,      /* ext_off, length */
    };
    ck_assert_uint_eq(len, sizeof(want));
    ck_assert_mem_eq(buf, want, sizeof(want));
}
END_TEST

/* Every strict prefix fails: as sent (the header announces more) and with body_len patched to
 * the shorter length (the body itself runs out). One extra byte fails too. */
START_TEST(wire_every_truncation_and_trailing_byte_is_refused)
{
    struct wire_msg ms[WIRE__TYPE_END + 1];
    for (int t = 1; t < WIRE__TYPE_END; t++)
        ms[t] = sample((wire_type_t)t);
    ms[0] = fragment_sample();
    for (int t = 0; t < WIRE__TYPE_END; t++) {
        void *enc = NULL;
        size_t len = 0;
        ck_assert_int_eq(wire_encode(&ms[t], &enc, &len), 0);
        uint8_t *b = malloc(len + 1);
        ck_assert_ptr_nonnull(b);
        for (size_t cut = 0; cut < len; cut++) {
            memcpy(b, enc, cut);
            struct wire_msg d;
            ck_assert_int_eq(wire_decode(b, cut, &d), -EBADMSG);
            if (cut >= WIRE_HDR_BYTES) {
                uint32_t body = (uint32_t)(cut - WIRE_HDR_BYTES);
                for (int i = 0; i < 4; i++)
                    b[8 + i] = (uint8_t)(body >> (8 * i));
                int rc = wire_decode(b, cut, &d);
                ck_assert_msg(rc == -EBADMSG, "type %d cut %zu: %d", t, cut, rc);
            }
        }
        memcpy(b, enc, len);
        b[len] = 0;
        struct wire_msg d;
        ck_assert_int_eq(wire_decode(b, len + 1, &d), -EBADMSG);
        uint32_t body = (uint32_t)(len + 1 - WIRE_HDR_BYTES);
        for (int i = 0; i < 4; i++)
            b[8 + i] = (uint8_t)(body >> (8 * i));
        ck_assert_int_eq(wire_decode(b, len + 1, &d), -EBADMSG);
        free(b);
        free(enc);
    }
}
END_TEST

START_TEST(wire_bad_header_is_refused)
{
    struct wire_msg m = sample(WIRE_CANCEL), d;
    uint8_t buf[64], b[64];
    size_t len;
    wire_type_t t;
    size_t total;
    ck_assert_int_eq(wire_encode_into(&m, buf, sizeof(buf), &len), 0);
    memcpy(b, buf, len);
    b[0] ^= 1; /* magic */
    ck_assert_int_eq(wire_decode(b, len, &d), -EBADMSG);
    for (int v = 0; v < 256; v++) {
        if (v == WIRE_VERSION)
            continue;
        memcpy(b, buf, len);
        b[2] = (uint8_t)v;
        ck_assert_int_eq(wire_decode(b, len, &d), -EPROTONOSUPPORT);
    }
    const int bad_types[] = {0, WIRE__TYPE_END, 0x7f, 0xff};
    for (size_t i = 0; i < sizeof(bad_types) / sizeof(bad_types[0]); i++) {
        memcpy(b, buf, len);
        b[3] = (uint8_t)bad_types[i];
        ck_assert_int_eq(wire_decode(b, len, &d), -ENOMSG);
    }
    for (int off = 4; off < 8; off++) { /* flags, reserved */
        memcpy(b, buf, len);
        b[off] = 0x80;
        ck_assert_int_eq(wire_decode(b, len, &d), -EBADMSG);
    }
    memcpy(b, buf, len);
    b[8] = 0xff, b[9] = 0xff, b[10] = 0xff, b[11] = 0x7f; /* body over WIRE_MSG_MAX */
    ck_assert_int_eq(wire_peek(b, len, &t, &total), -EMSGSIZE);
    ck_assert_int_eq(wire_decode(b, len, &d), -EMSGSIZE);
    ck_assert_int_eq(wire_peek(b, WIRE_HDR_BYTES - 1, &t, &total), -EBADMSG);
    ck_assert_int_eq(wire_decode(NULL, 0, &d), -EBADMSG);
}
END_TEST

/* ---- a raw byte builder, for messages the encoder would refuse to write ---- */

struct tb {
    uint8_t *b;
    size_t n;
};

static void tb_le(struct tb *t, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        t->b[t->n++] = (uint8_t)(v >> (8 * i));
}

static void tb_fill(struct tb *t, uint8_t c, size_t n)
{
    memset(t->b + t->n, c, n);
    t->n += n;
}

static void tb_str(struct tb *t, const char *s)
{
    tb_le(t, strlen(s), 2);
    memcpy(t->b + t->n, s, strlen(s));
    t->n += strlen(s);
}

static struct tb tb_start(wire_type_t type, size_t cap)
{
    struct tb t = {.b = calloc(1, cap), .n = 0};
    ck_assert_ptr_nonnull(t.b);
    tb_le(&t, WIRE_MAGIC, 2);
    tb_le(&t, WIRE_VERSION, 1);
    tb_le(&t, type, 1);
    tb_le(&t, 0, 8);
    return t;
}

static int tb_decode(struct tb *t)
{
    uint32_t body = (uint32_t)(t->n - WIRE_HDR_BYTES);
    for (int i = 0; i < 4; i++)
        t->b[8 + i] = (uint8_t)(body >> (8 * i));
    struct wire_msg d;
    int rc = wire_decode(t->b, t->n, &d);
    if (rc == 0)
        wire_msg_done(&d);
    free(t->b);
    t->b = NULL;
    return rc;
}

/* RECV_REQ up to its first group, with `ngroups` announced. */
static struct tb raw_recv_req_head(uint32_t ngroups, size_t cap)
{
    struct tb t = tb_start(WIRE_RECV_REQ, cap);
    tb_le(&t, 1, 8);
    tb_str(&t, "ctx-a");
    tb_le(&t, 1, 8);
    tb_le(&t, (uint32_t)-1, 4);
    tb_le(&t, 0, 4);
    tb_le(&t, 2, 4);
    tb_fill(&t, '{', 1), tb_fill(&t, '}', 1);
    tb_le(&t, 5, 8); /* layout_id */
    tb_le(&t, 0, 4); /* layout_slot */
    tb_le(&t, ngroups, 4);
    return t;
}

START_TEST(wire_over_limit_counts_are_refused_on_decode)
{
    /* GRANT with WIRE_MAX_GRANTS + 1 grants (all bytes present) */
    struct tb t = tb_start(WIRE_GRANT, 8192);
    tb_le(&t, 1, 8);
    tb_le(&t, 0, 4);
    tb_le(&t, WIRE_MAX_GRANTS + 1, 4);
    for (uint32_t i = 0; i < WIRE_MAX_GRANTS + 1; i++) {
        tb_le(&t, i, 4), tb_le(&t, 1, 4), tb_le(&t, 0, 8), tb_le(&t, 1, 8), tb_le(&t, 0, 8);
    }
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    /* GRANT with zero grants is malformed */
    t = tb_start(WIRE_GRANT, 64);
    tb_le(&t, 1, 8), tb_le(&t, 0, 4), tb_le(&t, 0, 4);
    ck_assert_int_eq(tb_decode(&t), -EBADMSG);
    /* TABLE with WIRE_MAX_RANKS + 1 ranks */
    t = tb_start(WIRE_TABLE, 64);
    tb_str(&t, "ctx-a"), tb_le(&t, 1, 8), tb_le(&t, WIRE_MAX_RANKS + 1, 4);
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    /* TABLE announcing more ranks than its bytes can hold: refused before any allocation */
    t = tb_start(WIRE_TABLE, 64);
    tb_str(&t, "ctx-a"), tb_le(&t, 1, 8), tb_le(&t, WIRE_MAX_RANKS, 4);
    ck_assert_int_eq(tb_decode(&t), -EBADMSG);
    /* RECV_REQ: groups, ids per group, rkeys, rkey blob, grants */
    t = raw_recv_req_head(LAYOUT_MAX_GROUPS + 1, 256);
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    t = raw_recv_req_head(1, 256);
    tb_le(&t, PLAN_MAX_IDS + 1, 4);
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    t = raw_recv_req_head(0, 256);
    tb_le(&t, WIRE_PATH_FRAGMENT, 1), tb_le(&t, 100, 8), tb_le(&t, WIRE_MAX_RKEYS + 1, 4);
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    t = raw_recv_req_head(0, 256);
    tb_le(&t, WIRE_PATH_FRAGMENT, 1), tb_le(&t, 100, 8), tb_le(&t, 1, 4);
    tb_le(&t, 0, 4), tb_le(&t, 4096, 8), tb_le(&t, WIRE_RKEY_MAX + 1, 4);
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    t = raw_recv_req_head(0, 256);
    tb_le(&t, WIRE_PATH_BOUNCE, 1), tb_le(&t, 100, 8), tb_le(&t, 0, 4), tb_le(&t, WIRE_MAX_GRANTS + 1, 4);
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    /* the head itself, completed, is valid: the refusals above are the counts' doing */
    t = raw_recv_req_head(0, 256);
    tb_le(&t, WIRE_PATH_BOUNCE, 1), tb_le(&t, 100, 8), tb_le(&t, 0, 4), tb_le(&t, 0, 4);
    ck_assert_int_eq(tb_decode(&t), 0);
}
END_TEST

START_TEST(wire_over_long_strings_and_json_are_refused)
{
    char big[WIRE_TEXT_MAX + 8];
    /* addr of WIRE_ADDR_MAX bytes (one too many) */
    struct tb t = tb_start(WIRE_LAYOUT_FORWARD, 4096);
    memset(big, 'a', sizeof(big));
    memcpy(big + WIRE_ADDR_MAX - 5, ":7400", 6);
    ck_assert_uint_eq(strlen(big), WIRE_ADDR_MAX);
    tb_str(&t, big), tb_le(&t, 2, 4), tb_fill(&t, '{', 1), tb_fill(&t, '}', 1);
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    /* the same with one byte less is fine */
    t = tb_start(WIRE_LAYOUT_FORWARD, 4096);
    tb_str(&t, big + 1), tb_le(&t, 2, 4), tb_fill(&t, '{', 1), tb_fill(&t, '}', 1);
    ck_assert_int_eq(tb_decode(&t), 0);
    /* instance of LAYOUT_NAME_MAX bytes */
    memset(big, 'i', LAYOUT_NAME_MAX);
    big[LAYOUT_NAME_MAX] = 0;
    t = tb_start(WIRE_TABLE_REQ, 256);
    tb_str(&t, big);
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    t = tb_start(WIRE_TABLE_REQ, 256);
    tb_str(&t, big + 1);
    ck_assert_int_eq(tb_decode(&t), 0);
    /* NACK message of WIRE_TEXT_MAX bytes */
    memset(big, 'm', WIRE_TEXT_MAX);
    big[WIRE_TEXT_MAX] = 0;
    t = tb_start(WIRE_NACK, 2048);
    tb_le(&t, 1, 8), tb_le(&t, 0, 4), tb_le(&t, KVF_E_TIMEOUT, 4), tb_str(&t, big);
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    /* layout JSON of LAYOUT_JSON_MAX + 1 bytes */
    t = tb_start(WIRE_LAYOUT_FORWARD, LAYOUT_JSON_MAX + 64);
    tb_str(&t, "h:1"), tb_le(&t, LAYOUT_JSON_MAX + 1, 4), tb_fill(&t, ' ', LAYOUT_JSON_MAX + 1);
    ck_assert_int_eq(tb_decode(&t), -E2BIG);
    t = tb_start(WIRE_LAYOUT_FORWARD, LAYOUT_JSON_MAX + 64);
    tb_str(&t, "h:1"), tb_le(&t, LAYOUT_JSON_MAX, 4), tb_fill(&t, ' ', LAYOUT_JSON_MAX);
    ck_assert_int_eq(tb_decode(&t), 0);
    /* a NUL inside a string or the JSON */
    t = tb_start(WIRE_TABLE_REQ, 64);
    tb_str(&t, "ctx-a"), t.b[t.n - 2] = 0;
    ck_assert_int_eq(tb_decode(&t), -EBADMSG);
    t = tb_start(WIRE_LAYOUT_FORWARD, 64);
    tb_str(&t, "h:1"), tb_le(&t, 3, 4), tb_fill(&t, '{', 1), tb_fill(&t, 0, 1), tb_fill(&t, '}', 1);
    ck_assert_int_eq(tb_decode(&t), -EBADMSG);

    /* the encoder refuses the same */
    struct wire_msg m = sample(WIRE_NACK);
    memset(m.u.nack.message, 'x', WIRE_TEXT_MAX); /* no NUL inside the array */
    ck_assert_int_eq(wire_validate(&m), -E2BIG);
    m = sample(WIRE_LAYOUT_FORWARD);
    m.u.layout_forward.json_len = LAYOUT_JSON_MAX + 1;
    ck_assert_int_eq(wire_validate(&m), -E2BIG);
    m = sample(WIRE_TABLE_REQ);
    memset(m.u.table_req.instance, 'i', LAYOUT_NAME_MAX);
    ck_assert_int_eq(wire_validate(&m), -E2BIG);
}
END_TEST

START_TEST(wire_values_out_of_domain_are_refused_both_ways)
{
    struct {
        struct wire_msg m;
        int want;
    } bad[64];
    int n = 0;
#define BAD(type, stmt, err)                                                                       \
    do {                                                                                           \
        struct wire_msg m_ = (type) == WIRE__TYPE_END ? fragment_sample() : sample(type);          \
        stmt;                                                                                      \
        bad[n].m = m_;                                                                             \
        bad[n++].want = (err);                                                                     \
    } while (0)
    BAD(WIRE_LAYOUT_FORWARD, strcpy(m_.u.layout_forward.addr, "noport"), -EINVAL);
    BAD(WIRE_LAYOUT_FORWARD, strcpy(m_.u.layout_forward.addr, "h:0"), -EINVAL);
    BAD(WIRE_LAYOUT_FORWARD, strcpy(m_.u.layout_forward.addr, "h:65536"), -EINVAL);
    BAD(WIRE_LAYOUT_FORWARD, strcpy(m_.u.layout_forward.addr, ":80"), -EINVAL);
    BAD(WIRE_LAYOUT_FORWARD, strcpy(m_.u.layout_forward.addr, "h st:80"), -EINVAL);
    BAD(WIRE_LAYOUT_FORWARD, strcpy(m_.u.layout_forward.addr, "h:8x"), -EINVAL);
    BAD(WIRE_LAYOUT_FORWARD, m_.u.layout_forward.json_len = 0, -EINVAL);
    BAD(WIRE_TABLE_REQ, m_.u.table_req.instance[0] = 0, -EINVAL);
    BAD(WIRE_TABLE_REQ, strcpy(m_.u.table_req.instance, "a\tb"), -EINVAL);
    BAD(WIRE_TABLE, m_.u.table.n_ranks = 0, -EINVAL);
    BAD(WIRE_TABLE, m_.u.table.n_ranks = WIRE_MAX_RANKS + 1, -E2BIG);
    BAD(WIRE_TABLE_NACK, m_.u.table_nack.code = KVF_OK, -EINVAL);
    BAD(WIRE_TABLE_NACK, m_.u.table_nack.code = KVF_E__COUNT, -EINVAL);
    BAD(WIRE_RECV_REQ, m_.u.recv_req.ctx_dp_rank = -2, -EINVAL);
    BAD(WIRE_RECV_REQ, m_.u.recv_req.ctx_dp_rank = LAYOUT_MAX_TP, -EINVAL);
    BAD(WIRE_RECV_REQ, m_.u.recv_req.writer = WIRE_MAX_RANKS, -EINVAL);
    BAD(WIRE_RECV_REQ, m_.u.recv_req.path = (wire_path_t)2, -EINVAL);
    BAD(WIRE_RECV_REQ, m_.u.recv_req.extent_bytes = 0, -EINVAL);
    BAD(WIRE_RECV_REQ, m_.u.recv_req.grants[1].ext_off = (96u << 20) - 1, -EINVAL); /* past extent */
    BAD(WIRE_RECV_REQ, m_.u.recv_req.grants[0].generation = 0, -EINVAL);
    BAD(WIRE_RECV_REQ, m_.u.recv_req.n_groups = LAYOUT_MAX_GROUPS + 1, -E2BIG);
    BAD(WIRE_RECV_REQ, m_.u.recv_req.n_ids[0] = PLAN_MAX_IDS + 1, -E2BIG);
    BAD(WIRE_RECV_REQ, m_.u.recv_req.n_grants = WIRE_MAX_GRANTS + 1, -E2BIG);
    BAD(WIRE_RECV_REQ, (m_.u.recv_req.n_rkeys = 1, m_.u.recv_req.rkeys[0].blob = RKEY0,
                        m_.u.recv_req.rkeys[0].blob_len = 1), -EINVAL); /* bounce with rkeys */
    BAD(WIRE__TYPE_END, m_.u.recv_req.n_grants = 1, -EINVAL);            /* fragment with grants */
    BAD(WIRE__TYPE_END, m_.u.recv_req.n_rkeys = 0, -EINVAL);
    BAD(WIRE__TYPE_END, m_.u.recv_req.rkeys[1].pool = 0, -EINVAL);       /* not ascending */
    BAD(WIRE__TYPE_END, m_.u.recv_req.rkeys[1].pool = LAYOUT_MAX_POOLS, -EINVAL);
    BAD(WIRE__TYPE_END, m_.u.recv_req.rkeys[0].blob_len = 0, -EINVAL);
    BAD(WIRE__TYPE_END, m_.u.recv_req.rkeys[0].blob_len = WIRE_RKEY_MAX + 1, -E2BIG);
    BAD(WIRE__TYPE_END, m_.u.recv_req.n_rkeys = WIRE_MAX_RKEYS + 1, -E2BIG);
    BAD(WIRE_GRANT, m_.u.grant.n_grants = 0, -EINVAL);
    BAD(WIRE_GRANT, m_.u.grant.grants[0].length = 0, -EINVAL);
    BAD(WIRE_GRANT, m_.u.grant.grants[0].offset = UINT64_MAX - 4094, -EINVAL); /* wraps */
    BAD(WIRE_GRANT, m_.u.grant.writer = WIRE_MAX_RANKS, -EINVAL);
    BAD(WIRE_CHUNK, m_.u.chunk.generation = 0, -EINVAL);
    BAD(WIRE_CHUNK, m_.u.chunk.ext_off = UINT64_MAX, -EINVAL);
    BAD(WIRE_NACK, m_.u.nack.code = (kvf_error_t)99, -EINVAL);
    BAD(WIRE_CANCEL, m_.u.cancel.writer = UINT32_MAX, -EINVAL);
    BAD(WIRE_READER_NACK, m_.u.reader_nack.writer = WIRE_MAX_RANKS, -EINVAL);
    BAD(WIRE_READER_NACK, m_.u.reader_nack.code = KVF_OK, -EINVAL);
    BAD(WIRE_READER_NACK, m_.u.reader_nack.ctx_instance[0] = 0, -EINVAL);
    BAD(WIRE_FENCE, m_.u.fence.serial = 0, -EINVAL);
    BAD(WIRE_FENCE_DONE, m_.u.fence.serial = 0, -EINVAL);
    BAD(WIRE_WRITER_DONE, m_.u.writer_done.writer = WIRE_MAX_RANKS, -EINVAL);
#undef BAD
    ck_assert_int_le(n, 64);
    for (int i = 0; i < n; i++) {
        void *buf = NULL;
        size_t len = 0;
        ck_assert_msg(wire_encode(&bad[i].m, &buf, &len) == bad[i].want, "case %d", i);
        ck_assert_ptr_null(buf);
    }
    /* decode side: patch a valid encoding's field (the CHUNK generation, a NACK code, the path) */
    struct wire_msg m = sample(WIRE_CHUNK), d;
    uint8_t b[256];
    size_t len;
    ck_assert_int_eq(wire_encode_into(&m, b, sizeof(b), &len), 0);
    memset(b + 12 + 16, 0, 4); /* generation */
    ck_assert_int_eq(wire_decode(b, len, &d), -EBADMSG);
    m = sample(WIRE_NACK);
    ck_assert_int_eq(wire_encode_into(&m, b, sizeof(b), &len), 0);
    b[12 + 12] = 0; /* code = OK */
    ck_assert_int_eq(wire_decode(b, len, &d), -EBADMSG);
    b[12 + 12] = KVF_E__COUNT;
    ck_assert_int_eq(wire_decode(b, len, &d), -EBADMSG);
}
END_TEST

START_TEST(wire_size_limits_are_inclusive_and_enforced)
{
    /* a group at PLAN_MAX_IDS ids is accepted and round-trips */
    uint32_t *ids = malloc(PLAN_MAX_IDS * sizeof(uint32_t));
    ck_assert_ptr_nonnull(ids);
    for (uint32_t i = 0; i < PLAN_MAX_IDS; i++)
        ids[i] = i * 2654435761u;
    struct wire_msg m = sample(WIRE_RECV_REQ);
    m.u.recv_req.n_ids[0] = PLAN_MAX_IDS;
    m.u.recv_req.ids[0] = ids;
    uint8_t *buf;
    size_t len;
    struct wire_msg d = roundtrip(&m, &buf, &len);
    ck_assert_uint_eq(d.u.recv_req.n_ids[0], PLAN_MAX_IDS);
    ck_assert_uint_eq(d.u.recv_req.ids[0][PLAN_MAX_IDS - 1], ids[PLAN_MAX_IDS - 1]);
    wire_msg_done(&d);
    free(buf);
    free(ids);

    /* a table whose layouts add up past WIRE_MSG_MAX is refused before anything is written */
    char *json = malloc(LAYOUT_JSON_MAX);
    ck_assert_ptr_nonnull(json);
    memset(json, ' ', LAYOUT_JSON_MAX);
    uint32_t nr = WIRE_MSG_MAX / LAYOUT_JSON_MAX + 1;
    struct wire_rank *ranks = calloc(nr, sizeof(*ranks));
    ck_assert_ptr_nonnull(ranks);
    for (uint32_t i = 0; i < nr; i++) {
        strcpy(ranks[i].addr, "h:1");
        ranks[i].json = json;
        ranks[i].json_len = LAYOUT_JSON_MAX;
    }
    m = sample(WIRE_TABLE);
    m.u.table.ranks = ranks;
    m.u.table.n_ranks = nr;
    size_t sz;
    ck_assert_int_eq(wire_encoded_size(&m, &sz), -EMSGSIZE);
    void *out = NULL;
    ck_assert_int_eq(wire_encode(&m, &out, &len), -EMSGSIZE);
    ck_assert_ptr_null(out);
    m.u.table.n_ranks = nr - 2;
    ck_assert_int_eq(wire_encoded_size(&m, &sz), 0);
    ck_assert_uint_le(sz, WIRE_MSG_MAX);
    free(ranks);
    free(json);
}
END_TEST

static Suite *wire_suite(void)
{
    Suite *s = suite_create("wire");
    TCase *tc = tcase_create("roundtrip");
    tcase_add_test(tc, wire_every_message_roundtrips_byte_for_byte);
    tcase_add_test(tc, wire_fuzz_seeds_are_this_versions_messages);
    tcase_add_test(tc, wire_decoded_fields_equal_the_sent_ones);
    tcase_add_test(tc, wire_chunk_is_explicit_little_endian);
    tcase_add_test(tc, wire_recv_req_tokens_are_optional_and_bounded);
    tcase_add_test(tc, wire_nack_reason_is_optional_typed_and_bounded);
    tcase_add_test(tc, wire_reader_nack_epoch_is_optional_and_not_zero);
    suite_add_tcase(s, tc);
    tc = tcase_create("refusals");
    tcase_add_test(tc, wire_every_truncation_and_trailing_byte_is_refused);
    tcase_add_test(tc, wire_bad_header_is_refused);
    tcase_add_test(tc, wire_over_limit_counts_are_refused_on_decode);
    tcase_add_test(tc, wire_over_long_strings_and_json_are_refused);
    tcase_add_test(tc, wire_values_out_of_domain_are_refused_both_ways);
    suite_add_tcase(s, tc);
    tc = tcase_create("limits");
    tcase_add_test(tc, wire_size_limits_are_inclusive_and_enforced);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(wire_suite()); }
