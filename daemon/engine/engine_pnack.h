/* engine_pnack.h: failed readers' NACKs that cannot go out yet (engine_pnack.c): a reader that
 * failed before its context instance's table came (its writers are not known yet), and a
 * READER_NACK for a writer's daemon that is not connected. Both wait, bounded in number
 * (PNACK_MAX) and age (deadlines.send_wait + deadlines.transfer, past which no SEND that waited
 * for the reader is left), until the table comes (asked again while they wait) or the daemon is
 * up (connected again while they wait). Loop thread only. */
#ifndef KVF_ENGINE_PNACK_H
#define KVF_ENGINE_PNACK_H

#include <stdbool.h>
#include <stdint.h>

#include "engine_int.h"

#define PNACK_MAX 1024u      /* waiting NACKs of a daemon; past it a failure is not told */
#define PNACK_RETRY_MS 250u  /* first wait between asks for a table or a connection; doubles */

struct pnack;

/* Generation side: rx failed (code, why: the reason its writers' SENDs end with) before it
 * planned, its table not known: its writers learn it once the table of (instance, home) comes.
 * Call while rx->x names the reader. */
void pnack_unplanned(struct rx *rx, kvf_error_t code, const char *why);
/* READER_NACK n to the writer daemon p (or, p NULL, the one at addr): sent now when it is up,
 * else queued until it is. */
void pnack_send(struct engine *e, struct epeer *p, const char *addr,
                const struct wire_reader_nack *n);
/* Hooks: a table fetch ended (err 0: t ready), a peer came up, the tick, stop. */
void pnack_table_ready(struct engine *e, const struct itable *t, int err);
void pnack_peer_up(struct engine *e, struct epeer *p);
uint64_t pnack_tick(struct engine *e, uint64_t now);
void pnack_free_all(struct engine *e);

#endif
