/* check_live_keys.c: every key the config table marks live reaches its user on a reload
 * (issue 24). A real kvferryd with an arena (cluster.secret_file set, no listener) gets a config
 * in which every live key has a new value; after `reload`, status.live (each module's report of
 * the value it holds, modules.h) must show exactly the live keys of cfg_table, each equal to the
 * new value as `config` renders it. A key whose user keeps a copy made at start (as the arena's
 * reserve timeout did) shows its old value and fails; a live key no module reports fails too. */
#include <grp.h>
#include <sys/stat.h>

#include "cfg.h"
#include "daemon_harness.h"

/* A value different from `cur` within the key's bounds, as YAML text. Lists get our own uid or
 * gid (so this test keeps its access and admin rights) and one more. */
static void new_value(const struct cfg_key *k, json_t *cur, char *buf, size_t len)
{
    switch (k->type) {
    case CFG_INT:
    case CFG_SIZE:
    case CFG_DURATION: {
        int64_t v = json_integer_value(cur);
        int64_t step = k->type == CFG_SIZE ? 1024 : k->type == CFG_DURATION ? 1000 : 1;
        int64_t nv = v + step <= k->max ? v + step : v - step;
        ck_assert_msg(nv >= k->min && nv <= k->max, "%s: no room for a new value", k->key);
        if (k->type == CFG_SIZE)
            ck_assert_int_eq(cfg_format_size((uint64_t)nv, buf, len), 0);
        else if (k->type == CFG_DURATION)
            ck_assert_int_eq(cfg_format_duration_ms((uint64_t)nv, buf, len), 0);
        else
            tu_fmt(buf, len, "%lld", (long long)nv);
        return;
    }
    case CFG_ENUM: {
        size_t i = 0;
        while (k->enum_names[i] && strcmp(k->enum_names[i], json_string_value(cur)) != 0)
            i++;
        ck_assert_msg(k->enum_names[i], "%s: value %s not among its names", k->key,
                      json_string_value(cur));
        const char *next = k->enum_names[i + 1] ? k->enum_names[i + 1] : k->enum_names[0];
        tu_fmt(buf, len, "\"%s\"", next);
        return;
    }
    case CFG_LIST: {
        bool gids = strstr(k->key, "gids") != NULL;
        unsigned own = gids ? (unsigned)getgid() : (unsigned)getuid();
        tu_fmt(buf, len, "[\"%u\", \"%u\"]", own, own + 4242);
        return;
    }
    default:
        ck_abort_msg("%s: a live key of a type this test cannot change: add it here", k->key);
    }
}

/* The config's value of a dotted key ("arena.reserve_timeout") out of `config`'s sections. */
static json_t *config_value(json_t *config, const char *key)
{
    char sec[64];
    const char *dot = strchr(key, '.');
    ck_assert_ptr_nonnull(dot);
    tu_fmt(sec, sizeof sec, "%.*s", (int)(dot - key), key);
    return json_object_get(json_object_get(config, sec), dot + 1);
}

static json_t *result_of(json_t *reply)
{
    ck_assert_msg(reply && json_is_true(json_object_get(reply, "ok")), "reply: %s",
                  reply ? json_dumps(reply, 0) : "none");
    return json_object_get(reply, "result");
}

START_TEST(every_live_key_reaches_its_user_on_reload)
{
    char secret[96], extra[512];
    tu_tmpdir(secret, sizeof secret);
    strcat(secret, "/secret");
    dh_write_file(secret, "kvferry-live-keys-test-secret-0123456789abcdef\n");
    ck_assert_int_eq(chmod(secret, 0600), 0);
    tu_fmt(extra, sizeof extra,
           "cluster.secret_file: \"%s\"\narena.size: 64MiB\narena.chunk: 4MiB\n", secret);
    struct dh h;
    dh_start(&h, extra);

    json_t *cr = dh_call(&h, "{\"id\":1,\"cmd\":\"config\"}");
    json_t *before = result_of(cr);
    char *cfg_text = NULL;
    size_t cfg_len = 0;
    FILE *f = open_memstream(&cfg_text, &cfg_len);
    fprintf(f, "%s", extra);
    size_t n_live = 0;
    for (size_t i = 0; i < cfg_table_len; i++) {
        const struct cfg_key *k = &cfg_table[i];
        if (!k->live)
            continue;
        char v[128];
        new_value(k, config_value(before, k->key), v, sizeof v);
        fprintf(f, "%s: %s\n", k->key, v);
        n_live++;
    }
    fclose(f);
    ck_assert_uint_gt(n_live, 20);
    json_decref(cr);
    char path[160];
    tu_fmt(path, sizeof path, "%s/kvferry.yaml", h.dir);
    dh_write_file(path, cfg_text);
    free(cfg_text);

    json_t *rr = dh_call(&h, "{\"id\":2,\"cmd\":\"reload\"}");
    json_t *applied = json_object_get(result_of(rr), "applied");
    ck_assert_msg(json_array_size(applied) == n_live, "reload applied %zu of %zu live keys: %s",
                  json_array_size(applied), n_live, json_dumps(applied, 0));
    json_decref(rr);

    cr = dh_call(&h, "{\"id\":3,\"cmd\":\"config\"}");
    json_t *after = result_of(cr);
    json_t *sr = dh_call(&h, "{\"id\":4,\"cmd\":\"status\"}");
    json_t *live = json_object_get(result_of(sr), "live");
    ck_assert_ptr_nonnull(live);
    size_t checked = 0;
    for (size_t i = 0; i < cfg_table_len; i++) {
        const struct cfg_key *k = &cfg_table[i];
        json_t *want = config_value(after, k->key), *got = json_object_get(live, k->key);
        if (!k->live) {
            ck_assert_msg(!got, "%s is not live but status.live reports it", k->key);
            continue;
        }
        ck_assert_msg(!json_equal(want, config_value(before, k->key)), "%s did not change",
                      k->key);
        char *w = json_dumps(want, JSON_ENCODE_ANY), *g = got ? json_dumps(got, JSON_ENCODE_ANY)
                                                               : NULL;
        ck_assert_msg(got && json_equal(want, got),
                      "%s: the config says %s after the reload, its user holds %s", k->key, w,
                      g ? g : "nothing (no module reports it)");
        free(w);
        free(g);
        checked++;
    }
    ck_assert_uint_eq(checked, n_live);
    ck_assert_uint_eq(json_object_size(live), n_live);
    printf("live keys: %zu reloaded, each seen by its user\n", checked);
    json_decref(cr);
    json_decref(sr);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
    unlink(secret);
    *strrchr(secret, '/') = '\0';
    rmdir(secret);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("live_keys");
    TCase *tc = tcase_create("reload");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, every_live_key_reaches_its_user_on_reload);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
