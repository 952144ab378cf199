/* check_ctl_plan.c: runs the real build/kvferryctl binary: `plan --json` for a compatible and an
 * incompatible pair (exit codes and every JSON field), --all-ranks, usage errors, and the
 * README's examples. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "testutil.h"

/* Runs kvferryctl with args; returns its exit code and its stdout parsed as JSON (or NULL). */
static int run_ctl(const char *args, json_t **ret)
{
    char bin[256], cmd[1024], out[65536];
    tu_fmt(cmd, sizeof(cmd), "%s %s 2>/dev/null", tu_bin("kvferryctl", bin, sizeof(bin)), args);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    int st = pclose(f);
    ck_assert(WIFEXITED(st));
    if (ret) {
        json_error_t e;
        *ret = json_loads(out, 0, &e);
    }
    return WEXITSTATUS(st);
}

static json_int_t jint(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    ck_assert_msg(json_is_integer(v), "field %s missing", k);
    return json_integer_value(v);
}

START_TEST(ctl_plan_json_for_a_compatible_pair)
{
    json_t *j;
    int rc = run_ctl("plan --ctx kimi-k3 --gen kimi-k3 --prompt-tokens 8192 --json", &j);
    ck_assert_int_eq(rc, 0);
    ck_assert_ptr_nonnull(j);
    ck_assert(json_is_true(json_object_get(j, "ok")));
    ck_assert_int_eq(jint(j, "gen_rank"), 0);
    ck_assert_int_eq(jint(j, "state_bytes"), 454459392);
    ck_assert_int_eq(jint(j, "kv_bytes"), 27648 * 8192);
    ck_assert_int_eq(jint(j, "total_bytes"), 454459392 + 27648 * 8192);
    json_t *ws = json_object_get(j, "writers");
    ck_assert_uint_eq(json_array_size(ws), 1);
    ck_assert_int_eq(jint(json_array_get(ws, 0), "ctx_rank"), 0);
    ck_assert_int_eq(jint(json_array_get(ws, 0), "bytes"), 454459392 + 27648 * 8192);
    ck_assert_int_ge(jint(json_array_get(ws, 0), "copy_ops"), 1);
    ck_assert_uint_eq(json_object_size(j), 6);
    json_decref(j);
    /* fan-in at every rank, prefix-cached */
    rc = run_ctl("plan --ctx tiny:tp=4 --gen tiny:tp=2 --all-ranks --prompt-tokens 640 "
                 "--gen-cached-tokens 128 --json", &j);
    ck_assert_int_eq(rc, 0);
    ck_assert(json_is_array(j));
    ck_assert_uint_eq(json_array_size(j), 2);
    for (size_t r = 0; r < 2; r++) {
        json_t *p = json_array_get(j, r);
        ck_assert_int_eq(jint(p, "gen_rank"), (json_int_t)r);
        ck_assert_int_eq(jint(p, "kv_bytes"), 8 * 2 * 64 * 1152); /* 10 - 2 blocks, 2 MLA layers */
        json_int_t sum = 0;
        json_t *w;
        size_t i;
        json_array_foreach(json_object_get(p, "writers"), i, w) sum += jint(w, "bytes");
        ck_assert_int_eq(sum, jint(p, "total_bytes"));
        ck_assert_int_eq(jint(p, "state_bytes") + jint(p, "kv_bytes"), jint(p, "total_bytes"));
    }
    json_decref(j);
}
END_TEST

START_TEST(ctl_plan_json_for_an_incompatible_pair_exits_2)
{
    json_t *j;
    int rc = run_ctl("plan --ctx tiny:tp=2,state_shard=replicated "
                     "--gen tiny:tp=4,state_shard=replicated --json", &j);
    ck_assert_int_eq(rc, 2);
    ck_assert_ptr_nonnull(j);
    ck_assert(json_is_false(json_object_get(j, "ok")));
    ck_assert_str_eq(json_string_value(json_object_get(j, "error")), "PEER_INCOMPATIBLE");
    ck_assert_str_eq(json_string_value(json_object_get(j, "reason")), "size_invariant");
    const char *m = json_string_value(json_object_get(j, "message"));
    ck_assert_ptr_nonnull(m);
    ck_assert_ptr_nonnull(strstr(m, "generation rank 0 (tp 0/4 pp 0/1)"));
    json_decref(j);
    rc = run_ctl("plan --ctx tiny --gen tiny:tpb=24 --json", &j);
    ck_assert_int_eq(rc, 2);
    ck_assert_str_eq(json_string_value(json_object_get(j, "reason")), "tokens_per_block");
    json_decref(j);
    /* a generation layout without the state group: refused naming it, never half-planned */
    rc = run_ctl("plan --ctx tiny --gen tiny:omit=kda --json", &j);
    ck_assert_int_eq(rc, 2);
    ck_assert_str_eq(json_string_value(json_object_get(j, "reason")), "omitted");
    ck_assert_ptr_nonnull(strstr(json_string_value(json_object_get(j, "message")), "groups.kda"));
    json_decref(j);
    /* an attention-DP context without the DP rank that ran the request: the request's fault */
    rc = run_ctl("plan --ctx tiny:tp=2,adp=1 --gen tiny:tp=2,adp=1 --json", &j);
    ck_assert_int_eq(rc, 2);
    ck_assert_str_eq(json_string_value(json_object_get(j, "error")), "BAD_REQUEST");
    ck_assert_str_eq(json_string_value(json_object_get(j, "reason")), "dp_rank");
    json_decref(j);
    ck_assert_int_eq(run_ctl("plan --ctx tiny:tp=2,adp=1 --gen tiny:tp=2,adp=1 --ctx-dp-rank 1",
                             NULL), 0);
    /* a request larger than the pools is a bad request, also exit 2 */
    rc = run_ctl("plan --ctx tiny:blocks=4 --gen tiny --prompt-tokens 1000 --json", &j);
    ck_assert_int_eq(rc, 2);
    ck_assert_str_eq(json_string_value(json_object_get(j, "error")), "BAD_REQUEST");
    json_decref(j);
}
END_TEST

START_TEST(ctl_plan_usage_errors_exit_1)
{
    ck_assert_int_eq(run_ctl("plan --ctx tiny", NULL), 1);
    ck_assert_int_eq(run_ctl("plan --ctx tiny --gen nosuchmodel", NULL), 1);
    ck_assert_int_eq(run_ctl("plan --ctx tiny --gen tiny --gen-rank 1", NULL), 1);
    ck_assert_int_eq(run_ctl("plan --ctx tiny --gen tiny --prompt-tokens -5", NULL), 1);
    ck_assert_int_eq(run_ctl("plan --ctx tiny --gen tiny --prompt-tokens 10 --gen-cached-tokens 20",
                             NULL), 1);
    ck_assert_int_eq(run_ctl("plan --ctx tiny --gen tiny --bogus", NULL), 1);
    /* limits: the token count's range, and PLAN_MAX_IDS (2^20) blocks per request */
    ck_assert_int_eq(run_ctl("plan --ctx tiny --gen tiny --prompt-tokens 68719476737", NULL), 1);
    ck_assert_int_eq(run_ctl("plan --ctx tiny:tpb=1 --gen tiny:tpb=1 --prompt-tokens 1048577",
                             NULL), 1);
    /* 2^20 blocks is within the CLI's limit; the pools (512 blocks) refuse it: BAD_REQUEST */
    ck_assert_int_eq(run_ctl("plan --ctx tiny:tpb=1 --gen tiny:tpb=1 --prompt-tokens 1048576",
                             NULL), 2);
    ck_assert_int_eq(run_ctl("plan --ctx tiny --gen tiny:tp=2 --gen-rank 1 --all-ranks", NULL), 1);
    ck_assert_int_eq(run_ctl("plan --ctx tiny --gen tiny", NULL), 0); /* the table */
}
END_TEST

/* The README's `kvferryctl plan` examples run as written (the test runs in the repo root). */
START_TEST(ctl_plan_readme_examples_run)
{
    FILE *f = fopen("README.md", "r");
    ck_assert_ptr_nonnull(f);
    char line[512];
    int n = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strncmp(line, "kvferryctl plan --ctx ", 22) != 0 || strstr(line, "SPEC"))
            continue; /* not an example, or the synopsis */
        line[strcspn(line, "\n")] = '\0';
        ck_assert_msg(run_ctl(line + 11, NULL) == 0, "README example failed: %s", line);
        n++;
    }
    fclose(f);
    ck_assert_int_ge(n, 2);
}
END_TEST

static Suite *ctl_plan_suite(void)
{
    Suite *s = suite_create("ctl_plan");
    TCase *tc = tcase_create("cli");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ctl_plan_json_for_a_compatible_pair);
    tcase_add_test(tc, ctl_plan_json_for_an_incompatible_pair_exits_2);
    tcase_add_test(tc, ctl_plan_usage_errors_exit_1);
    tcase_add_test(tc, ctl_plan_readme_examples_run);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(ctl_plan_suite()); }
