/* check_plan_alias.c: declared aliasing through the planner: the vLLM hybrid example
 * (examples/layouts/vllm-hybrid-mamba-state.json: attention blocks and Mamba state slots on
 * the same raw per-layer tensors) moves with bitwise parity (CPU executor) when a request's
 * pages are distinct, and a request whose destination block and slot are the same page is
 * BAD_REQUEST naming both items. */
#include <check.h>
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "copy.h"
#include "pattern.h"
#include "plan.h"
#include "testutil.h"

#define HYBRID "examples/layouts/vllm-hybrid-mamba-state.json"

static char err[512];

static void load(const char *path, layout_role_t role, struct layout *ret)
{
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    ck_assert_msg(o, "%s: %s (run from the repository root)", path, je.text);
    json_object_set_new(o, "role", json_string(layout_role_to_string(role)));
    json_object_set_new(o, "instance", json_string(role == ROLE_CONTEXT ? "ctx" : "gen"));
    ck_assert_msg(layout_from_jobj(o, ret, err, sizeof(err)) == 0, "%s", err);
    json_decref(o);
}

static void mem_alloc(const struct layout *l, struct copy_mem *m, int fill)
{
    m->n = l->n_pools;
    for (uint32_t p = 0; p < l->n_pools; p++) {
        m->size[p] = l->pools[p].bytes;
        m->base[p] = malloc(m->size[p]);
        ck_assert_ptr_nonnull(m->base[p]);
        memset(m->base[p], fill, m->size[p]);
    }
}

static void mem_free(struct copy_mem *m)
{
    for (uint32_t p = 0; p < m->n; p++)
        free(m->base[p]);
}

/* attention blocks `blocks` (3 of them), one slot per Mamba group. */
static void ids_of(const uint32_t *blocks, const uint32_t *slots, struct plan_ids *ret)
{
    memset(ret, 0, sizeof(*ret));
    ret->n[0] = 3;
    ret->ids[0] = blocks;
    for (uint32_t g = 1; g <= 3; g++) {
        ret->n[g] = 1;
        ret->ids[g] = &slots[g - 1];
    }
}

START_TEST(aliased_hybrid_moves_with_bitwise_parity)
{
    struct layout *c = malloc(sizeof(*c)), *g = malloc(sizeof(*g));
    load(HYBRID, ROLE_CONTEXT, c);
    load(HYBRID, ROLE_GENERATION, g);
    static const uint32_t cb[3] = {7, 1, 30}, cs[3] = {2, 40, 63}; /* context pages */
    static const uint32_t gb[3] = {5, 6, 9}, gs[3] = {0, 11, 12};  /* generation pages */
    struct plan_ids ci, gi;
    ids_of(cb, cs, &ci);
    ids_of(gb, gs, &gi);
    struct copy_mem cm, gm;
    mem_alloc(c, &cm, 0x5a);
    mem_alloc(g, &gm, 0xee);
    pattern_fill(c, &cm, &ci, 0, 99);
    struct plan_input in = {.gen = g, .gen_ids = gi, .ctx = c, .n_ctx = 1, .ctx_ids = &ci,
                            .ctx_dp_rank = -1};
    struct plan p;
    struct plan_error pe;
    ck_assert_msg(plan_build(&in, &p, &pe) == 0, "%s", pe.message);
    ck_assert_uint_eq(p.n_writers, 1);
    ck_assert_int_eq(copy_check(p.writers[0].ops, p.writers[0].n_ops, &cm, 's'), 0);
    ck_assert_int_eq(copy_check(p.writers[0].ops, p.writers[0].n_ops, &gm, 'd'), 0);
    copy_direct(p.writers[0].ops, p.writers[0].n_ops, &cm, &gm);
    char where[256] = "";
    uint32_t bp;
    uint64_t bo;
    ck_assert_msg(pattern_verify(g, &gm, &gi, 0, 99, &bp, &bo, where, sizeof(where)) == 0, "%s",
                  where);
    /* nothing outside the request's pages was written */
    uint64_t page = g->groups[0].views[0].item_stride, written = 0;
    for (uint32_t q = 0; q < gm.n; q++)
        for (uint64_t b = 0; b < gm.size[q]; b++)
            written += gm.base[q][b] != 0xee;
    ck_assert_uint_le(written, 2 * 6 * page);
    plan_done(&p);
    mem_free(&cm);
    mem_free(&gm);
    free(c);
    free(g);
}
END_TEST

START_TEST(aliased_destinations_overlapping_in_one_request_are_bad_request)
{
    struct layout *c = malloc(sizeof(*c)), *g = malloc(sizeof(*g));
    load(HYBRID, ROLE_CONTEXT, c);
    load(HYBRID, ROLE_GENERATION, g);
    static const uint32_t cb[3] = {7, 1, 30}, cs[3] = {2, 40, 63};
    static const uint32_t gb[3] = {5, 6, 9}, gs[3] = {0, 6, 12}; /* mamba1 slot 6 = block 6 */
    struct plan_ids ci, gi;
    ids_of(cb, cs, &ci);
    ids_of(gb, gs, &gi);
    struct plan_input in = {.gen = g, .gen_ids = gi, .ctx = c, .n_ctx = 1, .ctx_ids = &ci,
                            .ctx_dp_rank = -1};
    struct plan p;
    struct plan_error pe;
    ck_assert_int_eq(plan_build(&in, &p, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    ck_assert_msg(strstr(pe.message, "groups.attn view kv layer 3 block 6 and groups.mamba1 view "
                                     "state layer 1 slot 6 overlap in pool 0"),
                  "%s", pe.message);
    /* the generation daemon plans without context ids: the same refusal */
    in.ctx_ids = NULL;
    ck_assert_int_eq(plan_build(&in, &p, &pe), -EINVAL);
    ck_assert_int_eq(pe.code, KVF_E_BAD_REQUEST);
    /* the same page for two Mamba groups is refused too; a context overlap is only read */
    static const uint32_t gs2[3] = {20, 20, 12}, cs2[3] = {7, 40, 63};
    ids_of(gb, gs2, &gi);
    ids_of(cb, cs2, &ci);
    in.gen_ids = gi;
    in.ctx_ids = &ci;
    ck_assert_int_eq(plan_build(&in, &p, &pe), -EINVAL);
    ck_assert_msg(strstr(pe.message, "groups.mamba0 view state layer 0 slot 20 and groups.mamba1"),
                  "%s", pe.message);
    static const uint32_t gs3[3] = {0, 11, 12};
    ids_of(gb, gs3, &gi);
    in.gen_ids = gi;
    ck_assert_msg(plan_build(&in, &p, &pe) == 0, "%s", pe.message);
    plan_done(&p);
    free(c);
    free(g);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("plan_alias");
    TCase *tc = tcase_create("alias");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, aliased_hybrid_moves_with_bitwise_parity);
    tcase_add_test(tc, aliased_destinations_overlapping_in_one_request_are_bad_request);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
