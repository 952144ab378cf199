/* wire_io.h: private to wire.c (not installed): little-endian byte writer and bounds-checked
 * reader with a sticky error, and the block chain that owns a decoded message's data.
 * Header-only (static inline), so it exports no symbols. */
#ifndef KVF_WIRE_IO_H
#define KVF_WIRE_IO_H

#include <errno.h>
#include <stdalign.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

/* ---- writer: counts when p is NULL, so one function sizes and writes ---- */

struct wr {
    uint8_t *p;
    size_t pos;
};

static inline void wr_u8(struct wr *w, uint8_t v)
{
    if (w->p)
        w->p[w->pos] = v;
    w->pos++;
}

static inline void wr_le(struct wr *w, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        wr_u8(w, (uint8_t)(v >> (8 * i)));
}

static inline void wr_u16(struct wr *w, uint16_t v) { wr_le(w, v, 2); }
static inline void wr_u32(struct wr *w, uint32_t v) { wr_le(w, v, 4); }
static inline void wr_u64(struct wr *w, uint64_t v) { wr_le(w, v, 8); }

static inline void wr_bytes(struct wr *w, const void *src, size_t n)
{
    if (w->p && n)
        memcpy(w->p + w->pos, src, n);
    w->pos += n;
}

/* n little-endian u32s; sizing is O(1) */
static inline void wr_u32_array(struct wr *w, const uint32_t *v, uint32_t n)
{
    if (w->p) {
        uint8_t *q = w->p + w->pos;
        for (uint32_t i = 0; i < n; i++, q += 4) {
            q[0] = (uint8_t)v[i];
            q[1] = (uint8_t)(v[i] >> 8);
            q[2] = (uint8_t)(v[i] >> 16);
            q[3] = (uint8_t)(v[i] >> 24);
        }
    }
    w->pos += (size_t)n * 4;
}

static inline void wr_str(struct wr *w, const char *s)
{
    size_t n = strlen(s); /* validated: < 64 KiB */
    wr_u16(w, (uint16_t)n);
    wr_bytes(w, s, n);
}

static inline void wr_blob(struct wr *w, const void *b, uint32_t n)
{
    wr_u32(w, n);
    wr_bytes(w, b, n);
}

/* ---- reader: sticky error, every read bounds-checked ---- */

struct rd {
    const uint8_t *p;
    size_t len, pos;
    int err;
};

static inline const uint8_t *rd_take(struct rd *r, size_t n)
{
    if (r->err)
        return NULL;
    if (r->len - r->pos < n) {
        r->err = -EBADMSG;
        return NULL;
    }
    const uint8_t *q = r->p + r->pos;
    r->pos += n;
    return q;
}

static inline uint64_t rd_le(struct rd *r, int bytes)
{
    const uint8_t *q = rd_take(r, (size_t)bytes);
    uint64_t v = 0;
    for (int i = 0; q && i < bytes; i++)
        v |= (uint64_t)q[i] << (8 * i);
    return v;
}

static inline uint8_t rd_u8(struct rd *r) { return (uint8_t)rd_le(r, 1); }
static inline uint16_t rd_u16(struct rd *r) { return (uint16_t)rd_le(r, 2); }
static inline uint32_t rd_u32(struct rd *r) { return (uint32_t)rd_le(r, 4); }
static inline uint64_t rd_u64(struct rd *r) { return rd_le(r, 8); }

static inline void rd_fail(struct rd *r, int err)
{
    if (!r->err)
        r->err = err;
}

/* n little-endian u32s into dst, bounds-checked once */
static inline void rd_u32_array(struct rd *r, uint32_t *dst, uint32_t n)
{
    const uint8_t *q = rd_take(r, (size_t)n * 4);
    for (uint32_t i = 0; q && i < n; i++, q += 4)
        dst[i] = (uint32_t)q[0] | (uint32_t)q[1] << 8 | (uint32_t)q[2] << 16 | (uint32_t)q[3] << 24;
}

/* Into a fixed array of `cap` bytes (NUL included). */
static inline void rd_str(struct rd *r, char *dst, size_t cap)
{
    uint16_t n = rd_u16(r);
    if (r->err)
        return;
    if (n >= cap) {
        rd_fail(r, -E2BIG);
        return;
    }
    const uint8_t *q = rd_take(r, n);
    if (!q)
        return;
    if (memchr(q, 0, n)) {
        rd_fail(r, -EBADMSG);
        return;
    }
    memcpy(dst, q, n);
    dst[n] = '\0';
}

/* Decoded data lives in a chain of blocks hung on msg->owned_. */
struct own_block {
    struct own_block *next;
    alignas(16) unsigned char data[];
};

static inline void *own_alloc(struct wire_msg *m, size_t n)
{
    struct own_block *b = malloc(sizeof(*b) + (n ? n : 1));
    if (!b)
        return NULL;
    b->next = m->owned_;
    m->owned_ = b;
    return b->data;
}

/* A u32-length blob of at most max bytes, copied with a NUL after it. */
static inline const uint8_t *rd_blob(struct rd *r, struct wire_msg *m, uint32_t max, uint32_t *ret_len)
{
    uint32_t n = rd_u32(r);
    if (r->err)
        return NULL;
    if (n > max) {
        rd_fail(r, -E2BIG);
        return NULL;
    }
    const uint8_t *q = rd_take(r, n);
    if (!q)
        return NULL;
    uint8_t *c = own_alloc(m, (size_t)n + 1);
    if (!c) {
        rd_fail(r, -ENOMEM);
        return NULL;
    }
    memcpy(c, q, n);
    c[n] = 0;
    *ret_len = n;
    return c;
}

/* A count that is within `max` and leaves at least count * min_each bytes to read. */
static inline uint32_t rd_count(struct rd *r, uint32_t max, size_t min_each)
{
    uint32_t n = rd_u32(r);
    if (r->err)
        return 0;
    if (n > max) {
        rd_fail(r, -E2BIG);
        return 0;
    }
    if ((uint64_t)n * min_each > r->len - r->pos) {
        rd_fail(r, -EBADMSG);
        return 0;
    }
    return n;
}

#endif
