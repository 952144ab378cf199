/* proto.c: the local worker protocol's names, limits and message helpers (see proto.h); the
 * decoder is proto_decode.c, the encoder proto_encode.c. */
#include <stdlib.h>

#include "proto.h"

static const char *const type_names[PROTO__TYPE_END] = {
    [PROTO_HELLO] = "HELLO",     [PROTO_WELCOME] = "WELCOME", [PROTO_REGISTER] = "REGISTER",
    [PROTO_REGISTERED] = "REGISTERED", [PROTO_SEND] = "SEND", [PROTO_RECV] = "RECV",
    [PROTO_CANCEL] = "CANCEL",   [PROTO_EVENT] = "EVENT",     [PROTO_ERROR] = "ERROR",
    [PROTO_FDS] = "FDS",         [PROTO_READY] = "READY",
    [PROTO_EVENTS] = "EVENTS",
    [PROTO_PING] = "PING",       [PROTO_PONG] = "PONG",
};

const char *proto_type_to_string(uint32_t type)
{
    if (type == 0 || type >= PROTO__TYPE_END)
        return "UNKNOWN";
    return type_names[type];
}

void proto_limits_init(struct proto_limits *ret, uint64_t max_frame, uint64_t max_blocks)
{
    if (max_frame == 0)
        max_frame = PROTO_FRAME_DEFAULT;
    if (max_frame < PROTO_FRAME_MIN)
        max_frame = PROTO_FRAME_MIN;
    if (max_frame > PROTO_FRAME_HARD_MAX)
        max_frame = PROTO_FRAME_HARD_MAX;
    if (max_blocks == 0)
        max_blocks = PROTO_BLOCKS_DEFAULT;
    if (max_blocks > PROTO_BLOCKS_HARD_MAX)
        max_blocks = PROTO_BLOCKS_HARD_MAX;
    ret->max_frame = (uint32_t)max_frame;
    ret->max_blocks = (uint32_t)max_blocks;
}

void proto_msg_done(struct proto_msg *m)
{
    if (!m)
        return;
    switch (m->type) {
    case PROTO_REGISTER:
        free(m->u.reg.json);
        m->u.reg.json = NULL;
        free(m->u.reg.pools);
        m->u.reg.pools = NULL;
        break;
    case PROTO_SEND:
        free(m->u.send.items.ids);
        m->u.send.items.ids = NULL;
        break;
    case PROTO_RECV:
        free(m->u.recv.items.ids);
        m->u.recv.items.ids = NULL;
        break;
    case PROTO_EVENTS:
        free(m->u.events.handles);
        m->u.events.handles = NULL;
        break;
    default:
        break;
    }
}

uint32_t proto_register_fds(const struct proto_register *r)
{
    uint32_t n = 0;
    for (uint32_t i = 0; r->pools && i < r->n_pools && i < LAYOUT_MAX_POOLS; i++)
        n += r->pools[i].kind == POOL_HOST ? 1
             : r->pools[i].kind == PROTO_POOL_CUDA_VMM ? r->pools[i].n_fds : 0;
    return n;
}

uint64_t proto_items_total(const struct proto_items *it)
{
    uint64_t t = 0;
    for (uint32_t g = 0; g < it->n_groups && g < LAYOUT_MAX_GROUPS; g++)
        t += it->counts[g];
    return t;
}
