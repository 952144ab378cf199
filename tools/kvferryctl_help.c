/* kvferryctl_help.c: `kvferryctl help`, offline (no daemon needed): the daemon's commands as
 * this kvferryctl knows them, and the offline ones. check_ctl_human compares the list with a
 * running daemon's own `help`, so the two cannot drift apart unnoticed. */
#include <stdio.h>

#include "kvferryctl.h"

static const struct {
    const char *name, *args, *doc;
} daemon_cmds[] = {
    {"status", "", "state, version, uptime, config, sockets, instances (short; -l: every field)"},
    {"stats", "", "counters of every module"},
    {"config", "", "the effective config, spelled as kvferry.yaml spells it"},
    {"log-level", "[LEVEL]", "show the log level, or set it: error, warn, info, debug (admin)"},
    {"reload", "", "re-read the config file, apply live keys (admin)"},
    {"drain", "", "stop accepting work, wait up to daemon.drain_timeout, exit 0 (admin)"},
    {"workers", "", "worker connections and their ranks, instances (short; -l: every column)"},
    {"transfers", "", "requests in flight and just finished: phase, peer, bytes done of planned, "
                      "rate, age, outcome (--watch [--interval S] [--count N]: refreshing)"},
    {"metrics", "", "every counter and gauge in the Prometheus text format"},
    {"peers", "", "peer daemons: address, state, transport path, requests, bytes"},
    {"arena", "", "arena slots: capacity, in use, quarantined, waiting, counters"},
    {"help", "", "this list (offline)"},
};

static const struct {
    const char *name, *args, *doc;
} offline_cmds[] = {
    {"version", "", "the version of kvferryctl"},
    {"plan", "--ctx SPEC --gen SPEC ...", "the transfer plan between two layouts (plan --help)"},
    {"layout", "SPEC [--rank N]", "a preset rank's layout JSON"},
    {"check-layout", "FILE...", "validate layout JSON files (exit 1 naming the field)"},
};

size_t ctl_help_daemon_commands(const char **names, size_t n)
{
    size_t total = sizeof(daemon_cmds) / sizeof(daemon_cmds[0]);
    for (size_t i = 0; i < total && i < n; i++)
        names[i] = daemon_cmds[i].name;
    return total;
}

int ctl_help_main(int argc, char **argv)
{
    (void)argc, (void)argv;
    printf("usage: kvferryctl [--socket PATH | --config FILE] [--json] [-l] [--timeout S] COMMAND "
           "[ARGS]\n\ncommands of the daemon (ARGS: key=value, the value JSON when it parses):\n");
    for (size_t i = 0; i < sizeof(daemon_cmds) / sizeof(daemon_cmds[0]); i++)
        printf("  %-10s %-8s %s\n", daemon_cmds[i].name, daemon_cmds[i].args, daemon_cmds[i].doc);
    printf("\noffline commands:\n");
    for (size_t i = 0; i < sizeof(offline_cmds) / sizeof(offline_cmds[0]); i++)
        printf("  %-10s %s%s%s\n", offline_cmds[i].name, offline_cmds[i].args,
               *offline_cmds[i].args ? ": " : "", offline_cmds[i].doc);
    printf("\nlive views (need the daemon):\n"
           "  %-10s %s\n", "top", "[--interval S] [--window S] [--count N]: per-peer and "
           "per-instance rates of completed requests over the last --window seconds (10), over "
           "the transfers table, refreshing; q quits");
    printf("\n--json prints the daemon's JSON unchanged (raw bytes, milliseconds, epoch seconds);\n"
           "tables print human units. -l: every field of status and workers.\n"
           "The socket defaults to the daemon's: /run/kvferry/control.sock for root or when the\n"
           "system daemon's socket exists, else $XDG_RUNTIME_DIR/kvferry/control.sock, else\n"
           "./run/control.sock. man kvferryctl(8) says more.\n");
    return 0;
}
