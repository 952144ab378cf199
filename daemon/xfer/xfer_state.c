/* xfer_state.c: the request state machine's names and its edges (xfer.h); transfers.c
 * sets states through them, check_request_state tests every edge. */
#include <stdbool.h>
#include <stdio.h>

#include "xfer.h"

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

void xfer_hold(struct xfer *x, kvf_error_t code, const char *msg)
{
    if (x->held.code != KVF_OK)
        return;
    x->held.code = code;
    snprintf(x->held.msg, sizeof x->held.msg, "%s", msg);
}
