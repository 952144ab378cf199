/* check_readers.c: the reader count the daemon derives for a SEND with n_readers 0
 * (daemon/xfer/readers.h): the same-daemon count from the generation layout, and the
 * between-daemons count, which plans the first reader's TP peers from its layout alone, equal to
 * what planning every real generation rank's layout gives, and under generation PP, learnt
 * stage by stage from the readers' own RECV_REQs. */
#include <check.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "plan_request.h"
#include "preset.h"
#include "readers.h"
#include "testutil.h"

static struct layout ctx[16], gen[16];

static uint32_t build(const char *spec, layout_role_t role, struct layout *ranks)
{
    struct preset_spec s;
    char err[256];
    ck_assert_msg(preset_parse(spec, &s, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(preset_build(&s, role == ROLE_CONTEXT ? "c" : "g", role, -1, ranks, err,
                               sizeof err) == 0, "%s", err);
    return preset_n_ranks(&s);
}

static const uint32_t ids[] = {0, 1, 2, 3};

/* The plan input of one request (3 blocks per paged group, slot 0) for generation rank g. */
static struct plan_input input(const struct layout *g, uint32_t n_ctx, struct plan_ids *ctx_ids)
{
    struct plan_input in = {.gen = g, .ctx = ctx, .n_ctx = n_ctx, .ctx_ids = ctx_ids,
                            .ctx_dp_rank = -1};
    for (uint32_t k = 0; k < g->n_groups; k++) {
        in.gen_ids.n[k] = g->groups[k].kind == GROUP_STATE ? 1 : 3;
        in.gen_ids.ids[k] = ids;
    }
    return in;
}

/* Does generation rank r read `writer`? (planning it) */
static bool reads_writer(uint32_t n_ctx, uint32_t r, uint32_t writer, struct plan_ids *cids)
{
    struct plan_input in = input(&gen[r], n_ctx, cids);
    struct plan p;
    char msg[512];
    ck_assert_msg(plan_request(&in, &p, msg, sizeof msg) == KVF_OK, "%s", msg);
    bool hit = false;
    for (uint32_t w = 0; w < p.n_writers; w++)
        hit |= p.writers[w].ctx_rank == writer && p.writers[w].bytes > 0;
    plan_done(&p);
    return hit;
}

/* Planning every real generation rank: how many list `writer` with bytes. */
static uint32_t truth(uint32_t n_ctx, uint32_t n_gen, uint32_t writer, struct plan_ids *cids)
{
    uint32_t n = 0;
    for (uint32_t r = 0; r < n_gen; r++)
        n += reads_writer(n_ctx, r, writer, cids);
    return n;
}

static void remote_case(const char *cspec, const char *gspec, uint32_t want0)
{
    uint32_t nc = build(cspec, ROLE_CONTEXT, ctx), ng = build(gspec, ROLE_GENERATION, gen);
    struct plan_ids *cids = plan_ctx_ids_new(ctx, nc);
    ck_assert_ptr_nonnull(cids);
    for (uint32_t w = 0; w < nc; w++) {
        struct plan_input in = input(&gen[0], nc, cids);
        struct readers_tally t = {0};
        uint32_t got = readers_remote(&t, &in, w), want = truth(nc, ng, w, cids);
        ck_assert_msg(got == want, "%s -> %s writer %u: derived %u, planning every rank %u",
                      cspec, gspec, w, got, want);
        if (w == 0)
            ck_assert_msg(got == want0, "%s -> %s writer 0: %u readers, expected %u", cspec,
                          gspec, got, want0);
    }
    free(cids);
}

START_TEST(readers_local_counts_the_generation_instance)
{
    build("tiny:tp=2,pp=2", ROLE_GENERATION, gen);
    ck_assert_uint_eq(readers_local(&gen[0]), 4);
    build("kimi-linear-48b:tp=4,adp=1", ROLE_GENERATION, gen);
    ck_assert_uint_eq(readers_local(&gen[0]), 1); /* attention-DP: the request's DP rank */
}
END_TEST

START_TEST(readers_remote_equals_planning_every_generation_rank)
{
    remote_case("kimi-linear-48b:tp=1", "kimi-linear-48b:tp=2", 2);
    remote_case("kimi-linear-48b:tp=4", "kimi-linear-48b:tp=2", 1);
    /* KDA heads: generation ranks 0 and 1 read context rank 0; the replicated MLA latent of a
     * third generation rank comes from context rank 0 as well */
    remote_case("kimi-linear-48b:tp=2", "kimi-linear-48b:tp=4", 3);
    remote_case("tiny:tp=2", "tiny:tp=2", 1);
}
END_TEST

/* A pipelined generation: its readers' RECV_REQs arrive one by one (stage order given by
 * `last_first`: the last stage's readers first); the count stays 0 until the stages seen hold
 * every layer of the writer, then equals planning every generation rank; never too early. */
static void pipelined_case(const char *cspec, const char *gspec, bool last_first)
{
    uint32_t nc = build(cspec, ROLE_CONTEXT, ctx), ng = build(gspec, ROLE_GENERATION, gen);
    struct plan_ids *cids = plan_ctx_ids_new(ctx, nc);
    ck_assert_ptr_nonnull(cids);
    for (uint32_t w = 0; w < nc; w++) {
        uint32_t want = truth(nc, ng, w, cids), fed = 0, got = 0;
        struct readers_tally t = {0};
        for (uint32_t k = 0; k < ng; k++) {
            uint32_t r = last_first ? ng - 1 - k : k;
            if (!reads_writer(nc, r, w, cids))
                continue; /* ranks that do not read it send it no RECV_REQ */
            struct plan_input in = input(&gen[r], nc, cids);
            got = readers_remote(&t, &in, w);
            fed++;
            ck_assert_msg(got == 0 || got == want, "%s -> %s writer %u after %u readers: %u of %u",
                          cspec, gspec, w, fed, got, want);
        }
        ck_assert_msg(got == want && want > 0, "%s -> %s writer %u: derived %u, planning every "
                      "rank %u", cspec, gspec, w, got, want);
    }
    free(cids);
}

START_TEST(readers_remote_counts_a_pipelined_generation_from_its_stages)
{
    uint32_t nc = build("tiny:tp=1", ROLE_CONTEXT, ctx);
    build("tiny:tp=1,pp=2", ROLE_GENERATION, gen);
    struct plan_ids *cids = plan_ctx_ids_new(ctx, nc);
    struct readers_tally t = {0};
    struct plan_input in = input(&gen[0], nc, cids);
    ck_assert_uint_eq(readers_remote(&t, &in, 0), 0); /* stage 1 unseen: unknown */
    ck_assert_uint_eq(readers_remote(&t, &in, 0), 0); /* the same stage again adds nothing */
    in = input(&gen[1], nc, cids);
    ck_assert_uint_eq(readers_remote(&t, &in, 0), 2); /* both stages: exact */
    free(cids);
    pipelined_case("tiny:tp=1", "tiny:tp=2,pp=2", false);
    pipelined_case("tiny:tp=2", "tiny:tp=1,pp=2", true);
    pipelined_case("tiny:tp=2,pp=2", "tiny:tp=2,pp=2", false); /* one stage reads each writer */
    pipelined_case("tiny:pp=2", "tiny:pp=4", true);
    pipelined_case("kimi-linear-48b:tp=2", "kimi-linear-48b:tp=4,pp=2", false);
    /* attention-DP: the request's DP rank of each stage reads it */
    nc = build("tiny:tp=2", ROLE_CONTEXT, ctx);
    build("tiny:tp=2,pp=2,adp=1", ROLE_GENERATION, gen);
    cids = plan_ctx_ids_new(ctx, nc);
    t = (struct readers_tally){0};
    in = input(&gen[0], nc, cids);
    ck_assert_uint_eq(readers_remote(&t, &in, 1), 0);
    in = input(&gen[2], nc, cids); /* stage 1, DP rank 0 */
    ck_assert_uint_eq(readers_remote(&t, &in, 1), 2);
    free(cids);
}
END_TEST

static Suite *readers_suite(void)
{
    Suite *s = suite_create("readers");
    TCase *t = tcase_create("derive");
    tcase_add_test(t, readers_local_counts_the_generation_instance);
    tcase_add_test(t, readers_remote_equals_planning_every_generation_rank);
    tcase_add_test(t, readers_remote_counts_a_pipelined_generation_from_its_stages);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run(readers_suite()); }
