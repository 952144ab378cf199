/* plan_check.c: what plan_build, plan_writers and a template's instantiation check of a
 * request before any run is emitted (plan.h plan_check_request): compatibility unless known, the
 * ids of both sides (count, range, duplicates, one slot per state group), the token count, the
 * attention-DP rank, declared aliasing. Beyond compatibility every check depends on id VALUES or
 * on the request alone, so it runs per request even when the plan's structure comes from a
 * template (plan_template.h). plan_check_shape is the part that decides who writes
 * (compatibility, the attention-DP rank). Pure; thread-safe. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan_internal.h"

#define set_err plan_set_err /* plan_internal.h: the one way to refuse */

int plan_set_err(struct plan_error *err, kvf_error_t code, compat_reason_t reason,
                 const char *fmt, ...)
{
    if (err) {
        err->code = code;
        err->reason = reason;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof(err->message), fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}

static int u32_cmp(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

/* Groups of at most this many items find duplicate ids with a bitmap on the stack (8 KiB, one
 * pass: this check runs per request, on every side, even on a template hit); larger ones sort a
 * copy. */
#define DUP_BITMAP_ITEMS 65536u

/* The first id of ids[0..n) (all < n_items) listed twice, or -1; -ENOMEM. */
static int64_t first_dup(const uint32_t *ids, uint32_t n, uint32_t n_items)
{
    if (n_items <= DUP_BITMAP_ITEMS) {
        uint64_t seen[DUP_BITMAP_ITEMS / 64];
        memset(seen, 0, ((n_items + 63) / 64) * sizeof *seen);
        for (uint32_t k = 0; k < n; k++) {
            uint64_t bit = 1ull << (ids[k] % 64);
            if (seen[ids[k] / 64] & bit)
                return ids[k];
            seen[ids[k] / 64] |= bit;
        }
        return -1;
    }
    uint32_t *s = malloc((size_t)n * sizeof(*s));
    if (!s)
        return -ENOMEM;
    memcpy(s, ids, (size_t)n * sizeof(*s));
    qsort(s, n, sizeof(*s), u32_cmp);
    int64_t dup = -1;
    for (uint32_t k = 1; k < n && dup < 0; k++)
        if (s[k] == s[k - 1])
            dup = s[k];
    free(s);
    return dup;
}

/* Limits on one side's item ids of one group. need_ids: ids must be present when n > 0. */
static int check_ids(struct plan_error *err, const char *side, uint32_t rank,
                     const struct layout_group *g, uint32_t n, const uint32_t *ids, bool need_ids)
{
    const char *what = g->kind == GROUP_STATE ? "slot" : "block";
    if (n > PLAN_MAX_IDS)
        return set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK,
                       "groups.%.*s: %s rank %" PRIu32 " sends %" PRIu32 " %s ids, limit %u",
                       LAYOUT_SHORT_MAX, g->name, side, rank, n, what, PLAN_MAX_IDS);
    if (!ids && !need_ids)
        return 0; /* context ids unknown here: only the count matters */
    if (g->kind == GROUP_STATE && n != 1)
        return set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK,
                       "groups.%.*s: %s rank %" PRIu32 " sends %" PRIu32
                       " slot ids, a state group takes exactly one",
                       LAYOUT_SHORT_MAX, g->name, side, rank, n);
    if (!ids && n > 0)
        return set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK,
                       "groups.%.*s: %s rank %" PRIu32 " gives %" PRIu32 " %s ids but no array",
                       LAYOUT_SHORT_MAX, g->name, side, rank, n, what);
    if (!ids)
        return 0;
    for (uint32_t k = 0; k < n; k++)
        if (ids[k] >= g->n_items)
            return set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK,
                           "groups.%.*s: %s rank %" PRIu32 " %s id %" PRIu32 " at %" PRIu32
                           " is out of range (%" PRIu32 " %ss)",
                           LAYOUT_SHORT_MAX, g->name, side, rank, what, ids[k], k, g->n_items, what);
    int64_t dup = n < 2 ? -1 : first_dup(ids, n, g->n_items);
    if (dup == -ENOMEM)
        return -ENOMEM;
    if (dup >= 0)
        return set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK,
                       "groups.%.*s: %s rank %" PRIu32 " lists %s id %" PRIu32 " twice",
                       LAYOUT_SHORT_MAX, g->name, side, rank, what, (uint32_t)dup);
    return 0;
}

/* An attention-DP context's KV lives on the DP rank that ran the request: without it the writers
 * are not known. */
static int check_dp_rank(const struct plan_input *in, struct plan_error *err)
{
    if (in->ctx[0].attention_dp &&
        (in->ctx_dp_rank < 0 || (uint32_t)in->ctx_dp_rank >= in->ctx[0].tp_size))
        return set_err(err, KVF_E_BAD_REQUEST, COMPAT_DP_RANK,
                       "attention-DP context (tp %" PRIu32 ") needs the DP rank that ran the "
                       "request, got %" PRId32,
                       in->ctx[0].tp_size, in->ctx_dp_rank);
    return 0;
}

static int check_request(const struct plan_input *in, struct plan_error *err)
{
    const struct layout *gen = in->gen;
    for (uint32_t g = 0; g < gen->n_groups; g++) {
        int rc = check_ids(err, "generation", layout_rank(gen), &gen->groups[g], in->gen_ids.n[g],
                           in->gen_ids.ids[g], true);
        if (rc)
            return rc;
    }
    for (uint32_t c = 0; in->ctx_ids && c < in->n_ctx; c++)
        for (uint32_t g = 0; g < in->ctx[c].n_groups; g++) {
            int rc = check_ids(err, "context", c, &in->ctx[c].groups[g], in->ctx_ids[c].n[g],
                               in->ctx_ids[c].ids[g], false);
            if (rc)
                return rc;
        }
    uint64_t gtb = gen->tokens_per_block, tok = in->tokens;
    if (tok > PLAN_MAX_TOKENS)
        return set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK,
                       "the request declares %" PRIu64 " tokens, limit %llu", tok,
                       (unsigned long long)PLAN_MAX_TOKENS);
    for (uint32_t g = 0; tok && in->ctx[0].tokens_per_block != gtb && g < gen->n_groups; g++)
        if (gen->groups[g].kind == GROUP_PAGED && in->gen_ids.n[g] > (tok + gtb - 1) / gtb)
            return set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK,
                           "groups.%.*s: generation rank %" PRIu32 " sends %" PRIu32
                           " blocks of %" PRIu64 " tokens, more than the request's %" PRIu64
                           " tokens fill",
                           LAYOUT_SHORT_MAX, gen->groups[g].name, layout_rank(gen),
                           in->gen_ids.n[g], gtb, tok);
    return check_dp_rank(in, err);
}

/* The input is complete and, unless the caller knows it, the layouts are compatible. */
static int check_layouts(const struct plan_input *in, struct plan_error *err)
{
    compat_reason_t reason;
    char msg[sizeof(err->message)];
    if (!in || !in->gen || !in->ctx || in->n_ctx == 0)
        return set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK, "plan input incomplete");
    if (!in->compat_known && compat_check(in->gen, in->ctx, in->n_ctx, &reason, msg, sizeof(msg)))
        return set_err(err, KVF_E_PEER_INCOMPATIBLE, reason, "%s", msg);
    return 0;
}

int plan_check_shape(const struct plan_input *in, struct plan_error *err)
{
    int rc = check_layouts(in, err);
    return rc ? rc : check_dp_rank(in, err);
}

int plan_check_request(const struct plan_input *in, struct plan_error *err)
{
    char msg[sizeof(err->message)];
    int rc = check_layouts(in, err);
    if (rc)
        return rc;
    rc = check_request(in, err);
    if (rc)
        return rc;
    rc = plan_alias_check(in->gen, &in->gen_ids, msg, sizeof(msg));
    if (rc == -ENOMEM)
        return set_err(err, KVF_E_INTERNAL, COMPAT_OK, "out of memory while planning"), -ENOMEM;
    if (rc)
        return set_err(err, KVF_E_BAD_REQUEST, COMPAT_OK, "%s", msg);
    return 0;
}
