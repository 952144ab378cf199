/* check_bounce_tl.c: the bounce path's chunk timeline (bounce_tl.h): off for 0 (a mark on an
 * off timeline does nothing), the count clamped to 64 .. 1048576; a full ring keeps the newest
 * events oldest first and counts what it dropped; the JSON names every kind; stamps never go
 * back. */
#include <jansson.h>
#include <stdlib.h>

#include "bounce_tl.h"
#include "testutil.h"

static json_int_t ev_at(json_t *j, size_t i, size_t field)
{
    return json_integer_value(json_array_get(json_array_get(json_object_get(j, "events"), i),
                                             field));
}

START_TEST(off_for_zero_and_the_count_clamped)
{
    ck_assert_ptr_null(btl_new(0));
    btl_mark(NULL, BTL_LANDED, 1, 0, 0); /* off: nothing, no crash */
    ck_assert_ptr_null(btl_json(NULL));
    struct btl *t = btl_new(3); /* clamped up */
    ck_assert_ptr_nonnull(t);
    json_t *j = btl_json(t);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "capacity")), 64);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "kinds")), BTL_KINDS);
    ck_assert_str_eq(json_string_value(json_array_get(json_object_get(j, "kinds"), BTL_LANDED)),
                     "landed");
    json_decref(j);
    btl_free(t);
    t = btl_new(99999999); /* clamped down */
    j = btl_json(t);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "capacity")), 1 << 20);
    json_decref(j);
    ck_assert_ptr_null(btl_free(t));
}
END_TEST

START_TEST(a_full_ring_keeps_the_newest_oldest_first_and_counts_the_dropped)
{
    struct btl *t = btl_new(64);
    for (uint64_t i = 0; i < 100; i++)
        btl_mark(t, (btl_kind_t)(i % BTL_KINDS), 7, 3, i << 20);
    json_t *j = btl_json(t);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "dropped")), 36);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "events")), 64);
    for (size_t i = 0; i < 64; i++) {
        ck_assert_int_eq(ev_at(j, i, 1), (json_int_t)((i + 36) % BTL_KINDS));
        ck_assert_int_eq(ev_at(j, i, 2), 7);
        ck_assert_int_eq(ev_at(j, i, 3), 3);
        ck_assert_int_eq(ev_at(j, i, 4), (json_int_t)((i + 36) << 20));
        if (i)
            ck_assert_int_ge(ev_at(j, i, 0), ev_at(j, i - 1, 0));
    }
    json_decref(j);
    btl_free(t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("bounce_tl");
    TCase *tc = tcase_create("timeline");
    tcase_add_test(tc, off_for_zero_and_the_count_clamped);
    tcase_add_test(tc, a_full_ring_keeps_the_newest_oldest_first_and_counts_the_dropped);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
