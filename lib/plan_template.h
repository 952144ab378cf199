/* plan_template.h: a plan's structure kept for every request of the same shape, so that a
 * request is planned by substituting its item ids instead of walking the layouts again
 * (docs/PLANNING.md "Templates").
 *
 * What fixes a plan's structure: the two layouts, and of the request its shape
 * (plan_template_shape): the generation's item count per group, per context rank whether its
 * ids are known and their counts, the context DP rank, and the token count where block sizes
 * differ (token mode; else it is not used). The ids' VALUES only move runs: every run of
 * plan_build lies inside one generation item's region and one context item's region, at
 * `region base + id * item_stride + a part no id changes`. A template's build emits
 * plan_build's runs tagged with their items and merges runs only within one tag (plan_build
 * also merges across items whose ids happen to be adjacent: the same bytes in fewer ops), so
 * its ops never depend on the ids' values. Checked once per template: compatibility, the
 * coverage check (on its first request), that every op lies inside its tagged regions. Per
 * request: plan_check_request (ids in range, no duplicates, one slot per state group, tokens,
 * DP rank, aliasing) and the substitution, O(ops). Pure; thread-safe on data the caller owns. */
#ifndef KVF_PLAN_TEMPLATE_H
#define KVF_PLAN_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "copy.h"
#include "plan.h"

struct plan_tag;

/* One region of a layout a template addresses: item i lies in `pool` at base + i * istride. */
struct plan_treg {
    uint32_t pool, group;
    uint64_t base, istride, bytes, n_items;
};

struct plan_template {
    struct plan plan;            /* ops at item 0 (offsets without the id term); owned */
    struct plan_tag **tags;      /* per writer, one per op; owned */
    struct plan_treg *gen_regs;  /* the generation layout's regions; owned */
    struct plan_treg **ctx_regs; /* per context rank, or NULL (not a writer); owned */
    uint32_t n_ctx;
    uint64_t *shape;             /* plan_template_shape of its first request; owned */
    uint32_t n_shape;
    size_t bytes;                /* memory held, for a cache's bound */
};

/* The shape of in's request (see above) as words: 0 or -ENOMEM; *ret owned (free()). */
int plan_template_shape(const struct plan_input *in, uint64_t **ret, uint32_t *n_ret);

/* Builds the template of in's request and, in *first, that request's plan (checked as
 * plan_build checks it; free with plan_done). 0, or plan_build's refusal in *err (-EINVAL /
 * -ENOMEM); nothing is kept on failure. */
int plan_template_build(const struct plan_input *in, struct plan_template *ret, struct plan *first,
                        struct plan_error *err);

/* The plan of in's request from template t, whose shape in must have (else BAD_REQUEST: a
 * caller's keying error, never a wrong plan). Runs plan_check_request (compatibility taken as
 * known: t was built against the same layouts, which the caller's key guarantees) and
 * substitutes the ids. 0 and *ret (plan_done), or -EINVAL / -ENOMEM with *err. */
int plan_template_instantiate(const struct plan_template *t, const struct plan_input *in,
                              struct plan *ret, struct plan_error *err);

/* The plan of in's request from t with no checks at all: in must be of t's shape and have
 * passed plan_check_request (plan_tcache_lookup found t and ran it). The ids substituted and
 * the ops folded, as plan_template_instantiate gives them. 0 and *ret (plan_done), -ENOMEM. */
int plan_template_substitute(const struct plan_template *t, const struct plan_input *in,
                             struct plan *ret);

/* Does writer w's program stay inside mem (side 's' its context rank's pools, 'd' the
 * generation's) for EVERY id in range? Each op lies inside its tagged region, so it is enough
 * that the last item's region of each region it uses ends inside its pool. Together with
 * copy_check of one instantiation (what no id changes: ext tiling, lengths), copy_check holds
 * for every instantiation. 0 or -ERANGE. */
int plan_template_fits(const struct plan_template *t, uint32_t w, const struct copy_mem *mem,
                       char side);

void plan_template_done(struct plan_template *t);

#endif
