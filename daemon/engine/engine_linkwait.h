/* engine_linkwait.h: a link whose start waits for its interface (engine_linkwait.c). Loop
 * thread only. */
#ifndef KVF_ENGINE_LINKWAIT_H
#define KVF_ENGINE_LINKWAIT_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct engine;

/* Starts the link once its interface is up (engine.c: the link, its arenas, and what registered
 * while it waited). 0, or -errno with err; e->link NULL: the link did not start. */
typedef int (*linkwait_up_cb)(struct engine *e, char *err, size_t errlen);

#define LINKWAIT_POLL_MS 250 /* how often the interface is looked at while the start waits */
#define LINKWAIT_WARN_MS 30000 /* the warning again while it still waits */

/* At the engine's start, before the link: true when the listen address's interface would not
 * accept now (down, no carrier, or the address on no interface): the link starts when it
 * would, the engine runs without it meanwhile (its remote requests fail NO_ROUTE, saying why);
 * false: start the link now. */
bool linkwait_start(struct engine *e, linkwait_up_cb up);
/* Whether the link's start waits; *why (may be NULL) says for what. */
bool linkwait_waiting(const struct engine *e, const char **why);
/* status.peers.link while it waits ({"state": "waiting", ...}), or once started after a wait
 * (waited_ms) into o. */
void linkwait_json(const struct engine *e, json_t *o);
/* Stops waiting (the engine stops); the memory goes with the timer's close callback. */
void linkwait_stop(struct engine *e);

#endif
