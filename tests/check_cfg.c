/* check_cfg.c: the configuration table: rows well formed, the live keys, the log level enum,
 * the defaults, and the shipped config/kvferry.yaml (parses to the defaults, documents every key).
 * Loading YAML: check_cfg_load.c; printing, copy, reload diff, socket paths: check_cfg_out.c.
 * Run from the repository root (it reads config/kvferry.yaml). */

#include "cfgutil.h"
#include "log.h"
#include "testutil.h"

#define MIB (1ULL << 20)

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
                                       "deadlines.stream_idle",
                                       "arena.reserve_timeout",
                                       "arena.window",
                                       "arena.cut_at_layers",
                                       "arena.direct_run",
                                       "arena.shm_write",
                                       "arena.cma_write",
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
    ck_assert_msg(cfg_load_file("config/kvferry.yaml", &c, cu_err, sizeof(cu_err)) == 0, "%s", cu_err);
    ck_assert_int_eq(cfg_defaults(&d), 0);
    ck_assert(cu_equal(&c, &d));
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
    return s;
}

int main(void)
{
    return tu_run(cfg_suite());
}
