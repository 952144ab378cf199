/* check_plan_hit.c: what a plan template hit runs per request. plan_check_request's duplicate
 * ids (lib/plan_check.c): groups of up to 65536 items find them with a bitmap, larger groups by
 * sorting a copy; both ways refuse the same requests with the same message, naming the id
 * listed twice (at the bitmap's word edges too), on either side, and accept distinct ids.
 * plan_tcache_lookup (a hit without its plan): the request's checks only, refusing what
 * plan_tcache_plan refuses with the same message; plan_template_substitute then gives the very
 * ops of plan_tcache_plan's hit; no template (empty cache, another shape) is 0. */
#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "plan_request.h"
#include "plan_tcache.h"
#include "preset.h"
#include "testutil.h"

struct side {
    struct layout l;
    uint32_t *ids;   /* the paged group's ids */
    uint32_t pg, n;  /* its group index and id count */
    uint32_t slot;
    struct plan_ids pids;
};

/* kimi-linear-48b with `blocks` items per paged group; n ids of the first paged group. */
static void side_init(struct side *s, uint32_t blocks, layout_role_t role, uint32_t n)
{
    char spec[64], err[256];
    snprintf(spec, sizeof spec, "kimi-linear-48b:blocks=%u", blocks);
    struct preset_spec ps;
    ck_assert_msg(preset_parse(spec, &ps, err, sizeof err) == 0, "%s", err);
    ck_assert_msg(preset_build(&ps, role == ROLE_CONTEXT ? "c" : "g", role, -1, &s->l, err,
                               sizeof err) == 0, "%s", err);
    memset(&s->pids, 0, sizeof s->pids);
    s->pg = UINT32_MAX;
    s->n = n;
    s->slot = 0;
    s->ids = calloc(n, sizeof *s->ids);
    ck_assert_ptr_nonnull(s->ids);
    for (uint32_t g = 0; g < s->l.n_groups; g++) {
        if (s->l.groups[g].kind == GROUP_STATE) {
            s->pids.n[g] = 1;
            s->pids.ids[g] = &s->slot;
            continue;
        }
        if (s->pg == UINT32_MAX) {
            s->pg = g;
            s->pids.n[g] = n;
            s->pids.ids[g] = s->ids;
        } else { /* other paged groups: the same ids */
            s->pids.n[g] = n;
            s->pids.ids[g] = s->ids;
        }
    }
    ck_assert_uint_ne(s->pg, UINT32_MAX);
    ck_assert_uint_eq(s->l.groups[s->pg].n_items, blocks);
    for (uint32_t k = 0; k < n; k++) /* distinct, spread over the whole group */
        s->ids[k] = (uint32_t)((uint64_t)k * blocks / n);
}

/* plan_check_request of g's ids against c's (context ids given): 0, or -EINVAL with msg. */
static int check(struct side *c, struct side *g, char *msg, size_t len)
{
    struct plan_input in = {.gen = &g->l, .ctx = &c->l, .n_ctx = 1, .ctx_ids = &c->pids,
                            .ctx_dp_rank = -1, .gen_ids = g->pids};
    struct plan_error pe;
    memset(&pe, 0, sizeof pe);
    int rc = plan_check_request(&in, &pe);
    snprintf(msg, len, "%s", pe.message);
    return rc;
}

static void both_sides_refuse_a_twice_listed_id(uint32_t blocks)
{
    struct side c, g;
    uint32_t n = 256;
    side_init(&c, blocks, ROLE_CONTEXT, n);
    side_init(&g, blocks, ROLE_GENERATION, n);
    char msg[512], want[64];
    ck_assert_msg(check(&c, &g, msg, sizeof msg) == 0, "distinct ids refused: %s", msg);
    /* an id on a bitmap word's edge, the last id of the group, id 0 */
    uint32_t at[][2] = {{3, 200}, {n - 1, 0}, {10, 11}};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        for (int side = 0; side < 2; side++) {
            struct side *s = side ? &g : &c;
            uint32_t keep = s->ids[at[i][0]], dup = i == 0 ? 63 : i == 1 ? blocks - 1 : 0;
            uint32_t keep2 = s->ids[at[i][1]];
            s->ids[at[i][0]] = dup;
            s->ids[at[i][1]] = dup;
            ck_assert_int_eq(check(&c, &g, msg, sizeof msg), -EINVAL);
            snprintf(want, sizeof want, "id %u twice", dup);
            ck_assert_msg(strstr(msg, want) && strstr(msg, side ? "generation" : "context"),
                          "%u blocks: '%s' lacks '%s'", blocks, msg, want);
            s->ids[at[i][0]] = keep;
            s->ids[at[i][1]] = keep2;
        }
    }
    ck_assert_msg(check(&c, &g, msg, sizeof msg) == 0, "distinct ids refused: %s", msg);
    free(c.ids);
    free(g.ids);
}

START_TEST(a_group_within_the_bitmap_refuses_duplicates)
{
    both_sides_refuse_a_twice_listed_id(4096);
    both_sides_refuse_a_twice_listed_id(65536); /* the largest the bitmap takes */
}
END_TEST

START_TEST(a_group_past_the_bitmap_refuses_duplicates_by_sorting)
{
    both_sides_refuse_a_twice_listed_id(65537);
    both_sides_refuse_a_twice_listed_id(200000);
}
END_TEST

static struct plan_input input_of(struct side *c, struct side *g)
{
    return (struct plan_input){.gen = &g->l, .ctx = &c->l, .n_ctx = 1, .ctx_ids = &c->pids,
                               .ctx_dp_rank = -1, .gen_ids = g->pids};
}

START_TEST(a_lookup_checks_the_request_and_substitutes_the_hits_ops)
{
    struct plan_tcache tc;
    ck_assert_int_eq(plan_tcache_init(&tc, 4, 1u << 26), 0);
    struct side c, g;
    side_init(&c, 256, ROLE_CONTEXT, 16);
    side_init(&g, 256, ROLE_GENERATION, 16);
    struct plan_input in = input_of(&c, &g);
    uint64_t who[2] = {7, 9};
    struct plan_tcache_entry *e = NULL;
    struct plan_error pe;
    ck_assert_int_eq(plan_tcache_lookup(&tc, who, 2, &in, &e, &pe), 0); /* empty */
    ck_assert_ptr_null(e);
    struct plan first, hit, sub;
    bool was_hit;
    ck_assert_int_eq(plan_tcache_plan(&tc, who, 2, &in, &first, &e, &was_hit, &pe), 0);
    ck_assert(!was_hit && e);
    for (uint32_t k = 0; k < 16; k++) { /* new ids of the same shape */
        c.ids[k] = 255 - 3 * k;
        g.ids[k] = 2 * k + 1;
    }
    ck_assert_int_eq(plan_tcache_lookup(&tc, who, 2, &in, &e, &pe), 1);
    ck_assert_ptr_nonnull(e);
    ck_assert_uint_eq(tc.hits, 1);
    ck_assert_int_eq(plan_template_substitute(&e->t, &in, &sub), 0);
    ck_assert_int_eq(plan_tcache_plan(&tc, who, 2, &in, &hit, &e, &was_hit, &pe), 0);
    ck_assert(was_hit);
    ck_assert_uint_eq(sub.n_writers, hit.n_writers);
    ck_assert_uint_eq(sub.total_bytes, hit.total_bytes);
    for (uint32_t w = 0; w < hit.n_writers; w++) {
        ck_assert_uint_eq(sub.writers[w].n_ops, hit.writers[w].n_ops);
        ck_assert(!memcmp(sub.writers[w].ops, hit.writers[w].ops,
                          hit.writers[w].n_ops * sizeof *hit.writers[w].ops));
    }
    /* a bad request is refused by the lookup with plan_tcache_plan's message */
    char a[sizeof pe.message], b[sizeof pe.message];
    c.ids[5] = c.ids[4];
    ck_assert_int_eq(plan_tcache_lookup(&tc, who, 2, &in, &e, &pe), -EINVAL);
    ck_assert_ptr_null(e);
    snprintf(a, sizeof a, "%s", pe.message);
    struct plan none;
    ck_assert_int_eq(plan_tcache_plan(&tc, who, 2, &in, &none, &e, &was_hit, &pe), -EINVAL);
    snprintf(b, sizeof b, "%s", pe.message);
    ck_assert_str_eq(a, b);
    ck_assert_ptr_nonnull(strstr(a, "twice"));
    c.ids[5] = 1;
    /* another shape (fewer generation ids) or other registrations: no template */
    in.gen_ids.n[g.pg] = 8;
    ck_assert_int_eq(plan_tcache_lookup(&tc, who, 2, &in, &e, &pe), 0);
    in.gen_ids.n[g.pg] = 16;
    who[1] = 10;
    ck_assert_int_eq(plan_tcache_lookup(&tc, who, 2, &in, &e, &pe), 0);
    ck_assert_ptr_null(e);
    plan_done(&first);
    plan_done(&hit);
    plan_done(&sub);
    plan_tcache_done(&tc);
    free(c.ids);
    free(g.ids);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("plan_hit");
    TCase *tc = tcase_create("hit");
    tcase_add_test(tc, a_group_within_the_bitmap_refuses_duplicates);
    tcase_add_test(tc, a_group_past_the_bitmap_refuses_duplicates_by_sorting);
    tcase_add_test(tc, a_lookup_checks_the_request_and_substitutes_the_hits_ops);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
