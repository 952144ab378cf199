/* check_cfg_out.c: a loaded configuration used: printed as YAML (reparses equal) and JSON, copied
 * deep, diffed for a reload (what needs a restart), its live keys applied, placement names, and
 * the socket paths derived for root and other users. */
#include <errno.h>
#include <jansson.h>
#include <sys/wait.h>

#include "cfgutil.h"
#include "testutil.h"

#define MIB (1ULL << 20)

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
    ck_assert_msg(cu_load(text, &c) == 0, "%s", cu_err);
    ck_assert_str_eq(c.sockets_dir, "/srv/k \"q\" \\ #x");
    char *y = cfg_to_yaml(&c);
    ck_assert_ptr_nonnull(y);
    ck_assert_ptr_nonnull(strstr(y, "arena:\n  size: 3GiB\n  chunk: 1028KiB\n"));
    ck_assert_ptr_nonnull(strstr(y, "  allow_uids: [\"1000\", \"alice\"]\n"));
    ck_assert_msg(cu_load(y, &back) == 0, "%s\n%s", cu_err, y);
    ck_assert(cu_equal(&c, &back));
    for (size_t i = 0; i < cfg_table_len; i++) { /* every key, once */
        char line[80];
        const char *dot = strchr(cfg_table[i].key, '.');
        snprintf(line, sizeof(line), "\n  %s: ", dot + 1);
        ck_assert_ptr_nonnull(strstr(y, line));
    }
    free(y);
    cfg_free(&back);
    ck_assert_int_eq(cfg_defaults(&back), 0);
    ck_assert(!cu_equal(&c, &back));
    y = cfg_to_yaml(&back);
    cfg_free(&c);
    ck_assert_msg(cu_load(y, &c) == 0, "%s", cu_err);
    ck_assert(cu_equal(&c, &back));
    free(y);
    cfg_free(&c);
    cfg_free(&back);
}
END_TEST

START_TEST(to_json_groups_sections_with_bytes_and_milliseconds)
{
    struct kvf_config c;
    ck_assert_msg(cu_load("arena: {size: 1GiB}\naccess: {allow_gids: [kvf]}\n", &c) == 0, "%s", cu_err);
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
    ck_assert_msg(cu_load("sockets: {dir: /x}\naccess: {admin_uids: [root, 7]}\n", &c) == 0, "%s",
                  cu_err);
    ck_assert_int_eq(cfg_copy(&c, &d), 0);
    ck_assert(cu_equal(&c, &d));
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
    ck_assert_msg(cu_load("log: {level: debug}\naccess: {allow_uids: [5]}\ndeadlines: {lookup: 1s}\n"
                       "arena: {reserve_timeout: 1s}\n",
                       &b) == 0,
                  "%s", cu_err);
    ck_assert_uint_eq(cfg_diff_restart_needed(&a, &b, keys, 4), 0); /* all live */
    cfg_free(&b);
    ck_assert_msg(cu_load("log: {level: debug}\narena: {size: 1GiB}\nlisten: {port: 5000}\n"
                       "sockets: {dir: /y}\n",
                       &b) == 0,
                  "%s", cu_err);
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
    ck_assert_msg(cu_load("log: {level: debug}\naccess: {allow_uids: [5]}\narena: {size: 1GiB}\n",
                       &fresh) == 0,
                  "%s", cu_err);
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
        ck_assert_msg(cu_load(yaml, &c) == 0, "%s", cu_err);
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
    ck_assert_msg(cu_load("sockets: {dir: /srv/kvf}\n", &c) == 0, "%s", cu_err);
    ck_assert_int_eq(cfg_control_path(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/srv/kvf/control.sock");
    ck_assert_int_eq(cfg_worker_path(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/srv/kvf/worker.sock");
    ck_assert_int_eq(cfg_worker_path(&c, buf, 10), -ENAMETOOLONG);
    cfg_free(&c);
    ck_assert_msg(cu_load("sockets: {dir: /srv/kvf, worker: /w.sock}\n", &c) == 0, "%s", cu_err);
    ck_assert_int_eq(cfg_worker_path(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/w.sock");
    ck_assert_int_eq(cfg_control_path(&c, buf, sizeof(buf)), 0);
    ck_assert_str_eq(buf, "/srv/kvf/control.sock");
    cfg_free(&c);
}
END_TEST

static Suite *cfg_out_suite(void)
{
    Suite *s = suite_create("cfg_out");
    TCase *tc = tcase_create("output");
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
    return tu_run(cfg_out_suite());
}
