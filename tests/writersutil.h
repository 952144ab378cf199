/* writersutil.h: plan_writers (who writes, no copy program) against the writers of a plan that
 * plan_build made from the same input: with the input's context ids and without any, the set
 * must be exactly the plan's writers; so must plan_writers_of_shape's (what a refused reader's
 * writers are told from). For the matrix and writer suites. */
#ifndef KVF_WRITERSUTIL_H
#define KVF_WRITERSUTIL_H

#include <check.h>
#include <stdlib.h>

#include "plan.h"

static inline void wu_assert_writers(const struct plan_input *in, const struct plan *p,
                                     const char *what)
{
    uint8_t *want = calloc(in->n_ctx, 1), *got = calloc(in->n_ctx, 1);
    ck_assert_ptr_nonnull(want);
    ck_assert_ptr_nonnull(got);
    for (uint32_t w = 0; w < p->n_writers; w++) {
        ck_assert_uint_gt(p->writers[w].bytes, 0);
        want[p->writers[w].ctx_rank] = 1;
    }
    for (int pass = 0; pass < 3; pass++) {
        struct plan_input pin = *in;
        if (pass)
            pin.ctx_ids = NULL; /* the generation daemon's input */
        struct plan_error pe;
        memset(got, 0xff, in->n_ctx); /* every entry must be written */
        int rc = pass == 2 ? plan_writers_of_shape(&pin, got, &pe) : plan_writers(&pin, got, &pe);
        ck_assert_msg(rc == 0, "%s: %s", what, pe.message);
        for (uint32_t c = 0; c < in->n_ctx; c++)
            ck_assert_msg(got[c] == want[c], "%s (context ids %s): rank %u is %s by %s", what,
                          pass ? "unknown" : "known", c, got[c] ? "a writer" : "not a writer",
                          pass == 2 ? "plan_writers_of_shape" : "plan_writers");
    }
    free(want);
    free(got);
}

#endif
