/* check_xfer_writers.c: the same-daemon path's writer cache (daemon/request/xfer_writers.h)
 * over real registrations' layouts: a hit gives plan_writers' answer and lets plan_build skip
 * compat_check; a context rank that re-registers (an incompatible layout, or the same one), a
 * generation rank that re-registers with another TP rank, another context DP rank and another
 * set of groups with items each make a new key, never the kept answer; the request's own ids
 * are checked on every hit. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "plan_request.h"
#include "preset.h"
#include "registry.h"
#include "testutil.h"
#include "transfers.h"
#include "xfer_writers.h"

#define MAX_CTX 64

struct fixture {
    struct layout table[MAX_CTX];
    struct reg_rank ctx[MAX_CTX], gen;
    struct reg_rank *ranks[MAX_CTX];
    struct reg_instance in;
    struct xfer r;
    uint32_t ids[8];
    struct xfer_wcache c;
};

static void build(const char *spec, layout_role_t role, struct layout *ranks)
{
    struct preset_spec s;
    char err[256];
    ck_assert_msg(preset_parse(spec, &s, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(preset_build(&s, role == ROLE_CONTEXT ? "c" : "g", role, -1, ranks, err,
                               sizeof err) == 0, "%s", err);
}

static uint64_t next_worker = 1;

/* Registers context rank i with layout l (a new worker id, the table rebuilt as the registry
 * does). */
static void reg_ctx(struct fixture *f, uint32_t i, const struct layout *l)
{
    f->ctx[i].layout = *l;
    f->ctx[i].worker_id = next_worker++;
    f->ranks[i] = &f->ctx[i];
    f->table[i] = *l;
}

static void reg_gen(struct fixture *f, const struct layout *l)
{
    f->gen.layout = *l;
    f->gen.worker_id = next_worker++;
}

/* A request of n_blocks blocks (ids 0..) per paged group and slot 0 per state group. */
static void request(struct fixture *f, uint32_t n_blocks, int32_t dp)
{
    const struct layout *l = &f->gen.layout;
    f->r.rank = &f->gen;
    f->r.ctx_dp_rank = dp;
    f->r.items.n_groups = l->n_groups;
    uint32_t *p = f->ids;
    f->r.items.ids = f->ids;
    for (uint32_t g = 0; g < l->n_groups; g++) {
        uint32_t n = l->groups[g].kind == GROUP_STATE ? 1 : n_blocks;
        f->r.items.counts[g] = n;
        for (uint32_t k = 0; k < n; k++)
            *p++ = k;
    }
}

static struct fixture *fixture(const char *cspec, uint32_t n_ctx, const char *gspec,
                               uint32_t gen_rank)
{
    struct fixture *f = calloc(1, sizeof *f);
    ck_assert_ptr_nonnull(f);
    struct layout *l = calloc(MAX_CTX, sizeof *l);
    ck_assert_ptr_nonnull(l);
    build(cspec, ROLE_CONTEXT, l);
    for (uint32_t i = 0; i < n_ctx; i++)
        reg_ctx(f, i, &l[i]);
    build(gspec, ROLE_GENERATION, l);
    reg_gen(f, &l[gen_rank]);
    free(l);
    f->in = (struct reg_instance){.n_ranks = n_ctx, .n_registered = n_ctx, .ranks = f->ranks,
                                  .table = f->table};
    request(f, 2, -1);
    return f;
}

/* xfer_writers' answer equals plan_writers' for the registrations as they are now. */
static kvf_error_t ask(struct fixture *f, uint8_t *got)
{
    char msg[512];
    kvf_error_t code = xfer_writers(&f->c, &f->r, &f->in, got, msg, sizeof msg);
    struct plan_input pin = {.gen = &f->gen.layout, .ctx = f->table, .n_ctx = f->in.n_ranks,
                             .ctx_dp_rank = f->r.ctx_dp_rank};
    plan_ids_of(f->r.items.n_groups, f->r.items.counts, f->r.items.ids, &pin.gen_ids);
    uint8_t want[MAX_CTX];
    char wmsg[512];
    ck_assert_int_eq(code, plan_request_writers(&pin, want, wmsg, sizeof wmsg));
    if (code == KVF_OK)
        ck_assert_mem_eq(got, want, f->in.n_ranks);
    else
        ck_assert_str_eq(msg, wmsg);
    return code;
}

START_TEST(a_hit_gives_plan_writers_answer_and_skips_compat)
{
    struct fixture *f = fixture("tiny:blocks=4,tp=2", 2, "tiny:blocks=4,tp=1", 0);
    uint8_t got[4];
    ck_assert(!xfer_wcache_compat_known(&f->c, &f->r, &f->in));
    ck_assert_int_eq(ask(f, got), KVF_OK);
    ck_assert(got[0] && got[1]);
    ck_assert_uint_eq(f->c.misses, 1);
    ck_assert(xfer_wcache_compat_known(&f->c, &f->r, &f->in));
    memset(got, 0, sizeof got);
    ck_assert_int_eq(ask(f, got), KVF_OK);
    ck_assert_uint_eq(f->c.hits, 1);
    /* the request's own ids are checked on a hit: a block id twice */
    f->ids[2] = f->ids[1];
    ck_assert_int_eq(ask(f, got), KVF_E_BAD_REQUEST);
    ck_assert_uint_eq(f->c.hits, 2);
    xfer_wcache_done(&f->c);
    free(f);
}
END_TEST

START_TEST(a_context_rank_that_re_registers_makes_a_new_key)
{
    struct fixture *f = fixture("tiny:blocks=4,tp=2", 2, "tiny:blocks=4,tp=1", 0);
    uint8_t got[4];
    ck_assert_int_eq(ask(f, got), KVF_OK);
    /* rank 1 leaves and comes back with another head dim: incompatible, never the kept OK */
    struct layout *l = calloc(2, sizeof *l);
    build("tiny:blocks=4,tp=2,hd=64", ROLE_CONTEXT, l);
    reg_ctx(f, 1, &l[1]);
    ck_assert(!xfer_wcache_compat_known(&f->c, &f->r, &f->in));
    ck_assert_int_eq(ask(f, got), KVF_E_PEER_INCOMPATIBLE);
    ck_assert_uint_eq(f->c.misses, 2);
    ck_assert(!xfer_wcache_compat_known(&f->c, &f->r, &f->in)); /* refusals are not kept */
    /* and again with its first layout: a new registration, asked again, then kept */
    build("tiny:blocks=4,tp=2", ROLE_CONTEXT, l);
    reg_ctx(f, 1, &l[1]);
    ck_assert_int_eq(ask(f, got), KVF_OK);
    ck_assert_uint_eq(f->c.misses, 3);
    ck_assert_uint_eq(f->c.hits, 0);
    ck_assert(xfer_wcache_compat_known(&f->c, &f->r, &f->in));
    free(l);
    xfer_wcache_done(&f->c);
    free(f);
}
END_TEST

START_TEST(a_generation_rank_that_re_registers_makes_a_new_key)
{
    /* Llama TP16 -> TP8: generation rank r reads head r from one holder of the two */
    struct fixture *f = fixture("llama-3-70b:blocks=3,tpb=4,tp=16", 16,
                                "llama-3-70b:blocks=3,tpb=4,tp=8", 2);
    uint8_t got[16];
    ck_assert_int_eq(ask(f, got), KVF_OK);
    ck_assert(got[4] && !got[5]); /* head 2: holder (2 + 0) % 2 of ranks 4, 5 */
    struct layout *g = calloc(8, sizeof *g);
    build("llama-3-70b:blocks=3,tpb=4,tp=8", ROLE_GENERATION, g);
    reg_gen(f, &g[3]); /* another registration, generation TP rank 3 */
    ck_assert(!xfer_wcache_compat_known(&f->c, &f->r, &f->in));
    ck_assert_int_eq(ask(f, got), KVF_OK);
    ck_assert(!got[4] && !got[6] && got[7]); /* head 3: holder 1 of ranks 6, 7 */
    ck_assert_uint_eq(f->c.misses, 2);
    ck_assert_uint_eq(f->c.hits, 0);
    xfer_wcache_done(&f->c);
    free(g);
    free(f);
}
END_TEST

START_TEST(the_dp_rank_and_the_groups_with_items_are_in_the_key)
{
    struct fixture *f = fixture("tiny:blocks=4,tp=2,adp=1", 2, "tiny:blocks=4,tp=1", 0);
    uint8_t got[4];
    request(f, 2, 0);
    ck_assert_int_eq(ask(f, got), KVF_OK);
    ck_assert(got[0] && !got[1]);
    request(f, 2, 1); /* the other DP rank ran it: rank 1 writes, not the kept rank 0 */
    ck_assert_int_eq(ask(f, got), KVF_OK);
    ck_assert(!got[0] && got[1]);
    ck_assert_uint_eq(f->c.misses, 2);
    request(f, 0, 1); /* no blocks: another key */
    ck_assert_int_eq(ask(f, got), KVF_OK);
    ck_assert_uint_eq(f->c.misses, 3);
    request(f, 3, 1); /* blocks again (another count): the kept answer */
    ck_assert_int_eq(ask(f, got), KVF_OK);
    ck_assert_uint_eq(f->c.hits, 1);
    xfer_wcache_done(&f->c);
    free(f);
}
END_TEST

/* 64 DP ranks, twice, over XFER_WCACHE_SLOTS slots: keys share slots, and every answer is still
 * its own DP rank's (the whole key is compared, not only the slot). */
START_TEST(keys_that_share_a_slot_never_answer_for_each_other)
{
    ck_assert_uint_le(XFER_WCACHE_SLOTS, MAX_CTX);
    struct fixture *f = fixture("tiny:blocks=4,tp=64,adp=1", MAX_CTX, "tiny:blocks=4,tp=1", 0);
    uint8_t got[MAX_CTX];
    for (int pass = 0; pass < 2; pass++)
        for (int32_t dp = 0; dp < MAX_CTX; dp++) {
            request(f, (uint32_t)pass, dp); /* pass 1: no blocks, pass 2: one block */
            ck_assert_int_eq(ask(f, got), KVF_OK);
            for (uint32_t c = 0; c < MAX_CTX; c++)
                ck_assert_uint_eq(got[c], c == (uint32_t)dp);
        }
    for (int32_t dp = 0; dp < MAX_CTX; dp++) {
        request(f, 1, dp);
        ck_assert_int_eq(ask(f, got), KVF_OK);
        for (uint32_t c = 0; c < MAX_CTX; c++)
            ck_assert_uint_eq(got[c], c == (uint32_t)dp);
    }
    ck_assert_uint_gt(f->c.hits, 0);
    ck_assert_uint_gt(f->c.misses, XFER_WCACHE_SLOTS); /* some were replaced */
    xfer_wcache_done(&f->c);
    free(f);
}
END_TEST

static Suite *wcache_suite(void)
{
    Suite *s = suite_create("xfer_writers");
    TCase *tc = tcase_create("cache");
    tcase_add_test(tc, a_hit_gives_plan_writers_answer_and_skips_compat);
    tcase_add_test(tc, a_context_rank_that_re_registers_makes_a_new_key);
    tcase_add_test(tc, a_generation_rank_that_re_registers_makes_a_new_key);
    tcase_add_test(tc, the_dp_rank_and_the_groups_with_items_are_in_the_key);
    tcase_add_test(tc, keys_that_share_a_slot_never_answer_for_each_other);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(wcache_suite()); }
