/* engine_laycache.c: generation layouts sent once per peer and instance registration (see
 * engine_laycache.h). */
#include "engine_laycache.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

bool laycache_place(struct laycache *c, uint64_t id, uint64_t flow, uint32_t *slot)
{
    uint32_t lru = WIRE_LAYOUT_SLOTS, any = 0;
    c->tick++;
    for (uint32_t i = 0; i < WIRE_LAYOUT_SLOTS; i++) {
        if (c->sent_id[i] == id) {
            c->sent_used[i] = c->tick;
            *slot = i;
            if (c->sent_ok[i])
                return true;
            c->sent_flow[i] = flow; /* not answered yet: carried again */
            return false;
        }
        /* an empty slot has use 0: taken first; one whose layout may still be on its way only
         * when every slot is */
        if ((!c->sent_id[i] || c->sent_ok[i]) &&
            (lru == WIRE_LAYOUT_SLOTS || c->sent_used[i] < c->sent_used[lru]))
            lru = i;
        if (c->sent_used[i] < c->sent_used[any])
            any = i;
    }
    if (lru == WIRE_LAYOUT_SLOTS)
        lru = any;
    c->sent_id[lru] = id;
    c->sent_used[lru] = c->tick;
    c->sent_flow[lru] = flow;
    c->sent_ok[lru] = false;
    *slot = lru;
    return false;
}

void laycache_answered(struct laycache *c, uint64_t flow)
{
    for (uint32_t i = 0; i < WIRE_LAYOUT_SLOTS; i++)
        if (c->sent_id[i] && !c->sent_ok[i] && c->sent_flow[i] == flow)
            c->sent_ok[i] = true;
}

void laycache_forget(struct laycache *c, uint32_t slot)
{
    if (slot < WIRE_LAYOUT_SLOTS) {
        c->sent_id[slot] = 0;
        c->sent_used[slot] = 0;
        c->sent_ok[slot] = false;
    }
}

static void ent_unref(struct laycache_ent *x)
{
    if (x && --x->refs == 0)
        free(x);
}

void laycache_unref(const struct layout *l)
{
    if (l)
        ent_unref((struct laycache_ent *)((char *)l - offsetof(struct laycache_ent, l)));
}

const struct layout *laycache_take(struct laycache *c, const struct wire_recv_req *q,
                                   bool *decoded, char *err, size_t len)
{
    *decoded = false;
    uint32_t s = q->layout_slot;
    if (s >= WIRE_LAYOUT_SLOTS || !q->layout_id) { /* wire_decode refuses these already */
        snprintf(err, len, "layout slot %u of %u (id %llu)", s, WIRE_LAYOUT_SLOTS,
                 (unsigned long long)q->layout_id);
        return NULL;
    }
    if (!q->gen_json_len) {
        if (c->held[s] && c->held_id[s] == q->layout_id) {
            c->held[s]->refs++;
            return &c->held[s]->l;
        }
        snprintf(err, len, "layout %llu is not held in slot %u (it holds %llu)",
                 (unsigned long long)q->layout_id, s, (unsigned long long)c->held_id[s]);
        return NULL;
    }
    c->held_id[s] = 0; /* a layout that fails to decode leaves the slot empty, not stale */
    if (c->held[s] && c->held[s]->refs > 1) { /* flows still plan with it: a new one */
        ent_unref(c->held[s]);
        c->held[s] = NULL;
    }
    if (!c->held[s] && !(c->held[s] = malloc(sizeof *c->held[s]))) {
        snprintf(err, len, "out of memory");
        return NULL;
    }
    c->held[s]->refs = 1;
    char why[256];
    if (layout_from_json(q->gen_json, q->gen_json_len, &c->held[s]->l, why, sizeof why) < 0) {
        snprintf(err, len, "%s", why);
        return NULL;
    }
    c->held_id[s] = q->layout_id;
    *decoded = true;
    c->held[s]->refs++;
    return &c->held[s]->l;
}

void laycache_clear(struct laycache *c)
{
    for (uint32_t i = 0; i < WIRE_LAYOUT_SLOTS; i++)
        ent_unref(c->held[i]);
    *c = (struct laycache){0};
}
