/* check_gpu_local.c: the same-node path with GPU pools, end to end: a real kvferryd and real
 * kvferry-sim processes whose pools are cudaMalloc allocations registered by CUDA IPC handle.
 * The parity matrix of the planning core runs context on GPU 0 -> generation on GPU 1 (one
 * peer-copy program per writer, no arena, no UCX) and on one GPU; every received byte is read
 * back from the device and checked against the global pattern; after each pair leaves, the
 * daemon's GPU mappings return to 0. Also: a kimi-k3 8k-token request at TP1 on two GPUs (wall
 * time and GB/s printed), a worker killed while the daemon maps its pools, a bogus IPC handle,
 * and a host context paired with a GPU generation (refused: NO_ROUTE).
 * Without CUDA or without a GPU: "SKIP: why", exit 77; the two-GPU cases are left out (said so)
 * with one GPU. The test process itself never initialises CUDA (its probe runs in a child):
 * Check forks, and CUDA does not survive fork. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_pool.h"
#include "integration/wtest.h"
#include "kvferry.h"
#include "preset.h"

#ifdef KVF_HAVE_CUDA

static int n_gpus;
static bool gl_templates = true; /* gpu.template_programs of the case's daemon */
static int64_t t_run0; /* set in main before the forks: every case sees the run's start */

/* The whole run stays under device-check's 300 s: a case that would start past the budget
 * fails saying so (a slow path is a finding, not a hang), and each case prints its start and
 * end, so a log cut by a timeout shows where it was. */
#define GL_BUDGET_MS 230000

static void case_begin(const char *name)
{
    int64_t at = wt_now_ms() - t_run0;
    printf("[%6.1f s] %s: start\n", at / 1e3, name);
    ck_assert_msg(at < GL_BUDGET_MS, "%s: not started: the run is at %.0f s of its %d s budget",
                  name, at / 1e3, GL_BUDGET_MS / 1000);
}

static void case_end(const char *name, int64_t t0)
{
    printf("[%6.1f s] %s: ok in %.1f s\n", (wt_now_ms() - t_run0) / 1e3, name,
           (wt_now_ms() - t0) / 1e3);
}

/* Long deadlines: CUDA start-up in each rank and pattern fills of large kimi-k3 pools. */
#define GL_CFG "deadlines:\n  send_wait: 60s\n  transfer: 60s\n  lookup: 60s\n"

struct gcase {
    const char *name, *ctx, *gen;
    const char *readers, *prompt, *requests;
    const char *gen_extra[3];
};

#define K48 "kimi-linear-48b"
#define K48S "blocks=16,slots=2"
#define K3 "kimi-k3"
#define K3S "blocks=8,slots=1"

static const struct gcase matrix[] = {
    {"tiny_tp1_to_tp1", "tiny", "tiny", "1", "300", "2", {NULL}},
    {"k48_tp1_to_tp1", K48 ":" K48S, K48 ":" K48S, "1", "300", "2", {NULL}},
    {"k48_tp2_to_tp2_adp_off", K48 ":tp=2," K48S, K48 ":tp=2," K48S, "2", "300", "2", {NULL}},
    {"k48_tp2_to_tp2_adp_on", K48 ":tp=2,adp=1," K48S, K48 ":tp=2,adp=1," K48S, "2", "300", "3",
     {"--ctx-dp-rank", "1", NULL}},
    {"k48_tp2_to_tp4", K48 ":tp=2," K48S, K48 ":tp=4," K48S, "4", "300", "2", {NULL}},
    {"k48_tp4_to_tp2", K48 ":tp=4," K48S, K48 ":tp=2," K48S, "2", "300", "2", {NULL}},
    {"k48_pp2_to_pp1", K48 ":pp=2," K48S, K48 ":" K48S, "1", "300", "2", {NULL}},
    {"k48_prefix_cached", K48 ":" K48S, K48 ":" K48S, "1", "300", "3",
     {"--gen-cached-tokens", "128", NULL}},
    {"k3_tp1_to_tp1", K3 ":" K3S, K3 ":" K3S, "1", "300", "1", {NULL}},
    {"k3_tp2_to_tp2_adp_off", K3 ":tp=2," K3S, K3 ":tp=2," K3S, "2", "300", "1", {NULL}},
    {"k3_tp2_to_tp2_adp_on", K3 ":tp=2,adp=1," K3S, K3 ":tp=2,adp=1," K3S, "2", "300", "1",
     {"--ctx-dp-rank", "0", NULL}},
    {"k3_tp2_to_tp4", K3 ":tp=2," K3S, K3 ":tp=4," K3S, "4", "300", "1", {NULL}},
    {"k3_tp4_to_tp2", K3 ":tp=4," K3S, K3 ":tp=2," K3S, "2", "300", "1", {NULL}},
    {"k3_pp2_to_pp1", K3 ":pp=2," K3S, K3 ":" K3S, "1", "300", "1", {NULL}},
    {"k3_prefix_cached", K3 ":" K3S, K3 ":" K3S, "1", "300", "1",
     {"--gen-cached-tokens", "192", NULL}},
};
#define N_MATRIX (int)(sizeof matrix / sizeof matrix[0])

/* The last n bytes of a log (failure messages stay short enough to be read whole). */
static const char *tail_of(const char *s, size_t n)
{
    size_t len = strlen(s);
    return len > n ? s + len - n : s;
}

/* result.gpu.<section>.<key> of `status`, or -1. */
static long long gpu_stat(struct wenv *e, const char *section, const char *key)
{
    json_t *r = wt_ctl(e, "status");
    json_t *v = json_object_get(json_object_get(json_object_get(r, "gpu"), section), key);
    long long n = json_is_integer(v) ? (long long)json_integer_value(v) : -1;
    json_decref(r);
    return n;
}

/* Waits up to timeout_ms for the daemon's open GPU mappings to equal want. */
static long long wait_mappings(struct wenv *e, long long want, int timeout_ms)
{
    int64_t end = wt_now_ms() + timeout_ms;
    long long n;
    while ((n = gpu_stat(e, "mappings", "count")) != want && wt_now_ms() < end)
        usleep(20000);
    return n;
}

/* One context instance on ctx_dev and one generation instance on gen_dev, all ranks; both must
 * exit 0 with parity OK; then no transfer is left and every mapping is closed. */
static void run_pair(struct wenv *e, const struct gcase *g, const char *ctx_dev,
                     const char *gen_dev)
{
    int64_t t0 = wt_now_ms();
    char name[96];
    snprintf(name, sizeof name, "%s GPU %s -> GPU %s", g->name, ctx_dev, gen_dev);
    case_begin(name);
    long long ok0 = gpu_stat(e, "completions", "ok"), gpu0 = wt_xfer_stat(e, "local_gpu");
    pid_t c = wt_sim(e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec", g->ctx,
                     "--all-ranks", "--requests", g->requests, "--prompt-tokens", g->prompt,
                     "--readers", g->readers, "--devices", ctx_dev, (char *)NULL);
    pid_t q = wt_sim(e, "gen.log", "--role", "generation", "--instance", "gen", "--spec", g->gen,
                     "--all-ranks", "--requests", g->requests, "--prompt-tokens", g->prompt,
                     "--ctx-instance", "ctx", "--devices", gen_dev,
                     g->gen_extra[0] ? g->gen_extra[0] : "--quiet",
                     g->gen_extra[1] ? g->gen_extra[1] : "--quiet", (char *)NULL);
    int gq = wt_wait(q, 60000), gc = wt_wait(c, 20000);
    char *gl = wt_log(e, "gen.log"), *cl = wt_log(e, "ctx.log"), *dl = wt_log(e, "daemon.log");
    ck_assert_msg(gq == 0, "%s: generation exit %d:\n%s\ncontext:\n%s\ndaemon:\n%s", g->name, gq,
                  tail_of(gl, 1200), tail_of(cl, 600), tail_of(dl, 1200));
    ck_assert_msg(gc == 0, "%s: context exit %d:\n%s\ndaemon:\n%s", g->name, gc, tail_of(cl, 1200),
                  tail_of(dl, 1200));
    ck_assert_msg(strstr(gl, "parity OK") && !strstr(gl, "FAILED"), "%s:\n%s", g->name,
                  tail_of(gl, 2000));
    free(gl);
    free(cl);
    free(dl);
    /* the bytes moved on GPU streams: completions came back through the loop */
    ck_assert_int_gt(gpu_stat(e, "completions", "ok"), ok0);
    ck_assert_int_eq(gpu_stat(e, "completions", "failed"), 0);
    /* the programs came from the plan templates' (gpu_tprog.h: every request of a kept
     * template) or, with them off, through the daemon's cache, which stays in bounds */
    bool tmpl = gl_templates;
    if (tmpl) {
        ck_assert_int_gt(gpu_stat(e, "template_programs", "made"), 0);
        ck_assert_int_gt(gpu_stat(e, "template_programs", "requests_template"), 0);
    } else {
        ck_assert_int_gt(gpu_stat(e, "programs", "misses"), 0);
        ck_assert_int_gt(gpu_stat(e, "template_programs", "requests_ops"), 0);
        ck_assert_int_eq(gpu_stat(e, "template_programs", "requests_template"), 0);
    }
    ck_assert_int_le(gpu_stat(e, "programs", "cached"), gpu_stat(e, "programs", "max"));
    ck_assert_int_gt(wt_xfer_stat(e, "local_gpu"), gpu0); /* copied by kernels, not the CPU */
    ck_assert_int_eq(wt_xfer_stat(e, "bytes_local_gpu"), wt_xfer_stat(e, "bytes_local"));
    ck_assert_uint_eq(wt_ctl_count(e, "transfers", "transfers"), 0);
    ck_assert_int_eq(wait_mappings(e, 0, 10000), 0);
    case_end(name, t0);
}

START_TEST(gpu_parity_matrix_gpu0_to_gpu1_through_the_local_path)
{
    struct wenv e;
    wt_start(&e, GL_CFG);
    run_pair(&e, &matrix[_i], "0", "1");
    wt_stop(&e);
}
END_TEST

START_TEST(gpu_parity_on_one_gpu_through_the_local_path)
{
    static const int pick[] = {2, 3, 8}; /* k48 TP2 both ways of ADP, k3 TP1 */
    struct wenv e;
    gl_templates = _i != 0; /* one pair with each request uploading a program of its own ops */
    wt_start(&e, gl_templates ? GL_CFG : GL_CFG "gpu:\n  template_programs: false\n");
    run_pair(&e, &matrix[pick[_i]], "0", "0");
    wt_stop(&e);
}
END_TEST

START_TEST(gpu_kimi_k3_8k_request_tp1_gpu0_to_gpu1_wall_time)
{
    static const struct gcase k8 = {"k3_8k_tp1", K3 ":blocks=128,slots=1", K3 ":blocks=128,slots=1",
                                    "1", "8192", "1", {NULL}};
    struct wenv e;
    wt_start(&e, GL_CFG);
    run_pair(&e, &k8, "0", "1");
    json_t *st = wt_ctl(&e, "stats");
    json_t *t = json_object_get(json_object_get(st, "workers"), "transfers");
    long long bytes = (long long)json_integer_value(json_object_get(t, "bytes_local"));
    double gbps = json_real_value(json_object_get(t, "local_memcpy_gbps"));
    ck_assert_int_gt(bytes, 600ll << 20); /* about 649 MiB */
    ck_assert(gbps > 0);
    printf("kimi-k3 8k tokens TP1 GPU0 -> GPU1 through kvferryd: %lld bytes (%.1f MiB), wall "
           "%.3f ms (program upload, launch, copy, completion on the loop), %.1f GB/s\n",
           bytes, bytes / 1048576.0, bytes / (gbps * 1e9) * 1e3, gbps);
    json_decref(st);
    wt_stop(&e);
}
END_TEST

START_TEST(gpu_worker_killed_while_mapped_leaves_the_daemon_up_and_mappings_released)
{
    struct wenv e;
    int64_t t0 = wt_now_ms();
    case_begin("gpu_worker_killed_while_mapped_leaves_the_daemon_up_and_mappings_released");
    wt_start(&e, GL_CFG);
    pid_t c = wt_sim(&e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec",
                     K48 ":tp=2," K48S, "--all-ranks", "--requests", "0", "--hold-ms", "60000",
                     "--devices", "0", (char *)NULL);
    int64_t end = wt_now_ms() + 60000;
    long long n = 0;
    json_t *w = NULL;
    while (wt_now_ms() < end) {
        w = wt_ctl(&e, "status");
        long long ranks = (long long)json_integer_value(
            json_object_get(json_object_get(w, "workers"), "ranks"));
        json_decref(w);
        if (ranks == 2)
            break;
        usleep(50000);
    }
    n = gpu_stat(&e, "mappings", "count");
    char *cl = wt_log(&e, "ctx.log");
    ck_assert_msg(n > 0, "no GPU mapping after both ranks registered:\n%s", cl);
    free(cl);
    w = wt_ctl(&e, "workers"); /* each rank's pools are shown where they live */
    json_t *rows = json_object_get(w, "workers"), *row;
    size_t k, on_gpu0 = 0;
    json_array_foreach(rows, k, row)
        on_gpu0 += json_string_value(json_object_get(row, "memory")) &&
                   strcmp(json_string_value(json_object_get(row, "memory")), "gpu 0") == 0;
    ck_assert_uint_eq(on_gpu0, 2);
    json_decref(w);
    kill(c, SIGKILL); /* the launcher: its ranks die with it (PR_SET_PDEATHSIG) */
    wt_wait(c, 5000);
    ck_assert_int_eq(wait_mappings(&e, 0, 15000), 0);
    char bin[256], cmd[512], out[1 << 16];
    tu_bin("kvferryctl", bin, sizeof bin);
    tu_fmt(cmd, sizeof cmd, "%s --socket %s --json status 2>&1", bin, e.csock);
    FILE *pf = popen(cmd, "r");
    ck_assert_ptr_nonnull(pf);
    size_t got = fread(out, 1, sizeof out - 1, pf);
    out[got] = 0;
    ck_assert_int_eq(pclose(pf), 0);
    json_t *ctl = json_loads(out, 0, NULL);
    ck_assert_msg(ctl, "kvferryctl status --json:\n%s", out);
    json_t *cnt = json_object_get(json_object_get(json_object_get(ctl, "gpu"), "mappings"), "count");
    ck_assert_msg(json_is_integer(cnt) && json_integer_value(cnt) == 0, "%s", out);
    json_decref(ctl);
    w = wt_ctl(&e, "status");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(w, "workers"), "ranks")), 0);
    json_decref(w);
    /* and the daemon still moves GPU requests */
    run_pair(&e, &matrix[1], "0", n_gpus >= 2 ? "1" : "0");
    case_end("gpu_worker_killed_while_mapped_leaves_the_daemon_up_and_mappings_released", t0);
    wt_stop(&e);
}
END_TEST

START_TEST(gpu_registration_with_a_bogus_ipc_handle_is_refused_by_name)
{
    struct wenv e;
    int64_t t0 = wt_now_ms();
    case_begin("gpu_registration_with_a_bogus_ipc_handle_is_refused_by_name");
    wt_start(&e, GL_CFG);
    struct preset_spec ps;
    struct layout l;
    char err[600] = "";
    ck_assert_int_eq(preset_parse("tiny", &ps, err, sizeof err), 0);
    ck_assert_int_eq(preset_build(&ps, "bogus", ROLE_CONTEXT, 0, &l, err, sizeof err), 0);
    char *json = layout_to_json(&l);
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    memset(pools, 0, sizeof pools);
    for (uint32_t i = 0; i < l.n_pools; i++) {
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_CUDA, .device = 0, .bytes = l.pools[i].bytes,
                                     .fd = -1};
        for (int k = 0; k < 64; k++) /* the bogus handle of check_gpu_ipc */
            pools[i].ipc_handle[k] = (uint8_t)(k * 37 + 11 + i);
    }
    struct kvf_client *c = NULL;
    struct kvf_options o = {.no_reconnect = 1};
    ck_assert_int_eq(kvf_connect(e.wsock, &o, &c), 0);
    int rc = kvf_register(c, json, pools, l.n_pools, err, sizeof err);
    ck_assert_int_eq(rc, -EINVAL);
    ck_assert_msg(strstr(err, "cudaIpcOpenMemHandle") && strstr(err, "GPU memory"), "%s", err);
    c = kvf_close(c);
    free(json);
    ck_assert_int_eq(gpu_stat(&e, "mappings", "count"), 0); /* and the daemon answers */
    case_end("gpu_registration_with_a_bogus_ipc_handle_is_refused_by_name", t0);
    wt_stop(&e);
}
END_TEST

START_TEST(gpu_host_context_to_gpu_generation_is_refused_with_no_route)
{
    struct wenv e;
    int64_t t0 = wt_now_ms();
    case_begin("gpu_host_context_to_gpu_generation_is_refused_with_no_route");
    /* its only reader is refused: the SEND ends at once with the reader's reason (issue 13's
     * NACK: "no reader can come"), not at its deadline (5 s + 1 s) */
    wt_start(&e, "deadlines:\n  send_wait: 5s\n  transfer: 1s\n  lookup: 60s\n");
    pid_t c = wt_sim(&e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec", "tiny",
                     "--rank", "0", "--requests", "1", "--prompt-tokens", "300",
                     "--expect-error", "NO_ROUTE", (char *)NULL);
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec", "tiny",
                     "--rank", "0", "--requests", "1", "--prompt-tokens", "300", "--ctx-instance",
                     "ctx", "--devices", "0", "--expect-error", "NO_ROUTE", (char *)NULL);
    int gq = wt_wait(q, 60000);
    char *gl = wt_log(&e, "gen.log");
    ck_assert_msg(gq == 0, "generation exit %d:\n%s", gq, gl);
    ck_assert_msg(strstr(gl, "host memory") && strstr(gl, "GPU memory"), "%s", gl);
    free(gl);
    int gc = wt_wait(c, 60000);
    char *cl = wt_log(&e, "ctx.log");
    ck_assert_msg(gc == 0, "context exit %d:\n%s", gc, cl);
    ck_assert_msg(strstr(cl, "no reader can come"), "%s", cl);
    free(cl);
    ck_assert_int_eq(wait_mappings(&e, 0, 10000), 0);
    ck_assert_msg(wt_now_ms() - t0 < 5000, "the SEND waited for its deadline");
    case_end("gpu_host_context_to_gpu_generation_is_refused_with_no_route", t0);
    wt_stop(&e);
}
END_TEST

/* GPU count in a child process (CUDA must not be initialised before Check forks). */
static int probe(char *why, size_t len)
{
    int p[2];
    if (pipe(p) < 0) {
        snprintf(why, len, "pipe: %s", strerror(errno));
        return -1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        char err[256] = "";
        int n = cuda_pool_device_count(err, sizeof err);
        if (n == 0)
            snprintf(err, sizeof err, "no CUDA device");
        (void)!write(p[1], &n, sizeof n);
        (void)!write(p[1], err, sizeof err);
        _exit(0);
    }
    close(p[1]);
    int n = -1;
    char err[256] = "probe child died";
    if (read(p[0], &n, sizeof n) != sizeof n || read(p[0], err, sizeof err) != sizeof err)
        n = -1;
    close(p[0]);
    waitpid(pid, NULL, 0);
    snprintf(why, len, "%s", err);
    return n;
}

int main(void)
{
    char why[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    t_run0 = wt_now_ms();
    n_gpus = probe(why, sizeof why);
    if (n_gpus <= 0) {
        printf("SKIP: %s\n", why);
        return 77;
    }
    Suite *s = suite_create("gpu_local");
    TCase *tc = tcase_create("one_gpu");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, gpu_registration_with_a_bogus_ipc_handle_is_refused_by_name);
    tcase_add_loop_test(tc, gpu_parity_on_one_gpu_through_the_local_path, 0, 3);
    tcase_add_test(tc, gpu_worker_killed_while_mapped_leaves_the_daemon_up_and_mappings_released);
    tcase_add_test(tc, gpu_host_context_to_gpu_generation_is_refused_with_no_route);
    suite_add_tcase(s, tc);
    tc = tcase_create("two_gpus");
    tcase_set_timeout(tc, 90);
    if (n_gpus >= 2) {
        tcase_add_loop_test(tc, gpu_parity_matrix_gpu0_to_gpu1_through_the_local_path, 0, N_MATRIX);
        tcase_add_test(tc, gpu_kimi_k3_8k_request_tp1_gpu0_to_gpu1_wall_time);
    } else {
        printf("SKIP (part): GPU 0 -> GPU 1 cases need 2 GPUs, this machine has %d\n", n_gpus);
    }
    suite_add_tcase(s, tc);
    return tu_run(s);
}

#else /* !KVF_HAVE_CUDA */

int main(void)
{
    printf("SKIP: this build has no CUDA (CUDA=0): GPU pools cannot be registered\n");
    return 77;
}

#endif
