/* engine_state.c: names and allowed edges of the engine's state machines (engine_state.h). */
#include "engine_state.h"
#include "log.h"
#include "require.h"

static const char *const rx_names[RX__COUNT] = {"lookup", "connect", "moving", "ended"};

static const bool rx_edges[RX__COUNT][RX__COUNT] = {
    [RX_LOOKUP] = {[RX_CONNECT] = true, [RX_ENDED] = true},
    [RX_CONNECT] = {[RX_MOVING] = true, [RX_LOOKUP] = true, [RX_ENDED] = true},
    [RX_MOVING] = {[RX_LOOKUP] = true, [RX_ENDED] = true},
};

static const char *const rxw_names[RXW__COUNT] = {"idle", "credit", "moving",
                                                  "done", "nacked", "closed"};

static const bool rxw_edges[RXW__COUNT][RXW__COUNT] = {
    [RXW_IDLE] = {[RXW_CREDIT] = true, [RXW_MOVING] = true, [RXW_DONE] = true,
                  [RXW_CLOSED] = true},
    [RXW_CREDIT] = {[RXW_MOVING] = true, [RXW_CLOSED] = true},
    [RXW_MOVING] = {[RXW_DONE] = true, [RXW_NACKED] = true, [RXW_CLOSED] = true},
    [RXW_DONE] = {[RXW_NACKED] = true, [RXW_CLOSED] = true},
    [RXW_NACKED] = {[RXW_CLOSED] = true},
};

static const char *const tx_names[TX__COUNT] = {"send_wait", "table_wait", "refetch",
                                                "moving",    "done",       "failed"};

static const bool tx_edges[TX__COUNT][TX__COUNT] = {
    [TX_SEND_WAIT] = {[TX_TABLE_WAIT] = true, [TX_REFETCH] = true, [TX_MOVING] = true,
                      [TX_FAILED] = true},
    [TX_TABLE_WAIT] = {[TX_MOVING] = true, [TX_FAILED] = true},
    [TX_REFETCH] = {[TX_MOVING] = true, [TX_FAILED] = true},
    [TX_MOVING] = {[TX_DONE] = true, [TX_FAILED] = true},
};

const char *rx_state_to_string(enum rx_state s)
{
    return (unsigned)s < RX__COUNT ? rx_names[s] : "unknown";
}

const char *rxw_state_to_string(enum rxw_state s)
{
    return (unsigned)s < RXW__COUNT ? rxw_names[s] : "unknown";
}

const char *tx_state_to_string(enum tx_state s)
{
    return (unsigned)s < TX__COUNT ? tx_names[s] : "unknown";
}

bool rx_state_edge_ok(enum rx_state from, enum rx_state to)
{
    return (unsigned)from < RX__COUNT && (unsigned)to < RX__COUNT && rx_edges[from][to];
}

bool rxw_state_edge_ok(enum rxw_state from, enum rxw_state to)
{
    return (unsigned)from < RXW__COUNT && (unsigned)to < RXW__COUNT && rxw_edges[from][to];
}

bool tx_state_edge_ok(enum tx_state from, enum tx_state to)
{
    return (unsigned)from < TX__COUNT && (unsigned)to < TX__COUNT && tx_edges[from][to];
}

bool tx_state_step(enum tx_state *state, enum tx_state to, uint64_t flow)
{
    if (!KVF_REQUIRE(tx_state_edge_ok(*state, to), "engine: flow %llu: illegal edge %s -> %s",
                     (unsigned long long)flow, tx_state_to_string(*state), tx_state_to_string(to)))
        return false;
    log_debug("engine: flow %llu: %s -> %s", (unsigned long long)flow, tx_state_to_string(*state),
              tx_state_to_string(to));
    *state = to;
    return true;
}

bool rxw_state_step(enum rxw_state *state, enum rxw_state to, uint64_t req_id, uint32_t writer)
{
    if (!KVF_REQUIRE(rxw_state_edge_ok(*state, to),
                     "engine: rx req %llu writer %u: illegal edge %s -> %s",
                     (unsigned long long)req_id, writer, rxw_state_to_string(*state),
                     rxw_state_to_string(to)))
        return false;
    *state = to;
    return true;
}
