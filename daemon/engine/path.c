/* path.c: the table of paths and the one rule that picks a request's (path.h). */
#include "path.h"

#include "frag_gen.h"
#include "engine_gen.h"
#include "engine_tab.h"
#include "registry.h"
#include "xfer.h"

extern const struct path_row path_local_row;  /* path_local.c */
extern const struct path_row path_bounce_row; /* path_bounce.c */
extern const struct path_row path_frag_row;   /* frag_gen.c */

const struct path_row *path_rows[PATH__COUNT] = {
    [PATH_LOCAL] = &path_local_row,
    [PATH_BOUNCE] = &path_bounce_row,
    [PATH_FRAGMENT] = &path_frag_row,
};

const struct path_row *path_of(path_kind_t k)
{
    return (unsigned)k < PATH__COUNT ? path_rows[k] : path_rows[PATH_BOUNCE];
}

const struct path_row *path_of_wire(wire_path_t w)
{
    return w == WIRE_PATH_FRAGMENT ? path_rows[PATH_FRAGMENT] : path_rows[PATH_BOUNCE];
}

static bool layout_on_gpu(const struct layout *l)
{
    for (uint32_t i = 0; i < l->n_pools; i++)
        if (l->pools[i].kind == POOL_CUDA && l->pools[i].bytes > 0)
            return true;
    return false;
}

/* Must the request take the bounce path because GPU pools are on either side? (counted) */
static bool gpu_pools(struct engine *e, const struct xfer *x, const struct itable *tab,
                      const struct plan *pl)
{
    bool gpu = x->rank->gpu != NULL;
    for (uint32_t w = 0; w < pl->n_writers && !gpu; w++)
        if (pl->writers[w].ctx_rank < tab->n)
            gpu = layout_on_gpu(&tab->ranks[pl->writers[w].ctx_rank]);
    if (gpu) /* UCX here reaches host memory only: the fragment path cannot read or write them */
        e->c.path_bounce_gpu_pools++;
    return gpu;
}

const struct path_row *path_choose(struct engine *e, const struct xfer *x, const struct itable *tab,
                                   const struct plan *pl, const char **why)
{
    if (pl->n_writers == 0) {
        *why = "nothing to move";
        return path_rows[PATH_BOUNCE];
    }
    if (gpu_pools(e, x, tab, pl)) { /* counted: path_bounce_gpu_pools */
        *why = "GPU pools on either side: UCX here reaches host memory only";
        return path_rows[PATH_BOUNCE];
    }
    return path_of_wire(frag_gen_choose(e, x, pl, why)); /* the gates, counted by reason */
}
