/* frag_gen.h: the fragment path's generation side (frag_gen.c): the generation ranks' pools
 * registered with UCX, the gates, and the path's row (path.h). Loop thread only. */
#ifndef KVF_FRAG_GEN_H
#define KVF_FRAG_GEN_H

#include "engine_int.h"

/* A rank's host pools registered with UCX for the fragment path. */
struct fragreg {
    const struct reg_rank *rk; /* borrowed: dropped by frag_gen_rank_removed */
    uint32_t n;
    struct link_mreg *m[LAYOUT_MAX_POOLS];
    struct fragreg *next;
};

/* REGISTER of a generation rank with host pools: its pools registered with UCX (on failure its
 * requests take the bounce path, logged). */
void frag_gen_rank_registered(struct engine *e, struct reg_rank *rk);
/* Before the registry removes rk: its registration goes. */
void frag_gen_rank_removed(struct engine *e, struct reg_rank *rk);
/* engine_stop: every registration released. */
void frag_gen_free_all(struct engine *e);
/* The gates' verdict for a request of x under pl (counted by reason; *why, when not NULL, says
 * it). Part of the rule of path_choose (path.h). */
wire_path_t frag_gen_choose(struct engine *e, const struct xfer *x, const struct plan *pl,
                            const char **why);

#endif
