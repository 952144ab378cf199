/* kvferryctl_plan.c: `kvferryctl plan (--ctx SPEC | --ctx-layout FILE...) (--gen SPEC |
 * --gen-layout FILE) [--gen-rank N | --all-ranks] [--prompt-tokens N] [--gen-cached-tokens N]
 * [--ctx-dp-rank N] [--json]`.
 * Works offline: each instance comes from a preset spec (preset.h) or from layout files (one per
 * context rank, in any order; one generation rank), the request is
 * ceil(prompt / tpb) context blocks 0..n_ctx-1 (the context's tpb), n_gen = ceil(prompt / tpb) -
 * cached / tpb generation blocks 0..n_gen-1 (the generation's tpb), slot n_items - 1 - k in the
 * k-th state group (clear of the blocks, so aliased layouts plan too). Output: a table, or with
 * --json exactly
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

#include "kvferryctl_layout.h"
#include "kvferryctl_plan.h"
#include "plan.h"
#include "preset.h"

#define PROMPT_DEFAULT 8192

struct opts {
    const char *ctx, *gen;
    char **ctx_files;     /* argv entries, n_ctx_files of them */
    int n_ctx_files;
    const char *gen_file;
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
               "       --ctx-layout FILE... in place of --ctx (one file per context rank),\n"
               "       --gen-layout FILE in place of --gen (the generation rank it holds)\n"
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
        } else if (strcmp(a, "--ctx-layout") == 0) {
            o->ctx_files = &argv[i + 1];
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
                o->n_ctx_files++;
                i++;
            }
            if (!o->n_ctx_files) {
                fprintf(stderr, "kvferryctl plan: --ctx-layout needs files\n");
                return -1;
            }
        } else if (strcmp(a, "--gen-layout") == 0) {
            if (!v) {
                fprintf(stderr, "kvferryctl plan: --gen-layout needs a file\n");
                return -1;
            }
            o->gen_file = v;
            i++;
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
    if (!o->ctx == !o->n_ctx_files || !o->gen == !o->gen_file) {
        fprintf(stderr, "kvferryctl plan: one of --ctx / --ctx-layout and one of --gen / "
                        "--gen-layout are required\n");
        usage(stderr);
        return -1;
    }
    if (o->gen_file && (o->all || have_rank)) {
        fprintf(stderr, "kvferryctl plan: --gen-layout plans the rank its file holds (no "
                        "--gen-rank / --all-ranks)\n");
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

/* The context table from one file per rank, placed by layout_rank. */
static int load_ctx(char **files, int n_files, struct inst *ret)
{
    char err[512];
    struct layout *l = malloc(sizeof(*l));
    int rc = -1;
    for (int i = 0; l && i < n_files; i++) {
        if (ctl_layout_load(files[i], l, err, sizeof(err))) {
            fprintf(stderr, "kvferryctl plan: --ctx-layout %s: %s\n", files[i], err);
            goto out;
        }
        if (!ret->ranks) {
            ret->n = l->tp_size * l->pp_size;
            ret->ranks = calloc(ret->n, sizeof(*ret->ranks));
            if (!ret->ranks)
                break;
        }
        uint32_t r = layout_rank(l);
        if (l->tp_size * l->pp_size != ret->n || strcmp(l->instance, ret->ranks[0].instance[0]
                                                                         ? ret->ranks[0].instance
                                                                         : l->instance)) {
            fprintf(stderr, "kvferryctl plan: --ctx-layout %s: instance %s tp %u x pp %u differs "
                            "from the files before it\n",
                    files[i], l->instance, l->tp_size, l->pp_size);
            goto out;
        }
        if (ret->ranks[r].instance[0]) {
            fprintf(stderr, "kvferryctl plan: --ctx-layout %s: rank %u given twice\n", files[i], r);
            goto out;
        }
        ret->ranks[r] = *l;
    }
    if (!l || !ret->ranks) {
        fprintf(stderr, "kvferryctl plan: out of memory\n");
        goto out;
    }
    for (uint32_t r = 0; r < ret->n; r++)
        if (!ret->ranks[r].instance[0]) {
            fprintf(stderr, "kvferryctl plan: --ctx-layout: no file for context rank %u of %u\n",
                    r, ret->n);
            goto out;
        }
    rc = 0;
out:
    free(l);
    return rc;
}

static int load_gen(const char *file, struct inst *ret)
{
    char err[512];
    ret->n = 1;
    ret->ranks = calloc(1, sizeof(*ret->ranks));
    if (!ret->ranks || ctl_layout_load(file, ret->ranks, err, sizeof(err))) {
        fprintf(stderr, "kvferryctl plan: --gen-layout %s: %s\n", file,
                ret->ranks ? err : "out of memory");
        return -1;
    }
    return 0;
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

/* Blocks 0..n-1 in every paged group; slot n_items - 1 - k in the k-th state group (slots[]
 * is scratch of LAYOUT_MAX_GROUPS entries, one per group). */
static void set_ids(const struct layout *l, const uint32_t *blocks, uint32_t n, uint32_t *slots,
                    struct plan_ids *ret)
{
    uint32_t k = 0;
    for (uint32_t gi = 0; gi < l->n_groups; gi++) {
        const struct layout_group *gr = &l->groups[gi];
        bool st = gr->kind == GROUP_STATE;
        if (st)
            slots[gi] = gr->n_items - 1 - k++ % gr->n_items;
        ret->n[gi] = st ? 1 : n;
        ret->ids[gi] = st ? &slots[gi] : blocks;
    }
}

int ctl_plan_main(int argc, char **argv)
{
    struct opts o;
    struct inst c = {0}, g = {0};
    int rc = 1;
    if (parse(argc, argv, &o) ||
        (o.ctx ? build(o.ctx, ROLE_CONTEXT, &c) : load_ctx(o.ctx_files, o.n_ctx_files, &c)) ||
        (o.gen ? build(o.gen, ROLE_GENERATION, &g) : load_gen(o.gen_file, &g)))
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
    uint32_t *blocks = malloc((n_ids ? n_ids : 1) * sizeof(uint32_t)), slots[LAYOUT_MAX_GROUPS];
    struct plan_ids *cids = calloc(c.n, sizeof(*cids));
    json_t *all = json_array();
    rc = 2;
    if (!blocks || !cids)
        goto out_free;
    for (uint64_t i = 0; i < n_ids; i++)
        blocks[i] = (uint32_t)i;
    for (uint32_t r = 0; r < c.n; r++)
        set_ids(&c.ranks[r], blocks, (uint32_t)n_ctx, slots, &cids[r]);
    uint32_t lo = o.all ? 0 : (uint32_t)o.gen_rank, hi = o.all ? g.n : lo + 1;
    for (uint32_t r = lo; r < hi; r++) {
        struct plan_input in = {.gen = &g.ranks[r], .ctx = c.ranks, .n_ctx = c.n, .ctx_ids = cids,
                                .ctx_dp_rank = (int32_t)o.dp};
        set_ids(&g.ranks[r], blocks, (uint32_t)n_gen, slots, &in.gen_ids);
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
