/* check_gpu_tprog.c: the GPU programs of plan templates (daemon/gpu/gpu_tprog.h) on a real
 * struct gpu (CPU mode where there is no GPU; the bookkeeping is the same), with test-made
 * program objects: one program per (template, device, writer), made once and then returned;
 * a refused make is remembered (no second try); the template's end (the template cache's
 * eviction or forget: plan_template_done) frees an unbound program at once and a bound one
 * only after its binding's last reference; gpu_free first, then the template's end: every
 * program freed exactly once; the request counters. */
#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "gpu.h"
#include "gpu_tprog.h"
#include "parity.h"
#include "plan_template.h"
#include "testutil.h"

static uv_loop_t loop;
static struct gpu *g;
static int made, freed, refuse;

static int make(void *arg, void **ret, char *msg, size_t len)
{
    (void)arg;
    if (refuse) {
        snprintf(msg, len, "sources not resolved");
        return -EINVAL;
    }
    int *p = malloc(sizeof *p);
    ck_assert_ptr_nonnull(p);
    *p = ++made;
    *ret = p;
    return 0;
}

static void free_obj(void *p)
{
    freed++;
    free(p);
}

static void setup(void)
{
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    ck_assert_int_eq(gpu_new(&loop, &g), 0);
    made = freed = refuse = 0;
}

static void teardown_loop(void)
{
    ck_assert_int_eq(uv_run(&loop, UV_RUN_DEFAULT), 0);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
}

/* A real template of a tiny pair (two writers: tp=2 context into tp=1 generation). */
static void tiny_template(struct plan_template *t)
{
    uint64_t rng = 9;
    char err[256];
    struct par_side c, gs;
    ck_assert_int_eq(par_side_init(&c, "tiny:tp=2,blocks=8", ROLE_CONTEXT, 2, &rng, err,
                                   sizeof err), 0);
    ck_assert_int_eq(par_side_init(&gs, "tiny:tp=1,blocks=8", ROLE_GENERATION, 2, &rng, err,
                                   sizeof err), 0);
    struct plan_input in = par_input(&c, &gs, 0, c.ids, -1);
    struct plan first;
    struct plan_error pe;
    ck_assert_int_eq(plan_template_build(&in, t, &first, &pe), 0);
    ck_assert_uint_ge(t->plan.n_writers, 2);
    plan_done(&first);
    par_side_free(&c);
    par_side_free(&gs);
}

static struct gpu_prog *get(struct plan_template *t, uint32_t w, int device, int want_rc)
{
    struct gpu_prog *p = NULL;
    char msg[128];
    ck_assert_int_eq(gpu_tprog_get(g, t, w, device, make, NULL, free_obj, &p, msg, sizeof msg),
                     want_rc);
    return p;
}

START_TEST(one_program_per_template_device_and_writer)
{
    setup();
    struct plan_template t;
    tiny_template(&t);
    struct gpu_prog *a = get(&t, 0, 0, 0), *b = get(&t, 1, 0, 0), *c = get(&t, 0, 1, 0);
    ck_assert(a != b && a != c && b != c);
    ck_assert_ptr_eq(get(&t, 0, 0, 0), a); /* made once */
    ck_assert_int_eq(made, 3);
    ck_assert_int_eq(*(int *)gpu_prog_obj(a), 1);
    get(&t, t.plan.n_writers, 0, 1); /* no such writer: the per-request path */
    refuse = 1;
    get(&t, 1, 2, 1);
    refuse = 0;
    get(&t, 1, 2, 1); /* remembered: not made again */
    ck_assert_int_eq(made, 3);
    struct gpu_progcache_stats ps;
    gpu_tprog_count(g, true);
    gpu_tprog_count(g, false);
    gpu_progcache_stats(g, &ps);
    ck_assert_uint_eq(ps.tmpl_live, 3);
    ck_assert_uint_eq(ps.tmpl_made, 3);
    ck_assert_uint_eq(ps.tmpl_refused, 1);
    ck_assert_uint_eq(ps.req_template, 1);
    ck_assert_uint_eq(ps.req_ops, 1);
    /* a binding holds b: the template's end frees a and c now, b after the binding let go */
    struct gpu_prog *held = gpu_prog_ref(b);
    plan_template_done(&t);
    ck_assert_int_eq(freed, 2);
    gpu_progcache_stats(g, &ps);
    ck_assert_uint_eq(ps.tmpl_live, 0);
    gpu_prog_put(g, held);
    ck_assert_int_eq(freed, 3);
    g = gpu_free(g);
    teardown_loop();
}
END_TEST

START_TEST(gpu_teardown_before_the_template_frees_once)
{
    setup();
    struct plan_template t;
    tiny_template(&t);
    get(&t, 0, 0, 0);
    get(&t, 1, 0, 0);
    g = gpu_free(g); /* the daemon's order: GPUs first, the template cache after */
    ck_assert_int_eq(freed, 2);
    plan_template_done(&t); /* only the set itself is left to free */
    ck_assert_int_eq(freed, 2);
    teardown_loop();
}
END_TEST

static Suite *tprog_suite(void)
{
    Suite *s = suite_create("gpu_tprog");
    TCase *tc = tcase_create("tprog");
    tcase_add_test(tc, one_program_per_template_device_and_writer);
    tcase_add_test(tc, gpu_teardown_before_the_template_frees_once);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(tprog_suite()); }
