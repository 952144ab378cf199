/* check_pattern.c: the global parity pattern (pattern.h): a byte's value depends on its logical
 * coordinates only (a TP2 rank's shard equals the same heads of the TP1 rank's pattern, in any
 * arrangement), every coordinate matters, and verify pinpoints a wrong byte. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "parity.h"
#include "testutil.h"

static void side(struct par_side *s, const char *spec, uint32_t n_blocks)
{
    char err[256];
    uint64_t rng = 1; /* same seed: same ids on every side built with the same capacity */
    ck_assert_msg(par_side_init(s, spec, ROLE_CONTEXT, n_blocks, &rng, err, sizeof(err)) == 0,
                  "%s", err);
}

static const uint8_t *row(const struct par_side *s, uint32_t r, const char *group,
                          const char *tensor, uint32_t li, uint32_t k, uint32_t o, uint32_t h)
{
    const struct layout *l = &s->ranks[r];
    for (uint32_t g = 0; g < l->n_groups; g++) {
        if (strcmp(l->groups[g].name, group))
            continue;
        for (uint32_t v = 0; v < l->groups[g].n_views; v++) {
            const struct layout_view *vw = &l->groups[g].views[v];
            for (uint32_t t = 0; t < vw->n_tensors; t++)
                if (!strcmp(vw->tensors[t].name, tensor))
                    return s->mem[r].base[layout_region_at(l, vw, li, s->ids[r].ids[g][k]).pool] +
                           layout_region_at(l, vw, li, s->ids[r].ids[g][k]).off + vw->tensors[t].offset +
                           ((uint64_t)o * vw->tensors[t].heads + h) * vw->tensors[t].inner;
        }
    }
    ck_abort_msg("no %s/%s", group, tensor);
    return NULL;
}

START_TEST(pattern_shard_equals_the_same_heads_of_the_full_pattern)
{
    struct par_side a, b;
    side(&a, "tiny:blocks=6,slots=2", 3);
    side(&b, "tiny:blocks=6,slots=2,tp=2,arr=block,state=split,kv=split", 3);
    pattern_fill(&a.ranks[0], &a.mem[0], &a.ids[0], 0, 5);
    for (uint32_t r = 0; r < 2; r++)
        pattern_fill(&b.ranks[r], &b.mem[r], &b.ids[r], 0, 5);
    uint32_t inner = 32 * 32 * 4; /* ssm */
    for (uint32_t r = 0; r < 2; r++)
        for (uint32_t h = 0; h < 2; h++)
            ck_assert(memcmp(row(&b, r, "kda", "ssm", 1, 0, 0, h),
                             row(&a, 0, "kda", "ssm", 1, 0, 0, r * 2 + h), inner) == 0);
    ck_assert(memcmp(row(&b, 1, "kda", "conv", 0, 0, 2, 1), row(&a, 0, "kda", "conv", 0, 0, 2, 3),
                     32 * 3 * 2) == 0);
    /* the replicated latent is the same on both TP ranks */
    ck_assert(memcmp(row(&b, 1, "mla", "kv_c", 1, 2, 5, 0), row(&a, 0, "mla", "kv_c", 1, 2, 5, 0),
                     1024) == 0);
    par_side_free(&a);
    par_side_free(&b);
}
END_TEST

START_TEST(pattern_every_coordinate_changes_the_bytes)
{
    struct par_side a;
    side(&a, "tiny:blocks=6,slots=2", 3);
    pattern_fill(&a.ranks[0], &a.mem[0], &a.ids[0], 0, 5);
    const uint8_t *base = row(&a, 0, "kda", "conv", 0, 0, 0, 0);
    const uint8_t *other[] = {
        row(&a, 0, "kda", "conv", 1, 0, 0, 0), /* layer */
        row(&a, 0, "kda", "conv", 0, 0, 1, 0), /* outer */
        row(&a, 0, "kda", "conv", 0, 0, 0, 1), /* head */
        row(&a, 0, "kda", "ssm", 0, 0, 0, 0),  /* tensor */
        row(&a, 0, "mla", "kv_c", 0, 0, 0, 0), /* group */
    };
    for (int i = 0; i < 5; i++)
        ck_assert_msg(memcmp(base, other[i], 64) != 0, "coordinate %d", i);
    ck_assert(memcmp(row(&a, 0, "mla", "kv_c", 0, 0, 0, 0), row(&a, 0, "mla", "kv_c", 0, 1, 0, 0),
                     64) != 0); /* item */
    uint8_t keep[64];
    memcpy(keep, base, 64);
    pattern_fill(&a.ranks[0], &a.mem[0], &a.ids[0], 0, 6); /* seed */
    ck_assert(memcmp(keep, base, 64) != 0);
    pattern_fill(&a.ranks[0], &a.mem[0], &a.ids[0], 1, 6); /* first_block moves paged items */
    ck_assert(memcmp(keep, base, 64) != 0);
    par_side_free(&a);
}
END_TEST

START_TEST(pattern_verify_pinpoints_a_wrong_byte)
{
    struct par_side a;
    side(&a, "tiny:blocks=6,slots=2", 3);
    pattern_fill(&a.ranks[0], &a.mem[0], &a.ids[0], 2, 9);
    char where[256];
    uint32_t bp = 99;
    uint64_t bo = 0;
    ck_assert_int_eq(pattern_verify(&a.ranks[0], &a.mem[0], &a.ids[0], 2, 9, &bp, &bo, where,
                                    sizeof(where)), 0);
    uint8_t *p = (uint8_t *)row(&a, 0, "kda", "ssm", 3, 0, 0, 2) + 17;
    *p ^= 0x40;
    ck_assert_int_eq(pattern_verify(&a.ranks[0], &a.mem[0], &a.ids[0], 2, 9, &bp, &bo, where,
                                    sizeof(where)), -1);
    ck_assert_ptr_eq(a.mem[0].base[bp] + bo, p);
    ck_assert_msg(strstr(where, "group kda layer ") && strstr(where, "tensor ssm item 0 outer 0 "
                                                                      "head 2 byte 17: got 0x"),
                  "%s", where);
    ck_assert_int_eq(pattern_verify(&a.ranks[0], &a.mem[0], &a.ids[0], 2, 10, NULL, NULL, NULL, 0),
                     -1); /* another seed */
    par_side_free(&a);
}
END_TEST

static Suite *pattern_suite(void)
{
    Suite *s = suite_create("pattern");
    TCase *tc = tcase_create("pattern");
    tcase_add_test(tc, pattern_shard_equals_the_same_heads_of_the_full_pattern);
    tcase_add_test(tc, pattern_every_coordinate_changes_the_bytes);
    tcase_add_test(tc, pattern_verify_pinpoints_a_wrong_byte);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(pattern_suite()); }
