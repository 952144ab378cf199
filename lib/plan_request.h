/* plan_request.h: planning one request against a context instance's table, the one way every
 * caller in the daemon does it (the local path, the generation side, the context side, local
 * writers of a spread instance): the item ids a worker sent as plan_ids, context ranks whose ids
 * this daemon does not know, and plan_build's failure as a typed error with its message.
 * Pure; any thread. */
#ifndef KVF_PLAN_REQUEST_H
#define KVF_PLAN_REQUEST_H

#include <stddef.h>
#include <stdint.h>

#include "plan.h"
#include "plan_tcache.h"

/* The ids of a request as a rank sent them (counts[g] ids for group g, group after group) as
 * plan_ids borrowing ids; a group without ids gets NULL. */
void plan_ids_of(uint32_t n_groups, const uint32_t *counts, const uint32_t *ids,
                 struct plan_ids *ret);
/* A context rank whose ids are not known here: one slot per state group and a block count that
 * never limits (PLAN_MAX_IDS); the source offsets of its ops stay unresolved. */
void plan_ids_unknown(const struct layout *l, struct plan_ids *ret);
/* Context ids for a table of n_ctx ranks, each unknown (plan_ids_unknown) until the caller sets
 * the ones it knows. NULL when out of memory; free() it. */
struct plan_ids *plan_ctx_ids_new(const struct layout *ctx, uint32_t n_ctx);
/* plan_build, its failure as a typed error: KVF_OK and *ret (free with plan_done), or
 * PEER_INCOMPATIBLE / BAD_REQUEST / INTERNAL with the reason in msg. */
kvf_error_t plan_request(const struct plan_input *in, struct plan *ret, char *msg, size_t msglen);
/* plan_marks_build (a streaming request's plan and its marks, plan.h), typed as plan_request. */
kvf_error_t plan_request_marked(const struct plan_input *in, struct plan *ret,
                                struct plan_marks *marks, char *msg, size_t msglen);
/* plan_tcache_plan (the plan from the template of (who, shape), or built and kept), its
 * failure typed as plan_request's; *entry_ret as plan_tcache_plan gives it. */
kvf_error_t plan_request_cached(struct plan_tcache *c, const uint64_t *who, uint32_t n_who,
                                const struct plan_input *in, struct plan *ret,
                                struct plan_tcache_entry **entry_ret, char *msg, size_t msglen);
/* plan_tcache_lookup typed as plan_request's: KVF_OK with *entry_ret the template hit (the
 * request checked, no plan made) or NULL (no template: plan_request_cached builds one), or the
 * refusal with msg. */
kvf_error_t plan_request_lookup(struct plan_tcache *c, const uint64_t *who, uint32_t n_who,
                                const struct plan_input *in,
                                struct plan_tcache_entry **entry_ret, char *msg, size_t msglen);
/* plan_writers (who writes, no copy program; writers: n_ctx entries), its failure typed as
 * plan_request's. */
kvf_error_t plan_request_writers(const struct plan_input *in, uint8_t *writers, char *msg,
                                 size_t msglen);
/* plan_check_request, its failure typed as plan_request's. */
kvf_error_t plan_request_check(const struct plan_input *in, char *msg, size_t msglen);

#endif
