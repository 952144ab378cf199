/* engine_peer.h: peer daemons as the engine holds them (engine_peer.c). Loop thread only. */
#ifndef KVF_ENGINE_PEER_H
#define KVF_ENGINE_PEER_H

#include "engine_int.h"
#include "engine_laycache.h"

/* One peer daemon, for as long as its link peer lives. */
struct epeer {
    struct engine *e;
    struct link_peer *lp;     /* borrowed from the link; NULL once down */
    uint64_t key;             /* serial: the arena's quarantine key */
    char addr[WIRE_ADDR_MAX]; /* "host:port" we connected to; "" for an inbound peer */
    bool outbound, up;
    uint64_t since_ms;
    uint32_t users; /* requests (rx writers, tx flows, table fetches) using it */
    uint64_t chunks_sent, chunks_recv, bytes_sent, bytes_recv, puts, ams;
    struct laycache lc; /* generation layouts sent to / kept from it (engine_laycache.h) */
    struct epeer *next;
};

int epeer_get(struct engine *e, const char *addr, struct epeer **ret);
struct epeer *epeer_of(struct engine *e, struct link_peer *lp); /* creates for inbound */
/* Unlinks p from the engine and frees it (after every part heard it went). */
void epeer_forget(struct engine *e, struct epeer *p);
void epeer_free_all(struct engine *e);
json_t *epeer_json(const struct epeer *p);

#endif
