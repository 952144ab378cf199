/* check_cfg_load.c: loading YAML: good files in every form, and every kind of bad one with its
 * exact "file:line:col: message" (all errors at once, a cap on them), and the limits crossed
 * (list entries, sun_path, file size). */
#include <errno.h>

#include "cfgutil.h"
#include "testutil.h"

#define MIB (1ULL << 20)

START_TEST(nested_dotted_and_list_forms_load_every_type)
{
    struct kvf_config c;
    const char *text = "# a comment\n"
                       "sockets:\n"
                       "  dir: /srv/kvf\n"
                       "  mode: 0600\n"
                       "access:\n"
                       "  allow_uids: [1000, alice]\n"
                       "  admin_gids:\n"
                       "    - wheel\n"
                       "    - \"10\"\n"
                       "log: {level: DEBUG}\n"
                       "arena.size: 2GiB\n"
                       "arena:\n"
                       "  chunk: 64KiB\n"
                       "  placement: host\n"
                       "  reserve_timeout: 250ms\n"
                       "listen:\n"
                       "  address: '10.0.0.1'\n"
                       "  port: 40123\n"
                       "transport: {ucx_tls: \"null\"}\n"
                       "cluster: {secret_file: ~}\n"
                       "control:\n"
                       "gates:\n"
                       "  min_blocks: 0\n";
    ck_assert_msg(cu_load(text, &c) == 0, "%s", cu_err);
    ck_assert_str_eq(c.sockets_dir, "/srv/kvf");
    ck_assert_int_eq(c.sockets_mode, 0600);
    ck_assert_uint_eq(c.access_allow_uids.n, 2);
    ck_assert_str_eq(c.access_allow_uids.items[0], "1000");
    ck_assert_str_eq(c.access_allow_uids.items[1], "alice");
    ck_assert_uint_eq(c.access_admin_gids.n, 2);
    ck_assert_str_eq(c.access_admin_gids.items[1], "10");
    ck_assert_int_eq(c.log_level, 3);
    ck_assert_uint_eq(c.arena_size, 2048 * MIB);
    ck_assert_uint_eq(c.arena_chunk, 64 * 1024);
    ck_assert_int_eq(c.arena_placement, 1);
    ck_assert_uint_eq(c.arena_reserve_timeout_ms, 250);
    ck_assert_str_eq(c.listen_address, "10.0.0.1");
    ck_assert_str_eq(c.transport_ucx_tls, "null"); /* quoted: a string, not a YAML null */
    ck_assert_str_eq(c.cluster_secret_file, "");   /* plain null: the empty string */
    ck_assert_int_eq(c.listen_port, 40123);
    ck_assert_int_eq(c.control_max_conns, 64); /* empty section: defaults */
    ck_assert_int_eq(c.gates_min_blocks, 0);
    ck_assert_str_eq(c.source_path, "t.yaml");
    cfg_free(&c);
}
END_TEST

START_TEST(empty_or_comment_only_files_mean_defaults)
{
    static const char *const texts[] = {"", "# nothing\n\n", "---\n", "~\n", "---\n...\n"};
    struct kvf_config c, d;
    ck_assert_int_eq(cfg_defaults(&d), 0);
    for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
        ck_assert_msg(cu_load(texts[i], &c) == 0, "%s", cu_err);
        ck_assert(cu_equal(&c, &d));
        cfg_free(&c);
    }
    cfg_free(&d);
}
END_TEST

/* Bad files and the exact message each must produce. */
static const struct {
    const char *text, *msg;
} bad[] = {
    {"arena:\n  sise: 1GiB\n", "t.yaml:2:3: unknown key 'arena.sise' (did you mean 'arena.size'?)"},
    {"arenna:\n  size: 1GiB\n", "t.yaml:1:1: unknown key 'arenna' (did you mean 'arena'?)"},
    {"log:\n  level: info\nbanana: 3\n", "t.yaml:3:1: unknown key 'banana'"},
    /* a removed key of older files: refused with why and what to do, not ignored */
    {"deadlines:\n  lookup: 2s\n  validate: 2s\n",
     "t.yaml:3:3: 'deadlines.validate' was removed: compatibility and planning run at once when "
     "a RECV meets the context instance's table, so nothing ever waited for it to bound (the "
     "table fetch is deadlines.lookup, the whole request deadlines.transfer); delete the line"},
    {"arena.max_inflight: 5\n",
     "t.yaml:1:1: unknown key 'arena.max_inflight' (did you mean 'workers.max_inflight'?)"},
    {"arena:\n  size: lots\n", "t.yaml:2:9: arena.size: expected a size like 512MiB, got 'lots'"},
    {"deadlines:\n  lookup: soon\n",
     "t.yaml:2:11: deadlines.lookup: expected a duration like 30s or 200ms, got 'soon'"},
    {"deadlines:\n  lookup: 2\n",
     "t.yaml:2:11: deadlines.lookup: '2' has no unit: write 2ms or 2s"},
    {"control:\n  idle_timeout: 300\n",
     "t.yaml:2:17: control.idle_timeout: '300' has no unit: write 300ms or 300s"},
    {"workers:\n  max_conns: many\n",
     "t.yaml:2:14: workers.max_conns: expected an integer, got 'many'"},
    {"arena:\n  size: 1GiB\n  chunk: 1KiB\n",
     "t.yaml:3:10: arena.chunk: 1KiB is below the minimum 64KiB"},
    {"listen:\n  port: 65536\n", "t.yaml:2:9: listen.port: 65536 is above the maximum 65535"},
    {"peers:\n  keepalive_interval: 50ms\n",
     "t.yaml:2:23: peers.keepalive_interval: 50ms is below the minimum 100ms"},
    {"peers:\n  keepalive_misses: 2\n",
     "t.yaml:2:21: peers.keepalive_misses: 2 is below the minimum 3"},
    {"arena:\n  peer_share: 101\n",
     "t.yaml:2:15: arena.peer_share: 101 is above the maximum 100"},
    {"control:\n  max_line: 65MiB\n",
     "t.yaml:2:13: control.max_line: 65MiB is above the maximum 64MiB"},
    {"arena:\n  placement: gpu\n",
     "t.yaml:2:14: arena.placement: 'gpu' is not one of auto, host, device"},
    {"log:\n  level: loud\n",
     "t.yaml:2:10: log.level: 'loud' is not one of error, warn, info, debug"},
    {"arena:\n  size: 1GiB\n  size: 2GiB\n",
     "t.yaml:3:3: duplicate key 'arena.size' (first set at line 2)"},
    {"arena.size: 1GiB\narena:\n  size: 2GiB\n",
     "t.yaml:3:3: duplicate key 'arena.size' (first set at line 1)"},
    {"log: {}\nlog: {}\n", "t.yaml:2:1: duplicate key 'log' (first set at line 1)"},
    {"arena: 5\n", "t.yaml:1:8: arena: expected a mapping of arena.* keys, got a scalar"},
    {"arena: [1, 2]\n", "t.yaml:1:8: arena: expected a mapping of arena.* keys, got a list"},
    {"arena:\n  size: {a: 1}\n", "t.yaml:2:9: arena.size: expected a single value, got a mapping"},
    {"access:\n  allow_uids: alice\n",
     "t.yaml:2:15: access.allow_uids: expected a list like [1000, alice], got a scalar"},
    {"access:\n  allow_uids: [[1]]\n",
     "t.yaml:2:16: access.allow_uids: list entries must be scalars, got a list"},
    {"access:\n  allow_uids: [ok, \"no way\"]\n",
     "t.yaml:2:20: access.allow_uids: expected a user or group name or number, got 'no way'"},
    {"- 1\n- 2\n", "t.yaml:1:1: expected a mapping of sections (like 'arena:'), got a list"},
    {"\"log\\0x\": {}\n", "t.yaml:1:1: unknown key 'log...'"},
    {"[a]: 1\n", "t.yaml:1:1: expected a key name, got a list"},
    {"arena:\n  size: 1GiB\n chunk: 1MiB\n", "t.yaml:3:2: YAML syntax error: "},
    {"log:\n  level: inf\xff\n", "t.yaml:2:13: YAML syntax error: invalid leading UTF-8 octet"},
    {"log:\n  level: info\x01\n",
     "t.yaml:2:14: YAML syntax error: control characters are not allowed"},
    {"arena:\n\tsize: 1GiB\n", "t.yaml:2:1: YAML syntax error: "},
    {"log: {level: info\n", "t.yaml:2:1: YAML syntax error: "},
    {"a: &x 1\n", "t.yaml:1:1: unknown key 'a'"},
    {"log: &l {level: info}\ndaemon: *l\n", "t.yaml:2:9: aliases (*name) are not supported"},
    {"log: {}\n---\nlog: {}\n", "t.yaml:2:1: more than one YAML document in the config"},
    {"arena:\n  chunk: 65537\n", "t.yaml:2:3: arena.chunk: 65537 is not a multiple of 4KiB"},
    {"arena:\n  size: 4MiB\n  chunk: 8MiB\n",
     "t.yaml:3:3: arena.chunk: 8MiB is larger than arena.size 4MiB"},
    {"arena:\n  size: 16MiB\n", "t.yaml:2:3: arena.chunk: 32MiB is larger than arena.size 16MiB"},
    {"control:\n  max_conns: 4\n",
     "t.yaml:2:3: control.max_conns_per_uid: 16 is larger than control.max_conns 4"},
    {"sockets:\n  mode: 0999\n",
     "t.yaml:2:9: sockets.mode: expected an octal number like 0660, got '0999'"},
    {"arena:\n  size:\n", "t.yaml:2:8: arena.size: expected a size like 512MiB, got nothing"},
    {"arena:\n  size: ''\n", "t.yaml:2:9: arena.size: expected a size like 512MiB, got ''"},
    {"sockets:\n  mode: 660\n", "t.yaml:2:9: sockets.mode: 660 is above the maximum 0777"},
    {"sockets:\n  dir: \"/a\\0b\"\n", "t.yaml:2:8: sockets.dir: a NUL character is not allowed"},
    {"access:\n  allow_uids: [\"a\\0\"]\n",
     "t.yaml:2:16: access.allow_uids: a NUL character is not allowed"},
};

START_TEST(bad_file_reports_file_line_column_and_what_is_wrong)
{
    const char *got = cu_load_err(bad[_i].text);
    ck_assert_msg(strncmp(got, bad[_i].msg, strlen(bad[_i].msg)) == 0,
                  "case %d:\n got: %s\nwant: %s", _i, got, bad[_i].msg);
}
END_TEST

/* Every mistake of a file at once, one line each in file order, the rules after the keys; a rule
 * on a key whose value was refused is not judged (it would blame a value the file did not set). */
START_TEST(every_error_of_a_file_is_reported_at_once)
{
    const char *text = "arena:\n"
                       "  sise: 1GiB\n"
                       "  chunk: 65537\n"
                       "  reserve_timeout: 5\n"
                       "deadlines:\n"
                       "  lookup: soon\n"
                       "  lookup: 2s\n"
                       "banana: {a: [1, 2]}\n"
                       "control:\n"
                       "  max_conns: 4\n"
                       "access:\n"
                       "  allow_uids: [ok, \"no way\", [1]]\n"
                       "listen: [1]\n"
                       "gates:\n"
                       "  min_bytes: lots\n";
    const char *want =
        "t.yaml:2:3: unknown key 'arena.sise' (did you mean 'arena.size'?)\n"
        "t.yaml:4:20: arena.reserve_timeout: '5' has no unit: write 5ms or 5s\n"
        "t.yaml:6:11: deadlines.lookup: expected a duration like 30s or 200ms, got "
        "'soon'\n"
        "t.yaml:7:3: duplicate key 'deadlines.lookup' (first set at line 6)\n"
        "t.yaml:8:1: unknown key 'banana'\n"
        "t.yaml:12:20: access.allow_uids: expected a user or group name or number, "
        "got 'no way'\n"
        "t.yaml:12:30: access.allow_uids: list entries must be scalars, got a list\n"
        "t.yaml:13:9: listen: expected a mapping of listen.* keys, got a list\n"
        "t.yaml:15:14: gates.min_bytes: expected a size like 512MiB, got 'lots'\n"
        "t.yaml:3:3: arena.chunk: 65537 is not a multiple of 4KiB\n"
        "t.yaml:10:3: control.max_conns_per_uid: 16 is larger than control.max_conns "
        "4";
    ck_assert_str_eq(cu_load_err(text), want);

    /* a refused arena.size: the chunk rule (chunk <= size) is not judged against the default */
    ck_assert_str_eq(cu_load_err("arena:\n  size: 1KiB\n  chunk: 64MiB\n"),
                     "t.yaml:2:9: arena.size: 1KiB is below the minimum 4MiB");
}
END_TEST

/* A file of nothing but mistakes: CFG_ERRORS_MAX of them, then a line saying the walk stopped. */
START_TEST(errors_past_the_cap_stop_the_walk_with_a_note)
{
    static char text[4096];
    int off = 0;
    for (int i = 0; i < CFG_ERRORS_MAX + 10; i++)
        off += snprintf(text + off, sizeof(text) - (size_t)off, "nokey%d: 1\n", i);
    const char *got = cu_load_err(text);
    int lines = 1;
    for (const char *p = got; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, CFG_ERRORS_MAX + 1);
    ck_assert_ptr_nonnull(strstr(got, "t.yaml:1:1: unknown key 'nokey0'\n"));
    char last[64];
    snprintf(last, sizeof(last), "\nt.yaml: stopped after %d errors", CFG_ERRORS_MAX);
    ck_assert_ptr_nonnull(strstr(got, last));
}
END_TEST

START_TEST(list_with_more_than_list_max_entries_is_refused)
{
    static char text[8192];
    struct kvf_config c;
    int off = snprintf(text, sizeof(text), "access:\n  allow_gids: [");
    for (int i = 0; i < CFG_LIST_MAX; i++)
        off += snprintf(text + off, sizeof(text) - (size_t)off, "%sg%d", i ? ", " : "", i);
    snprintf(text + off, sizeof(text) - (size_t)off, "]\n");
    ck_assert_msg(cu_load(text, &c) == 0, "%s", cu_err);
    ck_assert_uint_eq(c.access_allow_gids.n, CFG_LIST_MAX);
    cfg_free(&c);
    snprintf(text + off, sizeof(text) - (size_t)off, ", toomany]\n");
    const char *e = cu_load_err(text);
    const char *want = "access.allow_gids: more than 256 entries";
    ck_assert_msg(strncmp(e, "t.yaml:2:", 9) == 0 && strstr(e, want), "%s", e);
}
END_TEST

START_TEST(socket_path_longer_than_sun_path_is_refused)
{
    char text[256], want[128];
    struct kvf_config c;
    for (int len = 107; len <= 108; len++) {
        snprintf(text, sizeof(text), "sockets:\n  control: /%0*d\n", len - 1, 0);
        if (len == 107) {
            ck_assert_msg(cu_load(text, &c) == 0, "%s", cu_err);
            ck_assert_uint_eq(strlen(c.sockets_control), 107);
            cfg_free(&c);
        } else {
            snprintf(want, sizeof(want),
                     "t.yaml:2:12: sockets.control: 108 characters is above "
                     "the maximum 107");
            ck_assert_str_eq(cu_load_err(text), want);
        }
    }
    /* a derived path counts too: dir at its maximum fits, the table keeps dir short enough */
    snprintf(text, sizeof(text), "sockets:\n  dir: /%0*d\n", 93, 0);
    ck_assert_msg(cu_load(text, &c) == 0, "%s", cu_err);
    char buf[256];
    ck_assert_int_eq(cfg_control_path(&c, buf, sizeof(buf)), 0);
    ck_assert_uint_eq(strlen(buf), 107);
    cfg_free(&c);
    snprintf(text, sizeof(text), "sockets:\n  dir: /%0*d\n", 94, 0);
    ck_assert_ptr_nonnull(
        strstr(cu_load_err(text), "sockets.dir: 95 characters is above the maximum 94"));
}
END_TEST

static void write_file(const char *path, size_t len)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("log:\n  level: warn\n", f);
    for (size_t n = 19; n < len; n++) /* comment lines of 63 '#' and a newline */
        fputc((n + 1) % 64 == 0 || n + 1 == len ? '\n' : '#', f);
    ck_assert_int_eq(fclose(f), 0);
}

START_TEST(file_over_the_size_limit_is_refused)
{
    char dir[64], path[128];
    struct kvf_config c;
    tu_tmpdir(dir, sizeof(dir));
    tu_fmt(path, sizeof(path), "%s/kvferry.yaml", dir);
    write_file(path, CFG_FILE_MAX);
    ck_assert_msg(cfg_load_file(path, &c, cu_err, sizeof(cu_err)) == 0, "%s", cu_err);
    ck_assert_int_eq(c.log_level, 1);
    cfg_free(&c);
    write_file(path, CFG_FILE_MAX + 1);
    ck_assert_int_eq(cfg_load_file(path, &c, cu_err, sizeof(cu_err)), -EINVAL);
    char want[200];
    snprintf(want, sizeof(want), "%s:1:1: file is larger than 1048576 bytes", path);
    ck_assert_str_eq(cu_err, want);
    ck_assert_int_eq(cfg_load_string("big", "", CFG_FILE_MAX + 1, &c, cu_err, sizeof(cu_err)), -EINVAL);
    unlink(path);
    ck_assert_int_eq(cfg_load_file(path, &c, cu_err, sizeof(cu_err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(cu_err, path));
    ck_assert_int_eq(cfg_load_file(dir, &c, cu_err, sizeof(cu_err)), -EINVAL); /* a directory */
    rmdir(dir);
}
END_TEST

static Suite *cfg_load_suite(void)
{
    Suite *s = suite_create("cfg_load");
    TCase *tc = tcase_create("load");
    tcase_add_test(tc, nested_dotted_and_list_forms_load_every_type);
    tcase_add_test(tc, empty_or_comment_only_files_mean_defaults);
    tcase_add_loop_test(tc, bad_file_reports_file_line_column_and_what_is_wrong, 0,
                        (int)(sizeof(bad) / sizeof(bad[0])));
    tcase_add_test(tc, every_error_of_a_file_is_reported_at_once);
    tcase_add_test(tc, errors_past_the_cap_stop_the_walk_with_a_note);
    tcase_add_test(tc, list_with_more_than_list_max_entries_is_refused);
    tcase_add_test(tc, file_over_the_size_limit_is_refused);
    tcase_add_test(tc, socket_path_longer_than_sun_path_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(cfg_load_suite());
}
