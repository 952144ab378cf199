/* xfer_state.c: the request state machine's names and its edges (transfers.h); transfers.c
 * sets states through them, check_request_state tests every edge. */
#include <stdbool.h>

#include "transfers.h"

static const char *const state_names[XFER__COUNT] = {"waiting", "copying", "done", "failed"};

const char *xfer_state_to_string(xfer_state_t s)
{
    return (unsigned)s < XFER__COUNT ? state_names[s] : "unknown";
}

/* allowed[from][to] */
static const bool allowed[XFER__COUNT][XFER__COUNT] = {
    [XFER_WAITING] = {[XFER_COPYING] = true, [XFER_DONE] = true, [XFER_FAILED] = true},
    [XFER_COPYING] = {[XFER_DONE] = true, [XFER_FAILED] = true},
};

bool xfer_state_edge_ok(xfer_state_t from, xfer_state_t to)
{
    return (unsigned)from < XFER__COUNT && (unsigned)to < XFER__COUNT && allowed[from][to];
}
