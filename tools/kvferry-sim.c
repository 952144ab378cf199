/* kvferry-sim: a real worker process on libkvferry. One rank of an instance: builds its pools as
 * memfds from a preset spec, registers with the local kvferryd, then runs a workload: the
 * context side fills its shard of the global parity pattern and SENDs, the generation side
 * RECVs and verifies every byte. --all-ranks starts one process per rank of the spec.
 *   kvferry-sim --role context|generation --instance ID --spec SPEC --rank N|--all-ranks
 *       [--requests N --prompt-tokens N --gen-cached-tokens N --ctx-instance ID
 *        --ctx-dp-rank N --socket PATH --seed S --first-req N --readers N --deadline-ms N
 *        --expect-error NAME --hold-ms N --hold-while-pid PID --start-delay-ms N --quiet
 *        --device N | --devices A,B,...] (GPU pools: rank r on entry r mod count)
 *       [--start-on-signal]      after registering, wait for SIGUSR1 before --start-delay-ms
 *                                (a benchmark starts its ranks' workloads at one moment)
 *       [--step-on-signal]       one request at a time, each after the first waiting for a
 *                                SIGUSR1 (scripts/count-request-files opens its window between)
 *       [--send-tokens]          generation: give each RECV the prompt's token count; rows past
 *                                the prompt's last token must then stay unwritten (block sizes
 *                                that differ: docs/PLANNING.md)
 *       [--parity all|first]     first: fill and verify the first request only (benchmarks:
 *                                the pattern work would compete with the daemons for the CPU)
 *       [--stats-json PREFIX]    write PREFIX.r<rank>.json: counts, bytes, workload time and
 *                                each request's latency (RECV->DONE; context: SEND->SENT)
 *       [--cpu-pids PID,PID]     with --stats-json: sample these processes' CPU time (user+sys)
 *                                at the start and after each window (at most 4 pids)
 *       [--events PREFIX]        write PREFIX.r<rank>.jsonl: every issue, cancel, event and
 *                                parity check with its time (kvferry-sim_events.c; the chaos
 *                                run's checker reads them)
 *       [--cancel-pct N]         cancel a seeded N% of the requests right after issuing them
 *       [--event-wait-ms N]      give up (exit 3) when no event came this long (30000) */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kvferry-sim.h"
#include "kvferry.h"
#include "preset.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: kvferry-sim --role context|generation --instance ID --spec SPEC "
               "(--rank N | --all-ranks)\n"
               "  [--requests N] [--prompt-tokens N] [--gen-cached-tokens N] [--ctx-instance ID]\n"
               "  [--ctx-dp-rank N] [--socket PATH] [--seed S] [--first-req N] [--readers N]\n"
               "  [--deadline-ms N] [--expect-error NAME] [--hold-ms N] [--hold-while-pid PID]\n"
               "  [--start-delay-ms N] [--start-on-signal] [--step-on-signal] [--quiet]\n"
               "  [--send-tokens]\n"
               "  [--home HOST:PORT] [--ctx-home HOST:PORT]   instance homes on other daemons\n"
               "  [--device N | --devices A,B,...]   GPU pools, registered by CUDA IPC handle\n"
               "  [--parity all|first] [--stats-json PREFIX] [--cpu-pids PID,...]   benchmarks\n"
               "  [--events PREFIX] [--cancel-pct N] [--event-wait-ms N]   histories (chaos)\n");
}

static int parse_u64(const char *s, uint64_t *ret)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno || !*s || *end || *s == '-')
        return -EINVAL;
    *ret = v;
    return 0;
}

/* Starts every rank of the spec as a child (same arguments, --rank r) and waits for them. */
static int all_ranks(char **argv, int argc, const struct sim_opts *o)
{
    struct preset_spec ps;
    char err[256];
    if (preset_parse(o->spec, &ps, err, sizeof err)) {
        fprintf(stderr, "kvferry-sim: --spec: %s\n", err);
        return 2;
    }
    uint32_t n = preset_n_ranks(&ps);
    pid_t *pids = calloc(n, sizeof *pids);
    for (uint32_t r = 0; r < n; r++) {
        pid_t p = fork();
        if (p == 0) {
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* the launcher's end is the ranks' end */
            char **av = calloc((size_t)argc + 3, sizeof *av);
            int k = 0;
            for (int i = 0; i < argc; i++)
                if (strcmp(argv[i], "--all-ranks") != 0)
                    av[k++] = argv[i];
            char rb[16];
            snprintf(rb, sizeof rb, "%u", r);
            av[k++] = "--rank";
            av[k++] = rb;
            execv("/proc/self/exe", av);
            _exit(4);
        }
        pids[r] = p;
    }
    int worst = 0;
    for (uint32_t r = 0; r < n; r++) {
        int st;
        if (pids[r] > 0 && waitpid(pids[r], &st, 0) == pids[r]) {
            int code = WIFEXITED(st) ? WEXITSTATUS(st) : 5;
            if (code > worst)
                worst = code;
        } else {
            worst = 4;
        }
    }
    free(pids);
    return worst;
}

int main(int argc, char **argv)
{
    struct sim_opts o = {.rank = -2, .requests = 4, .prompt_tokens = 1000, .ctx_dp_rank = -1,
                         .seed = 1, .first_req = 1, .readers = 1};
    bool all = false;
    enum { O_ROLE = 256, O_INST, O_SPEC, O_RANK, O_ALL, O_REQS, O_PT, O_GCT, O_CTXI, O_DP, O_SOCK,
           O_SEED, O_FIRST, O_READERS, O_DL, O_EXP, O_HOLD, O_DELAY, O_QUIET, O_HELP, O_CTXH,
           O_HOME, O_DEV, O_HOLDPID, O_CANCEL, O_EVWAIT, O_PARITY, O_STATS, O_CPU, O_TOKENS,
           O_SIGNAL, O_EVENTS, O_STEP };
    static const struct option longopts[] = {
        {"role", 1, 0, O_ROLE}, {"instance", 1, 0, O_INST}, {"spec", 1, 0, O_SPEC},
        {"rank", 1, 0, O_RANK}, {"all-ranks", 0, 0, O_ALL}, {"requests", 1, 0, O_REQS},
        {"prompt-tokens", 1, 0, O_PT}, {"gen-cached-tokens", 1, 0, O_GCT},
        {"ctx-instance", 1, 0, O_CTXI}, {"ctx-dp-rank", 1, 0, O_DP}, {"socket", 1, 0, O_SOCK},
        {"seed", 1, 0, O_SEED}, {"first-req", 1, 0, O_FIRST}, {"readers", 1, 0, O_READERS},
        {"deadline-ms", 1, 0, O_DL}, {"expect-error", 1, 0, O_EXP}, {"hold-ms", 1, 0, O_HOLD},
        {"hold-while-pid", 1, 0, O_HOLDPID},
        {"start-delay-ms", 1, 0, O_DELAY}, {"quiet", 0, 0, O_QUIET}, {"help", 0, 0, O_HELP},
        {"ctx-home", 1, 0, O_CTXH}, {"home", 1, 0, O_HOME},
        {"device", 1, 0, O_DEV}, {"devices", 1, 0, O_DEV}, {"parity", 1, 0, O_PARITY},
        {"stats-json", 1, 0, O_STATS}, {"cpu-pids", 1, 0, O_CPU},
        {"send-tokens", 0, 0, O_TOKENS}, {"start-on-signal", 0, 0, O_SIGNAL},
        {"step-on-signal", 0, 0, O_STEP},
        {"events", 1, 0, O_EVENTS}, {"cancel-pct", 1, 0, O_CANCEL},
        {"event-wait-ms", 1, 0, O_EVWAIT}, {0, 0, 0, 0}};
    int ch;
    uint64_t v = 0;
    while ((ch = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        if (ch >= O_RANK && ch != O_ALL && ch != O_CTXI && ch != O_SOCK && ch != O_EXP &&
            ch != O_QUIET && ch != O_HELP && ch != O_CTXH && ch != O_HOME && ch != O_DEV &&
            ch < O_PARITY &&
            parse_u64(optarg, &v)) {
            fprintf(stderr, "kvferry-sim: bad number '%s'\n", optarg);
            return 2;
        }
        switch (ch) {
        case O_ROLE: o.role = optarg; break;
        case O_INST: o.instance = optarg; break;
        case O_SPEC: o.spec = optarg; break;
        case O_RANK: o.rank = (int32_t)v; break;
        case O_ALL: all = true; break;
        case O_REQS: o.requests = (uint32_t)v; break;
        case O_PT: o.prompt_tokens = v; break;
        case O_GCT: o.gen_cached_tokens = v; break;
        case O_CTXI: o.ctx_instance = optarg; break;
        case O_DP: o.ctx_dp_rank = (int32_t)v; break;
        case O_SOCK: o.socket = optarg; break;
        case O_SEED: o.seed = v; break;
        case O_FIRST: o.first_req = v; break;
        case O_READERS: o.readers = (uint32_t)v; break;
        case O_DL: o.deadline_ms = (uint32_t)v; break;
        case O_EXP: o.expect_error = optarg; break;
        case O_HOLD: o.hold_ms = (uint32_t)v; break;
        case O_HOLDPID: o.hold_pid = (uint32_t)v; break;
        case O_DELAY: o.start_delay_ms = (uint32_t)v; break;
        case O_QUIET: o.quiet = true; break;
        case O_CTXH: o.ctx_home = optarg; break;
        case O_HOME: o.home = optarg; break;
        case O_PARITY:
            if (strcmp(optarg, "all") && strcmp(optarg, "first")) {
                fprintf(stderr, "kvferry-sim: --parity: all or first, not '%s'\n", optarg);
                return 2;
            }
            o.parity_first = strcmp(optarg, "first") == 0;
            break;
        case O_STATS: o.stats_json = optarg; break;
        case O_EVENTS: o.events = optarg; break;
        case O_CANCEL:
            if (v > 100) {
                fprintf(stderr, "kvferry-sim: --cancel-pct: 0..100, not %s\n", optarg);
                return 2;
            }
            o.cancel_pct = (uint32_t)v;
            break;
        case O_EVWAIT: o.event_wait_ms = (uint32_t)v; break;
        case O_TOKENS: o.send_tokens = true; break;
        case O_SIGNAL: o.start_on_signal = true; break;
        case O_STEP: o.step_on_signal = true; break;
        case O_CPU: {
            /* a copy: --all-ranks passes argv on to its children */
            static char list[256];
            snprintf(list, sizeof list, "%s", optarg);
            for (char *save, *t = strtok_r(list, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (o.n_cpu_pids == SIM_MAX_CPU_PIDS || parse_u64(t, &v) || v == 0 ||
                    v > INT32_MAX) {
                    fprintf(stderr, "kvferry-sim: --cpu-pids: at most %d pids, not '%s'\n",
                            SIM_MAX_CPU_PIDS, t);
                    return 2;
                }
                o.cpu_pids[o.n_cpu_pids++] = (int32_t)v;
            }
            break;
        }
        case O_HELP: usage(stdout); return 0;
        case O_DEV: o.devices = optarg; break;
        default: usage(stderr); return 2;
        }
    }
    if (!o.role || !o.instance || !o.spec || (!all && o.rank < 0) ||
        (strcmp(o.role, "context") && strcmp(o.role, "generation")) ||
        (!strcmp(o.role, "generation") && !o.ctx_instance) || o.first_req == 0) {
        usage(stderr);
        return 2;
    }
    if (o.expect_error && kvf_error_from_string(o.expect_error) < 0) {
        fprintf(stderr, "kvferry-sim: --expect-error: unknown error %s\n", o.expect_error);
        return 2;
    }
    if (o.start_on_signal || o.step_on_signal) { /* blocked from here on: a SIGUSR1 before the wait stays pending */
        sigset_t usr1;
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_BLOCK, &usr1, NULL);
    }
    if (all)
        return all_ranks(argv, argc, &o);
    return sim_run(&o);
}
