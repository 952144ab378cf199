/* check_prom.c: lib/prom (Prometheus text format): names, escaping, values, the metric set,
 * the stats-JSON walk; every rendered text goes through the independent validator in
 * promcheck.h, which is itself shown to reject broken texts. */
#include <errno.h>
#include <jansson.h>
#include <math.h>

#include "hist.h"
#include "hist_table.h"
#include "label_table.h"
#include "prom.h"
#include "promcheck.h"
#include "testutil.h"

static char *render(struct prom_set *s)
{
    char *t = NULL;
    size_t len = 0;
    ck_assert_int_eq(prom_set_render(s, &t, &len), 0);
    ck_assert_uint_eq(len, strlen(t));
    char err[256] = "";
    int bad = pc_validate(t, true, err, sizeof(err));
    ck_assert_msg(bad == 0, "invalid exposition: %s\n%s", err, t);
    return t;
}

static void assert_has_line(const char *text, const char *line)
{
    size_t n = strlen(line);
    for (const char *p = text; (p = strstr(p, line)); p++)
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return;
    ck_abort_msg("line '%s' missing from:\n%s", line, text);
}

/* ---- names ---- */

START_TEST(name_sanitizing_maps_bad_bytes_to_underscore)
{
    char out[PROM_NAME_MAX + 1];
    ck_assert_int_eq(prom_sanitize_name("workers.bytes-in/s", out, sizeof(out)), 18);
    ck_assert_str_eq(out, "workers_bytes_in_s");
    ck_assert_int_ge(prom_sanitize_name("9lives", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "_9lives");
    ck_assert_int_ge(prom_sanitize_name("", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "_");
    ck_assert_int_ge(prom_sanitize_name("a:b_c9", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "a:b_c9");
    ck_assert_int_ge(prom_sanitize_name("h\xc3\xa9llo w\"x", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "h__llo_w_x");
    ck_assert(prom_name_valid(out));
}
END_TEST

START_TEST(label_name_sanitizing_drops_colon_and_reserved_prefix)
{
    char out[PROM_NAME_MAX + 1];
    ck_assert_int_ge(prom_sanitize_label_name("a:b", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "a_b");
    ck_assert_int_ge(prom_sanitize_label_name("__name__", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "l__name__");
    ck_assert(prom_label_name_valid(out));
    ck_assert_int_ge(prom_sanitize_label_name("''x", out, sizeof(out)), 0); /* found by fuzzing */
    ck_assert_str_eq(out, "l__x");
    ck_assert_int_ge(prom_sanitize_label_name("_-", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "l__");
    ck_assert_int_ge(prom_sanitize_label_name("_a", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "_a");
    ck_assert_int_ge(prom_sanitize_label_name("0day", out, sizeof(out)), 0);
    ck_assert_str_eq(out, "_0day");
    ck_assert(!prom_label_name_valid("a:b"));
    ck_assert(prom_name_valid("a:b"));
    ck_assert(!prom_name_valid("1a"));
    ck_assert(!prom_name_valid(""));
}
END_TEST

START_TEST(name_too_long_is_refused_not_cut)
{
    char in[PROM_NAME_MAX + 2], out[PROM_NAME_MAX + 1], small[8];
    memset(in, 'a', sizeof(in) - 1);
    in[sizeof(in) - 1] = '\0';
    ck_assert_int_eq(prom_sanitize_name(in, out, sizeof(out)), -ENAMETOOLONG);
    in[PROM_NAME_MAX] = '\0';
    ck_assert_int_eq(prom_sanitize_name(in, out, sizeof(out)), PROM_NAME_MAX);
    ck_assert_int_eq(prom_sanitize_name("abcdefgh", small, sizeof(small)), -ENAMETOOLONG);
    ck_assert_int_eq(prom_sanitize_name("abcdefg", small, sizeof(small)), 7);
}
END_TEST

/* ---- escaping and values ---- */

START_TEST(label_value_escapes_backslash_quote_newline)
{
    char out[64];
    ck_assert_int_eq(prom_escape_label_value("a\\b\"c\nd", out, sizeof(out)), 10);
    ck_assert_str_eq(out, "a\\\\b\\\"c\\nd");
    ck_assert_int_eq(prom_escape_label_value("tab\there", out, sizeof(out)), 8);
    ck_assert_str_eq(out, "tab\there");
    ck_assert_int_eq(prom_escape_label_value("\"\"", out, 4), -ENOSPC);
    ck_assert_int_eq(prom_escape_label_value("\"\"", out, 5), 4);
}
END_TEST

START_TEST(help_escapes_backslash_newline_but_not_quote)
{
    char out[64];
    ck_assert_int_eq(prom_escape_help("say \"hi\"\\\n", out, sizeof(out)), 12);
    ck_assert_str_eq(out, "say \"hi\"\\\\\\n");
}
END_TEST

START_TEST(values_print_exact_integers_and_special_floats)
{
    char v[32];
    prom_format_int(INT64_MAX, v, sizeof(v));
    ck_assert_str_eq(v, "9223372036854775807");
    prom_format_int(-3, v, sizeof(v));
    ck_assert_str_eq(v, "-3");
    prom_format_real(NAN, v, sizeof(v));
    ck_assert_str_eq(v, "NaN");
    prom_format_real(INFINITY, v, sizeof(v));
    ck_assert_str_eq(v, "+Inf");
    prom_format_real(-INFINITY, v, sizeof(v));
    ck_assert_str_eq(v, "-Inf");
    prom_format_real(0.25, v, sizeof(v));
    ck_assert_str_eq(v, "0.25");
    prom_format_real(0.1, v, sizeof(v));
    ck_assert_double_eq(strtod(v, NULL), 0.1); /* round-trips */
}
END_TEST

/* ---- the set ---- */

START_TEST(counter_gets_total_suffix_once_gauge_keeps_name)
{
    struct prom_set s;
    prom_set_init(&s);
    ck_assert_int_eq(prom_set_add_int(&s, "x_bytes", PROM_COUNTER, "bytes", NULL, 0, 5), 0);
    ck_assert_int_eq(prom_set_add_int(&s, "y_total", PROM_COUNTER, NULL, NULL, 0, 6), 0);
    ck_assert_int_eq(prom_set_add_int(&s, "z_open", PROM_GAUGE, "open", NULL, 0, 7), 0);
    ck_assert_int_eq(prom_set_add_int(&s, "slots_total", PROM_GAUGE, NULL, NULL, 0, 8), 0);
    ck_assert_int_eq(prom_set_add_int(&s, "_total", PROM_GAUGE, NULL, NULL, 0, 9), 0);
    char *t = render(&s);
    assert_has_line(t, "# TYPE x_bytes_total counter");
    assert_has_line(t, "x_bytes_total 5");
    assert_has_line(t, "# TYPE y_total counter");
    assert_has_line(t, "y_total 6");
    assert_has_line(t, "# TYPE z_open gauge");
    assert_has_line(t, "# HELP z_open open");
    assert_has_line(t, "z_open 7");
    ck_assert_ptr_null(strstr(t, "y_total_total"));
    assert_has_line(t, "# TYPE slots gauge");
    assert_has_line(t, "slots 8");
    assert_has_line(t, "_total 9"); /* nothing left to drop it from */
    free(t);
    prom_set_done(&s);
}
END_TEST

START_TEST(interleaved_adds_render_each_family_together)
{
    struct prom_set s;
    prom_set_init(&s);
    struct prom_label l1 = {"k", "1"}, l2 = {"k", "2"};
    ck_assert_int_eq(prom_set_add_int(&s, "a", PROM_GAUGE, NULL, &l1, 1, 1), 0);
    ck_assert_int_eq(prom_set_add_int(&s, "b", PROM_GAUGE, NULL, NULL, 0, 2), 0);
    ck_assert_int_eq(prom_set_add_int(&s, "a", PROM_GAUGE, NULL, &l2, 1, 3), 0);
    char *t = render(&s); /* the validator refuses split families */
    ck_assert_str_eq(t, "# HELP a kvferry metric a\n# TYPE a gauge\na{k=\"1\"} 1\na{k=\"2\"} 3\n"
                        "# HELP b kvferry metric b\n# TYPE b gauge\nb 2\n");
    free(t);
    prom_set_done(&s);
}
END_TEST

START_TEST(duplicate_series_and_type_clash_are_refused_and_counted)
{
    struct prom_set s;
    prom_set_init(&s);
    struct prom_label ab[2] = {{"a", "1"}, {"b", "2"}}, ba[2] = {{"b", "2"}, {"a", "1"}};
    ck_assert_int_eq(prom_set_add_int(&s, "m", PROM_GAUGE, NULL, ab, 2, 1), 0);
    ck_assert_int_eq(prom_set_add_int(&s, "m", PROM_GAUGE, NULL, ba, 2, 9), -EEXIST);
    ck_assert_int_eq(prom_set_add_int(&s, "m", PROM_COUNTER, NULL, NULL, 0, 1), 0); /* m_total */
    ck_assert_int_eq(prom_set_add_int(&s, "m_total", PROM_GAUGE, NULL, NULL, 0, 1), 0); /* "m" */
    ck_assert_int_eq(prom_set_add_int(&s, "m", PROM_GAUGE, NULL, NULL, 0, 2), -EEXIST);
    ck_assert_int_eq(prom_set_add_int(&s, "_total", PROM_COUNTER, NULL, NULL, 0, 1), 0);
    ck_assert_int_eq(prom_set_add_int(&s, "_total", PROM_GAUGE, NULL, NULL, 0, 1), -EEXIST);
    ck_assert_int_eq(prom_set_add_int(&s, "m.x", PROM_GAUGE, NULL, NULL, 0, 1), 0);
    ck_assert_int_eq(prom_set_add_int(&s, "m-x", PROM_GAUGE, NULL, NULL, 0, 2), -EEXIST);
    struct prom_label twice[2] = {{"a:b", "1"}, {"a_b", "2"}};
    ck_assert_int_eq(prom_set_add_int(&s, "n", PROM_GAUGE, NULL, twice, 2, 1), -EEXIST);
    ck_assert_uint_eq(s.dropped, 5);
    ck_assert_uint_eq(s.n_series, 5);
    char *t = render(&s);
    assert_has_line(t, "m{a=\"1\",b=\"2\"} 1"); /* labels sorted by name */
    assert_has_line(t, "m_x 1");
    free(t);
    prom_set_done(&s);
}
END_TEST

START_TEST(series_and_label_limits_are_enforced)
{
    struct prom_set s;
    prom_set_init(&s);
    s.max_series = 3;
    struct prom_label l[PROM_LABELS_MAX + 1];
    char names[PROM_LABELS_MAX + 1][16];
    for (int i = 0; i <= PROM_LABELS_MAX; i++) {
        snprintf(names[i], sizeof(names[i]), "l%d", i);
        l[i] = (struct prom_label){names[i], "v"};
    }
    ck_assert_int_eq(prom_set_add_int(&s, "a", PROM_GAUGE, NULL, l, PROM_LABELS_MAX + 1, 1),
                     -E2BIG);
    ck_assert_int_eq(prom_set_add_int(&s, "a", PROM_GAUGE, NULL, l, PROM_LABELS_MAX, 1), 0);
    for (int i = 0; i < 2; i++) {
        char nm[16];
        snprintf(nm, sizeof(nm), "g%d", i);
        ck_assert_int_eq(prom_set_add_int(&s, nm, PROM_GAUGE, NULL, NULL, 0, i), 0);
    }
    ck_assert_int_eq(prom_set_add_int(&s, "over", PROM_GAUGE, NULL, NULL, 0, 1), -E2BIG);
    ck_assert_uint_eq(s.dropped, 2);
    free(render(&s));
    prom_set_done(&s);
}
END_TEST

START_TEST(long_label_value_is_cut_on_a_utf8_boundary_and_escaped)
{
    struct prom_set s;
    prom_set_init(&s);
    char v[PROM_LABEL_VALUE_MAX + 64];
    size_t o = 0;
    v[o++] = 'x';
    while (o + 2 < sizeof(v) - 1) { /* 2-byte "é", then offset by one: the cut lands inside */
        v[o++] = '\xc3';
        v[o++] = '\xa9';
    }
    v[o] = '\0';
    struct prom_label l = {"peer", v};
    ck_assert_int_eq(prom_set_add_int(&s, "m", PROM_GAUGE, NULL, &l, 1, 1), 0);
    struct prom_label q = {"peer", "a\"b\\c\nd"};
    ck_assert_int_eq(prom_set_add_int(&s, "m", PROM_GAUGE, NULL, &q, 1, 2), 0);
    char *t = render(&s);
    const char *p = strstr(t, "m{peer=\"x");
    ck_assert_ptr_nonnull(p);
    size_t vl = strcspn(p + 8, "\"");
    ck_assert_uint_le(vl, PROM_LABEL_VALUE_MAX);
    ck_assert_uint_eq(vl % 2, 1); /* 'x' + whole 2-byte characters */
    assert_has_line(t, "m{peer=\"a\\\"b\\\\c\\nd\"} 2");
    free(t);
    prom_set_done(&s);
}
END_TEST

START_TEST(help_with_newline_and_backslash_is_escaped)
{
    struct prom_set s;
    prom_set_init(&s);
    ck_assert_int_eq(prom_set_add_real(&s, "m", PROM_GAUGE, "two\nlines \\ here", NULL, 0, NAN), 0);
    char *t = render(&s);
    assert_has_line(t, "# HELP m two\\nlines \\\\ here");
    assert_has_line(t, "m NaN");
    free(t);
    prom_set_done(&s);
}
END_TEST

/* ---- the JSON walk ---- */

static char *walk(const char *json, const struct prom_doc *docs, size_t n, size_t *dropped)
{
    json_error_t je;
    json_t *j = json_loads(json, 0, &je);
    ck_assert_msg(j != NULL, "test JSON: %s", je.text);
    struct prom_set s;
    prom_set_init(&s);
    ck_assert_int_eq(prom_from_json(&s, "kvferry", j, docs, n), 0);
    json_decref(j);
    char *t = render(&s);
    if (dropped)
        *dropped = s.dropped;
    prom_set_done(&s);
    return t;
}

START_TEST(json_numbers_become_samples_named_by_path)
{
    char *t = walk("{\"arena\":{\"bytes_free\":4096,\"ratio\":0.5,\"draining\":true,"
                   "\"slots\":{\"quarantined\":2}},\"peers\":{\"connected\":false}}",
                   NULL, 0, NULL);
    assert_has_line(t, "kvferry_arena_bytes_free 4096");
    assert_has_line(t, "kvferry_arena_ratio 0.5");
    assert_has_line(t, "kvferry_arena_draining 1");
    assert_has_line(t, "kvferry_arena_slots_quarantined 2");
    assert_has_line(t, "kvferry_peers_connected 0");
    assert_has_line(t, "# TYPE kvferry_arena_bytes_free gauge");
    assert_has_line(t, "# HELP kvferry_arena_slots_quarantined kvferryd stats key "
                       "arena.slots.quarantined");
    free(t);
}
END_TEST

START_TEST(json_total_suffix_is_counter_doc_overrides_type)
{
    static const struct prom_doc docs[] = {
        {"m.puts", PROM_COUNTER, NULL, "UCX puts issued.", NULL},
        {"m.weird_total", PROM_GAUGE, NULL, NULL, NULL},
    };
    char *t =
        walk("{\"m\":{\"bytes_total\":10,\"puts\":3,\"open\":1,\"weird_total\":4}}", docs, 2, NULL);
    assert_has_line(t, "# TYPE kvferry_m_bytes_total counter");
    assert_has_line(t, "# TYPE kvferry_m_puts_total counter");
    assert_has_line(t, "# HELP kvferry_m_puts_total UCX puts issued.");
    assert_has_line(t, "kvferry_m_puts_total 3");
    assert_has_line(t, "# TYPE kvferry_m_open gauge");
    assert_has_line(t, "# TYPE kvferry_m_weird gauge"); /* a gauge never ends in _total */
    ck_assert_ptr_null(strstr(t, "kvferry_m_weird_total"));
    free(t);
}
END_TEST

START_TEST(json_documented_object_keyed_by_name_becomes_label)
{
    static const struct prom_doc docs[] = {
        {"transfers.failed", PROM_COUNTER, "error", "Failed transfers by typed error.", NULL},
    };
    char *t = walk("{\"transfers\":{\"failed\":{\"TIMEOUT\":3,\"PEER_LOST\":0}}}", docs, 1, NULL);
    assert_has_line(t, "# TYPE kvferry_transfers_failed_total counter");
    assert_has_line(t, "kvferry_transfers_failed_total{error=\"TIMEOUT\"} 3");
    assert_has_line(t, "kvferry_transfers_failed_total{error=\"PEER_LOST\"} 0");
    free(t);
}
END_TEST

START_TEST(json_by_suffix_object_becomes_label_and_nests)
{
    char *t = walk("{\"engine\":{\"paths_total_by_reason\":{\"below_gate\":4,\"no-rkey\":1},"
                   "\"peers_by_peer\":{\"node\\\"1\":{\"bytes_total\":7,"
                   "\"failed_total_by_error\":{\"TIMEOUT\":2}}}}}",
                   NULL, 0, NULL);
    assert_has_line(t, "# TYPE kvferry_engine_paths_total counter");
    assert_has_line(t, "kvferry_engine_paths_total{reason=\"below_gate\"} 4");
    assert_has_line(t, "kvferry_engine_paths_total{reason=\"no-rkey\"} 1");
    assert_has_line(t, "kvferry_engine_peers_bytes_total{peer=\"node\\\"1\"} 7");
    assert_has_line(t, "kvferry_engine_peers_failed_total{error=\"TIMEOUT\",peer=\"node\\\"1\"} 2");
    free(t);
}
END_TEST

START_TEST(json_time_units_become_seconds)
{
    char *t = walk("{\"x\":{\"uptime_s\":5,\"wait_ms\":1500,\"busy_us_total\":2000000,"
                   "\"lag_ns\":250,\"bytes\":3,\"status\":7}}",
                   NULL, 0, NULL);
    assert_has_line(t, "kvferry_x_uptime_seconds 5");
    assert_has_line(t, "kvferry_x_wait_seconds 1.5");
    assert_has_line(t, "# TYPE kvferry_x_busy_seconds_total counter");
    assert_has_line(t, "kvferry_x_busy_seconds_total 2");
    assert_has_line(t, "kvferry_x_lag_seconds 2.5e-07");
    assert_has_line(t, "kvferry_x_bytes 3");
    assert_has_line(t, "kvferry_x_status 7"); /* "_s" only as a whole suffix word */
    free(t);
}
END_TEST

START_TEST(json_strings_arrays_null_are_skipped)
{
    size_t dropped = 99;
    char *t =
        walk("{\"s\":{\"name\":\"x\",\"list\":[1,2],\"none\":null,\"n\":1}}", NULL, 0, &dropped);
    ck_assert_str_eq(t, "# HELP kvferry_s_n kvferryd stats key s.n\n# TYPE kvferry_s_n gauge\n"
                        "kvferry_s_n 1\n");
    ck_assert_uint_eq(dropped, 0);
    free(t);
}
END_TEST

START_TEST(json_nesting_past_the_depth_limit_is_dropped_and_counted)
{
    char deep[512] = "{\"a\":";
    for (int i = 0; i < PROM_DEPTH_MAX + 2; i++)
        strcat(deep, "{\"b\":");
    strcat(deep, "1");
    for (int i = 0; i < PROM_DEPTH_MAX + 2; i++)
        strcat(deep, "}");
    strcat(deep, ",\"ok\":{\"v\":2}}");
    size_t dropped = 0;
    char *t = walk(deep, NULL, 0, &dropped);
    ck_assert_uint_eq(dropped, 1);
    assert_has_line(t, "kvferry_ok_v 2");
    ck_assert_ptr_null(strstr(t, "kvferry_a_b"));
    free(t);
}
END_TEST

START_TEST(json_colliding_names_keep_the_first_and_count_the_rest)
{
    size_t dropped = 0;
    char *t = walk("{\"m\":{\"a-b\":1,\"a_b\":2,\"weird key\":3}}", NULL, 0, &dropped);
    ck_assert_uint_eq(dropped, 1);
    assert_has_line(t, "kvferry_m_a_b 1");
    assert_has_line(t, "kvferry_m_weird_key 3");
    free(t);
}
END_TEST

START_TEST(json_stats_not_an_object_is_einval)
{
    struct prom_set s;
    prom_set_init(&s);
    json_t *a = json_array();
    ck_assert_int_eq(prom_from_json(&s, "kvferry", a, NULL, 0), -EINVAL);
    json_decref(a);
    prom_set_done(&s);
}
END_TEST

START_TEST(json_declared_only_leaves_out_and_counts_undeclared_numbers)
{
    static const struct prom_doc docs[] = {
        {"m.puts", PROM_COUNTER, NULL, "UCX puts issued.", "puts"},
        {"m.size_total", PROM_GAUGE, NULL, "A size, whatever its key says.", "bytes"},
    };
    json_t *j = json_loads("{\"m\":{\"puts\":3,\"size_total\":9,\"guess_total\":4,"
                           "\"errs_by_code\":{\"X\":1}}}",
                           0, NULL);
    ck_assert_ptr_nonnull(j);
    struct prom_set s;
    prom_set_init(&s);
    s.declared_only = true;
    ck_assert_int_eq(prom_from_json(&s, "kvferry", j, docs, 2), 0);
    json_decref(j);
    char *t = render(&s);
    assert_has_line(t, "# TYPE kvferry_m_puts_total counter");
    assert_has_line(t, "# HELP kvferry_m_puts_total UCX puts issued. Unit: puts.");
    assert_has_line(t, "# TYPE kvferry_m_size gauge");
    assert_has_line(t, "kvferry_m_size 9");
    ck_assert_ptr_null(strstr(t, "guess")); /* no type from a name: left out */
    ck_assert_ptr_null(strstr(t, "errs"));
    ck_assert_uint_eq(s.undeclared, 2);
    ck_assert_uint_eq(s.dropped, 0);
    ck_assert_int_eq(strncmp(s.undeclared_first, "m.", 2), 0); /* for the daemon's log */
    free(t);
    prom_set_done(&s);
}
END_TEST

START_TEST(json_declared_histogram_renders_cumulative_buckets)
{
    static const struct prom_doc docs[] = {
        {"x.wait_ms", PROM_HISTOGRAM, NULL, "Wait per request.", NULL},
        {"x.size", PROM_HISTOGRAM, NULL, "Size per request.", "bytes"},
        {"x.bad", PROM_HISTOGRAM, NULL, "Counts do not fit the bounds.", NULL},
    };
    struct hist h = {{0}, 0, 0};
    static const struct hist_spec spec = {3, {1, 10, 100}};
    hist_observe(&h, &spec, 0.5);
    hist_observe(&h, &spec, 5);
    hist_observe(&h, &spec, 5);
    hist_observe(&h, &spec, 1000);
    json_t *x = json_object();
    json_object_set_new(x, "wait_ms", hist_json(&h, &spec));
    json_object_set_new(x, "size", hist_json(&h, &spec));
    json_object_set_new(x, "bad", json_pack("{s:[i,i],s:[i],s:i}", "le", 1, 2, "counts", 1,
                                            "sum", 1));
    json_t *j = json_pack("{s:o}", "x", x);
    struct prom_set s;
    prom_set_init(&s);
    s.declared_only = true;
    ck_assert_int_eq(prom_from_json(&s, "kvferry", j, docs, 3), 0);
    json_decref(j);
    char *t = render(&s);
    assert_has_line(t, "# TYPE kvferry_x_wait_seconds histogram");
    assert_has_line(t, "# HELP kvferry_x_wait_seconds Wait per request. Unit: seconds.");
    assert_has_line(t, "kvferry_x_wait_seconds_bucket{le=\"0.001\"} 1"); /* ms -> s */
    assert_has_line(t, "kvferry_x_wait_seconds_bucket{le=\"0.01\"} 3");
    assert_has_line(t, "kvferry_x_wait_seconds_bucket{le=\"0.1\"} 3");
    assert_has_line(t, "kvferry_x_wait_seconds_bucket{le=\"+Inf\"} 4");
    assert_has_line(t, "kvferry_x_wait_seconds_sum 1.0105");
    assert_has_line(t, "kvferry_x_wait_seconds_count 4");
    assert_has_line(t, "# TYPE kvferry_x_size histogram");
    assert_has_line(t, "kvferry_x_size_bucket{le=\"100\"} 3");
    assert_has_line(t, "kvferry_x_size_sum 1010.5");
    ck_assert_ptr_null(strstr(t, "kvferry_x_bad"));
    ck_assert_uint_eq(s.dropped, 1);
    free(t);
    prom_set_done(&s);
}
END_TEST

START_TEST(histogram_with_unsorted_bounds_is_refused)
{
    struct prom_set s;
    prom_set_init(&s);
    double le[] = {1, 1};
    uint64_t c[] = {1, 0, 0};
    ck_assert_int_eq(prom_set_add_histogram(&s, "h", "x", NULL, 0, le, c, 2, 1), -EINVAL);
    ck_assert_uint_eq(s.dropped, 1);
    prom_set_done(&s);
}
END_TEST

START_TEST(label_table_keeps_max_values_and_counts_the_rest_as_other)
{
    struct label_table t = {0};
    label_table_add(&t, "a", 2, 10);
    label_table_add(&t, "b", 2, 20);
    label_table_add(&t, "a", 2, 1);
    label_table_add(&t, "c", 2, 100); /* the table is full: other */
    label_table_add(&t, "d", 2, 1000);
    label_table_add(&t, "other", 2, 5); /* a value spelled "other" cannot take a row */
    label_table_add(&t, "", 2, 7);      /* "": local, also beyond the cap */
    json_t *j = label_table_json(&t);
    ck_assert_uint_eq(json_object_size(j), 3);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "a"), "requests")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "a"), "bytes")), 11);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "other"), "requests")),
                     4);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "other"), "bytes")),
                     1112);
    json_decref(j);
    char longkey[300];
    memset(longkey, 'k', sizeof longkey - 1);
    longkey[sizeof longkey - 1] = '\0';
    label_table_free(&t);
    label_table_add(&t, longkey, 4, 1); /* cut to LABEL_TABLE_KEY_MAX */
    ck_assert_uint_eq(strlen(t.rows[0].key), LABEL_TABLE_KEY_MAX);
    label_table_free(&t);
}
END_TEST

START_TEST(hist_table_bounds_tuples_and_renders_one_label_per_level)
{
    static const struct hist_spec spec = {2, {1, 10}};
    static const char *const names[HIST_TABLE_HISTS] = {"a", "b", "c", "d", "e", "f"};
    const struct hist_spec *specs[HIST_TABLE_HISTS];
    for (int i = 0; i < HIST_TABLE_HISTS; i++)
        specs[i] = &spec;
    struct hist_table t = {0};
    const char *k1[] = {"bounce", "vm/1", "gen"}, *k2[] = {"local", "local", "gen"};
    const char *k3[] = {"bounce", "vm/2", "gen"}; /* a third tuple: the table (2) is full */
    hist_observe(&hist_table_row(&t, k1, 2)->h[0], &spec, 5);
    hist_observe(&hist_table_row(&t, k2, 2)->h[5], &spec, 0.5);
    hist_observe(&hist_table_row(&t, k1, 2)->h[0], &spec, 50);
    hist_observe(&hist_table_row(&t, k3, 2)->h[0], &spec, 5);
    ck_assert_uint_eq(t.n, 2);
    ck_assert(t.other_used);
    static const struct prom_doc docs[] = {
        {"x.phase_s", PROM_HISTOGRAM, "path,peer,instance,phase", "Phases.", NULL},
        {"x.flat", PROM_HISTOGRAM, "path,peer", "A leaf where a level is declared.", NULL},
    };
    json_t *x = json_pack("{s:o,s:{s:i}}", "phase_s", hist_table_json(&t, names, specs), "flat",
                          "bounce", 1);
    json_t *j = json_pack("{s:o}", "x", x);
    struct prom_set s;
    prom_set_init(&s);
    s.declared_only = true;
    ck_assert_int_eq(prom_from_json(&s, "kvferry", j, docs, 2), 0);
    json_decref(j);
    char *txt = render(&s);
    assert_has_line(txt, "# TYPE kvferry_x_phase_seconds histogram");
    assert_has_line(txt, "kvferry_x_phase_seconds_bucket{instance=\"gen\",le=\"10\","
                         "path=\"bounce\",peer=\"vm/1\",phase=\"a\"} 1");
    assert_has_line(txt, "kvferry_x_phase_seconds_count{instance=\"gen\",path=\"bounce\","
                         "peer=\"vm/1\",phase=\"a\"} 2");
    assert_has_line(txt, "kvferry_x_phase_seconds_count{instance=\"gen\",path=\"local\","
                         "peer=\"local\",phase=\"f\"} 1");
    assert_has_line(txt, "kvferry_x_phase_seconds_count{instance=\"other\",path=\"other\","
                         "peer=\"other\",phase=\"a\"} 1");
    ck_assert_ptr_null(strstr(txt, "vm/2"));
    ck_assert_ptr_null(strstr(txt, "phase=\"b\"")); /* never observed: no series */
    ck_assert_ptr_null(strstr(txt, "kvferry_x_flat"));
    ck_assert_uint_eq(s.dropped, 1);
    free(txt);
    prom_set_done(&s);
    hist_table_free(&t);
}
END_TEST

/* ---- the validator can fail ---- */

START_TEST(validator_rejects_each_grammar_and_rule_violation)
{
    static const struct {
        const char *text;
        int line;
    } bad[] = {
        {"m 1", 0},                                          /* no final newline */
        {"1m 1\n", 1},                                       /* bad name */
        {"m{a=\"x\"y\"} 1\n", 1},                            /* stray quote */
        {"m{a=\"\\t\"} 1\n", 1},                             /* bad escape */
        {"m{__a=\"x\"} 1\n", 1},                             /* reserved label */
        {"m{a=\"x\",a=\"y\"} 1\n", 1},                       /* label twice */
        {"m{a:b=\"x\"} 1\n", 1},                             /* ':' in a label name */
        {"m one\n", 1},                                      /* bad value */
        {"m 1 1.5\n", 1},                                    /* bad timestamp */
        {"m\n", 1},                                          /* no value */
        {"# TYPE m gauge\n# TYPE m gauge\nm 1\n", 2},        /* TYPE twice */
        {"# TYPE m bogus\nm 1\n", 1},                        /* bad type */
        {"m 1\n# TYPE m gauge\n", 2},                        /* TYPE after sample */
        {"m{a=\"1\"} 1\nn 1\nm{a=\"2\"} 1\n", 3},            /* family split */
        {"m{a=\"1\",b=\"2\"} 1\nm{b=\"2\",a=\"1\"} 1\n", 2}, /* series twice */
        {"# HELP m a\\qb\nm 1\n", 1},                        /* bad HELP escape */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[256] = "";
        int r = pc_validate(bad[i].text, false, err, sizeof(err));
        ck_assert_msg(r == (bad[i].line ? bad[i].line : 1), "case %zu: got %d (%s)", i, r, err);
    }
    char err[256];
    ck_assert_int_eq(pc_validate("m 1\n", true, err, sizeof(err)), 1); /* strict: no HELP */
    ck_assert_int_eq(pc_validate("# HELP m x\n# TYPE m counter\nm{a=\"\\\"\\\\\\n\",} 1 -5\n"
                                 "m NaN\n# other comment\n\nn +Inf\n",
                                 false, err, sizeof(err)),
                     0);
}
END_TEST

static Suite *prom_suite(void)
{
    Suite *s = suite_create("prom");
    TCase *tc = tcase_create("names");
    tcase_add_test(tc, name_sanitizing_maps_bad_bytes_to_underscore);
    tcase_add_test(tc, label_name_sanitizing_drops_colon_and_reserved_prefix);
    tcase_add_test(tc, name_too_long_is_refused_not_cut);
    suite_add_tcase(s, tc);
    tc = tcase_create("escaping");
    tcase_add_test(tc, label_value_escapes_backslash_quote_newline);
    tcase_add_test(tc, help_escapes_backslash_newline_but_not_quote);
    tcase_add_test(tc, values_print_exact_integers_and_special_floats);
    suite_add_tcase(s, tc);
    tc = tcase_create("set");
    tcase_add_test(tc, counter_gets_total_suffix_once_gauge_keeps_name);
    tcase_add_test(tc, interleaved_adds_render_each_family_together);
    tcase_add_test(tc, duplicate_series_and_type_clash_are_refused_and_counted);
    tcase_add_test(tc, series_and_label_limits_are_enforced);
    tcase_add_test(tc, long_label_value_is_cut_on_a_utf8_boundary_and_escaped);
    tcase_add_test(tc, help_with_newline_and_backslash_is_escaped);
    suite_add_tcase(s, tc);
    tc = tcase_create("json");
    tcase_add_test(tc, json_numbers_become_samples_named_by_path);
    tcase_add_test(tc, json_total_suffix_is_counter_doc_overrides_type);
    tcase_add_test(tc, json_documented_object_keyed_by_name_becomes_label);
    tcase_add_test(tc, json_by_suffix_object_becomes_label_and_nests);
    tcase_add_test(tc, json_time_units_become_seconds);
    tcase_add_test(tc, json_strings_arrays_null_are_skipped);
    tcase_add_test(tc, json_nesting_past_the_depth_limit_is_dropped_and_counted);
    tcase_add_test(tc, json_colliding_names_keep_the_first_and_count_the_rest);
    tcase_add_test(tc, json_stats_not_an_object_is_einval);
    tcase_add_test(tc, json_declared_only_leaves_out_and_counts_undeclared_numbers);
    tcase_add_test(tc, json_declared_histogram_renders_cumulative_buckets);
    tcase_add_test(tc, histogram_with_unsorted_bounds_is_refused);
    tcase_add_test(tc, label_table_keeps_max_values_and_counts_the_rest_as_other);
    tcase_add_test(tc, hist_table_bounds_tuples_and_renders_one_label_per_level);
    suite_add_tcase(s, tc);
    tc = tcase_create("validator");
    tcase_add_test(tc, validator_rejects_each_grammar_and_rule_violation);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(prom_suite());
}
