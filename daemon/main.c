/* main.c: kvferryd's entry: argv, ordered start, reverse teardown.
 * Start: signals held -> logging (its writer thread) -> RLIMIT_NOFILE raised -> loop and signal handlers -> config -> control socket -> worker
 * socket -> transfer engine (link, arena) -> READY=1. Any failure before READY=1 exits non-zero.
 * Teardown runs the start in reverse and closes the loop cleanly. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "control.h"
#include "copyeng.h"
#include "unmapper.h"
#include "gpu.h"
#include "gpu_tprog.h"
#include "workers.h"
#include "daemon_life.h"
#include "engine.h"
#include "link.h"
#include "logsink.h"
#include "ucxlog.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvferryd [--config FILE] [--log-level LEVEL]\n"
               "       kvferryd --check-config FILE   validate FILE, exit 0 (ok) or 1 (error)\n"
               "       kvferryd [--config FILE] --print-config   print the effective config\n"
               "       kvferryd --version\n"
               "With no --config, built-in defaults apply (sockets under /run/kvferry for root,\n"
               "else $XDG_RUNTIME_DIR/kvferry, else ./run). LEVEL: error, warn, info, debug.\n");
}

/* Every worker, peer and pool fd counts against RLIMIT_NOFILE, whose soft limit is often 1024:
 * take the hard limit (systemd's advice for programs that never use select()). */
static void raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
        return;
    rlim_t was = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max;
    if (setrlimit(RLIMIT_NOFILE, &rl) == 0)
        log_info("fds: RLIMIT_NOFILE raised from %llu to the hard limit %llu",
                 (unsigned long long)was, (unsigned long long)rl.rlim_max);
    else
        log_warn("fds: RLIMIT_NOFILE stays %llu: %s", (unsigned long long)was, strerror(errno));
}

/* The start's own checks (daemon_check_config), nothing opened. */
static int check_config(const char *path)
{
    struct kvf_config c;
    struct access a;
    char err[CFG_ERR_MAX] = "";
    if (daemon_check_config(path, &c, &a, err, sizeof(err)) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    access_done(&a);
    cfg_free(&c);
    printf("%s: ok\n", path);
    return 0;
}

static int print_config(const char *path)
{
    struct kvf_config c;
    char err[CFG_ERR_MAX] = "";
    int r = path ? cfg_load_file(path, &c, err, sizeof(err)) : cfg_defaults(&c);
    if (r < 0) {
        fprintf(stderr, "%s\n", err[0] ? err : strerror(-r));
        return 1;
    }
    char *y = cfg_to_yaml(&c);
    cfg_free(&c);
    if (!y) {
        fprintf(stderr, "out of memory\n");
        return 1;
    }
    fputs(y, stdout);
    free(y);
    return 0;
}

int main(int argc, char **argv)
{
    /* A stop signal held (blocked) from the first instruction until daemon_init has its
     * handlers: a SIGTERM during the start drains once the loop runs (exit 0), never kills a
     * half-started daemon (exit 143) */
    sigset_t stop_sigs;
    sigemptyset(&stop_sigs);
    sigaddset(&stop_sigs, SIGTERM);
    sigaddset(&stop_sigs, SIGINT);
    sigaddset(&stop_sigs, SIGHUP);
    sigprocmask(SIG_BLOCK, &stop_sigs, NULL);
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"check-config", required_argument, NULL, 'C'},
        {"print-config", no_argument, NULL, 'p'},
        {"log-level", required_argument, NULL, 'l'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *config = NULL, *level = NULL;
    bool print = false;
    int o;
    while ((o = getopt_long(argc, argv, "c:l:hV", opts, NULL)) != -1) {
        switch (o) {
        case 'c':
            config = optarg;
            break;
        case 'C':
            return check_config(optarg);
        case 'p':
            print = true;
            break;
        case 'l':
            level = optarg;
            break;
        case 'V':
            printf("kvferryd %s\n", KVF_VERSION);
            return 0;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kvferryd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if (print)
        return print_config(config);

    signal(SIGPIPE, SIG_IGN);
    static struct daemon d;
    char err[CFG_ERR_MAX] = "";
    int rc = 1, r;
    log_set_tag("kvferryd");
    if ((r = logsink_start()) < 0) /* lines queue, a thread writes them: the loop never waits */
        log_warn("log: no writer thread (%s): lines are written on the loop", strerror(-r));
    ucxlog_route(); /* UCX's messages too */
    raise_nofile();
    if ((r = daemon_init(&d)) < 0) {
        log_error("event loop: %s", uv_strerror(r));
        return 1;
    }
    sigprocmask(SIG_UNBLOCK, &stop_sigs, NULL);
    if (level) {
        log_level_t lv;
        if (log_level_from_string(level, &lv) < 0) {
            log_error("--log-level %s: not one of error, warn, info, debug", level);
            goto err_done;
        }
        log_set_level(lv);
        d.log_level_pinned = true;
    }
    if ((r = daemon_load_config(&d, config, err, sizeof(err))) < 0) {
        log_error("config: %s", err);
        goto err_done;
    }
    /* threads start before the sockets: once the control socket is up, the worker socket
     * follows with nothing slow between them (clients wait for the control socket) */
    if ((r = unmapper_new(&d.unmapper)) < 0) {
        log_error("unmapper thread: %s", strerror(-r));
        goto err_control;
    }
    struct copyeng_params cp = {.loop = &d.loop, .threads = (uint32_t)d.cfg.copy_threads};
    if ((r = copyeng_new(&cp, &d.copy)) < 0) {
        log_error("copy threads: %s", strerror(-r));
        goto err_control;
    }
    struct copyeng_stats cst;
    copyeng_get_stats(d.copy, &cst);
    log_info("copy: %u thread(s) on %u NUMA node(s)", cst.threads, cst.nodes);
    if ((r = control_new(&d, &daemon_control_ops, &d.control)) < 0) {
        log_error("control: %s", strerror(-r));
        goto err_done;
    }
    if ((r = control_listen(d.control, err, sizeof(err))) < 0) {
        log_error("%s", err);
        goto err_control;
    }
    if ((r = gpu_new(&d.loop, &d.gpu)) < 0) { /* no GPU is CPU mode, not an error */
        log_error("gpu: %s", strerror(-r));
        goto err_control;
    }
    gpu_set_completion_spin(d.gpu, (uint64_t)d.cfg.gpu_completion_spin_us);
    gpu_tprog_enable(d.gpu, d.cfg.gpu_template_programs != 0);
    if (!gpu_cpu_mode(d.gpu) && gpu_device_count(d.gpu) > 1) { /* gpu_new logged CPU mode */
        /* the same-node path copies GPU to GPU: peer access on before any pool is mapped */
        char perr[GPU_REASON_MAX + 64] = "";
        int np = gpu_peer_enable_all(d.gpu, perr, sizeof perr);
        if (np < 0)
            log_warn("gpu: peer access: %s (enabled per pair when a copy needs it)", perr);
        else
            log_info("gpu: %d device(s), peer access on for %d pair(s)", gpu_device_count(d.gpu), np);
    } else {
        log_info("gpu: %d device(s)", gpu_device_count(d.gpu));
    }
    if ((r = workers_new(&d, &d.workers)) < 0) {
        log_error("workers: %s", strerror(-r));
        goto err_control;
    }
    if ((r = workers_listen(d.workers, err, sizeof(err))) < 0) {
        log_error("%s", err);
        goto err_control;
    }
    const struct engine_req req = {&transfers_engine_ops, &d.workers->xt, &d.workers->reg,
                                   &d.workers->xt.phases, d.workers->epoch};
    if ((r = engine_new(&d, &req, &d.engine, err, sizeof(err))) < 0) {
        log_error("%s", err);
        goto err_control;
    }
    if ((r = daemon_ready(&d)) < 0) {
        log_error("startup: %s", uv_strerror(r));
        goto err_control;
    }
    uv_run(&d.loop, UV_RUN_DEFAULT);
    rc = d.exit_code;
    log_info("stopped");

err_control:
    workers_stop(d.workers); /* drops every rank: their GPU mappings close (or with their copies) */
    engine_stop(d.engine);
    control_stop(d.control);
    d.copy = copyeng_free(d.copy); /* requests ended: their copies were cancelled; joins */
    d.gpu = gpu_free(d.gpu); /* waits for the streams, delivers completions; before the walk */
    daemon_stop(&d);
    uv_run(&d.loop, UV_RUN_DEFAULT);
    d.control = control_free(d.control);
    engine_requests_gone(d.engine);
    d.workers = workers_free(d.workers);
    d.engine = engine_free(d.engine);
err_done:
    if ((r = daemon_done(&d)) != 0) {
        log_error("teardown: event loop still busy: %s", uv_strerror(r));
        rc = 1;
    }
    d.unmapper = unmapper_free(d.unmapper); /* last: every owner of a pool mapping let it go;
                                             * unmaps what is still queued, joins */
    logsink_stop(LOGSINK_EXIT_DRAIN_MS);
    return rc;
}
