/* kvferryctl_plan.c: `kvferryctl plan --ctx SPEC --gen SPEC [--gen-rank N | --all-ranks]
 * [--prompt-tokens N] [--gen-cached-tokens N] [--ctx-dp-rank N] [--json]`.
 * Works offline: both instances come from preset specs (preset.h), the request is
 * ceil(prompt / tpb) context blocks 0..n_ctx-1 (the context's tpb), n_gen = ceil(prompt / tpb) -
 * cached / tpb generation blocks 0..n_gen-1 (the generation's tpb), slot 0 in every state group. Output: a table, or with --json exactly
 *   {"ok":true,"gen_rank":N,"total_bytes":B,"state_bytes":S,"kv_bytes":K,
 *    "writers":[{"ctx_rank":R,"bytes":B,"copy_ops":C},...]}
 * (a JSON list of those with --all-ranks), or on refusal
 *   {"ok":false,"error":"PEER_INCOMPATIBLE","reason":"...","message":"..."}.
 * Exit 0 ok, 1 usage error (bad option or spec), 2 the plan was refused. */
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvferryctl_plan.h"
#include "plan.h"
#include "preset.h"

#define PROMPT_DEFAULT 8192

struct opts {
    const char *ctx, *gen;
    int64_t gen_rank;
    bool all, json;
    uint64_t prompt, cached;
    int64_t dp;
};

static void usage(FILE *f)
{
    fprintf(f, "usage: kvferryctl plan --ctx SPEC --gen SPEC [--gen-rank N | --all-ranks]\n"
               "                      [--prompt-tokens N] [--gen-cached-tokens N]\n"
               "                      [--ctx-dp-rank N] [--json]\n"
               "  SPEC: MODEL[:key=value,...], e.g. kimi-k3:tp=4,adp=0 (models:");
    for (int i = 0; preset_models[i]; i++)
        fprintf(f, " %s", preset_models[i]);
    fprintf(f, ")\n  --prompt-tokens defaults to %d; --ctx-dp-rank is required for an "
               "attention-DP context.\n", PROMPT_DEFAULT);
}

static int num(const char *opt, const char *s, uint64_t max, uint64_t *ret)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s ? s : "", &end, 10);
    if (!s || !*s || *end || errno || s[0] == '-' || v > max) {
        fprintf(stderr, "kvferryctl plan: %s: \"%s\" is not a number in 0..%" PRIu64 "\n", opt,
                s ? s : "", max);
        return -1;
    }
    *ret = v;
    return 0;
}

static int parse(int argc, char **argv, struct opts *o)
{
    *o = (struct opts){.gen_rank = 0, .prompt = PROMPT_DEFAULT, .dp = -1};
    bool have_rank = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        uint64_t n;
        if (strcmp(a, "--json") == 0) {
            o->json = true;
        } else if (strcmp(a, "--all-ranks") == 0) {
            o->all = true;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        } else if (strcmp(a, "--ctx") == 0 || strcmp(a, "--gen") == 0) {
            if (!v) {
                fprintf(stderr, "kvferryctl plan: %s needs a spec\n", a);
                return -1;
            }
            *(a[2] == 'c' ? &o->ctx : &o->gen) = v;
            i++;
        } else if (strcmp(a, "--gen-rank") == 0 || strcmp(a, "--ctx-dp-rank") == 0) {
            if (num(a, v, LAYOUT_MAX_TP * LAYOUT_MAX_PP, &n))
                return -1;
            if (a[2] == 'g') {
                o->gen_rank = (int64_t)n;
                have_rank = true;
            } else {
                o->dp = (int64_t)n;
            }
            i++;
        } else if (strcmp(a, "--prompt-tokens") == 0 || strcmp(a, "--gen-cached-tokens") == 0) {
            if (num(a, v, (uint64_t)PLAN_MAX_IDS * 65536, &n))
                return -1;
            *(a[2] == 'p' ? &o->prompt : &o->cached) = n;
            i++;
        } else {
            fprintf(stderr, "kvferryctl plan: unknown option \"%s\"\n", a);
            usage(stderr);
            return -1;
        }
    }
    if (!o->ctx || !o->gen) {
        fprintf(stderr, "kvferryctl plan: --ctx and --gen are required\n");
        usage(stderr);
        return -1;
    }
    if (o->all && have_rank) {
        fprintf(stderr, "kvferryctl plan: --gen-rank and --all-ranks exclude each other\n");
        return -1;
    }
    if (o->cached > o->prompt) {
        fprintf(stderr, "kvferryctl plan: --gen-cached-tokens %" PRIu64 " exceeds --prompt-tokens %"
                PRIu64 "\n", o->cached, o->prompt);
        return -1;
    }
    return 0;
}

struct inst {
    struct preset_spec spec;
    uint32_t n;
    struct layout *ranks; /* owned */
};

static int build(const char *spec, layout_role_t role, struct inst *ret)
{
    char err[512];
    if (preset_parse(spec, &ret->spec, err, sizeof(err)) == 0) {
        ret->n = preset_n_ranks(&ret->spec);
        ret->ranks = calloc(ret->n, sizeof(*ret->ranks));
        if (ret->ranks && preset_build(&ret->spec, role == ROLE_CONTEXT ? "ctx" : "gen", role, -1,
                                       ret->ranks, err, sizeof(err)) == 0)
            return 0;
        if (!ret->ranks)
            snprintf(err, sizeof(err), "out of memory");
    }
    fprintf(stderr, "kvferryctl plan: %s spec \"%s\": %s\n",
            role == ROLE_CONTEXT ? "--ctx" : "--gen", spec, err);
    return -1;
}

static json_t *plan_json(const struct plan *p)
{
    json_t *ws = json_array();
    for (uint32_t w = 0; w < p->n_writers; w++)
        json_array_append_new(ws, json_pack("{s:I,s:I,s:I}", "ctx_rank",
                                            (json_int_t)p->writers[w].ctx_rank, "bytes",
                                            (json_int_t)p->writers[w].bytes, "copy_ops",
                                            (json_int_t)p->writers[w].n_ops));
    return json_pack("{s:b,s:I,s:I,s:I,s:I,s:o}", "ok", 1, "gen_rank", (json_int_t)p->gen_rank,
                     "total_bytes", (json_int_t)p->total_bytes, "state_bytes",
                     (json_int_t)p->state_bytes, "kv_bytes", (json_int_t)p->kv_bytes, "writers", ws);
}

static void print_table(const struct plan *p)
{
    printf("generation rank %" PRIu32 ": %" PRIu64 " bytes (state %" PRIu64 ", kv %" PRIu64
           "), %" PRIu32 " writer%s\n",
           p->gen_rank, p->total_bytes, p->state_bytes, p->kv_bytes, p->n_writers,
           p->n_writers == 1 ? "" : "s");
    printf("  %8s %14s %14s %14s %9s\n", "ctx_rank", "bytes", "state_bytes", "kv_bytes",
           "copy_ops");
    for (uint32_t w = 0; w < p->n_writers; w++) {
        const struct plan_writer *wr = &p->writers[w];
        printf("  %8" PRIu32 " %14" PRIu64 " %14" PRIu64 " %14" PRIu64 " %9" PRIu32 "\n",
               wr->ctx_rank, wr->bytes, wr->state_bytes, wr->kv_bytes, wr->n_ops);
    }
}

static void print_error(const struct opts *o, const struct plan_error *pe)
{
    /* a reason code where there is one (every PEER_INCOMPATIBLE; BAD_REQUEST dp_rank) */
    bool has_reason = pe->reason != COMPAT_OK;
    if (o->json) {
        json_t *j = json_pack("{s:b,s:s,s:s,s:s}", "ok", 0, "error", kvf_error_to_string(pe->code),
                              "reason", has_reason ? compat_reason_to_string(pe->reason) : "",
                              "message", pe->message);
        char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", s);
        free(s);
        json_decref(j);
    } else {
        fprintf(stderr, "kvferryctl plan: %s%s%s%s: %s\n", kvf_error_to_string(pe->code),
                has_reason ? " (" : "", has_reason ? compat_reason_to_string(pe->reason) : "",
                has_reason ? ")" : "", pe->message);
    }
}

int ctl_plan_main(int argc, char **argv)
{
    struct opts o;
    struct inst c = {0}, g = {0};
    int rc = 1;
    if (parse(argc, argv, &o) || build(o.ctx, ROLE_CONTEXT, &c) || build(o.gen, ROLE_GENERATION, &g))
        goto out;
    if (!o.all && (uint64_t)o.gen_rank >= g.n) {
        fprintf(stderr, "kvferryctl plan: --gen-rank %" PRId64 " but the generation instance has %"
                PRIu32 " ranks\n", o.gen_rank, g.n);
        goto out;
    }
    /* each side in its own block size (they may differ: DESIGN §4 rule 10) */
    uint32_t tpb = g.ranks[0].tokens_per_block ? g.ranks[0].tokens_per_block : 1;
    uint32_t ctpb = c.ranks[0].tokens_per_block ? c.ranks[0].tokens_per_block : 1;
    uint64_t n_ctx = (o.prompt + ctpb - 1) / ctpb;
    uint64_t n_gen = (o.prompt + tpb - 1) / tpb - o.cached / tpb;
    if (n_ctx > PLAN_MAX_IDS || n_gen > PLAN_MAX_IDS) {
        fprintf(stderr, "kvferryctl plan: %" PRIu64 " blocks exceed the limit of %u\n", n_ctx,
                PLAN_MAX_IDS);
        goto out;
    }
    uint64_t n_ids = n_ctx > n_gen ? n_ctx : n_gen;
    uint32_t *blocks = malloc((n_ids ? n_ids : 1) * sizeof(uint32_t)), slot = 0;
    struct plan_ids *cids = calloc(c.n, sizeof(*cids));
    json_t *all = json_array();
    rc = 2;
    if (!blocks || !cids)
        goto out_free;
    for (uint64_t i = 0; i < n_ids; i++)
        blocks[i] = (uint32_t)i;
    for (uint32_t r = 0; r < c.n; r++)
        for (uint32_t gi = 0; gi < c.ranks[r].n_groups; gi++) {
            bool st = c.ranks[r].groups[gi].kind == GROUP_STATE;
            cids[r].n[gi] = st ? 1 : (uint32_t)n_ctx;
            cids[r].ids[gi] = st ? &slot : blocks;
        }
    uint32_t lo = o.all ? 0 : (uint32_t)o.gen_rank, hi = o.all ? g.n : lo + 1;
    for (uint32_t r = lo; r < hi; r++) {
        struct plan_input in = {.gen = &g.ranks[r], .ctx = c.ranks, .n_ctx = c.n, .ctx_ids = cids,
                                .ctx_dp_rank = (int32_t)o.dp};
        for (uint32_t gi = 0; gi < g.ranks[r].n_groups; gi++) {
            bool st = g.ranks[r].groups[gi].kind == GROUP_STATE;
            in.gen_ids.n[gi] = st ? 1 : (uint32_t)n_gen;
            in.gen_ids.ids[gi] = st ? &slot : blocks;
        }
        struct plan p;
        struct plan_error pe;
        if (plan_build(&in, &p, &pe)) {
            print_error(&o, &pe);
            goto out_free;
        }
        if (o.json)
            json_array_append_new(all, plan_json(&p));
        else
            print_table(&p);
        plan_done(&p);
    }
    if (o.json) {
        char *s = json_dumps(o.all ? all : json_array_get(all, 0), JSON_COMPACT | JSON_PRESERVE_ORDER);
        printf("%s\n", s);
        free(s);
    }
    rc = 0;
out_free:
    json_decref(all);
    free(blocks);
    free(cids);
out:
    free(c.ranks);
    free(g.ranks);
    return rc;
}
