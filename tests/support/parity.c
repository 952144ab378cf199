/* parity.c: the bitwise parity harness of check_plan*.c (declared, with what each does, in
 * tests/parity.h). Built once into libkvferry-testsupport.a, linked into every test. */
#include "parity.h"

uint64_t par_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

int par_side_init(struct par_side *s, const char *spec, layout_role_t role, uint32_t n_blocks,
                  uint64_t *rng, char *err, size_t errlen)
{
    memset(s, 0, sizeof(*s));
    if (preset_parse(spec, &s->spec, err, errlen))
        return -1;
    s->n = preset_n_ranks(&s->spec);
    s->ranks = calloc(s->n, sizeof(*s->ranks));
    s->mem = calloc(s->n, sizeof(*s->mem));
    s->ids = calloc(s->n, sizeof(*s->ids));
    s->idstore = calloc((size_t)s->n * LAYOUT_MAX_GROUPS * (n_blocks + 1), sizeof(uint32_t));
    if (!s->ranks || !s->mem || !s->ids || !s->idstore)
        return -1;
    if (preset_build(&s->spec, role == ROLE_CONTEXT ? "ctx" : "gen", role, -1, s->ranks, err,
                     errlen))
        return -1;
    uint32_t *next = s->idstore;
    for (uint32_t r = 0; r < s->n; r++) {
        const struct layout *l = &s->ranks[r];
        s->mem[r].n = l->n_pools;
        for (uint32_t p = 0; p < l->n_pools; p++) {
            s->mem[r].size[p] = l->pools[p].bytes;
            s->mem[r].base[p] = malloc(l->pools[p].bytes ? l->pools[p].bytes : 1);
            if (!s->mem[r].base[p])
                return -1;
            memset(s->mem[r].base[p], 0x5a, l->pools[p].bytes);
        }
        for (uint32_t g = 0; g < l->n_groups; g++) {
            const struct layout_group *gr = &l->groups[g];
            uint32_t n = gr->kind == GROUP_STATE ? 1 : n_blocks;
            ck_assert_uint_le(n, gr->n_items);
            /* distinct random ids: partial Fisher-Yates over [0, n_items) */
            uint32_t *all = malloc((size_t)gr->n_items * sizeof(uint32_t));
            ck_assert_ptr_nonnull(all);
            for (uint32_t i = 0; i < gr->n_items; i++)
                all[i] = i;
            for (uint32_t i = 0; i < n; i++) {
                uint32_t j = i + (uint32_t)(par_rand(rng) % (gr->n_items - i));
                uint32_t t = all[i];
                all[i] = all[j];
                all[j] = t;
                next[i] = all[i];
            }
            free(all);
            s->ids[r].n[g] = n;
            s->ids[r].ids[g] = next;
            next += n;
        }
    }
    return 0;
}

void par_side_free(struct par_side *s)
{
    for (uint32_t r = 0; s->mem && r < s->n; r++)
        for (uint32_t p = 0; p < s->mem[r].n; p++)
            free(s->mem[r].base[p]);
    free(s->ranks);
    free(s->mem);
    free(s->ids);
    free(s->idstore);
    memset(s, 0, sizeof(*s));
}

void par_poison(struct copy_mem *m)
{
    for (uint32_t p = 0; p < m->n; p++)
        memset(m->base[p], PAR_POISON, m->size[p]);
}

/* par_expected for a prompt of `tokens` tokens (0: whole blocks). */
static void expected_tokens(const struct layout *l, const struct copy_mem *m,
                            const struct plan_ids *ids, uint32_t first_block, uint64_t seed,
                            uint64_t tokens, struct copy_mem *ret)
{
    ret->n = m->n;
    for (uint32_t p = 0; p < m->n; p++) {
        ret->size[p] = m->size[p];
        ret->base[p] = malloc(m->size[p] ? m->size[p] : 1);
        ck_assert_ptr_nonnull(ret->base[p]);
        memset(ret->base[p], PAR_POISON, m->size[p]);
    }
    pattern_fill_tokens(l, ret, ids, first_block, seed, tokens);
}

void par_expected(const struct layout *l, const struct copy_mem *m, const struct plan_ids *ids,
                  uint32_t first_block, uint64_t seed, struct copy_mem *ret)
{
    expected_tokens(l, m, ids, first_block, seed, 0, ret);
}

void par_mem_free(struct copy_mem *m)
{
    for (uint32_t p = 0; p < m->n; p++)
        free(m->base[p]);
    m->n = 0;
}

static void assert_equal_tokens(const struct copy_mem *got, const struct copy_mem *want,
                                const struct layout *l, const struct plan_ids *ids,
                                uint32_t first_block, uint64_t seed, uint64_t tokens,
                                const char *what)
{
    char where[256] = "";
    uint32_t bp = 0;
    uint64_t bo = 0;
    int v = pattern_verify_tokens(l, got, ids, first_block, seed, tokens, &bp, &bo, where,
                                  sizeof(where));
    ck_assert_msg(v == 0, "%s: gen rank %u: pattern differs at pool %u offset %" PRIu64 ": %s",
                  what, layout_rank(l), bp, bo, where);
    for (uint32_t p = 0; p < got->n; p++)
        ck_assert_msg(memcmp(got->base[p], want->base[p], got->size[p]) == 0,
                      "%s: gen rank %u pool %u: bytes outside the request changed", what,
                      layout_rank(l), p);
}

void par_assert_equal(const struct copy_mem *got, const struct copy_mem *want,
                      const struct layout *l, const struct plan_ids *ids, uint32_t first_block,
                      uint64_t seed, const char *what)
{
    assert_equal_tokens(got, want, l, ids, first_block, seed, 0, what);
}

void par_move(const struct plan *src_plan, const struct plan *dst_plan, const struct par_side *ctx,
              const struct copy_mem *gmem, uint64_t chunk, uint64_t *rng)
{
    ck_assert_uint_eq(src_plan->n_writers, dst_plan->n_writers);
    for (uint32_t w = 0; w < src_plan->n_writers; w++) {
        const struct plan_writer *sw = &src_plan->writers[w], *dw = &dst_plan->writers[w];
        ck_assert_uint_eq(sw->ctx_rank, dw->ctx_rank);
        ck_assert_uint_eq(sw->bytes, dw->bytes);
        const struct copy_mem *cm = &ctx->mem[sw->ctx_rank];
        ck_assert_int_eq(copy_check(sw->ops, sw->n_ops, cm, 's'), 0);
        ck_assert_int_eq(copy_check(sw->ops, sw->n_ops, gmem, 'd'), 0);
        ck_assert_int_eq(copy_check(dw->ops, dw->n_ops, gmem, 'd'), 0);
        uint8_t *buf = malloc(sw->bytes ? sw->bytes : 1);
        ck_assert_ptr_nonnull(buf);
        for (uint64_t lo = 0; lo < sw->bytes;) {
            uint64_t hi;
            if (chunk)
                hi = lo + chunk;
            else if (rng)
                hi = lo + 1 + par_rand(rng) % (sw->bytes / 3 + 1);
            else
                hi = sw->bytes;
            if (hi > sw->bytes)
                hi = sw->bytes;
            copy_gather(sw->ops, sw->n_ops, cm, lo, hi, buf + lo);
            copy_scatter(dw->ops, dw->n_ops, buf + lo, lo, hi, gmem);
            lo = hi;
        }
        free(buf);
    }
}

struct plan_input par_input(const struct par_side *ctx, const struct par_side *gen, uint32_t gr,
                            const struct plan_ids *ctx_ids, int32_t dp_rank)
{
    struct plan_input in = {
        .gen = &gen->ranks[gr],
        .gen_ids = gen->ids[gr],
        .ctx = ctx->ranks,
        .n_ctx = ctx->n,
        .ctx_ids = ctx_ids,
        .ctx_dp_rank = dp_rank,
        .tokens = 0,
    };
    return in;
}

void par_run(const char *ctx_spec, const char *gen_spec, uint32_t n_ctx_blocks,
             uint32_t n_gen_blocks, const struct par_opts *o, uint32_t *n_writers_total)
{
    char err[512];
    uint64_t rng = o->seed * 0x9e3779b97f4a7c15ull + 1;
    struct par_side ctx, gen;
    ck_assert_msg(
        par_side_init(&ctx, ctx_spec, ROLE_CONTEXT, n_ctx_blocks, &rng, err, sizeof(err)) == 0,
        "%s: %s", ctx_spec, err);
    ck_assert_msg(
        par_side_init(&gen, gen_spec, ROLE_GENERATION, n_gen_blocks, &rng, err, sizeof(err)) == 0,
        "%s: %s", gen_spec, err);
    /* The generation daemon knows only the context's block counts. */
    struct plan_ids *counts = calloc(ctx.n, sizeof(*counts));
    ck_assert_ptr_nonnull(counts);
    for (uint32_t r = 0; r < ctx.n; r++)
        for (uint32_t g = 0; g < LAYOUT_MAX_GROUPS; g++)
            counts[r].n[g] = ctx.ids[r].n[g];
    /* the generation rank's first request block, in its own block size (rule 10) */
    uint64_t ctb = ctx.ranks[0].tokens_per_block, gtb = gen.ranks[0].tokens_per_block;
    uint32_t first = (uint32_t)((uint64_t)n_ctx_blocks * ctb / gtb) - n_gen_blocks;
    /* with the token count (block sizes differ): both lists from token 0, the context's the
     * last n_ctx_blocks of ceil(tokens/ctb); rows past the last token stay poisoned */
    uint64_t tok = ctb != gtb ? o->tokens : 0;
    if (tok)
        first = (uint32_t)((tok + gtb - 1) / gtb) - n_gen_blocks;
    uint32_t ctx_first = tok ? (uint32_t)((tok + ctb - 1) / ctb) - n_ctx_blocks : 0;
    for (uint32_t r = 0; r < ctx.n; r++)
        pattern_fill(&ctx.ranks[r], &ctx.mem[r], &ctx.ids[r], ctx_first, o->seed);
    for (uint32_t gr = 0; gr < gen.n; gr++) {
        struct plan pc, pg;
        struct plan_error pe;
        struct plan_input in = par_input(&ctx, &gen, gr, ctx.ids, o->ctx_dp_rank);
        in.tokens = o->tokens;
        ck_assert_msg(plan_build(&in, &pc, &pe) == 0, "%s -> %s gen rank %u: %s (%s)", ctx_spec,
                      gen_spec, gr, pe.message, compat_reason_to_string(pe.reason));
        in.ctx_ids = counts;
        ck_assert_msg(plan_build(&in, &pg, &pe) == 0, "%s -> %s gen rank %u (ids unknown): %s",
                      ctx_spec, gen_spec, gr, pe.message);
        struct request_bytes rb;
        plan_bytes(&gen.ranks[gr], gen.ids[gr].n, &rb);
        if (!tok || tok % gtb == 0)
            ck_assert_uint_eq(pc.total_bytes, rb.total);
        else
            ck_assert_uint_lt(pc.total_bytes, rb.total);
        ck_assert_uint_eq(pg.total_bytes, pc.total_bytes);
        ck_assert_uint_eq(pc.state_bytes, rb.state);
        if (!tok)
            ck_assert_uint_eq(pc.kv_bytes, rb.kv);
        if (n_writers_total)
            *n_writers_total += pc.n_writers;
        struct copy_mem want, *gm = &gen.mem[gr];
        expected_tokens(&gen.ranks[gr], gm, &gen.ids[gr], first, o->seed, tok, &want);
        uint64_t cuts[3] = {0, 4097, 0};
        int passes = o->chunked ? 3 : 1;
        for (int pass = 0; pass < passes; pass++) {
            par_poison(gm);
            par_move(&pc, &pg, &ctx, gm, cuts[pass], pass == 2 ? &rng : NULL);
            assert_equal_tokens(gm, &want, &gen.ranks[gr], &gen.ids[gr], first, o->seed, tok,
                                pass == 0   ? "gather+scatter"
                                : pass == 1 ? "4097-byte chunks"
                                            : "random cuts");
        }
        /* The local path: pool to pool. */
        par_poison(gm);
        for (uint32_t w = 0; w < pc.n_writers; w++)
            copy_direct(pc.writers[w].ops, pc.writers[w].n_ops, &ctx.mem[pc.writers[w].ctx_rank],
                        gm);
        assert_equal_tokens(gm, &want, &gen.ranks[gr], &gen.ids[gr], first, o->seed, tok,
                            "direct");
        par_mem_free(&want);
        plan_done(&pc);
        plan_done(&pg);
    }
    free(counts);
    par_side_free(&ctx);
    par_side_free(&gen);
}
