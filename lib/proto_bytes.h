/* proto_bytes.h: what the worker protocol's decoder (proto_decode.c) and encoder
 * (proto_encode.c) share: little-endian byte helpers and the hard limits used when the caller
 * gives none. Internal to lib/proto*.c. */
#ifndef KVF_PROTO_BYTES_H
#define KVF_PROTO_BYTES_H

#include <stdint.h>

#include "proto.h"

static inline void proto__put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static inline void proto__put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void proto__put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t proto__get16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }
static inline uint32_t proto__get32(const uint8_t *p)
{
    return (uint32_t)p[0] | ((uint32_t)p[1] << 8) | ((uint32_t)p[2] << 16) | ((uint32_t)p[3] << 24);
}
static inline uint64_t proto__get64(const uint8_t *p) { return (uint64_t)proto__get32(p) | ((uint64_t)proto__get32(p + 4) << 32); }

static const struct proto_limits proto__hard_limits = {PROTO_FRAME_HARD_MAX, PROTO_BLOCKS_HARD_MAX};

#endif
