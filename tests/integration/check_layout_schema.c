/* check_layout_schema.c: lib/kvferry-layout.schema.json (installed with the headers) agrees with
 * the decoder: the examples of docs/LAYOUT.md and preset layouts printed by the real kvferryctl
 * match it, and layouts the decoder refuses for a field's shape (unknown key, both addressings,
 * empty alias, over the limits) do not. Runs scripts/check-layout-schema (python3-jsonschema). */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "layout.h"
#include "testutil.h"

static int sh(const char *cmd)
{
    int st = system(cmd);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

/* The checker needs python3-jsonschema (scripts/install-deps has it; a bare GPU host may not). */
static int no_jsonschema(const char *test)
{
    if (system("python3 -c 'import jsonschema' >/dev/null 2>&1") == 0)
        return 0;
    printf("SKIP %s: python3 has no jsonschema module (Debian python3-jsonschema)\n", test);
    return 1;
}

START_TEST(schema_matches_the_examples_and_the_presets)
{
    if (no_jsonschema("schema_matches_the_examples_and_the_presets"))
        return;
    ck_assert_int_eq(sh("scripts/check-layout-schema examples/layouts/*.json"), 0);
    char bin[256], cmd[2048];
    /* rank 1 where the spec has one, else rank 0 */
    tu_bin("kvferryctl", bin, sizeof(bin));
    snprintf(cmd, sizeof(cmd),
             "set -e; for s in tiny tiny:pools=layer tiny:pools=layer_joint,tp=2,kv=split "
             "kimi-k3:tp=4,pp=2,pools=layer kimi-linear-48b:adp=1,tp=2,arr=block "
             "tiny:pp_layers=3+5,pp=2,state=split qwen3-next-80b:tp=4,pp=2,order=hnd,blocks=4 "
             "nemotron-h:tp=16,blocks=2,slots=1 llama-3-70b:tp=16,pp=2,blocks=2 "
             "deepseek-v3:blocks=2; do %s layout $s --rank 1 2>/dev/null || "
             "%s layout $s; done | scripts/check-layout-schema -",
             bin, bin);
    ck_assert_int_eq(sh(cmd), 0);
}
END_TEST

/* Each edit applied to a valid per-layer layout; the schema must refuse every result. */
START_TEST(schema_refuses_what_the_decoder_refuses_by_shape)
{
    if (no_jsonschema("schema_refuses_what_the_decoder_refuses_by_shape"))
        return;
    char bin[256], cmd[512], path[64];
    snprintf(path, sizeof(path), "/tmp/kvf-schema-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    snprintf(cmd, sizeof(cmd), "%s layout tiny:pools=layer",
             tu_bin("kvferryctl", bin, sizeof(bin)));
    FILE *p = popen(cmd, "r");
    json_error_t je;
    json_t *base = json_loadf(p, 0, &je);
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_ptr_nonnull(base);
    for (int i = 0; i < 7; i++) {
        json_t *o = json_deep_copy(base);
        json_t *g = json_array_get(json_object_get(o, "groups"), 0);
        json_t *v = json_array_get(json_object_get(g, "views"), 0);
        switch (i) {
        case 0:
            json_object_set_new(o, "colour", json_string("red"));
            break;
        case 1:
            json_object_set_new(v, "pool", json_integer(0));
            break;
        case 2:
            json_object_set_new(v, "alias", json_string(""));
            break;
        case 3:
            json_object_set_new(json_array_get(json_object_get(v, "per_layer"), 0), "pool",
                                json_integer(LAYOUT_MAX_POOLS));
            break;
        case 4: {
            json_t *ps = json_object_get(o, "pools");
            while (json_array_size(ps) <= LAYOUT_MAX_POOLS)
                json_array_append(ps, json_array_get(ps, 0));
            break;
        }
        case 5: {
            json_t *gs = json_object_get(o, "groups");
            while (json_array_size(gs) <= LAYOUT_MAX_GROUPS)
                json_array_append(gs, g);
            break;
        }
        case 6:
            json_object_del(v, "per_layer");
            break;
        }
        char *t = json_dumps(o, JSON_COMPACT);
        fprintf(f, "%s\n", t);
        free(t);
        json_decref(o);
    }
    json_decref(base);
    fclose(f);
    tu_fmt(cmd, sizeof(cmd), "scripts/check-layout-schema --expect-invalid - < %s", path);
    ck_assert_int_eq(sh(cmd), 0);
    unlink(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("layout_schema");
    TCase *tc = tcase_create("schema");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, schema_matches_the_examples_and_the_presets);
    tcase_add_test(tc, schema_refuses_what_the_decoder_refuses_by_shape);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
