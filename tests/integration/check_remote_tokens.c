/* check_remote_tokens.c: block sizes that differ between two real daemons (issue 9's gap): a
 * context whose block count does not end on a generation block (5 of 16 tokens -> blocks of
 * 32) moves when the RECV gives the prompt's token count, which the generation daemon sends on
 * in its RECV_REQs; every generation byte is checked (rows past the prompt's last token keep
 * their poison). Without the count the request is BAD_REQUEST naming what to send. */
#include <check.h>

#include "remoteutil.h"

#define GATES "arena:\n  size: 32MiB\n  chunk: 4MiB\ngates:\n  min_bytes: 0\n  min_blocks: 0\n"

/* Moves request req with `tokens` (0: not given). Returns the generation ranks' first terminal
 * event kind that was not DONE (its message in msg), or KVF_EV_DONE after checking parity. */
static int move_tokens(struct two *t, struct ru_inst *ctx, struct ru_inst *gen, uint64_t req,
                       uint64_t tokens, uint64_t seed, char *msg, size_t msglen)
{
    uint32_t readers[64] = {0};
    ru_fill_and_send(ctx, gen, req, -1, seed, readers);
    for (uint32_t g = 0; g < gen->n; g++) {
        struct ru_rank *r = &gen->r[g];
        struct kvf_recv_args a = {.req_id = req, .ctx_instance = ctx->r[0].l.instance,
                                  .ctx_dp_rank = -1, .ctx_home = t->a.addr,
                                  .n_groups = r->l.n_groups, .counts = r->counts, .ids = r->ids,
                                  .tokens = tokens};
        ck_assert_int_eq(kvf_recv(r->c, &a), 0);
    }
    for (uint32_t g = 0; g < gen->n; g++) {
        struct kvf_event ev;
        int k = ru_wait_event(&gen->r[g], req, &ev, 40000);
        if (k != KVF_EV_DONE) {
            snprintf(msg, msglen, "%s: %s", kvf_error_to_string((kvf_error_t)ev.error),
                     ev.message);
            return k;
        }
    }
    uint64_t gtb = gen->r[0].l.tokens_per_block;
    for (uint32_t g = 0; g < gen->n; g++) {
        const struct ru_rank *r = &gen->r[g];
        uint32_t n = 0; /* the request's blocks (tiny: one paged group) */
        for (uint32_t i = 0; i < r->l.n_groups; i++)
            n = r->l.groups[i].kind == GROUP_PAGED ? r->pids.n[i] : n;
        ru_assert_parity_tokens(r, (uint32_t)((tokens + gtb - 1) / gtb) - n, seed, tokens,
                                "remote, by tokens");
    }
    return KVF_EV_DONE;
}

static void tokens_case(const char *ctx_spec, const char *gen_spec, uint32_t n_ctx,
                        uint32_t n_gen, uint64_t tokens)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = GATES, .extra_b = GATES, .spec = ctx_spec,
                                            .gen_spec = gen_spec, .blocks = n_ctx,
                                            .gen_blocks = n_gen, .rng = 0x70c5 ^ tokens});
    char msg[600] = "";
    int k = move_tokens(&t, &t.ctx, &t.gen, 51, tokens, 0x515 + tokens, msg, sizeof msg);
    two_stop(&t, k == KVF_EV_DONE);
    ck_assert_msg(k == KVF_EV_DONE, "%s -> %s, %u -> %u blocks, %llu tokens: %s", ctx_spec,
                  gen_spec, n_ctx, n_gen, (unsigned long long)tokens, msg);
}

START_TEST(remote_odd_context_block_count_moves_with_the_token_count)
{
    tokens_case("tiny:tpb=16,blocks=16", "tiny:tpb=32,blocks=16", 5, 3, 70);
}
END_TEST

START_TEST(remote_32_to_16_token_blocks_with_a_partial_last_block)
{
    tokens_case("tiny:tpb=32,blocks=16,tp=2", "tiny:tpb=16,blocks=16", 2, 3, 41);
}
END_TEST

START_TEST(remote_even_counts_with_the_token_count_move_as_before)
{
    tokens_case("tiny:tpb=16,blocks=16", "tiny:tpb=32,blocks=16", 6, 3, 96);
}
END_TEST

START_TEST(remote_odd_count_without_the_token_count_is_refused_naming_it)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = GATES, .extra_b = GATES,
                                            .spec = "tiny:tpb=16,blocks=16",
                                            .gen_spec = "tiny:tpb=32,blocks=16", .blocks = 5,
                                            .gen_blocks = 2, .rng = 0x9});
    char msg[600] = "";
    int k = move_tokens(&t, &t.ctx, &t.gen, 52, 0, 0x52, msg, sizeof msg);
    two_stop(&t, 1);
    ck_assert_int_eq(k, KVF_EV_FAILED);
    ck_assert_msg(strstr(msg, "BAD_REQUEST") && strstr(msg, "token count"), "%s", msg);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("remote_tokens");
    TCase *tc = tcase_create("tokens");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, remote_odd_context_block_count_moves_with_the_token_count);
    tcase_add_test(tc, remote_32_to_16_token_blocks_with_a_partial_last_block);
    tcase_add_test(tc, remote_even_counts_with_the_token_count_move_as_before);
    tcase_add_test(tc, remote_odd_count_without_the_token_count_is_refused_naming_it);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
