/* check_cfg_units.c: sizes and durations as text (cfg_units.c) and one field of every cfg_type_t
 * (cfg_value.c), driven through rows of a test-local table. */
#include <errno.h>
#include <stdint.h>

#include "cfg_priv.h"
#include "testutil.h"

#define MIB (1ULL << 20)

static uint64_t size_of(const char *s)
{
    uint64_t v = 12345;
    ck_assert_msg(cfg_parse_size(s, &v) == 0, "'%s' should parse", s);
    return v;
}

static uint64_t ms_of(const char *s)
{
    uint64_t v = 12345;
    ck_assert_msg(cfg_parse_duration_ms(s, &v) == 0, "'%s' should parse", s);
    return v;
}

START_TEST(size_parses_binary_units_plain_bytes_and_whitespace)
{
    ck_assert_uint_eq(size_of("0"), 0);
    ck_assert_uint_eq(size_of("1024"), 1024);
    ck_assert_uint_eq(size_of("1024B"), 1024);
    ck_assert_uint_eq(size_of("1k"), 1024);
    ck_assert_uint_eq(size_of("1K"), 1024);
    ck_assert_uint_eq(size_of("64KiB"), 64 * 1024);
    ck_assert_uint_eq(size_of("512MiB"), 512 * MIB);
    ck_assert_uint_eq(size_of("512m"), 512 * MIB);
    ck_assert_uint_eq(size_of("4GiB"), 4096 * MIB);
    ck_assert_uint_eq(size_of("4G"), 4096 * MIB);
    ck_assert_uint_eq(size_of("1TiB"), 1ULL << 40);
    ck_assert_uint_eq(size_of("  64 KiB\t"), 64 * 1024);
    ck_assert_uint_eq(size_of("18446744073709551615"), UINT64_MAX);
    ck_assert_uint_eq(size_of("16777215TiB"), 16777215ULL << 40);
}
END_TEST

START_TEST(size_refuses_negative_junk_empty_decimal_units_and_overflow)
{
    static const char *const bad[] = {"",    "  ",      "-1",  "+1",    "1.5GiB", "lots", "1MB",
                                      "1KB", "1 MiB x", "MiB", "1MiBs", "0x10",   "1,024"};
    uint64_t v = 7;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(cfg_parse_size(bad[i], &v) == -EINVAL, "'%s' must be refused", bad[i]);
    ck_assert_int_eq(cfg_parse_size(NULL, &v), -EINVAL);
    ck_assert_int_eq(cfg_parse_size("18446744073709551616", &v), -ERANGE);
    ck_assert_int_eq(cfg_parse_size("99999999999999999999999999", &v), -ERANGE);
    ck_assert_int_eq(cfg_parse_size("16777216TiB", &v), -ERANGE);
    ck_assert_int_eq(cfg_parse_size("17179869184GiB", &v), -ERANGE);
    ck_assert_uint_eq(v, 7); /* ret written only on success */
}
END_TEST

START_TEST(duration_parses_units_and_a_bare_zero)
{
    ck_assert_uint_eq(ms_of("0"), 0);
    ck_assert_uint_eq(ms_of(" 0 "), 0);
    ck_assert_uint_eq(ms_of("0s"), 0);
    ck_assert_uint_eq(ms_of("200ms"), 200);
    ck_assert_uint_eq(ms_of("30s"), 30000);
    ck_assert_uint_eq(ms_of("5m"), 300000);
    ck_assert_uint_eq(ms_of("1h"), 3600000);
    ck_assert_uint_eq(ms_of(" 2 s "), 2000);
    ck_assert_uint_eq(ms_of("18446744073709551615ms"), UINT64_MAX);
}
END_TEST

START_TEST(duration_refuses_negative_junk_unknown_units_and_overflow)
{
    /* a number without its unit ("2": milliseconds or seconds?) is refused, 0 alone excepted */
    static const char *const bad[] = {"",    "-5s",  "s", "1.5s", "1d",   "10 sec",
                                      "5mm", "soon", "2", "250",  " 30 ", "00x"};
    uint64_t v = 7;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        ck_assert_msg(cfg_parse_duration_ms(bad[i], &v) == -EINVAL, "'%s' must be refused", bad[i]);
    ck_assert_int_eq(cfg_parse_duration_ms("18446744073709551616ms", &v), -ERANGE);
    ck_assert_int_eq(cfg_parse_duration_ms("5124095576030432h", &v), -ERANGE);
    ck_assert_uint_eq(v, 7);
}
END_TEST

START_TEST(format_picks_the_largest_exact_unit)
{
    char b[32];
    struct {
        uint64_t v;
        const char *s;
    } sizes[] = {{0, "0"},
                 {1, "1"},
                 {1536, "1536"},
                 {4096, "4KiB"},
                 {512 * MIB, "512MiB"},
                 {3072 * MIB, "3GiB"},
                 {1ULL << 40, "1TiB"},
                 {UINT64_MAX, "18446744073709551615"}},
      durs[] = {{0, "0ms"},     {999, "999ms"}, {1500, "1500ms"}, {2000, "2s"},
                {90000, "90s"}, {300000, "5m"}, {7200000, "2h"}};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        ck_assert_int_eq(cfg_format_size(sizes[i].v, b, sizeof(b)), 0);
        ck_assert_str_eq(b, sizes[i].s);
    }
    for (size_t i = 0; i < sizeof(durs) / sizeof(durs[0]); i++) {
        ck_assert_int_eq(cfg_format_duration_ms(durs[i].v, b, sizeof(b)), 0);
        ck_assert_str_eq(b, durs[i].s);
    }
    ck_assert_int_eq(cfg_format_size(512 * MIB, b, 6), -ENOSPC); /* "512MiB" needs 7 */
    ck_assert_int_eq(cfg_format_size(512 * MIB, b, 7), 0);
    ck_assert_int_eq(cfg_format_duration_ms(300000, b, 2), -ENOSPC);
}
END_TEST

START_TEST(format_then_parse_round_trips_exactly)
{
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    char b[32];
    for (int i = 0; i < 20000; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        /* values of every magnitude, many of them exact multiples of a unit */
        uint64_t v = (x >> (x & 63)) << ((x >> 8) % 45);
        uint64_t back = 0;
        ck_assert_int_eq(cfg_format_size(v, b, sizeof(b)), 0);
        ck_assert_int_eq(cfg_parse_size(b, &back), 0);
        ck_assert_uint_eq(back, v);
        ck_assert_int_eq(cfg_format_duration_ms(v, b, sizeof(b)), 0);
        ck_assert_int_eq(cfg_parse_duration_ms(b, &back), 0);
        ck_assert_uint_eq(back, v);
    }
}
END_TEST

/* A stand-in config with one field of every type, and rows describing it. */
struct tcfg {
    char *name;
    char *path;
    bool flag;
    int64_t count;
    int64_t mode;
    uint64_t size;
    uint64_t wait;
    int64_t color;
    struct cfg_list who;
};

static const char *const colors[] = {"red", "green", "blue", NULL};
#define T(f) offsetof(struct tcfg, f)
static const struct cfg_key trows[] = {
    {"t.name", CFG_STRING, T(name), "\"anon\"", 0, 8, NULL, false, "a string"},
    {"t.path", CFG_PATH, T(path), "\"\"", 0, 0, NULL, false, "a path"},
    {"t.flag", CFG_BOOL, T(flag), "false", 0, 0, NULL, true, "a bool"},
    {"t.count", CFG_INT, T(count), "3", -10, 100, NULL, false, "an int"},
    {"t.mode", CFG_INT, T(mode), "0640", 0, 0777, NULL, false, "an octal int"},
    {"t.size", CFG_SIZE, T(size), "1MiB", 4096, 1 << 30, NULL, false, "a size"},
    {"t.wait", CFG_DURATION, T(wait), "5s", 1, 60000, NULL, false, "a duration"},
    {"t.color", CFG_ENUM, T(color), "green", 0, 0, colors, false, "an enum"},
    {"t.who", CFG_LIST, T(who), "[]", 0, 0, NULL, false, "a list"},
};
enum { R_NAME, R_PATH, R_FLAG, R_COUNT, R_MODE, R_SIZE, R_WAIT, R_COLOR, R_WHO, R__N };

static struct tcfg tc;
static char msg[CFG_ERR_MAX];

static void tc_setup(void)
{
    memset(&tc, 0, sizeof(tc));
    for (int i = 0; i < R__N; i++)
        ck_assert_int_eq(cfg_value_default(&trows[i], &tc), 0);
}

static void tc_teardown(void)
{
    for (int i = 0; i < R__N; i++)
        cfg_value_free(&trows[i], &tc);
}

static int set(int row, const char *text)
{
    msg[0] = '\0';
    return cfg_value_parse(&trows[row], text, &tc, msg, sizeof(msg));
}

static const char *fmt(int row)
{
    static char b[256];
    ck_assert_int_eq(cfg_value_format(&trows[row], &tc, b, sizeof(b)), 0);
    return b;
}

START_TEST(every_type_takes_its_default_and_prints_it_back)
{
    ck_assert_str_eq(tc.name, "anon");
    ck_assert_str_eq(tc.path, "");
    ck_assert(!tc.flag);
    ck_assert_int_eq(tc.count, 3);
    ck_assert_int_eq(tc.mode, 0640);
    ck_assert_uint_eq(tc.size, MIB);
    ck_assert_uint_eq(tc.wait, 5000);
    ck_assert_int_eq(tc.color, 1);
    ck_assert_uint_eq(tc.who.n, 0);
    const char *want[R__N] = {"\"anon\"", "\"\"", "false", "3", "0640",
                              "1MiB",     "5s",   "green", "[]"};
    for (int i = 0; i < R__N; i++)
        ck_assert_str_eq(fmt(i), want[i]);
}
END_TEST

START_TEST(bool_accepts_yaml_spellings_and_refuses_others)
{
    static const char *const yes[] = {"true", "True", "yes", "on", "ON"};
    static const char *const no[] = {"false", "FALSE", "no", "off"};
    for (size_t i = 0; i < 5; i++) {
        tc.flag = false;
        ck_assert_int_eq(set(R_FLAG, yes[i]), 0);
        ck_assert(tc.flag);
    }
    for (size_t i = 0; i < 4; i++) {
        ck_assert_int_eq(set(R_FLAG, no[i]), 0);
        ck_assert(!tc.flag);
    }
    ck_assert_int_eq(set(R_FLAG, "maybe"), -EINVAL);
    ck_assert_str_eq(msg, "t.flag: expected true or false, got 'maybe'");
    ck_assert_int_eq(set(R_FLAG, NULL), -EINVAL);
    ck_assert_str_eq(msg, "t.flag: expected true or false, got nothing");
}
END_TEST

START_TEST(int_parses_decimal_octal_hex_and_enforces_bounds)
{
    ck_assert_int_eq(set(R_COUNT, "-10"), 0);
    ck_assert_int_eq(tc.count, -10);
    ck_assert_int_eq(set(R_COUNT, "0x10"), 0);
    ck_assert_int_eq(tc.count, 16);
    ck_assert_int_eq(set(R_COUNT, "100"), 0);
    ck_assert_int_eq(set(R_COUNT, "101"), -EINVAL);
    ck_assert_str_eq(msg, "t.count: 101 is above the maximum 100");
    ck_assert_int_eq(set(R_COUNT, "-11"), -EINVAL);
    ck_assert_str_eq(msg, "t.count: -11 is below the minimum -10");
    ck_assert_int_eq(set(R_COUNT, "12abc"), -EINVAL);
    ck_assert_str_eq(msg, "t.count: expected an integer, got '12abc'");
    ck_assert_int_eq(set(R_COUNT, "--1"), -EINVAL);
    ck_assert_int_eq(set(R_COUNT, "99999999999999999999"), -EINVAL);
    ck_assert_str_eq(msg, "t.count: 99999999999999999999 is above the maximum 100");
    ck_assert_int_eq(tc.count, 100); /* unchanged by the failures */
    ck_assert_int_eq(set(R_MODE, "0o600"), 0);
    ck_assert_int_eq(tc.mode, 0600);
    ck_assert_int_eq(set(R_MODE, "0755"), 0);
    ck_assert_str_eq(fmt(R_MODE), "0755");
    ck_assert_int_eq(set(R_MODE, "0888"), -EINVAL);
    ck_assert_str_eq(msg, "t.mode: expected an octal number like 0660, got '0888'");
    ck_assert_int_eq(set(R_MODE, "01000"), -EINVAL);
    ck_assert_str_eq(msg, "t.mode: 01000 is above the maximum 0777");
}
END_TEST

START_TEST(size_and_duration_fields_enforce_bounds_in_their_units)
{
    ck_assert_int_eq(set(R_SIZE, "4KiB"), 0);
    ck_assert_uint_eq(tc.size, 4096);
    ck_assert_int_eq(set(R_SIZE, "1KiB"), -EINVAL);
    ck_assert_str_eq(msg, "t.size: 1KiB is below the minimum 4KiB");
    ck_assert_int_eq(set(R_SIZE, "2GiB"), -EINVAL);
    ck_assert_str_eq(msg, "t.size: 2GiB is above the maximum 1GiB");
    ck_assert_int_eq(set(R_SIZE, "lots"), -EINVAL);
    ck_assert_str_eq(msg, "t.size: expected a size like 512MiB, got 'lots'");
    ck_assert_int_eq(set(R_SIZE, "18446744073709551615"), -EINVAL);
    ck_assert_int_eq(set(R_SIZE, "99999999999999999999TiB"), -EINVAL);
    ck_assert_str_eq(msg, "t.size: 99999999999999999999TiB is above the maximum 1GiB");
    ck_assert_uint_eq(tc.size, 4096);
    ck_assert_int_eq(set(R_WAIT, "1m"), 0);
    ck_assert_uint_eq(tc.wait, 60000);
    ck_assert_int_eq(set(R_WAIT, "61s"), -EINVAL);
    ck_assert_str_eq(msg, "t.wait: 61s is above the maximum 1m");
    ck_assert_int_eq(set(R_WAIT, "0"), -EINVAL);
    ck_assert_str_eq(msg, "t.wait: 0ms is below the minimum 1ms");
    ck_assert_int_eq(set(R_WAIT, "soon"), -EINVAL);
    ck_assert_str_eq(msg, "t.wait: expected a duration like 30s or 200ms, got 'soon'");
}
END_TEST

START_TEST(string_and_path_enforce_length_and_refuse_control_characters)
{
    ck_assert_int_eq(set(R_NAME, "12345678"), 0);
    ck_assert_str_eq(tc.name, "12345678");
    ck_assert_int_eq(set(R_NAME, "123456789"), -EINVAL);
    ck_assert_str_eq(msg, "t.name: 9 characters is above the maximum 8");
    ck_assert_int_eq(set(R_NAME, "a\nb"), -EINVAL);
    ck_assert_str_eq(msg, "t.name: control character at position 2");
    ck_assert_str_eq(tc.name, "12345678");
    ck_assert_int_eq(set(R_NAME, "say \"hi\\"), 0);
    ck_assert_str_eq(fmt(R_NAME), "\"say \\\"hi\\\\\"");
    ck_assert_int_eq(set(R_NAME, NULL), 0); /* YAML null is the empty string */
    ck_assert_str_eq(tc.name, "");
    char longp[CFG_STRING_MAX + 2];
    memset(longp, 'p', sizeof(longp) - 1);
    longp[sizeof(longp) - 1] = '\0';
    ck_assert_int_eq(set(R_PATH, longp), -EINVAL);
    longp[CFG_STRING_MAX] = '\0';
    ck_assert_int_eq(set(R_PATH, longp), 0);
}
END_TEST

START_TEST(enum_matches_names_case_insensitively_and_lists_them_on_error)
{
    ck_assert_int_eq(set(R_COLOR, "BLUE"), 0);
    ck_assert_int_eq(tc.color, 2);
    ck_assert_str_eq(fmt(R_COLOR), "blue");
    ck_assert_int_eq(set(R_COLOR, "pink"), -EINVAL);
    ck_assert_str_eq(msg, "t.color: 'pink' is not one of red, green, blue");
    ck_assert_int_eq(tc.color, 2);
}
END_TEST

START_TEST(list_takes_names_and_numbers_up_to_the_limit)
{
    char item[16];
    ck_assert_int_eq(cfg_list_append(&trows[R_WHO], "alice", &tc, msg, sizeof(msg)), 0);
    ck_assert_int_eq(cfg_list_append(&trows[R_WHO], "1000", &tc, msg, sizeof(msg)), 0);
    ck_assert_int_eq(cfg_list_append(&trows[R_WHO], "machine$", &tc, msg, sizeof(msg)), 0);
    ck_assert_str_eq(fmt(R_WHO), "[\"alice\", \"1000\", \"machine$\"]");
    ck_assert_int_eq(cfg_list_append(&trows[R_WHO], "bad name", &tc, msg, sizeof(msg)), -EINVAL);
    ck_assert_str_eq(msg, "t.who: expected a user or group name or number, got 'bad name'");
    ck_assert_int_eq(cfg_list_append(&trows[R_WHO], "", &tc, msg, sizeof(msg)), -EINVAL);
    char longname[CFG_ITEM_MAX + 2];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    ck_assert_int_eq(cfg_list_append(&trows[R_WHO], longname, &tc, msg, sizeof(msg)), -EINVAL);
    for (int i = 3; i < CFG_LIST_MAX; i++) {
        snprintf(item, sizeof(item), "u%d", i);
        ck_assert_int_eq(cfg_list_append(&trows[R_WHO], item, &tc, msg, sizeof(msg)), 0);
    }
    ck_assert_uint_eq(tc.who.n, CFG_LIST_MAX);
    ck_assert_int_eq(cfg_list_append(&trows[R_WHO], "onemore", &tc, msg, sizeof(msg)), -EINVAL);
    ck_assert_str_eq(msg, "t.who: more than 256 entries");
    ck_assert_uint_eq(tc.who.n, CFG_LIST_MAX);
}
END_TEST

START_TEST(copy_and_equal_cover_every_type)
{
    struct tcfg other;
    memset(&other, 0, sizeof(other));
    ck_assert_int_eq(set(R_NAME, "x"), 0);
    ck_assert_int_eq(cfg_list_append(&trows[R_WHO], "bob", &tc, msg, sizeof(msg)), 0);
    for (int i = 0; i < R__N; i++) {
        ck_assert_int_eq(cfg_value_copy(&trows[i], &tc, &other), 0);
        ck_assert(cfg_value_equal(&trows[i], &tc, &other));
    }
    ck_assert_ptr_ne(other.name, tc.name); /* deep */
    ck_assert_int_eq(set(R_FLAG, "on"), 0);
    ck_assert_int_eq(set(R_COLOR, "red"), 0);
    ck_assert_int_eq(cfg_list_append(&trows[R_WHO], "carol", &tc, msg, sizeof(msg)), 0);
    ck_assert(!cfg_value_equal(&trows[R_FLAG], &tc, &other));
    ck_assert(!cfg_value_equal(&trows[R_COLOR], &tc, &other));
    ck_assert(!cfg_value_equal(&trows[R_WHO], &tc, &other));
    ck_assert(cfg_value_equal(&trows[R_NAME], &tc, &other));
    for (int i = 0; i < R__N; i++)
        cfg_value_free(&trows[i], &other);
    ck_assert_ptr_null(other.name);
    ck_assert_uint_eq(other.who.n, 0);
}
END_TEST

static Suite *cfg_units_suite(void)
{
    Suite *s = suite_create("cfg_units");
    TCase *tc_units = tcase_create("units");
    tcase_add_test(tc_units, size_parses_binary_units_plain_bytes_and_whitespace);
    tcase_add_test(tc_units, size_refuses_negative_junk_empty_decimal_units_and_overflow);
    tcase_add_test(tc_units, duration_parses_units_and_a_bare_zero);
    tcase_add_test(tc_units, duration_refuses_negative_junk_unknown_units_and_overflow);
    tcase_add_test(tc_units, format_picks_the_largest_exact_unit);
    tcase_add_test(tc_units, format_then_parse_round_trips_exactly);
    suite_add_tcase(s, tc_units);

    TCase *tc_types = tcase_create("types");
    tcase_add_checked_fixture(tc_types, tc_setup, tc_teardown);
    tcase_add_test(tc_types, every_type_takes_its_default_and_prints_it_back);
    tcase_add_test(tc_types, bool_accepts_yaml_spellings_and_refuses_others);
    tcase_add_test(tc_types, int_parses_decimal_octal_hex_and_enforces_bounds);
    tcase_add_test(tc_types, size_and_duration_fields_enforce_bounds_in_their_units);
    tcase_add_test(tc_types, string_and_path_enforce_length_and_refuse_control_characters);
    tcase_add_test(tc_types, enum_matches_names_case_insensitively_and_lists_them_on_error);
    tcase_add_test(tc_types, list_takes_names_and_numbers_up_to_the_limit);
    tcase_add_test(tc_types, copy_and_equal_cover_every_type);
    suite_add_tcase(s, tc_types);
    return s;
}

int main(void)
{
    return tu_run(cfg_units_suite());
}
