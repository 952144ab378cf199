/* check_gpu_register.c: GPU pools against a real kvferryd, on any machine (CI has no GPU). The
 * daemon's `status` has a gpu section (mode, reason, open mappings); a rank whose pools are GPU
 * memory is refused at REGISTER with a message that says why and what to change, the daemon
 * stays up and maps nothing; kvferry-sim --devices on a machine without a usable GPU stops at
 * setup, saying so. Where the daemon does see a GPU the same bogus registration is refused by
 * the CUDA call that failed (tests/gpu/check_gpu_local.c covers real GPU pools). */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvferry.h"
#include "preset.h"
#include "wtest.h"

/* result.gpu of `status` (new reference). */
static json_t *gpu_section(struct wenv *e)
{
    json_t *r = wt_ctl(e, "status");
    json_t *g = json_incref(json_object_get(r, "gpu"));
    json_decref(r);
    ck_assert_ptr_nonnull(g);
    return g;
}

static bool gpu_mode(struct wenv *e)
{
    json_t *g = gpu_section(e);
    const char *mode = json_string_value(json_object_get(g, "mode"));
    ck_assert_ptr_nonnull(mode);
    bool gpu = strcmp(mode, "gpu") == 0;
    if (!gpu) /* CPU mode always says why */
        ck_assert_uint_gt(strlen(json_string_value(json_object_get(g, "reason"))), 0);
    json_decref(g);
    return gpu;
}

static long long mappings(struct wenv *e)
{
    json_t *g = gpu_section(e);
    long long n = (long long)json_integer_value(json_object_get(json_object_get(g, "mappings"), "count"));
    json_decref(g);
    return n;
}

START_TEST(gpu_rank_registration_is_refused_with_what_to_change_and_the_daemon_stays_up)
{
    struct wenv e;
    wt_start(&e, NULL);
    bool gpu = gpu_mode(&e);
    struct preset_spec ps;
    struct layout l;
    char err[600] = "";
    ck_assert_int_eq(preset_parse("tiny", &ps, err, sizeof err), 0);
    ck_assert_int_eq(preset_build(&ps, "gpuctx", ROLE_CONTEXT, 0, &l, err, sizeof err), 0);
    char *json = layout_to_json(&l);
    ck_assert_ptr_nonnull(json);
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    memset(pools, 0, sizeof pools);
    for (uint32_t i = 0; i < l.n_pools; i++) {
        ck_assert_int_eq(l.pools[i].kind, POOL_CUDA);
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_CUDA, .device = 0, .bytes = l.pools[i].bytes,
                                     .fd = -1};
        for (int k = 0; k < 64; k++) /* the bogus handle of check_gpu_ipc */
            pools[i].ipc_handle[k] = (uint8_t)(k * 37 + 11 + i);
    }
    struct kvf_client *c = NULL;
    struct kvf_options o = {.no_reconnect = 1};
    ck_assert_int_eq(kvf_connect(e.wsock, &o, &c), 0);
    ck_assert_int_eq(kvf_register(c, json, pools, l.n_pools, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "BAD_REQUEST") && strstr(err, "GPU memory"), "%s", err);
    if (gpu)
        ck_assert_msg(strstr(err, "cudaIpcOpenMemHandle"), "%s", err);
    else
        ck_assert_msg(strstr(err, "cannot map GPU memory") && strstr(err, "register host (memfd) pools"),
                      "%s", err);
    c = kvf_close(c);
    free(json);
    ck_assert_int_eq(mappings(&e), 0);
    json_t *s = wt_ctl(&e, "stats");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(s, "workers"),
                                                        "register_refused")), 1);
    json_t *xt = json_object_get(json_object_get(s, "workers"), "transfers");
    ck_assert(json_is_integer(json_object_get(xt, "local_gpu")));
    ck_assert_int_eq(json_integer_value(json_object_get(xt, "local_gpu")), 0);
    json_decref(s);
    wt_stop(&e); /* exits 0 */
}
END_TEST

START_TEST(sim_with_gpu_pools_and_no_usable_gpu_stops_at_setup_saying_why)
{
    struct wenv e;
    wt_start(&e, NULL);
    if (gpu_mode(&e)) {
        printf("SKIP (part): this machine has a GPU; check_gpu_local covers --devices\n");
        wt_stop(&e);
        return;
    }
    pid_t p = wt_sim(&e, "sim.log", "--role", "context", "--instance", "c", "--spec", "tiny",
                     "--rank", "0", "--requests", "1", "--devices", "0", (char *)NULL);
    int rc = wt_wait(p, 30000);
    char *log = wt_log(&e, "sim.log");
    ck_assert_msg(rc == 4 && strstr(log, "GPU pool 0"), "exit %d:\n%s", rc, log);
    free(log);
    ck_assert_int_eq(mappings(&e), 0);
    p = wt_sim(&e, "bad.log", "--role", "context", "--instance", "c", "--spec", "tiny", "--rank",
               "0", "--devices", "0,x", (char *)NULL);
    rc = wt_wait(p, 30000);
    log = wt_log(&e, "bad.log");
    ck_assert_msg(rc == 4 && strstr(log, "--devices"), "exit %d:\n%s", rc, log);
    free(log);
    wt_stop(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_register");
    TCase *tc = tcase_create("refusal");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, gpu_rank_registration_is_refused_with_what_to_change_and_the_daemon_stays_up);
    tcase_add_test(tc, sim_with_gpu_pools_and_no_usable_gpu_stops_at_setup_saying_why);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
