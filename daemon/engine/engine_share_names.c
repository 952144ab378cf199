/* engine_share_names.c: the names of the arena's per-peer shares (engine_share.h): which peer,
 * live or lost a moment ago (engine_lost.c), a share key stands for, for messages and status.
 * Apart from engine_share.c, which the parts below the lost-peer list call. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "daemon.h"
#include "engine_lost.h"
#include "engine_peer.h"
#include "engine_share.h"

#define TOP_HOLDERS 8

/* why: NULL for a peer known now, else what its slots wait for. */
static const char *owner_name(struct engine *e, uint64_t owner, const char **why)
{
    *why = NULL;
    for (const struct epeer *p = e->peers; p; p = p->next)
        if (p->lp && share_key(p) == owner)
            return link_peer_id(p->lp);
    const char *id;
    if (lost_find(e, owner, &id, why))
        return id;
    *why = "lost";
    return "a lost peer";
}

void share_why(struct engine *e, uint64_t owner, char *buf, size_t len)
{
    struct arena_stats st;
    arena_get_stats(e->arena, &st);
    struct arena_owner top[1];
    uint32_t n = arena_owners(e->arena, top, 1);
    uint64_t mib = 1 << 20;
    int w = snprintf(buf, len,
                     "%u of %u landing slots free, %u granted or filled, %u quarantined, %u "
                     "requests waiting; this peer holds %llu of its %llu MiB share",
                     st.slots_free, st.slots_total, st.slots_in_use, st.slots_quarantined,
                     st.waiting_requests,
                     (unsigned long long)(arena_owner_bytes(e->arena, owner) / mib),
                     (unsigned long long)(arena_share_bytes(e->arena) / mib));
    const char *why;
    if (n && w > 0 && (size_t)w < len) {
        const char *name = owner_name(e, top[0].owner, &why);
        snprintf(buf + w, len - (size_t)w, "; the most held: %llu MiB by %s%s%s%s",
                 (unsigned long long)(top[0].bytes / mib), name, why ? " (lost: " : "",
                 why ? why : "", why ? ")" : "");
    }
}

void share_json(struct engine *e, json_t *o)
{
    struct arena_owner top[TOP_HOLDERS];
    uint32_t n = arena_owners(e->arena, top, TOP_HOLDERS);
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++) {
        const char *why, *name = owner_name(e, top[i].owner, &why);
        json_t *h = json_pack("{s:s,s:I}", "peer", name, "bytes", (json_int_t)top[i].bytes);
        if (h && why) /* lost: what its slots wait for */
            json_object_set_new(h, "lost", json_string(why));
        json_array_append_new(a, h);
    }
    json_object_set_new(o, "holders", a);
}
