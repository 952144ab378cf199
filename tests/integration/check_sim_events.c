/* check_sim_events.c: kvferry-sim's history for the chaos checker (tools/kvferry-sim_events.c),
 * with a real kvferryd and real sims on the local path: --events writes one line per step,
 * every issued request has exactly one terminal line, every DONE one parity line, the seeded
 * --cancel-pct share is cancelled and ends CANCELLED (or DONE, had it finished first). Bad
 * values of these options: check_sim_stats.c. */
#include <check.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "wtest.h"

#define N_REQ 6

/* Every line of DIR/NAME.r0.jsonl; each must parse and carry "t" and "ev". */
static json_t *load_events(struct wenv *e, const char *name)
{
    char p[200], line[2048];
    tu_fmt(p, sizeof p, "%s/%s.r0.jsonl", e->dir, name);
    FILE *f = fopen(p, "r");
    ck_assert_msg(f != NULL, "%s missing", p);
    json_t *a = json_array();
    while (fgets(line, sizeof line, f)) {
        json_error_t err;
        json_t *j = json_loads(line, 0, &err);
        ck_assert_msg(j != NULL, "%s: %s: %s", p, err.text, line);
        ck_assert_msg(json_is_real(json_object_get(j, "t")), "%s: no t: %s", p, line);
        ck_assert_msg(json_is_string(json_object_get(j, "ev")), "%s: no ev: %s", p, line);
        json_array_append_new(a, j);
    }
    fclose(f);
    return a;
}

/* Lines of kind ev (and, req > 0, of that request); the last one found in *last. */
static int count(json_t *a, const char *ev, json_int_t req, json_t **last)
{
    size_t i;
    json_t *j;
    int n = 0;
    json_array_foreach(a, i, j)
    {
        if (strcmp(json_string_value(json_object_get(j, "ev")), ev) != 0)
            continue;
        if (req > 0 && json_integer_value(json_object_get(j, "req")) != req)
            continue;
        n++;
        if (last)
            *last = j;
    }
    return n;
}

START_TEST(sim_events_end_each_request_once_and_check_each_done)
{
    struct wenv e;
    wt_start(&e, NULL);
    char gprefix[128], cprefix[128];
    tu_fmt(gprefix, sizeof gprefix, "%s/gen", e.dir);
    tu_fmt(cprefix, sizeof cprefix, "%s/ctx", e.dir);
    pid_t c = wt_sim(&e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec",
                     "tiny:tp=1,slots=3", "--rank", "0", "--requests", "6", "--events", cprefix,
                     (char *)NULL);
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec",
                     "tiny:tp=1,slots=3", "--rank", "0", "--requests", "6", "--ctx-instance", "ctx",
                     "--events", gprefix, "--cancel-pct", "50", (char *)NULL);
    wt_wait(q, 40000);
    wt_wait(c, 40000);

    json_t *g = load_events(&e, "gen"), *cx = load_events(&e, "ctx"), *l = NULL;
    ck_assert_int_eq(count(g, "start", 0, &l), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(l, "cancel_pct")), 50);
    ck_assert_int_eq(json_integer_value(json_object_get(l, "pid")) > 0, 1);
    ck_assert_int_eq(count(g, "registered", 0, NULL), 1);
    int cancels = count(g, "cancel", 0, NULL), cancelled = 0, done = 0;
    ck_assert_msg(cancels > 0 && cancels < N_REQ, "%d of %d cancelled (seed 1, 50%%)", cancels,
                  N_REQ);
    for (json_int_t r = 1; r <= N_REQ; r++) {
        ck_assert_int_eq(count(g, "issue", r, &l), 1);
        ck_assert_str_eq(json_string_value(json_object_get(l, "rc")), "0");
        ck_assert_int_eq(count(g, "end", r, &l), 1);
        const char *kind = json_string_value(json_object_get(l, "kind"));
        if (strcmp(kind, "DONE") == 0) {
            done++;
            ck_assert_int_eq(count(g, "verify", r, &l), 1); /* every DONE checked, bitwise */
            ck_assert_int_eq(json_is_true(json_object_get(l, "ok")), 1);
        } else {
            ck_assert_str_eq(kind, "FAILED");
            ck_assert_str_eq(json_string_value(json_object_get(l, "error")), "CANCELLED");
            ck_assert_int_eq(count(g, "cancel", r, NULL), 1); /* only what was cancelled */
            ck_assert_int_eq(count(g, "verify", r, NULL), 0);
            cancelled++;
        }
        ck_assert_int_eq(count(cx, "issue", r, NULL), 1);
        ck_assert_int_eq(count(cx, "end", r, NULL), 1);
    }
    ck_assert_int_eq(done + cancelled, N_REQ);
    ck_assert_int_le(cancelled, cancels);
    /* the last line: the exit, with the counts */
    l = json_array_get(g, json_array_size(g) - 1);
    ck_assert_str_eq(json_string_value(json_object_get(l, "ev")), "exit");
    ck_assert_int_eq(json_integer_value(json_object_get(l, "ok")), done);
    ck_assert_int_eq(json_integer_value(json_object_get(l, "failed")), cancelled);
    /* lines in time order */
    double t = 0;
    size_t i;
    json_t *j;
    json_array_foreach(g, i, j)
    {
        double ti = json_real_value(json_object_get(j, "t"));
        ck_assert_msg(ti >= t, "line %zu: t %f before %f", i, ti, t);
        t = ti;
    }
    json_decref(g);
    json_decref(cx);
    wt_stop(&e);
}
END_TEST

static Suite *sim_events_suite(void)
{
    Suite *s = suite_create("sim_events");
    TCase *t = tcase_create("histories");
    tcase_set_timeout(t, 90);
    tcase_add_test(t, sim_events_end_each_request_once_and_check_each_done);
    suite_add_tcase(s, t);
    return s;
}

int main(void)
{
    return tu_run(sim_events_suite());
}
