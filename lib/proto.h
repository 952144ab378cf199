/* proto.h: local worker protocol (docs/DESIGN.md §8): the frames exchanged between libkvferry and
 * kvferryd over the worker socket (sockets.worker, a unix stream socket).
 *
 * Every frame is a 24-byte header followed by `length` payload bytes. All integers are
 * little-endian, whatever the host:
 *   u32 magic 'KVFW' (bytes 4b 56 46 57), u16 version, u16 type, u32 flags (0), u32 length, u64 seq
 * Strings are u16 length + bytes (no NUL, no embedded NUL, bounded per field). Item lists are
 *   u32 n_groups, u32 count[n_groups], u32 ids[sum(count)]
 * with n_groups <= LAYOUT_MAX_GROUPS and sum(count) <= limits.max_blocks. A payload must be
 * consumed exactly: trailing bytes are refused like missing ones.
 *
 * Conversation: worker HELLO -> daemon WELCOME; worker REGISTER (host pools' memfds attached with
 * SCM_RIGHTS, one per POOL_HOST pool, in pool order) -> REGISTERED; then
 * SEND / RECV / CANCEL / READY from the worker and EVENT from the daemon, in any interleaving; EVENTS
 * (a GPU rank's CUDA interprocess events, once per registration) -> REGISTERED. Frames may
 * be pipelined (HELLO and REGISTER back to back): fds belong to the frame whose first byte they
 * were sent with (frame.h). A frame the daemon refuses gets an ERROR
 * frame and the connection is closed. PING is answered with PONG (same seq).
 * A frame carries at most PROTO_FDS_MAX fds, so a REGISTER with more host pools sends the first
 * ones ahead in FDS frames (u32 n, the n fds attached), PROTO_FDS_MAX a frame, in pool order,
 * immediately before the REGISTER, which carries the rest; the daemon holds at most
 * LAYOUT_MAX_POOLS fds ahead and refuses any other frame while it holds some.
 *
 * Pure codec: no I/O, no logging. Decoded messages own their allocations (proto_msg_done).
 * Thread-safe (no shared state). */
#ifndef KVF_PROTO_H
#define KVF_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "kvferry.h"
#include "fdpass.h"
#include "layout.h"

#define PROTO_MAGIC 0x5746564bu /* "KVFW" as little-endian bytes */
#define PROTO_VERSION 1 /* the frame format: every header carries it */
/* The conversation HELLO and WELCOME agree on: the worker offers version_min..version_max, the
 * daemon answers the highest both speak. 2 (PROTO_CONV_HELD) adds the held end of a RECV: a
 * FAILED event with PROTO_EVF_HELD, then RELEASED. A daemon never sends them at 1, so a
 * library of either age meets a daemon of either age. */
#define PROTO_CONV_MIN 1
#define PROTO_CONV_HELD 2
#define PROTO_CONV_MAX 2
#define PROTO_HDR_SIZE 24

#define PROTO_FRAME_MIN 4096u                  /* smallest allowed limits.max_frame */
#define PROTO_FRAME_HARD_MAX (64u * 1024 * 1024) /* largest allowed limits.max_frame */
#define PROTO_FRAME_DEFAULT (1u * 1024 * 1024)
#define PROTO_BLOCKS_DEFAULT 65536u
#define PROTO_BLOCKS_HARD_MAX (1u << 20)       /* == PLAN_MAX_IDS */

#define PROTO_NAME_MAX 64      /* HELLO/WELCOME names, bytes without NUL */
#define PROTO_HOME_MAX 255     /* RECV ctx_home "host:port" */
#define PROTO_MSG_MAX 511      /* EVENT / REGISTERED / ERROR messages */
#define PROTO_IPC_HANDLE 64    /* bytes of a cudaIpcMemHandle_t */
#define PROTO_FDS_MAX 16       /* fds one frame carries (== FDPASS_MAX_FDS) */
#define PROTO_TOKENS_MAX (1ull << 40) /* RECV tokens (== PLAN_MAX_TOKENS) */
#define PROTO_EVENTS_MAX 256u  /* CUDA events of one rank (== KVF_EVENTS_MAX) */

typedef enum {
    PROTO_HELLO = 1,
    PROTO_WELCOME = 2,
    PROTO_REGISTER = 3,
    PROTO_REGISTERED = 4,
    PROTO_SEND = 5,
    PROTO_RECV = 6,
    PROTO_CANCEL = 7,
    PROTO_EVENT = 8,
    PROTO_ERROR = 9,
    PROTO_PING = 10,
    PROTO_PONG = 11,
    PROTO_FDS = 12,
    PROTO_READY = 13,
    PROTO_EVENTS = 14,
    PROTO__TYPE_END
} proto_type_t;

/* EVENT kinds; the same values as KVF_EV_* in kvferry.h. */
typedef enum {
    PROTO_EV_SENT = 1,   /* context side: the blocks of this SEND may be reused */
    PROTO_EV_DONE = 2,   /* generation side: every byte of this RECV is in place */
    PROTO_EV_FAILED = 3, /* either side: the request failed; error + message say why */
    /* 4, 5: the library's own (KVF_EV_DISCONNECTED, RECONNECTED), never on the wire */
    PROTO_EV_RELEASED = 6, /* generation side, conversation 2: a RECV that ended FAILED with
                              PROTO_EVF_HELD: nothing can write into its blocks any more */
    PROTO__EV_END
} proto_event_kind_t;

/* EVENT flags (== KVF_EVF_*), on the wire an optional trailing u32 present only when not 0. */
#define PROTO_EVF_HELD 1u /* FAILED: a lost peer may still write the RECV's blocks; RELEASED
                             follows once nothing can */

/* "HELLO", ...; "UNKNOWN" out of range. */
const char *proto_type_to_string(uint32_t type);

struct proto_limits {
    uint32_t max_frame;  /* header + payload */
    uint32_t max_blocks; /* item ids per request, all groups together */
};

struct proto_hdr {
    uint16_t version, type;
    uint32_t flags, length;
    uint64_t seq;
};

struct proto_items {
    uint32_t n_groups;
    uint32_t counts[LAYOUT_MAX_GROUPS];
    uint32_t *ids; /* owned: sum(counts) ids, group after group */
};

struct proto_hello {
    uint32_t version_min, version_max, pid;
    char name[PROTO_NAME_MAX + 1];
};

struct proto_welcome {
    uint32_t version, max_frame, max_blocks, max_inflight;
    uint64_t epoch; /* changes on every daemon start */
    char name[PROTO_NAME_MAX + 1];
};

#define PROTO_POOL_CUDA_VMM 2 /* a kind beside pool_kind_t's: GPU memory by VMM fd handles */
#define PROTO_REGISTER_MAX_FDS LAYOUT_MAX_POOLS /* fds of one REGISTER, FDS frames ahead included */
#define PROTO_VMM_MAX_FDS PROTO_REGISTER_MAX_FDS /* chunks of one VMM pool */

struct proto_pool {
    uint32_t kind;   /* pool_kind_t, or PROTO_POOL_CUDA_VMM (a "cuda" pool of the layout) */
    int32_t device;  /* -1 for host pools */
    uint64_t bytes;
    uint64_t offset; /* CUDA: offset of the pool inside the IPC allocation; VMM: inside the
                      * chunks mapped back to back; host: 0 */
    uint8_t ipc_handle[PROTO_IPC_HANDLE]; /* CUDA only; all zero for host pools */
    uint32_t n_fds;       /* VMM only (on the wire after ipc_handle): chunks, one fd each */
    uint64_t chunk_bytes; /* VMM only: bytes of each chunk */
    const int *fds;       /* daemon side, not on the wire: the VMM pool's received fds
                           * (borrowed from the REGISTER frame) */
};

/* The layout's kind of a REGISTER pool (a VMM pool is GPU memory: POOL_CUDA). */
static inline uint32_t proto_pool_layout_kind(const struct proto_pool *p)
{
    return p->kind == PROTO_POOL_CUDA_VMM ? POOL_CUDA : p->kind;
}

struct proto_register {
    uint32_t n_pools;
    struct proto_pool *pools; /* n_pools entries: owned when decoded, borrowed when encoded */
    uint32_t json_len;
    char *json; /* owned, NUL-terminated, json_len <= LAYOUT_JSON_MAX */
    char home[PROTO_HOME_MAX + 1]; /* optional trailing str: the instance's home daemon
                                    * "host:port"; "" = this daemon (absent on the wire) */
};

struct proto_registered {
    uint32_t status; /* kvf_error_t */
    uint32_t rank;   /* layout_rank of the registered layout */
    uint64_t worker_id;
    char message[PROTO_MSG_MAX + 1];
};

struct proto_send {
    uint64_t req_id;
    uint32_t n_readers; /* generation ranks expected to read it; 0: release on deadline */
    struct proto_items items;
    uint32_t stream; /* optional trailing u32 after the items: 1, the SEND streams (its layers
                      * become final by READY frames); absent (0) for a plain SEND */
};

/* READY (a streaming SEND, issue 28): every global layer id below layers_upto is final in the
 * SEND's items. Never decreasing; at most LAYOUT_MAX_LAYERS on the wire, at most the layout's
 * n_layers_total at the daemon. No answer: a READY the daemon refuses fails its SEND. */
struct proto_ready {
    uint64_t req_id;
    uint32_t layers_upto;
    uint32_t event; /* optional trailing u32: 1 + the index, among the rank's EVENTS, of the
                     * CUDA event recorded after these layers' writes (the daemon's copies wait
                     * for it on the GPU); absent (0): the writes completed on the host's word */
};

/* EVENTS (issue 28): a GPU rank's CUDA interprocess events (cudaEventInterprocess |
 * cudaEventDisableTiming, on the device of its pools), by the bytes of cudaIpcGetEventHandle's
 * handles; event i is named by READY's event = i + 1. Once per registration, answered by
 * REGISTERED (its status and message; rank and worker_id as registered). */
struct proto_events {
    uint32_t n;        /* 1..PROTO_EVENTS_MAX */
    uint8_t *handles;  /* n * PROTO_IPC_HANDLE bytes: owned when decoded, borrowed encoded */
};

struct proto_recv {
    uint64_t req_id;
    int32_t ctx_dp_rank;  /* -1 unless the context instance runs attention-DP */
    uint32_t deadline_ms; /* 0: the daemon's deadlines */
    char ctx_instance[LAYOUT_NAME_MAX];
    char ctx_home[PROTO_HOME_MAX + 1]; /* "" local / look up; else the home daemon "host:port" */
    struct proto_items items;
    uint64_t tokens; /* optional trailing u64 after the items: the prompt's tokens, absent (0)
                      * when unknown; 1..PROTO_TOKENS_MAX */
};

struct proto_cancel {
    uint64_t req_id;
};

struct proto_fds {
    uint32_t n; /* fds attached to this frame, 1..PROTO_FDS_MAX */
};

struct proto_event {
    uint64_t req_id;
    uint32_t kind;  /* proto_event_kind_t */
    uint32_t error; /* kvf_error_t, KVF_OK unless FAILED */
    uint64_t bytes;
    char message[PROTO_MSG_MAX + 1];
    uint32_t flags; /* PROTO_EVF_*: FAILED only */
};

struct proto_error {
    uint32_t error; /* kvf_error_t */
    char message[PROTO_MSG_MAX + 1];
};

struct proto_msg {
    uint32_t type; /* proto_type_t */
    uint64_t seq;
    union {
        struct proto_hello hello;
        struct proto_welcome welcome;
        struct proto_register reg;
        struct proto_registered registered;
        struct proto_send send;
        struct proto_recv recv;
        struct proto_cancel cancel;
        struct proto_ready ready;
        struct proto_events events;
        struct proto_fds fds;
        struct proto_event event;
        struct proto_error error;
    } u;
};

/* Limits from config values, clamped to [PROTO_FRAME_MIN, PROTO_FRAME_HARD_MAX] and
 * [1, PROTO_BLOCKS_HARD_MAX]; 0 means the default. */
void proto_limits_init(struct proto_limits *ret, uint64_t max_frame, uint64_t max_blocks);

/* Parses and checks a header (magic, version, known type, flags 0, length within max_frame).
 * len must be >= PROTO_HDR_SIZE. Returns 0, -EPROTO (bad magic/version/type/flags) or -EMSGSIZE
 * (length over the limit), with a message in err. */
int proto_hdr_decode(const uint8_t *buf, size_t len, const struct proto_limits *lim,
                     struct proto_hdr *ret, char *err, size_t errlen);

/* Decodes one whole frame (header + exactly `length` payload bytes). Returns 0 and fills *ret
 * (release with proto_msg_done), or -EPROTO / -EMSGSIZE / -EINVAL / -ENOMEM with a message
 * naming the field in err; *ret is untouched on error. */
int proto_decode(const uint8_t *frame, size_t len, const struct proto_limits *lim,
                 struct proto_msg *ret, char *err, size_t errlen);

/* Encodes a message into a malloc'd frame (caller frees). Checks the same bounds the decoder
 * does (with lim, or the hard maxima when lim is NULL). Returns 0 or -EINVAL / -EMSGSIZE / -ENOMEM. */
int proto_encode(const struct proto_msg *m, const struct proto_limits *lim, uint8_t **ret,
                 size_t *retlen);

/* Releases what a decoded (or caller-built) message owns; accepts NULL. */
void proto_msg_done(struct proto_msg *m);

/* The fds that must come with a REGISTER: one per host pool, n_fds per VMM pool, in pool order. */
uint32_t proto_register_fds(const struct proto_register *r);

/* Total ids of an item list. */
uint64_t proto_items_total(const struct proto_items *it);

#endif
