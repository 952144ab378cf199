/* engine_nack.h: failed readers told to the context side (engine_nack.c). Loop thread only. */
#ifndef KVF_ENGINE_NACK_H
#define KVF_ENGINE_NACK_H

#include "engine_int.h"

/* Generation side: rx failed; every writer it planned and had not finished reading learns it
 * (READER_NACK to its daemon, or this daemon's SEND directly for a local writer). */
void nack_readers(struct rx *rx, kvf_error_t code, const char *msg);
/* Generation side, before any plan: an incompatible verdict against tab refuses every writer:
 * one READER_NACK (every writer) to each daemon of the table that is up, and this daemon's. */
void nack_refused(struct rx *rx, const struct itable *tab, kvf_error_t code, const char *msg);
/* Generation side, with the table tab of rx's instance: rx's request cannot be planned (refused,
 * not incompatible: pin's ids, tokens or aliasing) or its plan cannot run (rx->planned, no writer
 * reached yet): each writer its shape reads (plan_writers_of_shape of pin), or its plan's, learns
 * it will not come. An attention-DP request without a valid DP rank has no known writer: counted
 * in reader_nacks_unsent, its SEND ends at its deadline. Call before rx_fail (whose nack_readers
 * then tells nobody twice: no writer of rx was set up). */
void nack_unplanned(struct rx *rx, const struct itable *tab, const struct plan_input *pin,
                    kvf_error_t code, const char *msg);
/* READER_NACK n0 for each context rank r of table t with writers[r] set (naming r): to its daemon
 * (now, or once connected: engine_pnack.c), or this daemon's SEND directly. Returns how many. */
/* READER_NACK n0 for every writer (an incompatible verdict): one to each daemon of table t (now,
 * or once connected), this daemon's SENDs directly. Returns how many daemons. */
uint32_t nack_tell_all(struct engine *e, const struct itable *t, const struct wire_reader_nack *n0);
uint32_t nack_tell_writers(struct engine *e, const struct itable *t,
                           const struct wire_reader_nack *n0, const uint8_t *writers);
/* Context side: flow tx is about to meet SEND s. When s's readers are all served or being
 * read already (n_readers, or the count the daemon derived), tx is refused BAD_REQUEST, the
 * request id, instance and count named (as the same-daemon path refuses such a RECV): true,
 * tx ended. Its NACK says not_reader, so the generation side does not count that refusal
 * against s (nack_readers); every other refusal of a flow is counted there. */
bool nack_beyond_readers(struct tx *tx, struct xfer *s);
/* Context side: flow tx failed; the SEND it read (if any) is settled again, since a reader's
 * failure may have come (READER_NACK) while this flow still read its blocks. */
void nack_flow_ended(struct tx *tx);
/* Context side: a READER_NACK from peer p. */
void nack_on_reader_nack(struct engine *e, struct epeer *p, const struct wire_msg *m);
/* Generation side: why a reader ended by its worker (its request's end code) failed. */
const char *nack_why_ended(kvf_error_t code);
/* Context side: flow tx, reading SEND s (NULL: none), failed because its generation daemon was
 * lost. */
void nack_flow_lost(struct tx *tx, struct xfer *s, int err);
/* Context side: flow tx, whose RECV_REQ came but whose SEND had not (it met none), failed because
 * its generation daemon was lost: that reader will not come either, so the SEND it waited for
 * learns it now (or when it comes), by the RECV_REQ's instance, id and writer. */
void nack_wait_lost(struct tx *tx, int err);
/* Context side: flow tx failed (ended already, its generation daemon not told) because a put
 * to that daemon failed: the link under it broke, so that daemon cannot NACK its reader either
 * (engine_pnack.c); counted here, as nack_flow_lost does at the peer's loss, which skips it. */
void nack_put_failed(struct tx *tx, int err);

#endif
