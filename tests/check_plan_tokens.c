/* check_plan_tokens.c: block size conversions with the prompt's token count (plan_input.tokens,
 * docs/PLANNING.md "Conversions"): a context block count that does not end on a generation
 * block (5 blocks of 16 -> blocks of 32) moves with bitwise parity through both daemons' plans
 * (parity.h: the generation side's plan with context ids unknown), the last partial block row
 * for row, nothing past the prompt's last token written (those rows stay poisoned); even counts
 * move as before; what still cannot be expressed is BAD_REQUEST naming why. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "parity.h"
#include "testutil.h"

static void parity(const char *c, const char *g, uint32_t n_ctx, uint32_t n_gen, uint64_t tokens)
{
    struct par_opts o = {.ctx_dp_rank = -1, .seed = 0x70c5, .chunked = 1, .tokens = tokens};
    par_run(c, g, n_ctx, n_gen, &o, NULL);
}

START_TEST(odd_context_block_counts_move_with_the_token_count)
{
    /* 16 -> 32: 5 context blocks, the prompt ending in the first half of the last 32-block */
    parity("tiny:tpb=16,blocks=8", "tiny:tpb=32,blocks=8", 5, 3, 80);
    parity("tiny:tpb=16,blocks=8", "tiny:tpb=32,blocks=8", 5, 3, 70);
    parity("tiny:tpb=16,blocks=8", "tiny:tpb=32,blocks=8", 5, 3, 65);
    parity("tiny:tpb=16,blocks=8", "tiny:tpb=32,blocks=8", 5, 1, 77); /* prefix cached */
    /* 32 -> 16: the context's last block partial, the generation sized by the prompt */
    parity("tiny:tpb=32,blocks=8", "tiny:tpb=16,blocks=8", 2, 3, 40);
    parity("tiny:tpb=32,blocks=8", "tiny:tpb=16,blocks=8", 2, 3, 33);
    parity("tiny:tpb=32,blocks=8", "tiny:tpb=16,blocks=8", 3, 2, 70);
    /* fan-in and split K/V views, 16 -> 64 */
    parity("tiny:tpb=16,blocks=8,tp=2,kv=split,arr=block", "tiny:tpb=64,blocks=8,tp=4", 7, 2, 100);
    /* both conversions at once (NHD -> HND, 8 -> 16) with replicated heads and PP */
    parity("qwen3-next-80b:hd=16,blocks=4,slots=1,tpb=8,tp=2,pp=2",
           "qwen3-next-80b:hd=16,blocks=4,slots=1,tp=4,tpb=16,order=hnd", 3, 2, 21);
    parity("llama-3-70b:blocks=6,tpb=4,tp=2,order=hnd", "llama-3-70b:blocks=3,tpb=8,tp=4", 5, 3,
           18);
}
END_TEST

START_TEST(even_counts_with_the_token_count_move_as_before)
{
    parity("tiny:tpb=16,blocks=8", "tiny:tpb=32,blocks=8", 6, 3, 96);
    parity("tiny:tpb=16,blocks=8", "tiny:tpb=32,blocks=8", 6, 3, 90);
    parity("tiny:tpb=32,blocks=8", "tiny:tpb=16,blocks=8", 3, 6, 96);
    /* equal block sizes: whole blocks, the token count changes nothing */
    parity("tiny:tpb=16,blocks=8", "tiny:tpb=16,blocks=8", 5, 5, 70);
}
END_TEST

/* plan_build's refusal of the pair (generation rank 0), context ids known or not. */
static struct plan_error refusal(struct par_side *c, struct par_side *g, uint64_t tokens,
                                 int ids_known)
{
    struct plan p;
    struct plan_error pe;
    memset(&pe, 0, sizeof(pe));
    struct plan_input in = par_input(c, g, 0, ids_known ? c->ids : NULL, -1);
    in.tokens = tokens;
    ck_assert_int_eq(plan_build(&in, &p, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    return pe;
}

static void sides(struct par_side *c, uint32_t nc, struct par_side *g, uint32_t ng)
{
    char err[256];
    uint64_t rng = 11;
    ck_assert(par_side_init(c, "tiny:tpb=16,blocks=8", ROLE_CONTEXT, nc, &rng, err, sizeof(err)) ==
              0);
    ck_assert(par_side_init(g, "tiny:tpb=32,blocks=8", ROLE_GENERATION, ng, &rng, err,
                            sizeof(err)) == 0);
}

static void free_sides(struct par_side *c, struct par_side *g)
{
    par_side_free(c);
    par_side_free(g);
}

START_TEST(what_the_token_count_cannot_express_is_refused_naming_why)
{
    struct par_side c, g;
    /* without it an odd count stays refused, and the message says what to send */
    sides(&c, 5, &g, 2);
    struct plan_error pe = refusal(&c, &g, 0, 1);
    ck_assert_msg(strstr(pe.message, "do not end on a generation block of 32 tokens") &&
                      strstr(pe.message, "token count"),
                  "%s", pe.message);
    /* more generation blocks than the prompt fills: refused on the generation daemon too */
    free_sides(&c, &g);
    sides(&c, 5, &g, 3);
    pe = refusal(&c, &g, 60, 0);
    ck_assert_msg(strstr(pe.message, "sends 3 blocks of 32 tokens, more than the request's 60"),
                  "%s", pe.message);
    free_sides(&c, &g);
    /* more context blocks than the prompt fills */
    sides(&c, 5, &g, 2);
    pe = refusal(&c, &g, 49, 1);
    ck_assert_msg(strstr(pe.message, "holds 5 blocks of 16 tokens, more than the request's 49"),
                  "%s", pe.message);
    free_sides(&c, &g);
    /* the context holds too few of the prompt's blocks */
    sides(&c, 2, &g, 3);
    pe = refusal(&c, &g, 70, 1);
    ck_assert_msg(strstr(pe.message, "holds the last 2 of 5 blocks of 16"), "%s", pe.message);
    /* the limit on the declared count */
    pe = refusal(&c, &g, PLAN_MAX_TOKENS + 1, 1);
    ck_assert_msg(strstr(pe.message, "tokens, limit"), "%s", pe.message);
    free_sides(&c, &g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan_tokens");
    TCase *tc = tcase_create("tokens");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, odd_context_block_counts_move_with_the_token_count);
    tcase_add_test(tc, even_counts_with_the_token_count_move_as_before);
    tcase_add_test(tc, what_the_token_count_cannot_express_is_refused_naming_why);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
