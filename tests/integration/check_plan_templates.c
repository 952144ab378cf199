/* check_plan_templates.c: plan templates on the same-daemon path through a real kvferryd and
 * real kvferry-sim workers. Requests of one shape get different block ids and slots from the sim
 * (its seeded permutation gives each request of a window its own); the first is planned from
 * scratch (a miss), every later one from the template (hits), and every one lands bit for bit
 * (the generation sim checks each request's pattern). A new shape (another prompt length) is a
 * miss of its own; when the workers leave their templates go (entries and bytes back to 0). */
#include <check.h>

#include "wtest.h"

#define SPEC "kimi-linear-48b"

/* A context and a generation sim of n requests of `tokens`, every request's parity checked. */
static void run_pair(struct wenv *e, const char *tag, const char *n, const char *tokens)
{
    char cl[64], gl[64], ci[32], gi[32];
    snprintf(cl, sizeof cl, "%s-ctx.log", tag);
    snprintf(gl, sizeof gl, "%s-gen.log", tag);
    snprintf(ci, sizeof ci, "%s-c", tag);
    snprintf(gi, sizeof gi, "%s-g", tag);
    pid_t c = wt_sim(e, cl, "--role", "context", "--instance", ci, "--spec", SPEC, "--rank", "0",
                     "--requests", n, "--prompt-tokens", tokens, (char *)NULL);
    pid_t g = wt_sim(e, gl, "--role", "generation", "--instance", gi, "--spec", SPEC, "--rank",
                     "0", "--requests", n, "--prompt-tokens", tokens, "--ctx-instance", ci,
                     "--parity", "all", (char *)NULL);
    int rg = wt_wait(g, 120000), rc = wt_wait(c, 120000);
    char *l = wt_log(e, gl);
    ck_assert_msg(rg == 0 && rc == 0 && strstr(l, "parity OK"), "gen %d ctx %d:\n%s", rg, rc, l);
    free(l);
}

static bool no_workers(struct wenv *e, void *arg)
{
    (void)arg;
    return wt_ctl_count(e, "workers", "workers") == 0;
}

START_TEST(same_shape_requests_with_new_ids_hit_the_template_bitwise_right)
{
    struct wenv e;
    wt_start(&e, NULL);
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_template_misses"), 0);
    run_pair(&e, "a", "3", "512"); /* three requests, three id sets, one shape */
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_template_misses"), 1);
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_template_hits"), 2);
    wt_until(&e, 15000, no_workers, NULL); /* the pair left: its template is dropped */
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_templates"), 0);
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_template_bytes"), 0);
    run_pair(&e, "b", "2", "300"); /* new registrations and another shape */
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_template_misses"), 2);
    ck_assert_int_eq(wt_xfer_stat(&e, "plan_template_hits"), 3);
    wt_stop(&e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("plan_templates");
    TCase *tc = tcase_create("local");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, same_shape_requests_with_new_ids_hit_the_template_bitwise_right);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
