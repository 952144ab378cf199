/* check_cfg.c: the configuration as a whole: the table, loading YAML (good files and every kind of
 * bad one, with its exact "file:line:col: message"), limits, the shipped config/kvferry.yaml,
 * printing as YAML and JSON, copy, the reload diff and the socket paths.
 * Run from the repository root (it reads config/kvferry.yaml). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "cfg_priv.h"
#include "log.h"
#include "testutil.h"

#define MIB (1ULL << 20)

static char err[CFG_ERR_MAX];

static bool cfg_equal(const struct kvf_config *a, const struct kvf_config *b)
{
    for (size_t i = 0; i < cfg_table_len; i++)
        if (!cfg_value_equal(&cfg_table[i], a, b))
            return false;
    return true;
}

static int load(const char *text, struct kvf_config *c)
{
    err[0] = '\0';
    return cfg_load_string("t.yaml", text, strlen(text), c, err, sizeof(err));
}

/* Loads `text` expecting failure; the config passed in must come back untouched. */
static const char *load_err(const char *text)
{
    struct kvf_config c, before;
    memset(&c, 0xab, sizeof(c));
    before = c;
    ck_assert_msg(load(text, &c) == -EINVAL, "should fail: %s", text);
    ck_assert(memcmp(&c, &before, sizeof(c)) == 0);
    return err;
}

START_TEST(table_rows_are_well_formed_and_grouped_by_section)
{
    for (size_t i = 0; i < cfg_table_len; i++) {
        const struct cfg_key *k = &cfg_table[i];
        const char *dot = strchr(k->key, '.');
        ck_assert_msg(dot && dot > k->key && dot[1] && !strchr(dot + 1, '.'), "%s", k->key);
        ck_assert_msg(k->doc && strlen(k->doc) > 10, "%s has no doc", k->key);
        ck_assert(k->offset < sizeof(struct kvf_config));
        ck_assert(k->type != CFG_ENUM || k->enum_names);
        ck_assert(k->min <= k->max);
        for (size_t j = 0; j < i; j++) {
            ck_assert_msg(strcmp(cfg_table[j].key, k->key) != 0, "%s twice", k->key);
            ck_assert_msg(cfg_table[j].offset != k->offset, "%s shares storage", k->key);
            /* a section seen before must be the one just before (sections contiguous) */
            size_t sl = (size_t)(dot - k->key);
            if (j + 1 < i && !strncmp(cfg_table[j].key, k->key, sl + 1))
                ck_assert_msg(!strncmp(cfg_table[i - 1].key, k->key, sl + 1), "%s", k->key);
        }
    }
    /* One row per field: the rows' storage plus source_path fills the struct (no padding in it). */
    size_t bytes = sizeof(char *);
    for (size_t i = 0; i < cfg_table_len; i++) {
        cfg_type_t t = cfg_table[i].type;
        bytes += t == CFG_STRING || t == CFG_PATH ? sizeof(char *)
                 : t == CFG_BOOL                  ? sizeof(bool)
                 : t == CFG_LIST                  ? sizeof(struct cfg_list)
                                                  : sizeof(int64_t);
    }
    ck_assert_uint_eq(bytes, sizeof(struct kvf_config));
}
END_TEST

START_TEST(live_keys_are_exactly_the_reloadable_ones)
{
    static const char *const live[] = {"log.level",
                                       "access.allow_uids",
                                       "access.allow_gids",
                                       "access.admin_uids",
                                       "access.admin_gids",
                                       "control.max_line",
                                       "control.max_conns",
                                       "control.max_conns_per_uid",
                                       "control.idle_timeout",
                                       "workers.read_timeout",
                                       "workers.hello_timeout",
                                       "workers.frame_timeout",
                                       "workers.frame_memory",
                                       "gates.min_bytes",
                                       "gates.min_blocks",
                                       "deadlines.lookup",
                                       "deadlines.send_wait",
                                       "deadlines.transfer",
                                       "arena.reserve_timeout",
                                       "arena.window",
                                       "arena.direct_run",
                                       "arena.shm_write",
                                       "peers.max_inflight",
                                       "metrics.max_label_values",
                                       "transfers.keep_finished"};
    size_t n_live = 0;
    for (size_t i = 0; i < cfg_table_len; i++) {
        bool want = false;
        for (size_t j = 0; j < sizeof(live) / sizeof(live[0]); j++)
            want |= strcmp(live[j], cfg_table[i].key) == 0;
        ck_assert_msg(cfg_table[i].live == want, "%s live flag", cfg_table[i].key);
        n_live += want;
    }
    ck_assert_uint_eq(n_live, sizeof(live) / sizeof(live[0]));
}
END_TEST

START_TEST(log_level_enum_is_numbered_like_log_level_t)
{
    const struct cfg_key *k = cfg_key_find("log.level");
    ck_assert_ptr_nonnull(k);
    int64_t n = 0;
    for (; k->enum_names[n]; n++) {
        log_level_t lvl;
        ck_assert_int_eq(log_level_from_string(k->enum_names[n], &lvl), 0);
        ck_assert_int_eq((int64_t)lvl, n); /* the daemon casts log_level to log_level_t */
    }
    ck_assert_int_eq(n, LOG_LVL_DEBUG + 1);
}
END_TEST

START_TEST(defaults_are_the_documented_values)
{
    struct kvf_config c;
    ck_assert_int_eq(cfg_defaults(&c), 0);
    ck_assert_str_eq(c.sockets_dir, "");
    ck_assert_str_eq(c.sockets_control, "");
    ck_assert_str_eq(c.sockets_worker, "");
    ck_assert_int_eq(c.sockets_mode, 0660);
    ck_assert_uint_eq(c.access_allow_uids.n + c.access_allow_gids.n + c.access_admin_uids.n +
                          c.access_admin_gids.n,
                      0);
    ck_assert_uint_eq(c.control_max_line, MIB);
    ck_assert_int_eq(c.control_max_conns, 64);
    ck_assert_int_eq(c.control_max_conns_per_uid, 16);
    ck_assert_uint_eq(c.control_idle_timeout_ms, 300000);
    ck_assert_int_eq(c.log_level, 2); /* info, as log_level_t */
    ck_assert_uint_eq(c.daemon_drain_timeout_ms, 10000);
    ck_assert_int_eq(c.workers_max_conns, 256);
    ck_assert_uint_eq(c.workers_max_frame, 16 * MIB);
    ck_assert_int_eq(c.workers_max_blocks, 65536);
    ck_assert_int_eq(c.workers_max_inflight, 4096);
    ck_assert_str_eq(c.listen_address, "127.0.0.1");
    ck_assert_int_eq(c.listen_port, 0);
    ck_assert_str_eq(c.transport_ucx_tls, "");
    ck_assert_str_eq(c.cluster_secret_file, "");
    ck_assert_int_eq(c.peers_max_inflight, 4096);
    ck_assert_uint_eq(c.arena_size, 512 * MIB);
    ck_assert_uint_eq(c.arena_chunk, 32 * MIB);
    ck_assert_uint_eq(c.arena_reserve_timeout_ms, 5000);
    ck_assert_int_eq(c.arena_placement, 0); /* auto */
    ck_assert_uint_eq(c.gates_min_bytes, 2 * MIB);
    ck_assert_int_eq(c.gates_min_blocks, 64);
    ck_assert_uint_eq(c.deadlines_lookup_ms, 2000);
    ck_assert_uint_eq(c.deadlines_send_wait_ms, 30000);
    ck_assert_uint_eq(c.deadlines_transfer_ms, 60000);
    ck_assert_str_eq(c.source_path, "");
    cfg_free(&c);
    cfg_free(&c); /* fields are NULL after a free: safe twice */
    cfg_free(NULL);
}
END_TEST

START_TEST(shipped_config_parses_to_the_defaults_and_documents_every_key)
{
    struct kvf_config c, d;
    ck_assert_msg(cfg_load_file("config/kvferry.yaml", &c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(cfg_defaults(&d), 0);
    ck_assert(cfg_equal(&c, &d));
    ck_assert_str_eq(c.source_path, "config/kvferry.yaml");

    FILE *f = fopen("config/kvferry.yaml", "r");
    ck_assert_ptr_nonnull(f);
    static char text[64 * 1024];
    size_t n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    for (size_t i = 0; i < cfg_table_len; i++) {
        const struct cfg_key *k = &cfg_table[i];
        const char *dot = strchr(k->key, '.');
        char sect[64], line[128];
        snprintf(sect, sizeof(sect), "\n%.*s:\n", (int)(dot - k->key), k->key);
        const char *s = strstr(text, sect);
        ck_assert_msg(s, "section of %s missing", k->key);
        /* the key, set at its default text, inside its section, after its doc comment */
        snprintf(line, sizeof(line), "\n  %s: %s\n", dot + 1, k->def);
        const char *at = strstr(s, line), *next = strstr(s + 1, ":\n\n");
        ck_assert_msg(at && (!next || at < next), "%s missing from config/kvferry.yaml", k->key);
        char doc[48];
        snprintf(doc, sizeof(doc), "%.40s", k->doc);
        ck_assert_msg(strstr(s, doc) && strstr(s, doc) < at, "doc of %s missing", k->key);
    }
    cfg_free(&c);
    cfg_free(&d);
}
END_TEST

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
    ck_assert_msg(load(text, &c) == 0, "%s", err);
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
        ck_assert_msg(load(texts[i], &c) == 0, "%s", err);
        ck_assert(cfg_equal(&c, &d));
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
    const char *got = load_err(bad[_i].text);
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
    ck_assert_str_eq(load_err(text), want);

    /* a refused arena.size: the chunk rule (chunk <= size) is not judged against the default */
    ck_assert_str_eq(load_err("arena:\n  size: 1KiB\n  chunk: 64MiB\n"),
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
    const char *got = load_err(text);
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
    ck_assert_msg(load(text, &c) == 0, "%s", err);
    ck_assert_uint_eq(c.access_allow_gids.n, CFG_LIST_MAX);
    cfg_free(&c);
    snprintf(text + off, sizeof(text) - (size_t)off, ", toomany]\n");
    const char *e = load_err(text);
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
            ck_assert_msg(load(text, &c) == 0, "%s", err);
            ck_assert_uint_eq(strlen(c.sockets_control), 107);
            cfg_free(&c);
        } else {
            snprintf(want, sizeof(want),
                     "t.yaml:2:12: sockets.control: 108 characters is above "
                     "the maximum 107");
            ck_assert_str_eq(load_err(text), want);
        }
    }
    /* a derived path counts too: dir at its maximum fits, the table keeps dir short enough */
    snprintf(text, sizeof(text), "sockets:\n  dir: /%0*d\n", 93, 0);
    ck_assert_msg(load(text, &c) == 0, "%s", err);
    char buf[256];
    ck_assert_int_eq(cfg_control_path(&c, buf, sizeof(buf)), 0);
    ck_assert_uint_eq(strlen(buf), 107);
    cfg_free(&c);
    snprintf(text, sizeof(text), "sockets:\n  dir: /%0*d\n", 94, 0);
    ck_assert_ptr_nonnull(
        strstr(load_err(text), "sockets.dir: 95 characters is above the maximum 94"));
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
    ck_assert_msg(cfg_load_file(path, &c, err, sizeof(err)) == 0, "%s", err);
    ck_assert_int_eq(c.log_level, 1);
    cfg_free(&c);
    write_file(path, CFG_FILE_MAX + 1);
    ck_assert_int_eq(cfg_load_file(path, &c, err, sizeof(err)), -EINVAL);
    char want[200];
    snprintf(want, sizeof(want), "%s:1:1: file is larger than 1048576 bytes", path);
    ck_assert_str_eq(err, want);
    ck_assert_int_eq(cfg_load_string("big", "", CFG_FILE_MAX + 1, &c, err, sizeof(err)), -EINVAL);
    unlink(path);
    ck_assert_int_eq(cfg_load_file(path, &c, err, sizeof(err)), -ENOENT);
    ck_assert_ptr_nonnull(strstr(err, path));
    ck_assert_int_eq(cfg_load_file(dir, &c, err, sizeof(err)), -EINVAL); /* a directory */
    rmdir(dir);
}
END_TEST

START_TEST(to_yaml_reparses_to_an_equal_config)
{
    struct kvf_config c, back;
    const char *text = "sockets: {dir: \"/srv/k \\\"q\\\" \\\\ #x\", mode: 0700}\n"
                       "access: {allow_uids: [1000, alice], admin_gids: [wheel]}\n"
                       "log: {level: warn}\n"
                       "arena: {size: 3GiB, chunk: 1052672, placement: device,"
                       " reserve_timeout: 1500ms}\n"
                       "transport: {ucx_tls: 'tcp,sm'}\n"
                       "deadlines: {transfer: 90s}\n";
    ck_assert_msg(load(text, &c) == 0, "%s", err);
    ck_assert_str_eq(c.sockets_dir, "/srv/k \"q\" \\ #x");
    char *y = cfg_to_yaml(&c);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(strstr(y, "arena:\n  size: 3GiB\n  chunk: 1028KiB\n"));
    ck_assert_ptr_nonnull(strstr(y, "  allow_uids: [\"1000\", \"alice\"]\n"));
    ck_assert_msg(load(y, &back) == 0, "%s\n%s", err, y);
    ck_assert(cfg_equal(&c, &back));
    for (size_t i = 0; i < cfg_table_len; i++) { /* every key, once */
        char line[80];
        const char *dot = strchr(cfg_table[i].key, '.');
        snprintf(line, sizeof(line), "\n  %s: ", dot + 1);
        ck_assert_ptr_nonnull(strstr(y, line));
    }
    free(y);
    cfg_free(&back);
    ck_assert_int_eq(cfg_defaults(&back), 0);
    ck_assert(!cfg_equal(&c, &back));
    y = cfg_to_yaml(&back);
    cfg_free(&c);
    ck_assert_msg(load(y, &c) == 0, "%s", err);
    ck_assert(cfg_equal(&c, &back));
    free(y);
    cfg_free(&c);
    cfg_free(&back);
}
END_TEST

START_TEST(to_json_groups_sections_with_bytes_and_milliseconds)
{
    struct kvf_config c;
    ck_assert_msg(load("arena: {size: 1GiB}\naccess: {allow_gids: [kvf]}\n", &c) == 0, "%s", err);
    json_t *j = cfg_to_json(&c);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(j, "arena"), "size")),
                     1 << 30);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(j, "deadlines"), "send_wait")), 30000);
    ck_assert_str_eq(json_string_value(json_object_get(json_object_get(j, "log"), "level")),
                     "info");
    json_t *g = json_object_get(json_object_get(j, "access"), "allow_gids");
    ck_assert_uint_eq(json_array_size(g), 1);
    ck_assert_str_eq(json_string_value(json_array_get(g, 0)), "kvf");
    size_t keys = 0;
    const char *name;
    json_t *sect;
    json_object_foreach(j, name, sect) keys += json_object_size(sect);
    ck_assert_uint_eq(keys, cfg_table_len);
    json_decref(j);
    cfg_free(&c);
}
END_TEST

START_TEST(copy_is_deep_and_survives_the_source)
{
    struct kvf_config c, d;
    ck_assert_msg(load("sockets: {dir: /x}\naccess: {admin_uids: [root, 7]}\n", &c) == 0, "%s",
                  err);
    ck_assert_int_eq(cfg_copy(&c, &d), 0);
    ck_assert(cfg_equal(&c, &d));
    ck_assert_ptr_ne(d.sockets_dir, c.sockets_dir);
    ck_assert_ptr_ne(d.access_admin_uids.items, c.access_admin_uids.items);
    cfg_free(&c);
    ck_assert_str_eq(d.sockets_dir, "/x");
    ck_assert_str_eq(d.access_admin_uids.items[1], "7");
    ck_assert_str_eq(d.source_path, "t.yaml");
    cfg_free(&d);
}
END_TEST

START_TEST(diff_reports_only_changed_keys_that_need_a_restart)
{
    struct kvf_config a, b;
    const char *keys[4];
    ck_assert_int_eq(cfg_defaults(&a), 0);
    ck_assert_msg(load("log: {level: debug}\naccess: {allow_uids: [5]}\ndeadlines: {lookup: 1s}\n"
                       "arena: {reserve_timeout: 1s}\n",
                       &b) == 0,
                  "%s", err);
    ck_assert_uint_eq(cfg_diff_restart_needed(&a, &b, keys, 4), 0); /* all live */
    cfg_free(&b);
    ck_assert_msg(load("log: {level: debug}\narena: {size: 1GiB}\nlisten: {port: 5000}\n"
                       "sockets: {dir: /y}\n",
                       &b) == 0,
                  "%s", err);
    ck_assert_uint_eq(cfg_diff_restart_needed(&a, &b, keys, 4), 3);
    ck_assert_str_eq(keys[0], "sockets.dir");
    ck_assert_str_eq(keys[1], "listen.port");
    ck_assert_str_eq(keys[2], "arena.size");
    ck_assert_uint_eq(cfg_diff_restart_needed(&a, &b, keys, 1), 3); /* count beyond n */
    ck_assert_str_eq(keys[0], "sockets.dir");
    ck_assert_uint_eq(cfg_diff_restart_needed(&a, &a, keys, 4), 0);
    cfg_free(&a);
    cfg_free(&b);
}
END_TEST

START_TEST(apply_live_moves_changed_live_keys_and_leaves_the_rest)
{
    struct kvf_config cur, fresh;
    const char *keys[4];
    ck_assert_int_eq(cfg_defaults(&cur), 0);
    ck_assert_msg(load("log: {level: debug}\naccess: {allow_uids: [5]}\narena: {size: 1GiB}\n",
                       &fresh) == 0,
                  "%s", err);
    uint64_t size_before = cur.arena_size;
    ck_assert_uint_eq(cfg_apply_live(&cur, &fresh, keys, 4), 2);
    ck_assert_str_eq(keys[0], "access.allow_uids");
    ck_assert_str_eq(keys[1], "log.level");
    ck_assert_int_eq(cur.log_level, 3); /* debug */
    ck_assert_uint_eq(cur.access_allow_uids.n, 1);
    ck_assert_str_eq(cur.access_allow_uids.items[0], "5");
    ck_assert_uint_eq(cur.arena_size, size_before); /* needs a restart: untouched */
    ck_assert_uint_eq(fresh.access_allow_uids.n, 0); /* the old value, freed with fresh */
    ck_assert_uint_eq(cfg_apply_live(&cur, &fresh, keys, 1), 2); /* the old values back */
    ck_assert_uint_eq(cur.access_allow_uids.n, 0);
    ck_assert_uint_eq(cfg_apply_live(&cur, &cur, keys, 4), 0);
    cfg_free(&cur);
    cfg_free(&fresh);
}
END_TEST

START_TEST(placement_names_load_as_their_enum_values)
{
    static const struct {
        const char *name;
        cfg_placement_t value;
    } cases[] = {{"auto", CFG_PLACEMENT_AUTO}, {"host", CFG_PLACEMENT_HOST},
                 {"device", CFG_PLACEMENT_DEVICE}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char yaml[64];
        struct kvf_config c;
        snprintf(yaml, sizeof yaml, "arena: {placement: %s}\n", cases[i].name);
        ck_assert_msg(load(yaml, &c) == 0, "%s", err);
        ck_assert_int_eq(c.arena_placement, cases[i].value);
        cfg_free(&c);
    }
    struct kvf_config d;
    ck_assert_int_eq(cfg_defaults(&d), 0);
    ck_assert_int_eq(d.arena_placement, CFG_PLACEMENT_AUTO);
    cfg_free(&d);
}
END_TEST

/* Derivation for a user other than root; returns 0 when right (callable in a child). */
static int check_user_paths(const struct kvf_config *c)
{
    char buf[256];
    int wrong = 0;
    setenv("XDG_RUNTIME_DIR", "/run/user/1234", 1);
    wrong |= cfg_control_path(c, buf, sizeof(buf)) != 0 ||
             strcmp(buf, "/run/user/1234/kvferry/control.sock") != 0;
    setenv("XDG_RUNTIME_DIR", "", 1);
    wrong |= cfg_worker_path(c, buf, sizeof(buf)) != 0 || strcmp(buf, "./run/worker.sock") != 0;
    unsetenv("XDG_RUNTIME_DIR");
    wrong |= cfg_socket_dir(c, buf, sizeof(buf)) != 0 || strcmp(buf, "./run") != 0;
    /* under systemd (User=kvferry, RuntimeDirectory=kvferry): the unit's runtime directory */
    setenv("RUNTIME_DIRECTORY", "/run/kvferry", 1);
    wrong |=
        cfg_worker_path(c, buf, sizeof(buf)) != 0 || strcmp(buf, "/run/kvferry/worker.sock") != 0;
    setenv("RUNTIME_DIRECTORY", "/run/a:/run/b", 1); /* several: none of them */
    wrong |= cfg_socket_dir(c, buf, sizeof(buf)) != 0 || strcmp(buf, "./run") != 0;
    unsetenv("RUNTIME_DIRECTORY");
    return wrong ? 1 : 0;
}

START_TEST(socket_paths_derive_from_dir_and_explicit_values_win)
{
    struct kvf_config c;
    char buf[256];
    ck_assert_int_eq(cfg_defaults(&c), 0);
    if (geteuid() == 0) {
        ck_assert_int_eq(cfg_socket_dir(&c, buf, sizeof(buf)), 0);
        ck_assert_str_eq(buf, "/run/kvferry");
        /* and the non-root derivation, in a child that drops to nobody */
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0)
                _exit(2);
            _exit(check_user_paths(&c));
        }
        int status;
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert(WIFEXITED(status));
        ck_assert_int_eq(WEXITSTATUS(status), 0);
    } else {
        ck_assert_int_eq(check_user_paths(&c), 0);
    }
    cfg_free(&c);
    ck_assert_msg(load("sockets: {dir: /srv/kvf}\n", &c) == 0, "%s", err);
    ck_assert_int_eq(cfg_control_path(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/srv/kvf/control.sock");
    ck_assert_int_eq(cfg_worker_path(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/srv/kvf/worker.sock");
    ck_assert_int_eq(cfg_worker_path(&c, buf, 10), -ENAMETOOLONG);
    cfg_free(&c);
    ck_assert_msg(load("sockets: {dir: /srv/kvf, worker: /w.sock}\n", &c) == 0, "%s", err);
    ck_assert_int_eq(cfg_worker_path(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/w.sock");
    ck_assert_int_eq(cfg_control_path(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/srv/kvf/control.sock");
    cfg_free(&c);
}
END_TEST

static Suite *cfg_suite(void)
{
    Suite *s = suite_create("cfg");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, table_rows_are_well_formed_and_grouped_by_section);
    tcase_add_test(tc, live_keys_are_exactly_the_reloadable_ones);
    tcase_add_test(tc, log_level_enum_is_numbered_like_log_level_t);
    tcase_add_test(tc, defaults_are_the_documented_values);
    tcase_add_test(tc, shipped_config_parses_to_the_defaults_and_documents_every_key);
    suite_add_tcase(s, tc);

    tc = tcase_create("load");
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

    tc = tcase_create("output");
    tcase_add_test(tc, to_yaml_reparses_to_an_equal_config);
    tcase_add_test(tc, to_json_groups_sections_with_bytes_and_milliseconds);
    tcase_add_test(tc, copy_is_deep_and_survives_the_source);
    tcase_add_test(tc, diff_reports_only_changed_keys_that_need_a_restart);
    tcase_add_test(tc, apply_live_moves_changed_live_keys_and_leaves_the_rest);
    tcase_add_test(tc, placement_names_load_as_their_enum_values);
    tcase_add_test(tc, socket_paths_derive_from_dir_and_explicit_values_win);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(cfg_suite());
}
