/* check_request_state.c: the request state machines (transfers.h xfer_state_t; the remote
 * objects' engine_gen.h rx_state and rxw_state, engine_ctx.h tx_state): exactly the documented edges are allowed, every state has a name; and KVF_REQUIRE
 * (require.h), which guards both setters: false and logged in release, abort where invariants
 * are fatal. */
#include <check.h>
#include <signal.h>
#include <stdlib.h>

#include "engine_ctx.h"
#include "engine_gen.h"
#include "transfers.h"
#include "require.h"
#include "testutil.h"

START_TEST(rx_allows_exactly_the_documented_edges)
{
    static const struct {
        enum rx_state from, to;
    } ok[] = {
        {RX_LOOKUP, RX_CONNECT}, {RX_LOOKUP, RX_ENDED},   {RX_CONNECT, RX_MOVING},
        {RX_CONNECT, RX_LOOKUP}, {RX_CONNECT, RX_ENDED},  {RX_MOVING, RX_LOOKUP},
        {RX_MOVING, RX_ENDED},
    };
    for (int f = 0; f < RX__COUNT; f++)
        for (int t = 0; t < RX__COUNT; t++) {
            bool want = false;
            for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
                want |= ok[i].from == (enum rx_state)f && ok[i].to == (enum rx_state)t;
            ck_assert_msg(rx_state_edge_ok((enum rx_state)f, (enum rx_state)t) == want,
                          "%s -> %s", rx_state_to_string((enum rx_state)f),
                          rx_state_to_string((enum rx_state)t));
        }
    ck_assert(!rx_state_edge_ok(RX__COUNT, RX_ENDED));
    ck_assert(!rx_state_edge_ok(RX_LOOKUP, RX__COUNT));
}
END_TEST

START_TEST(rx_states_have_names_and_ended_is_terminal)
{
    ck_assert_str_eq(rx_state_to_string(RX_LOOKUP), "lookup");
    ck_assert_str_eq(rx_state_to_string(RX_CONNECT), "connect");
    ck_assert_str_eq(rx_state_to_string(RX_MOVING), "moving");
    ck_assert_str_eq(rx_state_to_string(RX_ENDED), "ended");
    ck_assert_str_eq(rx_state_to_string(RX__COUNT), "unknown");
    for (int t = 0; t < RX__COUNT; t++)
        ck_assert(!rx_state_edge_ok(RX_ENDED, (enum rx_state)t));
}
END_TEST

START_TEST(rxw_allows_exactly_the_documented_edges)
{
    static const struct {
        enum rxw_state from, to;
    } ok[] = {
        {RXW_IDLE, RXW_CREDIT},   {RXW_IDLE, RXW_MOVING},   {RXW_IDLE, RXW_DONE},
        {RXW_IDLE, RXW_CLOSED},   {RXW_CREDIT, RXW_MOVING}, {RXW_CREDIT, RXW_CLOSED},
        {RXW_MOVING, RXW_DONE},   {RXW_MOVING, RXW_NACKED}, {RXW_MOVING, RXW_CLOSED},
        {RXW_DONE, RXW_NACKED},   {RXW_DONE, RXW_CLOSED},   {RXW_NACKED, RXW_CLOSED},
    };
    for (int f = 0; f < RXW__COUNT; f++)
        for (int t = 0; t < RXW__COUNT; t++) {
            bool want = false;
            for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
                want |= ok[i].from == (enum rxw_state)f && ok[i].to == (enum rxw_state)t;
            ck_assert_msg(rxw_state_edge_ok((enum rxw_state)f, (enum rxw_state)t) == want,
                          "%s -> %s", rxw_state_to_string((enum rxw_state)f),
                          rxw_state_to_string((enum rxw_state)t));
        }
    ck_assert(!rxw_state_edge_ok(RXW__COUNT, RXW_CLOSED));
    ck_assert(!rxw_state_edge_ok(RXW_IDLE, RXW__COUNT));
    ck_assert_str_eq(rxw_state_to_string(RXW_CREDIT), "credit");
    ck_assert_str_eq(rxw_state_to_string(RXW_CLOSED), "closed");
    ck_assert_str_eq(rxw_state_to_string(RXW__COUNT), "unknown");
}
END_TEST

START_TEST(tx_allows_exactly_the_documented_edges)
{
    static const struct {
        enum tx_state from, to;
    } ok[] = {
        {TX_SEND_WAIT, TX_TABLE_WAIT}, {TX_SEND_WAIT, TX_REFETCH}, {TX_SEND_WAIT, TX_MOVING},
        {TX_SEND_WAIT, TX_FAILED},     {TX_TABLE_WAIT, TX_MOVING}, {TX_TABLE_WAIT, TX_FAILED},
        {TX_REFETCH, TX_MOVING},       {TX_REFETCH, TX_FAILED},    {TX_MOVING, TX_DONE},
        {TX_MOVING, TX_FAILED},
    };
    for (int f = 0; f < TX__COUNT; f++)
        for (int t = 0; t < TX__COUNT; t++) {
            bool want = false;
            for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
                want |= ok[i].from == (enum tx_state)f && ok[i].to == (enum tx_state)t;
            ck_assert_msg(tx_state_edge_ok((enum tx_state)f, (enum tx_state)t) == want,
                          "%s -> %s", tx_state_to_string((enum tx_state)f),
                          tx_state_to_string((enum tx_state)t));
        }
    ck_assert(!tx_state_edge_ok(TX__COUNT, TX_FAILED));
    ck_assert(!tx_state_edge_ok(TX_SEND_WAIT, TX__COUNT));
    ck_assert_str_eq(tx_state_to_string(TX_SEND_WAIT), "send_wait");
    ck_assert_str_eq(tx_state_to_string(TX_FAILED), "failed");
    ck_assert_str_eq(tx_state_to_string(TX__COUNT), "unknown");
}
END_TEST

START_TEST(xfer_allows_exactly_the_documented_edges)
{
    for (int f = 0; f < XFER__COUNT; f++)
        for (int t = 0; t < XFER__COUNT; t++) {
            bool want = (f == XFER_WAITING && t != XFER_WAITING) ||
                        (f == XFER_COPYING && (t == XFER_DONE || t == XFER_FAILED));
            ck_assert_msg(xfer_state_edge_ok((xfer_state_t)f, (xfer_state_t)t) == want,
                          "%s -> %s", xfer_state_to_string((xfer_state_t)f),
                          xfer_state_to_string((xfer_state_t)t));
        }
    ck_assert(!xfer_state_edge_ok(XFER__COUNT, XFER_DONE));
    ck_assert_str_eq(xfer_state_to_string(XFER_COPYING), "copying");
    ck_assert_str_eq(xfer_state_to_string(XFER__COUNT), "unknown");
}
END_TEST

START_TEST(require_in_release_logs_and_yields_false)
{
    unsetenv("KVF_FATAL_INVARIANTS");
    if (kvf_require_fatal())
        return; /* a KVF_DEBUG build: every failure is fatal (the next test covers it) */
    int evaluated = 0;
    ck_assert(KVF_REQUIRE(++evaluated == 1, "first"));
    ck_assert(!KVF_REQUIRE(++evaluated == 1, "second: %d", evaluated));
    ck_assert_int_eq(evaluated, 2); /* the condition runs once per use */
}
END_TEST

START_TEST(require_aborts_where_invariants_are_fatal)
{
    setenv("KVF_FATAL_INVARIANTS", "1", 1);
    ck_assert(kvf_require_fatal());
    (void)KVF_REQUIRE(1 + 1 == 3, "arithmetic");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("request_state");
    TCase *tc = tcase_create("rx");
    tcase_add_test(tc, rx_allows_exactly_the_documented_edges);
    tcase_add_test(tc, rx_states_have_names_and_ended_is_terminal);
    suite_add_tcase(s, tc);
    tc = tcase_create("rxw");
    tcase_add_test(tc, rxw_allows_exactly_the_documented_edges);
    suite_add_tcase(s, tc);
    tc = tcase_create("tx");
    tcase_add_test(tc, tx_allows_exactly_the_documented_edges);
    suite_add_tcase(s, tc);
    tc = tcase_create("xfer");
    tcase_add_test(tc, xfer_allows_exactly_the_documented_edges);
    suite_add_tcase(s, tc);
    tc = tcase_create("require");
    tcase_add_test(tc, require_in_release_logs_and_yields_false);
    tcase_add_test_raise_signal(tc, require_aborts_where_invariants_are_fatal, SIGABRT);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
