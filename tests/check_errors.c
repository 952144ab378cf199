/* check_errors.c: the typed errors (kvferry.h: names both ways, stable values) and err_inval
 * (errors.h), the one message helper of the layout and preset refusals. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "errors.h"
#include "kvferry.h"
#include "preset.h"
#include "testutil.h"

START_TEST(error_names_round_trip_and_unknowns_are_refused)
{
    for (int e = 0; e < KVF_E__COUNT; e++) {
        const char *n = kvf_error_to_string((kvf_error_t)e);
        ck_assert_str_ne(n, "UNKNOWN");
        ck_assert_int_eq(kvf_error_from_string(n), e);
    }
    ck_assert_str_eq(kvf_error_to_string(KVF_E_PEER_INCOMPATIBLE), "PEER_INCOMPATIBLE");
    ck_assert_str_eq(kvf_error_to_string(KVF_E_BAD_REQUEST), "BAD_REQUEST");
    ck_assert_str_eq(kvf_error_to_string(KVF_E__COUNT), "UNKNOWN");
    ck_assert_int_eq(kvf_error_from_string("bad_request"), -1);
    ck_assert_int_eq(kvf_error_from_string(""), -1);
}
END_TEST

START_TEST(err_inval_formats_truncates_and_returns_einval)
{
    char buf[16];
    ck_assert_int_eq(err_inval(buf, sizeof(buf), "%s: %d is over %u", "tp", 99, 64u), -EINVAL);
    ck_assert_str_eq(buf, "tp: 99 is over "); /* cut to 15 bytes and the NUL */
    memset(buf, 'x', sizeof(buf));
    ck_assert_int_eq(err_inval(buf, 1, "anything"), -EINVAL);
    ck_assert_str_eq(buf, "");
    memset(buf, 'x', sizeof(buf));
    ck_assert_int_eq(err_inval(buf, 0, "nothing written"), -EINVAL);
    ck_assert_int_eq(buf[0], 'x');
    ck_assert_int_eq(err_inval(NULL, 64, "no buffer"), -EINVAL);
}
END_TEST

START_TEST(err_inval_serves_the_preset_and_layout_refusals)
{
    struct preset_spec s;
    char err[128];
    ck_assert_int_eq(preset_parse("tiny:tp=0", &s, err, sizeof(err)), -EINVAL);
    ck_assert_str_eq(err, "tp: 0 is not allowed");
    ck_assert_int_eq(preset_parse("tiny:tp=2", &s, NULL, 0), 0);
    ck_assert_int_eq(preset_parse("tiny:tp=x", &s, NULL, 0), -EINVAL); /* no buffer: still refused */
    struct layout l[1];
    ck_assert_int_eq(preset_parse("tiny", &s, err, sizeof(err)), 0);
    ck_assert_int_eq(preset_build(&s, "x", ROLE_CONTEXT, -1, l, err, sizeof(err)), 0);
    l[0].tp_rank = 1;
    ck_assert_int_eq(layout_validate(&l[0], err, sizeof(err)), -EINVAL);
    ck_assert_msg(strstr(err, "tp_rank: 1 is not below tp_size 1"), "%s", err);
}
END_TEST

static Suite *errors_suite(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, error_names_round_trip_and_unknowns_are_refused);
    tcase_add_test(tc, err_inval_formats_truncates_and_returns_einval);
    tcase_add_test(tc, err_inval_serves_the_preset_and_layout_refusals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(errors_suite()); }
