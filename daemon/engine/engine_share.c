/* engine_share.c: names for the landing arena's per-peer share (arena.peer_share, arena.h).
 * The arena counts bytes per 64-bit owner; here an owner is a peer daemon, keyed by a hash of
 * its id, and named back through the peers the engine knows. A peer already lost is not known
 * any more: its quarantined slots show as "a lost peer". */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "engine_peer.h"
#include "engine_share.h"

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}

uint64_t share_key(const struct epeer *p)
{
    const char *id = p->lp ? link_peer_id(p->lp) : "";
    uint64_t h = fnv1a(id[0] ? id : p->addr);
    return h ? h : 1;
}

bool alive_hold(const struct epeer *p, int err)
{
    return err == -ETIMEDOUT && p->up && p->lp && link_peer_same_host(p->lp) &&
           link_peer_direct_mem(p->lp);
}
