/* check_ctl_layout.c: runs the real build/kvferryctl binary offline: `layout SPEC --rank N`
 * prints exactly the preset rank's canonical JSON, `check-layout` accepts the examples and
 * names the field of a broken file (exit 1), `plan --ctx-layout FILE... --gen-layout FILE`
 * plans engine-shaped files (any order of ranks) and refuses an incomplete or repeated table. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "layout.h"
#include "plan.h"
#include "preset.h"
#include "testutil.h"

#define EX "examples/layouts/"

/* Runs kvferryctl ARGS (stderr joined to stdout when both); returns the exit code, output in out. */
static int run_ctl(const char *args, int both, char *out, size_t len)
{
    char bin[256], cmd[2048];
    tu_fmt(cmd, sizeof(cmd), "%s %s %s", tu_bin("kvferryctl", bin, sizeof(bin)), args,
             both ? "2>&1" : "2>/dev/null");
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out, 1, len - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    ck_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

static char out[1 << 20];

START_TEST(ctl_layout_prints_the_preset_ranks_canonical_json)
{
    const char *spec = "tiny:tp=2,pools=layer";
    ck_assert_int_eq(run_ctl("layout tiny:tp=2,pools=layer --rank 1 --role generation "
                             "--instance gen7", 0, out, sizeof(out)), 0);
    struct preset_spec s;
    char err[256];
    ck_assert_int_eq(preset_parse(spec, &s, err, sizeof(err)), 0);
    struct layout *ls = calloc(2, sizeof(*ls));
    ck_assert_int_eq(preset_build(&s, "gen7", ROLE_GENERATION, -1, ls, err, sizeof(err)), 0);
    char *want = layout_to_json(&ls[1]);
    ck_assert_uint_eq(strlen(out), strlen(want) + 1);
    ck_assert(strncmp(out, want, strlen(want)) == 0);
    free(want);
    free(ls);
    ck_assert_int_eq(run_ctl("layout tiny:tp=2 --rank 2", 1, out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "--rank 2 but the instance has 2 ranks"), "%s", out);
    ck_assert_int_eq(run_ctl("layout tiny:pools=shelf", 1, out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "pools: \"shelf\" is not view, layer or layer_joint"), "%s", out);
    ck_assert_int_eq(run_ctl("layout", 1, out, sizeof(out)), 1);
}
END_TEST

START_TEST(ctl_check_layout_accepts_the_examples_and_names_the_bad_field)
{
    ck_assert_int_eq(run_ctl("check-layout " EX "vllm-llama-per-layer-nhd.json " EX
                             "sglang-mha-token-pool.json " EX "vllm-hybrid-mamba-state.json",
                             1, out, sizeof(out)),
                     0);
    ck_assert_msg(strstr(out, "vllm-llama-per-layer-nhd.json: ok (instance vllm-llama3-8b, "
                              "context rank 0 of tp 1 x pp 1, 32 pools, 1 groups)"),
                  "%s", out);
    char dir[64], path[128], args[256];
    tu_tmpdir(dir, sizeof(dir));
    tu_fmt(path, sizeof(path), "%s/bad.json", dir);
    json_error_t je;
    json_t *o = json_load_file(EX "vllm-llama-per-layer-nhd.json", 0, &je);
    ck_assert_ptr_nonnull(o);
    json_t *v = json_array_get(json_object_get(json_array_get(json_object_get(o, "groups"), 0),
                                               "views"), 1);
    json_object_set_new(json_array_get(json_object_get(v, "per_layer"), 5), "pool",
                        json_integer(32));
    ck_assert_int_eq(json_dump_file(o, path, 0), 0);
    json_decref(o);
    tu_fmt(args, sizeof(args), "check-layout %s " EX "vllm-hybrid-mamba-state.json", path);
    ck_assert_int_eq(run_ctl(args, 1, out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "bad.json: groups[0].views[1].per_layer[5].pool: 32 is not below "
                              "n_pools 32"), "%s", out);
    ck_assert_msg(strstr(out, "vllm-hybrid-mamba-state.json: ok"), "%s", out);
    tu_fmt(args, sizeof(args), "check-layout %s/none.json", dir);
    ck_assert_int_eq(run_ctl(args, 1, out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "none.json: No such file or directory"), "%s", out);
    unlink(path);
    rmdir(dir);
}
END_TEST

START_TEST(ctl_plan_takes_layout_files)
{
    /* context ranks in any order; the generation rank is the one its file holds */
    ck_assert_int_eq(run_ctl("plan --json --ctx-layout " EX "sglang-mha-token-pool.rank1.json " EX
                             "sglang-mha-token-pool.json --gen-layout " EX
                             "sglang-mha-token-pool.rank1.json --prompt-tokens 1000",
                             0, out, sizeof(out)),
                     0);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    ck_assert_msg(j, "%s", out);
    /* 1000 tokens x 32 layers x (k + v) x 4 heads x 128 x bf16, all from context rank 1 */
    ck_assert_int_eq(json_integer_value(json_object_get(j, "total_bytes")), 1000LL * 32 * 2 * 1024);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "gen_rank")), 1);
    json_t *w = json_array_get(json_object_get(j, "writers"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(w, "ctx_rank")), 1);
    ck_assert_uint_eq(json_array_size(json_object_get(j, "writers")), 1);
    json_decref(j);
    /* the aliased hybrid plans (its state slots are clear of the blocks) */
    ck_assert_int_eq(run_ctl("plan --json --ctx-layout " EX "vllm-hybrid-mamba-state.json "
                             "--gen-layout " EX "vllm-hybrid-mamba-state.json",
                             0, out, sizeof(out)),
                     0);
    ck_assert_msg(strstr(out, "\"ok\":true"), "%s", out);
    /* a file per context rank: missing, repeated, or mixed with --all-ranks are refused */
    ck_assert_int_eq(run_ctl("plan --ctx-layout " EX "sglang-mha-token-pool.json --gen-layout " EX
                             "sglang-mha-token-pool.json", 1, out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "no file for context rank 1 of 2"), "%s", out);
    ck_assert_int_eq(run_ctl("plan --ctx-layout " EX "sglang-mha-token-pool.json " EX
                             "sglang-mha-token-pool.json --gen-layout " EX
                             "sglang-mha-token-pool.json", 1, out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "rank 0 given twice"), "%s", out);
    ck_assert_int_eq(run_ctl("plan --ctx tiny --gen-layout " EX "sglang-mha-token-pool.json "
                             "--all-ranks", 1, out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "--gen-layout plans the rank its file holds"), "%s", out);
    /* layouts of different models: refused by the planner, exit 2 */
    ck_assert_int_eq(run_ctl("plan --ctx-layout " EX "vllm-hybrid-mamba-state.json --gen-layout " EX
                             "vllm-llama-per-layer-nhd.json", 1, out, sizeof(out)), 2);
    ck_assert_msg(strstr(out, "PEER_INCOMPATIBLE"), "%s", out);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctl_layout");
    TCase *tc = tcase_create("ctl_layout");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ctl_layout_prints_the_preset_ranks_canonical_json);
    tcase_add_test(tc, ctl_check_layout_accepts_the_examples_and_names_the_bad_field);
    tcase_add_test(tc, ctl_plan_takes_layout_files);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
