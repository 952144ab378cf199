/* plan_marks.c: where a streaming SEND's final layers end in each writer's extent (issue 28).
 * The canonical order puts layers first (plan_build.c), so the layers below any global id are
 * a prefix of every writer's extent; the marks say how long. Pure; thread-safe. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

#define ROW (LAYOUT_MAX_LAYERS + 1)

int plan_marks_build(const struct plan_input *in, struct plan *plan_ret, struct plan_marks *ret,
                     struct plan_error *err)
{
    struct plan_marks m = {.n_ctx = in ? in->n_ctx : 0};
    m.below = calloc((size_t)(m.n_ctx ? m.n_ctx : 1) * ROW, sizeof *m.below);
    if (!m.below) {
        plan_set_err(err, KVF_E_INTERNAL, COMPAT_OK, "out of memory while planning");
        return -ENOMEM;
    }
    for (size_t i = 0; i < (size_t)m.n_ctx * ROW; i++)
        m.below[i] = UINT64_MAX; /* not reached by a layer: filled from below */
    struct plan p;
    int rc = plan_build_marked(in, NULL, &p, NULL, &m, err);
    if (rc) {
        free(m.below);
        return rc;
    }
    for (uint32_t c = 0; c < m.n_ctx; c++) {
        uint64_t *b = m.below + (size_t)c * ROW;
        b[0] = 0;
        for (uint32_t l = 1; l < ROW; l++)
            if (b[l] == UINT64_MAX)
                b[l] = b[l - 1];
    }
    if (plan_ret)
        *plan_ret = p;
    else
        plan_done(&p);
    *ret = m;
    return 0;
}

uint64_t plan_marks_below(const struct plan_marks *m, uint32_t c, uint32_t layers_upto)
{
    if (!m || !m->below || c >= m->n_ctx)
        return 0;
    return m->below[(size_t)c * ROW + (layers_upto < ROW ? layers_upto : ROW - 1)];
}

void plan_marks_done(struct plan_marks *m)
{
    if (!m)
        return;
    free(m->below);
    memset(m, 0, sizeof *m);
}
