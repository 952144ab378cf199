/* wire.c: daemon-to-daemon control message codec (see wire.h for the format). One body
 * writer and one body reader per type; wire_validate holds every domain rule and runs on both
 * encode and decode, so the two sides refuse the same messages. */
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "wire_io.h"

/* ---- names ---- */

static const char *const type_names[WIRE__TYPE_END] = {
    [WIRE_LAYOUT_FORWARD] = "LAYOUT_FORWARD", [WIRE_TABLE_REQ] = "TABLE_REQ",
    [WIRE_TABLE] = "TABLE",                   [WIRE_TABLE_NACK] = "TABLE_NACK",
    [WIRE_RECV_REQ] = "RECV_REQ",             [WIRE_GRANT] = "GRANT",
    [WIRE_CHUNK] = "CHUNK",                   [WIRE_WRITER_DONE] = "WRITER_DONE",
    [WIRE_NACK] = "NACK",                     [WIRE_CANCEL] = "CANCEL",
    [WIRE_READER_NACK] = "READER_NACK",       [WIRE_FENCE] = "FENCE",
    [WIRE_FENCE_DONE] = "FENCE_DONE",
};

const char *wire_type_to_string(wire_type_t t)
{
    if ((unsigned)t >= WIRE__TYPE_END || !type_names[t])
        return "UNKNOWN";
    return type_names[t];
}

const char *wire_path_to_string(wire_path_t p)
{
    return p == WIRE_PATH_BOUNCE ? "bounce" : p == WIRE_PATH_FRAGMENT ? "fragment" : "unknown";
}

/* ---- validation (shared by encode and decode) ---- */

static int check_token(const char *s, size_t cap)
{
    size_t n = strnlen(s, cap);
    if (n >= cap)
        return -E2BIG;
    if (n == 0)
        return -EINVAL;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x21 || (unsigned char)s[i] > 0x7e)
            return -EINVAL;
    return 0;
}

static int check_addr(const char *s)
{
    int rc = check_token(s, WIRE_ADDR_MAX);
    if (rc)
        return rc;
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s)
        return -EINVAL;
    size_t digits = strlen(colon + 1);
    if (digits < 1 || digits > 5)
        return -EINVAL;
    unsigned long port = 0;
    for (const char *d = colon + 1; *d; d++) {
        if (*d < '0' || *d > '9')
            return -EINVAL;
        port = port * 10 + (unsigned long)(*d - '0');
    }
    return port >= 1 && port <= 65535 ? 0 : -EINVAL;
}

static int check_text(const char *s) { return strnlen(s, WIRE_TEXT_MAX) < WIRE_TEXT_MAX ? 0 : -E2BIG; }

static int check_json(const char *j, uint32_t len)
{
    if (len > LAYOUT_JSON_MAX)
        return -E2BIG;
    if (!j || len == 0 || memchr(j, 0, len))
        return -EINVAL;
    return 0;
}

static int check_code(kvf_error_t c) { return c > KVF_OK && c < KVF_E__COUNT ? 0 : -EINVAL; }

static int check_range(uint64_t off, uint64_t len)
{
    return len > 0 && off <= UINT64_MAX - len ? 0 : -EINVAL;
}

static int check_grant(const struct wire_grant *g)
{
    if (g->generation == 0 || check_range(g->offset, g->length) || check_range(g->ext_off, g->length))
        return -EINVAL;
    return 0;
}

#define TRY(x)                                                                                     \
    do {                                                                                           \
        int rc_ = (x);                                                                             \
        if (rc_)                                                                                   \
            return rc_;                                                                            \
    } while (0)

static int check_recv_req(const struct wire_recv_req *q)
{
    TRY(check_token(q->ctx_instance, LAYOUT_NAME_MAX));
    if (q->ctx_dp_rank < -1 || q->ctx_dp_rank >= (int32_t)LAYOUT_MAX_TP)
        return -EINVAL;
    if (q->writer >= WIRE_MAX_RANKS)
        return -EINVAL;
    if (q->gen_json_len) /* empty: the layout the receiver holds in layout_slot */
        TRY(check_json(q->gen_json, q->gen_json_len));
    if (q->layout_id == 0 || q->layout_slot >= WIRE_LAYOUT_SLOTS)
        return -EINVAL;
    if (q->n_groups > LAYOUT_MAX_GROUPS)
        return -E2BIG;
    for (uint32_t g = 0; g < q->n_groups; g++) {
        if (q->n_ids[g] > PLAN_MAX_IDS)
            return -E2BIG;
        if (q->n_ids[g] && !q->ids[g])
            return -EINVAL;
    }
    if (q->path != WIRE_PATH_BOUNCE && q->path != WIRE_PATH_FRAGMENT)
        return -EINVAL;
    if (q->extent_bytes == 0)
        return -EINVAL;
    if (q->n_rkeys > WIRE_MAX_RKEYS || q->n_grants > WIRE_MAX_GRANTS)
        return -E2BIG;
    if (q->path == WIRE_PATH_BOUNCE ? q->n_rkeys != 0 : (q->n_rkeys == 0 || q->n_grants != 0))
        return -EINVAL;
    for (uint32_t i = 0; i < q->n_rkeys; i++) {
        const struct wire_rkey *k = &q->rkeys[i];
        if (k->blob_len > WIRE_RKEY_MAX)
            return -E2BIG;
        if (k->pool >= LAYOUT_MAX_POOLS || (i > 0 && k->pool <= q->rkeys[i - 1].pool) || !k->blob ||
            k->blob_len == 0)
            return -EINVAL;
    }
    for (uint32_t i = 0; i < q->n_grants; i++) {
        TRY(check_grant(&q->grants[i]));
        if (q->grants[i].ext_off + q->grants[i].length > q->extent_bytes)
            return -EINVAL;
    }
    return q->tokens > PLAN_MAX_TOKENS ? -EINVAL : 0;
}

static int validate_fields(const struct wire_msg *m)
{
    switch (m->type) {
    case WIRE_LAYOUT_FORWARD:
        TRY(check_addr(m->u.layout_forward.addr));
        return check_json(m->u.layout_forward.json, m->u.layout_forward.json_len);
    case WIRE_TABLE_REQ:
        return check_token(m->u.table_req.instance, LAYOUT_NAME_MAX);
    case WIRE_TABLE: {
        const struct wire_table *t = &m->u.table;
        TRY(check_token(t->instance, LAYOUT_NAME_MAX));
        if (t->n_ranks > WIRE_MAX_RANKS)
            return -E2BIG;
        if (t->n_ranks == 0 || !t->ranks)
            return -EINVAL;
        for (uint32_t i = 0; i < t->n_ranks; i++) {
            TRY(check_addr(t->ranks[i].addr));
            TRY(check_json(t->ranks[i].json, t->ranks[i].json_len));
        }
        return 0;
    }
    case WIRE_TABLE_NACK:
        TRY(check_token(m->u.table_nack.instance, LAYOUT_NAME_MAX));
        TRY(check_code(m->u.table_nack.code));
        return check_text(m->u.table_nack.message);
    case WIRE_RECV_REQ:
        return check_recv_req(&m->u.recv_req);
    case WIRE_GRANT:
        if (m->u.grant.writer >= WIRE_MAX_RANKS)
            return -EINVAL;
        if (m->u.grant.n_grants > WIRE_MAX_GRANTS)
            return -E2BIG;
        if (m->u.grant.n_grants == 0)
            return -EINVAL;
        for (uint32_t i = 0; i < m->u.grant.n_grants; i++)
            TRY(check_grant(&m->u.grant.grants[i]));
        return 0;
    case WIRE_CHUNK:
        if (m->u.chunk.writer >= WIRE_MAX_RANKS || m->u.chunk.generation == 0)
            return -EINVAL;
        return check_range(m->u.chunk.ext_off, m->u.chunk.length);
    case WIRE_WRITER_DONE:
        return m->u.writer_done.writer < WIRE_MAX_RANKS ? 0 : -EINVAL;
    case WIRE_NACK:
        if (m->u.nack.writer >= WIRE_MAX_RANKS || (unsigned)m->u.nack.reason >= WIRE_NACK__COUNT)
            return -EINVAL;
        TRY(check_code(m->u.nack.code));
        return check_text(m->u.nack.message);
    case WIRE_CANCEL:
        return m->u.cancel.writer < WIRE_MAX_RANKS ? 0 : -EINVAL;
    case WIRE_READER_NACK:
        TRY(check_token(m->u.reader_nack.ctx_instance, LAYOUT_NAME_MAX));
        if (m->u.reader_nack.writer >= WIRE_MAX_RANKS && m->u.reader_nack.writer != WIRE_ALL_WRITERS)
            return -EINVAL;
        TRY(check_code(m->u.reader_nack.code));
        return check_text(m->u.reader_nack.message);
    case WIRE_FENCE:
    case WIRE_FENCE_DONE:
        return m->u.fence.serial ? 0 : -EINVAL;
    default:
        return -EINVAL;
    }
}

/* ---- bodies ---- */

static void put_grant(struct wr *w, const struct wire_grant *g)
{
    wr_u32(w, g->slot);
    wr_u32(w, g->generation);
    wr_u64(w, g->offset);
    wr_u64(w, g->length);
    wr_u64(w, g->ext_off);
}

static void get_grant(struct rd *r, struct wire_grant *g)
{
    g->slot = rd_u32(r);
    g->generation = rd_u32(r);
    g->offset = rd_u64(r);
    g->length = rd_u64(r);
    g->ext_off = rd_u64(r);
}

#define GRANT_BYTES 32u

static void put_recv_req(struct wr *w, const struct wire_recv_req *q)
{
    wr_u64(w, q->req_id);
    wr_str(w, q->ctx_instance);
    wr_u64(w, q->table_epoch);
    wr_u32(w, (uint32_t)q->ctx_dp_rank);
    wr_u32(w, q->writer);
    wr_blob(w, q->gen_json, q->gen_json_len);
    wr_u64(w, q->layout_id);
    wr_u32(w, q->layout_slot);
    wr_u32(w, q->n_groups);
    for (uint32_t g = 0; g < q->n_groups; g++) {
        wr_u32(w, q->n_ids[g]);
        wr_u32_array(w, q->ids[g], q->n_ids[g]);
    }
    wr_u8(w, (uint8_t)q->path);
    wr_u64(w, q->extent_bytes);
    wr_u32(w, q->n_rkeys);
    for (uint32_t i = 0; i < q->n_rkeys; i++) {
        wr_u32(w, q->rkeys[i].pool);
        wr_u64(w, q->rkeys[i].remote_base);
        wr_blob(w, q->rkeys[i].blob, q->rkeys[i].blob_len);
    }
    wr_u32(w, q->n_grants);
    for (uint32_t i = 0; i < q->n_grants; i++)
        put_grant(w, &q->grants[i]);
    if (q->tokens) /* absent when unknown: the encoding stays canonical */
        wr_u64(w, q->tokens);
}

static void get_recv_req(struct rd *r, struct wire_msg *m)
{
    struct wire_recv_req *q = &m->u.recv_req;
    q->req_id = rd_u64(r);
    rd_str(r, q->ctx_instance, sizeof(q->ctx_instance));
    q->table_epoch = rd_u64(r);
    q->ctx_dp_rank = (int32_t)rd_u32(r);
    q->writer = rd_u32(r);
    q->gen_json = (const char *)rd_blob(r, m, LAYOUT_JSON_MAX, &q->gen_json_len);
    q->layout_id = rd_u64(r);
    q->layout_slot = rd_u32(r);
    q->n_groups = rd_count(r, LAYOUT_MAX_GROUPS, 4);
    for (uint32_t g = 0; g < q->n_groups && !r->err; g++) {
        q->n_ids[g] = rd_count(r, PLAN_MAX_IDS, 4);
        if (r->err || q->n_ids[g] == 0)
            continue;
        uint32_t *ids = own_alloc(m, (size_t)q->n_ids[g] * sizeof(uint32_t));
        if (!ids) {
            rd_fail(r, -ENOMEM);
            break;
        }
        rd_u32_array(r, ids, q->n_ids[g]);
        q->ids[g] = ids;
    }
    q->path = (wire_path_t)rd_u8(r);
    q->extent_bytes = rd_u64(r);
    q->n_rkeys = rd_count(r, WIRE_MAX_RKEYS, 16);
    for (uint32_t i = 0; i < q->n_rkeys && !r->err; i++) {
        q->rkeys[i].pool = rd_u32(r);
        q->rkeys[i].remote_base = rd_u64(r);
        q->rkeys[i].blob = rd_blob(r, m, WIRE_RKEY_MAX, &q->rkeys[i].blob_len);
    }
    q->n_grants = rd_count(r, WIRE_MAX_GRANTS, GRANT_BYTES);
    for (uint32_t i = 0; i < q->n_grants && !r->err; i++)
        get_grant(r, &q->grants[i]);
    q->tokens = 0;
    if (!r->err && r->len > r->pos) { /* optional trailing tokens: present means nonzero */
        q->tokens = rd_u64(r);
        if (!r->err && (q->tokens == 0 || q->tokens > PLAN_MAX_TOKENS))
            r->err = -EBADMSG;
    }
}

static void put_body(struct wr *w, const struct wire_msg *m)
{
    switch (m->type) {
    case WIRE_LAYOUT_FORWARD:
        wr_str(w, m->u.layout_forward.addr);
        wr_blob(w, m->u.layout_forward.json, m->u.layout_forward.json_len);
        break;
    case WIRE_TABLE_REQ:
        wr_str(w, m->u.table_req.instance);
        break;
    case WIRE_TABLE:
        wr_str(w, m->u.table.instance);
        wr_u64(w, m->u.table.epoch);
        wr_u32(w, m->u.table.n_ranks);
        for (uint32_t i = 0; i < m->u.table.n_ranks; i++) {
            wr_str(w, m->u.table.ranks[i].addr);
            wr_blob(w, m->u.table.ranks[i].json, m->u.table.ranks[i].json_len);
        }
        break;
    case WIRE_TABLE_NACK:
        wr_str(w, m->u.table_nack.instance);
        wr_u32(w, (uint32_t)m->u.table_nack.code);
        wr_str(w, m->u.table_nack.message);
        break;
    case WIRE_RECV_REQ:
        put_recv_req(w, &m->u.recv_req);
        break;
    case WIRE_GRANT:
        wr_u64(w, m->u.grant.req_id);
        wr_u32(w, m->u.grant.writer);
        wr_u32(w, m->u.grant.n_grants);
        for (uint32_t i = 0; i < m->u.grant.n_grants; i++)
            put_grant(w, &m->u.grant.grants[i]);
        break;
    case WIRE_CHUNK:
        wr_u64(w, m->u.chunk.req_id);
        wr_u32(w, m->u.chunk.writer);
        wr_u32(w, m->u.chunk.slot);
        wr_u32(w, m->u.chunk.generation);
        wr_u64(w, m->u.chunk.ext_off);
        wr_u64(w, m->u.chunk.length);
        break;
    case WIRE_WRITER_DONE:
        wr_u64(w, m->u.writer_done.req_id);
        wr_u32(w, m->u.writer_done.writer);
        wr_u64(w, m->u.writer_done.bytes);
        break;
    case WIRE_NACK:
        wr_u64(w, m->u.nack.req_id);
        wr_u32(w, m->u.nack.writer);
        wr_u32(w, (uint32_t)m->u.nack.code);
        wr_str(w, m->u.nack.message);
        if (m->u.nack.reason != WIRE_NACK_PLAIN) /* absent when plain: the encoding is canonical */
            wr_u8(w, (uint8_t)m->u.nack.reason);
        break;
    case WIRE_CANCEL:
        wr_u64(w, m->u.cancel.req_id);
        wr_u32(w, m->u.cancel.writer);
        break;
    case WIRE_READER_NACK:
        wr_u64(w, m->u.reader_nack.req_id);
        wr_str(w, m->u.reader_nack.ctx_instance);
        wr_u32(w, m->u.reader_nack.writer);
        wr_u32(w, (uint32_t)m->u.reader_nack.code);
        wr_str(w, m->u.reader_nack.message);
        if (m->u.reader_nack.epoch) /* absent when unknown: the encoding is canonical */
            wr_u64(w, m->u.reader_nack.epoch);
        break;
    case WIRE_FENCE:
    case WIRE_FENCE_DONE:
        wr_u64(w, m->u.fence.serial);
        break;
    default:
        break;
    }
}

/* Minimum encoded bytes of one table rank: addr str + blob length. */
#define RANK_MIN_BYTES 6u

static void get_body(struct rd *r, struct wire_msg *m)
{
    switch (m->type) {
    case WIRE_LAYOUT_FORWARD:
        rd_str(r, m->u.layout_forward.addr, WIRE_ADDR_MAX);
        m->u.layout_forward.json =
            (const char *)rd_blob(r, m, LAYOUT_JSON_MAX, &m->u.layout_forward.json_len);
        break;
    case WIRE_TABLE_REQ:
        rd_str(r, m->u.table_req.instance, LAYOUT_NAME_MAX);
        break;
    case WIRE_TABLE: {
        struct wire_table *t = &m->u.table;
        rd_str(r, t->instance, LAYOUT_NAME_MAX);
        t->epoch = rd_u64(r);
        t->n_ranks = rd_count(r, WIRE_MAX_RANKS, RANK_MIN_BYTES);
        if (r->err || t->n_ranks == 0)
            break;
        struct wire_rank *ranks = own_alloc(m, (size_t)t->n_ranks * sizeof(*ranks));
        if (!ranks) {
            rd_fail(r, -ENOMEM);
            break;
        }
        memset(ranks, 0, (size_t)t->n_ranks * sizeof(*ranks));
        for (uint32_t i = 0; i < t->n_ranks && !r->err; i++) {
            rd_str(r, ranks[i].addr, WIRE_ADDR_MAX);
            ranks[i].json = (const char *)rd_blob(r, m, LAYOUT_JSON_MAX, &ranks[i].json_len);
        }
        t->ranks = ranks;
        break;
    }
    case WIRE_TABLE_NACK:
        rd_str(r, m->u.table_nack.instance, LAYOUT_NAME_MAX);
        m->u.table_nack.code = (kvf_error_t)rd_u32(r);
        rd_str(r, m->u.table_nack.message, WIRE_TEXT_MAX);
        break;
    case WIRE_RECV_REQ:
        get_recv_req(r, m);
        break;
    case WIRE_GRANT:
        m->u.grant.req_id = rd_u64(r);
        m->u.grant.writer = rd_u32(r);
        m->u.grant.n_grants = rd_count(r, WIRE_MAX_GRANTS, GRANT_BYTES);
        for (uint32_t i = 0; i < m->u.grant.n_grants && !r->err; i++)
            get_grant(r, &m->u.grant.grants[i]);
        break;
    case WIRE_CHUNK:
        m->u.chunk.req_id = rd_u64(r);
        m->u.chunk.writer = rd_u32(r);
        m->u.chunk.slot = rd_u32(r);
        m->u.chunk.generation = rd_u32(r);
        m->u.chunk.ext_off = rd_u64(r);
        m->u.chunk.length = rd_u64(r);
        break;
    case WIRE_WRITER_DONE:
        m->u.writer_done.req_id = rd_u64(r);
        m->u.writer_done.writer = rd_u32(r);
        m->u.writer_done.bytes = rd_u64(r);
        break;
    case WIRE_NACK:
        m->u.nack.req_id = rd_u64(r);
        m->u.nack.writer = rd_u32(r);
        m->u.nack.code = (kvf_error_t)rd_u32(r);
        rd_str(r, m->u.nack.message, WIRE_TEXT_MAX);
        m->u.nack.reason = WIRE_NACK_PLAIN;
        if (!r->err && r->len > r->pos) { /* optional trailing reason: present means not plain */
            uint8_t why = rd_u8(r);
            if (!r->err && (why == WIRE_NACK_PLAIN || why >= WIRE_NACK__COUNT))
                r->err = -EBADMSG;
            m->u.nack.reason = (wire_nack_reason_t)why;
        }
        break;
    case WIRE_CANCEL:
        m->u.cancel.req_id = rd_u64(r);
        m->u.cancel.writer = rd_u32(r);
        break;
    case WIRE_READER_NACK:
        m->u.reader_nack.req_id = rd_u64(r);
        rd_str(r, m->u.reader_nack.ctx_instance, LAYOUT_NAME_MAX);
        m->u.reader_nack.writer = rd_u32(r);
        m->u.reader_nack.code = (kvf_error_t)rd_u32(r);
        rd_str(r, m->u.reader_nack.message, WIRE_TEXT_MAX);
        m->u.reader_nack.epoch = 0;
        if (!r->err && r->len > r->pos) { /* optional trailing epoch: present means known */
            m->u.reader_nack.epoch = rd_u64(r);
            if (!r->err && !m->u.reader_nack.epoch)
                r->err = -EBADMSG;
        }
        break;
    case WIRE_FENCE:
    case WIRE_FENCE_DONE:
        m->u.fence.serial = rd_u64(r);
        break;
    default:
        rd_fail(r, -ENOMSG);
        break;
    }
}

/* ---- public ---- */

int wire_grant_check(const struct wire_grant *g, uint64_t ext_off, uint64_t length)
{
    if (!g || ext_off != g->ext_off || length != g->length)
        return -ERANGE;
    return 0;
}

int wire_validate(const struct wire_msg *m)
{
    size_t n;
    return wire_encoded_size(m, &n);
}

int wire_encoded_size(const struct wire_msg *m, size_t *ret)
{
    if (!m)
        return -EINVAL;
    TRY(validate_fields(m));
    struct wr w = {.p = NULL, .pos = 0};
    put_body(&w, m);
    if (w.pos > WIRE_MSG_MAX - WIRE_HDR_BYTES)
        return -EMSGSIZE;
    *ret = WIRE_HDR_BYTES + w.pos;
    return 0;
}

int wire_encode_into(const struct wire_msg *m, void *buf, size_t cap, size_t *ret_len)
{
    size_t total;
    TRY(wire_encoded_size(m, &total));
    if (!buf || cap < total)
        return -ENOBUFS;
    struct wr w = {.p = buf, .pos = 0};
    wr_u16(&w, WIRE_MAGIC);
    wr_u8(&w, WIRE_VERSION);
    wr_u8(&w, (uint8_t)m->type);
    wr_u16(&w, 0);
    wr_u16(&w, 0);
    wr_u32(&w, (uint32_t)(total - WIRE_HDR_BYTES));
    put_body(&w, m);
    *ret_len = w.pos;
    return 0;
}

int wire_encode(const struct wire_msg *m, void **ret_buf, size_t *ret_len)
{
    size_t total, len;
    TRY(wire_encoded_size(m, &total));
    void *buf = malloc(total);
    if (!buf)
        return -ENOMEM;
    int rc = wire_encode_into(m, buf, total, &len);
    if (rc) {
        free(buf);
        return rc;
    }
    *ret_buf = buf;
    *ret_len = len;
    return 0;
}

int wire_peek(const void *buf, size_t len, wire_type_t *ret_type, size_t *ret_total)
{
    if (!buf || len < WIRE_HDR_BYTES)
        return -EBADMSG;
    struct rd r = {.p = buf, .len = len};
    uint16_t magic = rd_u16(&r);
    uint8_t version = rd_u8(&r);
    uint8_t type = rd_u8(&r);
    uint16_t flags = rd_u16(&r);
    uint16_t reserved = rd_u16(&r);
    uint32_t body = rd_u32(&r);
    if (magic != WIRE_MAGIC)
        return -EBADMSG;
    if (version != WIRE_VERSION)
        return -EPROTONOSUPPORT;
    if (type == 0 || type >= WIRE__TYPE_END)
        return -ENOMSG;
    if (flags || reserved)
        return -EBADMSG;
    if (body > WIRE_MSG_MAX - WIRE_HDR_BYTES)
        return -EMSGSIZE;
    *ret_type = (wire_type_t)type;
    *ret_total = WIRE_HDR_BYTES + (size_t)body;
    return 0;
}

int wire_decode(const void *buf, size_t len, struct wire_msg *ret)
{
    if (len > WIRE_MSG_MAX)
        return -EMSGSIZE;
    wire_type_t type;
    size_t total;
    TRY(wire_peek(buf, len, &type, &total));
    if (total != len)
        return -EBADMSG;
    struct wire_msg m;
    memset(&m, 0, sizeof(m));
    m.type = type;
    struct rd r = {.p = buf, .len = len, .pos = WIRE_HDR_BYTES};
    get_body(&r, &m);
    if (!r.err && r.pos != len)
        r.err = -EBADMSG;
    if (!r.err) {
        r.err = validate_fields(&m);
        if (r.err == -EINVAL)
            r.err = -EBADMSG;
    }
    if (r.err) {
        wire_msg_done(&m);
        return r.err;
    }
    *ret = m;
    return 0;
}

void wire_msg_done(struct wire_msg *m)
{
    if (!m)
        return;
    struct own_block *b = m->owned_;
    while (b) {
        struct own_block *next = b->next;
        free(b);
        b = next;
    }
    m->owned_ = NULL;
}
