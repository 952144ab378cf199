/* client_held.c: the RECVs that ended FAILED with KVF_EVF_HELD and wait for their RELEASED
 * (kvferry.h). The daemon sends RELEASED on the connection that issued the RECV; a daemon that
 * restarted cannot (and holds nothing any more: the writes went into its own mappings), so a
 * reconnect to a new daemon epoch releases every id still held here. Called under c->mu. */
#include <stdlib.h>
#include <string.h>

#include "client_int.h"

void client_held_add(struct kvf_client *c, uint64_t id)
{
    if (c->n_held == c->cap_held) {
        uint32_t ncap = c->cap_held ? c->cap_held * 2 : 16;
        uint64_t *n = realloc(c->held, ncap * sizeof *n);
        if (!n)
            return; /* its RELEASED from this daemon still comes; only a restart's is lost */
        c->held = n;
        c->cap_held = ncap;
    }
    c->held[c->n_held++] = id;
}

bool client_held_take(struct kvf_client *c, uint64_t id)
{
    for (uint32_t i = 0; i < c->n_held; i++)
        if (c->held[i] == id) {
            c->held[i] = c->held[--c->n_held];
            return true;
        }
    return false;
}

void client_held_epoch(struct kvf_client *c, uint64_t old_epoch)
{
    if (c->epoch == old_epoch)
        return; /* the same daemon: it still holds them and says when it lets go */
    for (uint32_t i = 0; i < c->n_held; i++)
        client_queue_event(c, c->held[i], KVF_EV_RELEASED, KVF_OK, 0,
                           "the daemon that held its blocks restarted: none of its writes can "
                           "land any more", 0);
    c->n_held = 0;
}

void client_held_free(struct kvf_client *c)
{
    free(c->held);
    c->held = NULL;
    c->n_held = c->cap_held = 0;
}
