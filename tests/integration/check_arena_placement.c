/* check_arena_placement.c: what a real kvferryd says about its arena (issue 6, docs/DESIGN.md §3).
 * In CPU mode (CI: no GPU) the arena is host memory allocated by UCX and not page-locked, and
 * `arena` says so and why; the GPU counters of the bounce path exist and are zero after a host
 * request moved through two daemons (host pools never touch the GPU path). On a GPU node the
 * page-locked case is checked by tests/gpu/check_gpu_remote. */
#include <check.h>

#include "remoteutil.h"

START_TEST(arena_status_says_host_and_why_it_is_not_page_locked)
{
    struct two t;
    two_start(&t, NULL, NULL, NULL);
    json_t *b = ru_ctl(&t.b, "arena"); /* both answer: both loops run (signals handled) */
    ck_assert_ptr_nonnull(b);
    ck_assert_str_eq(json_string_value(json_object_get(b, "placement")), "host");
    json_decref(b);
    json_t *a = ru_ctl(&t.a, "arena");
    ck_assert_ptr_nonnull(a);
    ck_assert_str_eq(json_string_value(json_object_get(a, "placement")), "host");
    const char *why = json_string_value(json_object_get(a, "why"));
    ck_assert_ptr_nonnull(why);
    json_t *s = ru_ctl(&t.a, "status");
    const char *mode = json_string_value(json_object_get(json_object_get(s, "gpu"), "mode"));
    ck_assert_ptr_nonnull(mode);
    if (strcmp(mode, "cpu") == 0) {
        ck_assert(json_is_false(json_object_get(a, "pinned_for_gpu")));
        ck_assert_msg(strstr(why, "UCX-allocated") && strstr(why, "not page-locked: no GPU"), "%s",
                      why);
    } else { /* a GPU machine: page-locked */
        ck_assert_msg(json_is_true(json_object_get(a, "pinned_for_gpu")) &&
                          strstr(why, "page-locked for CUDA"),
                      "%s", why);
    }
    json_decref(s);
    json_decref(a);
    two_stop(&t, 1);
}
END_TEST

START_TEST(host_pools_through_two_daemons_never_take_the_gpu_path)
{
    struct two t;
    const char *extra = "arena:\n  size: 16MiB\n  chunk: 1MiB\ngates:\n  min_bytes: 0\n"
                        "  min_blocks: 0\n";
    two_start_insts(&t, &(struct two_insts){.extra_a = extra, .extra_b = extra,
                                            .spec = "tiny:blocks=64,slots=4", .blocks = 6,
                                            .rng = 77});
    pattern_fill(&t.ctx.r[0].l, &t.ctx.r[0].mem, &t.ctx.r[0].pids, 0, 99);
    ck_assert_int_eq(
        kvf_send(t.ctx.r[0].c, 5, t.ctx.r[0].l.n_groups, t.ctx.r[0].counts, t.ctx.r[0].ids, 1), 0);
    struct kvf_recv_args ra = {.req_id = 5,
                               .ctx_instance = "ctx",
                               .ctx_dp_rank = -1,
                               .ctx_home = t.a.addr,
                               .n_groups = t.gen.r[0].l.n_groups,
                               .counts = t.gen.r[0].counts,
                               .ids = t.gen.r[0].ids};
    ck_assert_int_eq(kvf_recv(t.gen.r[0].c, &ra), 0);
    struct kvf_event ev;
    int k = ru_wait_event(&t.gen.r[0], 5, &ev, 30000);
    ck_assert_msg(k == KVF_EV_DONE, "event %d: %s", k, ev.message);
    ru_assert_parity(&t.gen.r[0], 0, 99, "host pools");
    json_t *sa = ru_ctl(&t.a, "stats"), *sb = ru_ctl(&t.b, "stats");
    json_t *pa = json_object_get(sa, "peers"), *pb = json_object_get(sb, "peers");
    ck_assert_int_gt(json_integer_value(json_object_get(pb, "bytes_landed")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(pa, "gpu_gathers")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(pb, "gpu_scatters")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(pb, "gpu_failures")), 0);
    ck_assert(json_is_integer(json_object_get(json_object_get(pb, "paths"), "bounce_gpu_pools")));
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(pb, "paths"), "bounce_gpu_pools")), 0);
    /* the last request's wall time (RECV to DONE) and size are reported */
    ck_assert_int_gt(json_integer_value(json_object_get(pb, "last_remote_wall_us")), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(pb, "last_remote_bytes")),
                     json_integer_value(json_object_get(pb, "bytes_landed")));
    json_decref(sa);
    json_decref(sb);
    two_stop(&t, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena_placement");
    TCase *tc = tcase_create("placement");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, arena_status_says_host_and_why_it_is_not_page_locked);
    tcase_add_test(tc, host_pools_through_two_daemons_never_take_the_gpu_path);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
