/* engine_state.h: the remote engine's three state machines, each an enum, a _to_string and an
 * allowed-edges table (engine_state.c). The setters live with the objects (rx_set_state and
 * gen_rxw_set_state in engine_gen.c, tx_set_state in engine_ctx.c; the last two through the
 * _step checks here): an illegal edge is an invariant failure (require.h) and fails the
 * request. Loop thread only. */
#ifndef KVF_ENGINE_STATE_H
#define KVF_ENGINE_STATE_H

#include <stdbool.h>
#include <stdint.h>

/* The generation side's request: lookup (the table) -> connect (planned, writers starting) ->
 * moving (RECV_REQs out, chunks landing) -> ended; a stale table sends connect or moving back to
 * lookup once (replan). */
enum rx_state { RX_LOOKUP, RX_CONNECT, RX_MOVING, RX_ENDED, RX__COUNT };

/* One writer of a RECV (struct rxw): idle (planned; its daemon not connected, or a local writer
 * whose SEND has not come) -> credit (bounce: the landing reservation is open, the first grant
 * not yet come, so no RECV_REQ) -> moving (RECV_REQ sent: chunks or fragment puts come) -> done
 * (WRITER_DONE came, or a local writer copied) -> closed (released: holds nothing). nacked: the
 * writer's daemon ended the flow, so no NACK goes back. A reservation that timed out before its
 * first grant goes credit -> closed. */
enum rxw_state { RXW_IDLE, RXW_CREDIT, RXW_MOVING, RXW_DONE, RXW_NACKED, RXW_CLOSED, RXW__COUNT };

/* One flow of the context side (struct tx): send_wait (the RECV_REQ came, the rank's SEND not
 * yet) -> [table_wait (met; the instance's table is being fetched from its home) | refetch (the
 * cached table was stale: fetched again, once)] -> moving (planned: chunks going out) -> done or
 * failed. */
enum tx_state {
    TX_SEND_WAIT,
    TX_TABLE_WAIT,
    TX_REFETCH,
    TX_MOVING,
    TX_DONE,
    TX_FAILED,
    TX__COUNT
};

const char *rx_state_to_string(enum rx_state s);
const char *rxw_state_to_string(enum rxw_state s);
const char *tx_state_to_string(enum tx_state s);
/* Whether from -> to is an edge of the state machine. */
bool rx_state_edge_ok(enum rx_state from, enum rx_state to);
bool rxw_state_edge_ok(enum rxw_state from, enum rxw_state to);
bool tx_state_edge_ok(enum tx_state from, enum tx_state to);
/* Moves *state to `to` when that is an edge (logged at debug); else the invariant failure is
 * logged (require.h: fatal in debug and tests), *state stays and false says the owner fails
 * the flow or request. */
bool tx_state_step(enum tx_state *state, enum tx_state to, uint64_t flow);
bool rxw_state_step(enum rxw_state *state, enum rxw_state to, uint64_t req_id, uint32_t writer);

#endif
