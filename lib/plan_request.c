/* plan_request.c: see plan_request.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_request.h"

void plan_ids_of(uint32_t n_groups, const uint32_t *counts, const uint32_t *ids,
                 struct plan_ids *ret)
{
    memset(ret, 0, sizeof *ret);
    const uint32_t *p = ids;
    for (uint32_t g = 0; g < n_groups && g < LAYOUT_MAX_GROUPS; g++) {
        ret->n[g] = counts[g];
        ret->ids[g] = counts[g] ? p : NULL;
        p += counts[g];
    }
}

void plan_ids_unknown(const struct layout *l, struct plan_ids *ret)
{
    memset(ret, 0, sizeof *ret);
    for (uint32_t g = 0; g < l->n_groups && g < LAYOUT_MAX_GROUPS; g++)
        ret->n[g] = l->groups[g].kind == GROUP_STATE ? 1 : PLAN_MAX_IDS;
}

struct plan_ids *plan_ctx_ids_new(const struct layout *ctx, uint32_t n_ctx)
{
    struct plan_ids *ids = calloc(n_ctx ? n_ctx : 1, sizeof *ids);
    for (uint32_t c = 0; ids && c < n_ctx; c++)
        plan_ids_unknown(&ctx[c], &ids[c]);
    return ids;
}

static kvf_error_t typed(int rc, const struct plan_error *perr, char *msg, size_t msglen)
{
    if (rc == 0)
        return KVF_OK;
    snprintf(msg, msglen, "%s", perr->message[0] ? perr->message : "planning failed");
    return perr->code != KVF_OK ? perr->code : KVF_E_INTERNAL;
}

kvf_error_t plan_request(const struct plan_input *in, struct plan *ret, char *msg, size_t msglen)
{
    struct plan_error perr;
    memset(&perr, 0, sizeof perr);
    return typed(plan_build(in, ret, &perr), &perr, msg, msglen);
}

kvf_error_t plan_request_marked(const struct plan_input *in, struct plan *ret,
                                struct plan_marks *marks, char *msg, size_t msglen)
{
    struct plan_error perr;
    memset(&perr, 0, sizeof perr);
    return typed(plan_marks_build(in, ret, marks, &perr), &perr, msg, msglen);
}

kvf_error_t plan_request_cached(struct plan_tcache *c, const uint64_t *who, uint32_t n_who,
                                const struct plan_input *in, struct plan *ret,
                                struct plan_tcache_entry **entry_ret, char *msg, size_t msglen)
{
    struct plan_error perr;
    bool hit;
    memset(&perr, 0, sizeof perr);
    *entry_ret = NULL;
    return typed(plan_tcache_plan(c, who, n_who, in, ret, entry_ret, &hit, &perr), &perr, msg,
                 msglen);
}

kvf_error_t plan_request_lookup(struct plan_tcache *c, const uint64_t *who, uint32_t n_who,
                                const struct plan_input *in,
                                struct plan_tcache_entry **entry_ret, char *msg, size_t msglen)
{
    struct plan_error perr;
    memset(&perr, 0, sizeof perr);
    int rc = plan_tcache_lookup(c, who, n_who, in, entry_ret, &perr);
    return typed(rc > 0 ? 0 : rc, &perr, msg, msglen);
}

kvf_error_t plan_request_writers(const struct plan_input *in, uint8_t *writers, char *msg,
                                 size_t msglen)
{
    struct plan_error perr;
    memset(&perr, 0, sizeof perr);
    return typed(plan_writers(in, writers, &perr), &perr, msg, msglen);
}

kvf_error_t plan_request_check(const struct plan_input *in, char *msg, size_t msglen)
{
    struct plan_error perr;
    memset(&perr, 0, sizeof perr);
    return typed(plan_check_request(in, &perr), &perr, msg, msglen);
}
