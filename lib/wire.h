/* wire.h: the binary codec of daemon-to-daemon control messages (docs/DESIGN.md §7, §8). The link
 * layer carries one encoded message per UCX active message (header or payload); the handshake is
 * the link layer's own. This module is pure: no I/O, no logging above debug.
 *
 * Encoding. Every integer is little-endian, written byte by byte (never a struct memcpy).
 *   header (12 bytes): magic u16 = 0x4b46 ("FK" on the wire), version u8 = WIRE_VERSION,
 *                      type u8 (wire_type_t), flags u16 = 0, reserved u16 = 0, body_len u32
 *   body (body_len bytes): the fields of the type, in the order listed below.
 *   str    = u16 length + bytes (no NUL on the wire; a NUL byte inside is refused)
 *   blob   = u32 length + bytes
 *   ids    = u32 count + count x u32
 * The message is exactly 12 + body_len bytes: trailing bytes are refused, so encoding is
 * canonical (decode then encode reproduces the input byte for byte).
 *
 * Messages (request ids are the generation side's; `writer` is the context rank index, < WIRE_MAX_RANKS):
 *   LAYOUT_FORWARD  non-home -> home daemon: addr str (the daemon hosting the rank, "host:port"),
 *                   layout blob (the rank's layout JSON, 1..LAYOUT_JSON_MAX bytes)
 *   TABLE_REQ       instance str
 *   TABLE           instance str, epoch u64, n_ranks u32 (1..WIRE_MAX_RANKS), then per rank
 *                   (index order): addr str, layout blob
 *   TABLE_NACK      instance str, code u32 (kvf_error_t, not OK), message str
 *   RECV_REQ        req_id u64, ctx_instance str, table_epoch u64, ctx_dp_rank i32 (-1 or
 *                   0..LAYOUT_MAX_TP-1), writer u32, gen_layout blob (0..LAYOUT_JSON_MAX
 *                   bytes: empty = the layout the peer holds in layout_slot), layout_id u64
 *                   (!= 0: the generation rank's registration), layout_slot u32
 *                   (< WIRE_LAYOUT_SLOTS: where the receiver keeps a sent layout, chosen by the
 *                   sender; engine_laycache.h), n_groups u32
 *                   (<= LAYOUT_MAX_GROUPS) then per group ids (<= PLAN_MAX_IDS each),
 *                   path u8 (bounce | fragment), extent_bytes u64 (> 0),
 *                   n_rkeys u32 then per destination pool: pool u32 (< LAYOUT_MAX_POOLS, strictly
 *                   ascending), remote_base u64, rkey blob (1..WIRE_RKEY_MAX bytes),
 *                   n_grants u32 then grants (the first credits),
 *                   then optionally tokens u64 (1..PLAN_MAX_TOKENS: the RECV's prompt tokens;
 *                   absent when the RECV gave none).
 *                   bounce: n_rkeys == 0, n_grants <= WIRE_MAX_GRANTS;
 *                   fragment: 1 <= n_rkeys <= WIRE_MAX_RKEYS, n_grants == 0.
 *   GRANT           req_id u64, writer u32, n_grants u32 (1..WIRE_MAX_GRANTS), grants
 *                   grant = slot u32, generation u32 (!= 0), offset u64, length u64 (> 0),
 *                           ext_off u64 (no range may overflow 64 bits)
 *   CHUNK           req_id u64, writer u32, slot u32, generation u32 (!= 0), ext_off u64,
 *                   length u64 (> 0): "extent bytes [ext_off, +length) are in slot" (after the
 *                   flush of the put), or the AM header when the bytes ride an AM rendezvous
 *   WRITER_DONE     req_id u64, writer u32, bytes u64 (the writer's whole extent)
 *   NACK            req_id u64, writer u32, code u32 (kvf_error_t, not OK), message str,
 *                   then optionally reason u8 (wire_nack_reason_t; absent: WIRE_NACK_PLAIN):
 *                   1 NOT_READER, the context side refused the flow as no reader of the SEND
 *                   (e.g. a RECV beyond its readers: the generation side counts no failed
 *                   reader for it); 2 STALE_TABLE, the context instance re-registered since the
 *                   generation side fetched its table (it refetches and replans once). The
 *                   receiver decides by this enum, never by the message's text
 *   CANCEL          req_id u64, writer u32
 *   READER_NACK     generation -> context daemon: req_id u64, ctx_instance str, writer u32
 *                   (< WIRE_MAX_RANKS, or WIRE_ALL_WRITERS), code u32 (kvf_error_t, not OK),
 *                   message str: "a reader of this request failed and will not come", for the
 *                   SEND's end (docs/DESIGN.md §7); not bound to a flow; then, optional, epoch
 *                   u64 (not 0: the home's table epoch the reader planned with; absent: unknown)
 * Strings: addr 1..WIRE_ADDR_MAX-1 bytes, printable ASCII without spaces, "host:port" with a
 * port 1..65535; instance 1..LAYOUT_NAME_MAX-1 bytes, printable ASCII without spaces; message
 * 0..WIRE_TEXT_MAX-1 bytes, any byte but NUL. Whole message <= WIRE_MSG_MAX bytes.
 *
 * Errors (decode): -EBADMSG truncated, trailing bytes, bad magic, non-zero flags/reserved, a
 * value out of its domain; -EPROTONOSUPPORT other version; -ENOMSG unknown type; -E2BIG a
 * count or string over its limit; -EMSGSIZE over WIRE_MSG_MAX; -ENOMEM. Encode refuses what
 * decode would refuse (-EINVAL for a bad value, -E2BIG, -EMSGSIZE, -ENOBUFS for a short buffer).
 *
 * Ownership: a message you build holds borrowed pointers (json, ids, rkey blobs, ranks) and is
 * never passed to wire_msg_done. A message from wire_decode owns copies of all of them
 * (strings NUL-terminated) and is freed with wire_msg_done. Any thread, on its own messages. */
#ifndef KVF_WIRE_H
#define KVF_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kvferry.h"
#include "layout.h"
#include "plan.h"

#define WIRE_MAGIC 0x4b46u
#define WIRE_VERSION 3u /* 2: RECV_REQ's layout_id/layout_slot (layout sent once); 3: extents
                          * ordered layer first (plan_build.c): chunk offsets mean other bytes */
#define WIRE_HDR_BYTES 12u
#define WIRE_MSG_MAX (64u * 1024u * 1024u) /* whole message, header included */
#define WIRE_ADDR_MAX 256u                 /* "host:port", including NUL */
#define WIRE_TEXT_MAX 512u                 /* error messages, including NUL */
#define WIRE_MAX_RANKS (LAYOUT_MAX_TP * LAYOUT_MAX_PP)
#define WIRE_MAX_GRANTS 64u                /* grants in one GRANT or RECV_REQ */
#define WIRE_MAX_RKEYS LAYOUT_MAX_POOLS
#define WIRE_RKEY_MAX 4096u                /* packed UCX rkey bytes */
#define WIRE_LAYOUT_SLOTS 8u               /* generation layouts a receiver keeps per peer */
#define WIRE_ALL_WRITERS 0xffffffffu       /* READER_NACK: every writer of the instance */

typedef enum {
    WIRE_LAYOUT_FORWARD = 1,
    WIRE_TABLE_REQ = 2,
    WIRE_TABLE = 3,
    WIRE_TABLE_NACK = 4,
    WIRE_RECV_REQ = 5,
    WIRE_GRANT = 6,
    WIRE_CHUNK = 7,
    WIRE_WRITER_DONE = 8,
    WIRE_NACK = 9,
    WIRE_CANCEL = 10,
    WIRE_READER_NACK = 11,
    WIRE_FENCE = 12,      /* a returned peer: end your writes into me from before this link */
    WIRE_FENCE_DONE = 13, /* they ended: nothing written before it lands any more */
    WIRE__TYPE_END
} wire_type_t;

typedef enum { WIRE_PATH_BOUNCE = 0, WIRE_PATH_FRAGMENT = 1 } wire_path_t;

struct wire_grant {
    uint32_t slot, generation;
    uint64_t offset, length, ext_off;
};

struct wire_layout_forward {
    char addr[WIRE_ADDR_MAX];
    const char *json; /* layout JSON, json_len bytes */
    uint32_t json_len;
};

struct wire_table_req {
    char instance[LAYOUT_NAME_MAX];
};

struct wire_rank {
    char addr[WIRE_ADDR_MAX];
    const char *json;
    uint32_t json_len;
};

struct wire_table {
    char instance[LAYOUT_NAME_MAX];
    uint64_t epoch;
    uint32_t n_ranks;
    const struct wire_rank *ranks; /* n_ranks, index order */
};

struct wire_table_nack {
    char instance[LAYOUT_NAME_MAX];
    kvf_error_t code;
    char message[WIRE_TEXT_MAX];
};

struct wire_rkey {
    uint32_t pool;          /* destination pool index in the generation layout */
    uint64_t remote_base;   /* remote address of that pool's byte 0 */
    const uint8_t *blob;    /* packed rkey */
    uint32_t blob_len;
};

struct wire_recv_req {
    uint64_t req_id;
    char ctx_instance[LAYOUT_NAME_MAX];
    uint64_t table_epoch;
    int32_t ctx_dp_rank;
    uint32_t writer;
    const char *gen_json;   /* the generation rank's layout JSON; NULL/0: the one in layout_slot */
    uint32_t gen_json_len;
    uint64_t layout_id;     /* != 0: names the layout (the rank's registration) */
    uint32_t layout_slot;   /* < WIRE_LAYOUT_SLOTS */
    uint32_t n_groups;
    uint32_t n_ids[LAYOUT_MAX_GROUPS];
    const uint32_t *ids[LAYOUT_MAX_GROUPS];
    wire_path_t path;
    uint64_t extent_bytes;
    uint32_t n_rkeys;
    struct wire_rkey rkeys[WIRE_MAX_RKEYS];
    uint32_t n_grants;
    struct wire_grant grants[WIRE_MAX_GRANTS];
    uint64_t tokens; /* the RECV's prompt tokens, 0: not given (absent on the wire) */
};

struct wire_grant_msg {
    uint64_t req_id;
    uint32_t writer;
    uint32_t n_grants;
    struct wire_grant grants[WIRE_MAX_GRANTS];
};

struct wire_chunk {
    uint64_t req_id;
    uint32_t writer, slot, generation;
    uint64_t ext_off, length;
};

struct wire_writer_done {
    uint64_t req_id;
    uint32_t writer;
    uint64_t bytes;
};

/* Why a flow was refused, where the generation side acts on it (the code alone says what failed). */
typedef enum {
    WIRE_NACK_PLAIN = 0,       /* a failed reader, counted against the SEND */
    WIRE_NACK_NOT_READER = 1,  /* no reader of the SEND: not counted against it */
    WIRE_NACK_STALE_TABLE = 2, /* planned with an older table epoch: refetch, replan once */
    WIRE_NACK__COUNT
} wire_nack_reason_t;

struct wire_nack {
    uint64_t req_id;
    uint32_t writer;
    kvf_error_t code;
    char message[WIRE_TEXT_MAX];
    wire_nack_reason_t reason;
};

struct wire_cancel {
    uint64_t req_id;
    uint32_t writer;
};

struct wire_reader_nack {
    uint64_t req_id;
    char ctx_instance[LAYOUT_NAME_MAX];
    uint32_t writer; /* context rank, or WIRE_ALL_WRITERS (a verdict that refuses them all) */
    kvf_error_t code;
    char message[WIRE_TEXT_MAX];
    /* the epoch of the instance's table the reader planned with (its home's), 0: unknown; a
     * writer's daemon that is the home at another epoch drops it (an older incarnation's) */
    uint64_t epoch;
};

/* FENCE / FENCE_DONE (engine_fence.c): serial names the fence its answer closes. */
struct wire_fence {
    uint64_t serial;
};

struct wire_msg {
    wire_type_t type;
    union {
        struct wire_layout_forward layout_forward;
        struct wire_table_req table_req;
        struct wire_table table;
        struct wire_table_nack table_nack;
        struct wire_recv_req recv_req;
        struct wire_grant_msg grant;
        struct wire_chunk chunk;
        struct wire_writer_done writer_done;
        struct wire_nack nack;
        struct wire_cancel cancel;
        struct wire_reader_nack reader_nack;
        struct wire_fence fence; /* FENCE and FENCE_DONE */
    } u;
    void *owned_; /* decode's allocations; NULL for a message you built */
};

/* "LAYOUT_FORWARD", ...; "UNKNOWN" otherwise. */
const char *wire_type_to_string(wire_type_t t);
const char *wire_path_to_string(wire_path_t p);

/* Sender-side bound (DESIGN §6): 0 if the chunk at extent ext_off of `length` bytes is exactly
 * what grant g covers (same ext_off, same length: it fits the slot), else -ERANGE. */
int wire_grant_check(const struct wire_grant *g, uint64_t ext_off, uint64_t length);

/* Checks every field against its domain and limits: 0, -EINVAL, -E2BIG or -EMSGSIZE. */
int wire_validate(const struct wire_msg *m);
/* Exact encoded length (header included): 0 and *ret, or what wire_validate returns. */
int wire_encoded_size(const struct wire_msg *m, size_t *ret);
/* Encode into buf[cap]: 0 and *ret_len, -ENOBUFS when cap is short, or wire_validate's error. */
int wire_encode_into(const struct wire_msg *m, void *buf, size_t cap, size_t *ret_len);
/* Encode into a malloc'd buffer (caller frees): 0, or an error as above, or -ENOMEM. */
int wire_encode(const struct wire_msg *m, void **ret_buf, size_t *ret_len);

/* Header only: 0 with the type and the total message length the header announces, or the
 * header errors of wire_decode (-EBADMSG if len < WIRE_HDR_BYTES). */
int wire_peek(const void *buf, size_t len, wire_type_t *ret_type, size_t *ret_total);
/* Decode exactly len bytes. 0 and *ret (free with wire_msg_done), or an error (see above);
 * *ret is written only on success. */
int wire_decode(const void *buf, size_t len, struct wire_msg *ret);
/* Frees what wire_decode allocated; no-op for built messages. Accepts NULL. */
void wire_msg_done(struct wire_msg *m);

#endif
