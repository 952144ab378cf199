/* layout.h: what a rank registers (docs/DESIGN.md §1, §3, §4): identity, parallelism, the global
 * layers it holds, its memory pools and, per group, the pool views that locate every tensor.
 * Plain data with fixed-size arrays: a layout is copied by value and needs no destructor. It is
 * about 100 KiB (check_layout prints sizeof): keep it on the heap or the main thread's stack, never
 * on a small thread stack. Pure: no I/O. The JSON codec (layout_json.c) is the one encoding used on every wire.
 * Any thread may call these functions on layouts it owns. */
#ifndef KVF_LAYOUT_H
#define KVF_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Limits (docs/LAYOUT.md says why each is what it is). */
#define LAYOUT_MAX_LAYERS 256   /* global layer ids < this */
#define LAYOUT_MAX_POOLS 1024   /* SGLang: one k and one v buffer per layer of a 512-layer rank */
#define LAYOUT_MAX_GROUPS 16    /* vLLM hybrid KV cache groups (Jamba-style 1:7 needs 8) */
#define LAYOUT_MAX_VIEWS 8      /* per group: k, v, their fp8 scales, ... */
#define LAYOUT_MAX_TENSORS 4    /* per view */
#define LAYOUT_MAX_LAYER_ADDRS (LAYOUT_MAX_LAYERS * LAYOUT_MAX_VIEWS) /* per-layer entries: every
                                     * layer of every view, so a decoded layout never runs out */
#define LAYOUT_MAX_TP 64
#define LAYOUT_MAX_PP 64
#define LAYOUT_NAME_MAX 64      /* instance id, including NUL */
#define LAYOUT_SHORT_MAX 24     /* group/view/tensor names, including NUL */
#define LAYOUT_FP_MAX 65        /* fingerprint, including NUL */
#define LAYOUT_JSON_MAX (256 * 1024) /* largest accepted encoding */

typedef enum { ROLE_CONTEXT = 0, ROLE_GENERATION = 1 } layout_role_t;
typedef enum { GROUP_PAGED = 0, GROUP_STATE = 1 } group_kind_t;
typedef enum { SHARD_SHARDED = 0, SHARD_REPLICATED = 1 } shard_mode_t;
typedef enum { DTYPE_BF16 = 0, DTYPE_FP16, DTYPE_FP32, DTYPE_FP8, DTYPE_U8 } dtype_t;
typedef enum { POOL_HOST = 0, POOL_CUDA = 1 } pool_kind_t;
/* Order of a tensor's rows: [outer][heads][inner] (token-major, NHD for paged KV) or
 * [heads][outer][inner] (head-major, HND). The copy program converts between them. */
typedef enum { ORDER_NHD = 0, ORDER_HND = 1 } tensor_order_t;

/* One memory region the rank hands over (a memfd or a CUDA IPC allocation). */
struct layout_pool {
    pool_kind_t kind;
    int32_t device; /* CUDA device ordinal for POOL_CUDA, -1 for host */
    uint64_t bytes;
};

/* A head-structured tensor inside a view's region: bytes [offset, offset + outer*heads*inner)
 * of the region, laid out [outer][heads][inner] (order NHD) or [heads][outer][inner] (HND);
 * `heads` are this rank's local heads. A sharded tensor with tp_eff > global_heads holds one
 * head (each head is held by tp_eff / global_heads ranks; see layout_first_head). In a paged
 * group `outer` is the token axis when tokens_per_block differs between the sides. */
struct layout_tensor {
    char name[LAYOUT_SHORT_MAX]; /* "conv", "ssm", "kv", "k_pe", ... */
    uint64_t offset;             /* within the region */
    uint32_t outer, heads, inner; /* inner: bytes per (outer, head) */
    uint32_t global_heads;
    shard_mode_t shard;
    dtype_t dtype;
    tensor_order_t order;
};

/* Where one local layer of a per-layer view starts: pool index and byte offset in it. */
struct layout_addr {
    uint32_t pool;
    uint64_t base;
};

/* One tensor family of a group in memory. The region of (local layer l, item i) is region_bytes
 * long and starts (layout_region_at)
 *  - uniform view (per_layer false, as zeroed memory has it): in `pool` at
 *    base + l * layer_stride + i * item_stride;
 *  - per-layer view: in layout.addrs[addr_at + l].pool at addrs[addr_at + l].base + i * item_stride
 *    (vLLM / SGLang: one tensor per layer; pool, base and layer_stride are then 0).
 * Its tensors tile it exactly (sum of tensor bytes == region_bytes, no overlap, no gap).
 * alias: "" or a name; views of different groups declaring the same alias may share memory
 * (vLLM's hybrid allocator), then the planner refuses a request whose destinations overlap. */
struct layout_view {
    char name[LAYOUT_SHORT_MAX];
    uint32_t pool; /* index into layout.pools */
    uint64_t base, layer_stride, item_stride, region_bytes;
    uint32_t n_tensors;
    struct layout_tensor tensors[LAYOUT_MAX_TENSORS];
    bool per_layer;
    uint32_t addr_at;             /* per_layer: first of the group's n_layers entries of addrs */
    char alias[LAYOUT_SHORT_MAX]; /* "" none */
};

/* Paged group: n_items blocks, a request owns a block list. State group: n_items slots, a request
 * owns one slot. layers[] are global ids (ascending); local layer index = position in layers[]. */
struct layout_group {
    char name[LAYOUT_SHORT_MAX]; /* groups match across sides by name */
    group_kind_t kind;
    uint32_t n_layers;
    uint16_t layers[LAYOUT_MAX_LAYERS];
    uint32_t n_items;
    uint32_t n_views;
    struct layout_view views[LAYOUT_MAX_VIEWS];
};

struct layout {
    char instance[LAYOUT_NAME_MAX];
    layout_role_t role;
    uint32_t tp_size, tp_rank, pp_size, pp_rank;
    bool attention_dp;
    int32_t device;                 /* -1: CPU mode */
    char fingerprint[LAYOUT_FP_MAX]; /* model identity; equal on both sides */
    uint32_t tokens_per_block;
    uint32_t n_layers_total;        /* layers of the whole model */
    /* The model's layer map (DESIGN §4 rule 7): layer_map[id] is 1 + the index into map_groups
     * of the group global layer id belongs to, 0 for a layer that keeps no cache; entries past
     * n_layers_total are 0. n_map_groups == 0: the layout declares no map (then compat derives
     * it from the context table). Equal on both sides; the rank's own groups agree with it. */
    uint32_t n_map_groups;
    char map_groups[LAYOUT_MAX_GROUPS][LAYOUT_SHORT_MAX];
    uint8_t layer_map[LAYOUT_MAX_LAYERS];
    /* This rank's PP stage: global layers [stage_first, stage_first + stage_count), the span of
     * which it must declare every layer the context holds (rule 8). stage_count 0: undeclared
     * (then every layer for pp_size 1, else inferred from the declared layers). */
    uint32_t stage_first, stage_count;
    uint32_t n_pools;
    struct layout_pool pools[LAYOUT_MAX_POOLS];
    uint32_t n_groups;
    struct layout_group groups[LAYOUT_MAX_GROUPS];
    uint32_t n_addrs;             /* used entries of addrs, per-layer views index into it */
    struct layout_addr addrs[LAYOUT_MAX_LAYER_ADDRS];
};

/* Rank index within its instance: pp_rank * tp_size + tp_rank. */
static inline uint32_t layout_rank(const struct layout *l) { return l->pp_rank * l->tp_size + l->tp_rank; }
/* Shards a sharded tensor is split into: 1 under attention-DP, else tp_size (DESIGN §4 rule 4). */
static inline uint32_t layout_tp_eff(const struct layout *l) { return l->attention_dp ? 1 : l->tp_size; }

/* First global head a rank holds of tensor t (DESIGN §4 rule 4): r * heads when the tensor is
 * sharded over tp_eff > 1 shards and tp_eff <= global_heads; r * global_heads / tp_eff (one
 * head, held by tp_eff / global_heads ranks) when tp_eff > global_heads; 0 otherwise. */
static inline uint32_t layout_first_head(const struct layout *l, const struct layout_tensor *t)
{
    uint32_t tpe = layout_tp_eff(l);
    if (t->shard != SHARD_SHARDED || tpe <= 1)
        return 0;
    if (tpe > t->global_heads)
        return (uint32_t)((uint64_t)l->tp_rank * t->global_heads / tpe);
    return l->tp_rank * t->heads;
}

/* Byte offset of row (o, h) (local head h) inside its region. */
static inline uint64_t layout_row_off(const struct layout_tensor *t, uint32_t o, uint32_t h)
{
    uint64_t row = t->order == ORDER_HND ? (uint64_t)h * t->outer + o : (uint64_t)o * t->heads + h;
    return t->offset + row * t->inner;
}

/* The region of (view v, local layer l, item i): every planner, executor and check addresses
 * memory through this one function. Expects a validated layout (l < n_layers of v's group). */
struct layout_loc {
    uint32_t pool;
    uint64_t off;
};
static inline struct layout_loc layout_region_at(const struct layout *lay,
                                                 const struct layout_view *v, uint32_t l,
                                                 uint64_t i)
{
    if (!v->per_layer)
        return (struct layout_loc){v->pool, v->base + l * v->layer_stride + i * v->item_stride};
    const struct layout_addr *a = &lay->addrs[v->addr_at + l];
    return (struct layout_loc){a->pool, a->base + i * v->item_stride};
}

uint32_t dtype_size(dtype_t t);
const char *dtype_to_string(dtype_t t);
int dtype_from_string(const char *s, dtype_t *ret);
const char *group_kind_to_string(group_kind_t k);
const char *shard_mode_to_string(shard_mode_t s);
const char *tensor_order_to_string(tensor_order_t o);
const char *layout_role_to_string(layout_role_t r);

/* Full consistency check (the decoder runs it too): counts within limits, names non-empty, every
 * view's tensors tile its region, heads divide, every region of every (layer, item) lies inside
 * its pool, regions of different (layer, item, view) never overlap, layer ids ascending and
 * unique; regions of views of different groups declaring the same alias may overlap; per-layer
 * entries lie in addrs[0, n_addrs) and name pools that exist. Returns 0, or -EINVAL with a
 * message naming the field in err (-ENOMEM if the region check cannot allocate). */
int layout_validate(const struct layout *l, char *err, size_t errlen);

/* Canonical JSON (jansson). Encode returns a malloc'd NUL-terminated string (caller frees) or
 * NULL on OOM. Decode is strict: unknown keys, wrong types, out-of-range values, over-long
 * strings, input over LAYOUT_JSON_MAX, and anything layout_validate refuses are -EINVAL with a
 * message naming the field; *ret is written only on success. */
char *layout_to_json(const struct layout *l);
int layout_from_json(const char *text, size_t len, struct layout *ret, char *err, size_t errlen);

/* Forward declaration for the jansson-object variants used inside bigger messages. */
struct json_t;
struct json_t *layout_to_jobj(const struct layout *l);
int layout_from_jobj(const struct json_t *obj, struct layout *ret, char *err, size_t errlen);

#endif
