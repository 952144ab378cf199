/* kvferryctl_help.c: `kvferryctl help`, offline (no daemon needed): the daemon's commands from
 * the one help table the daemon answers `help` from (lib/ctl_help.c), and the offline ones.
 * check_ctl_human compares the list with a running daemon's own `help`. */
#include <stdio.h>
#include <string.h>

#include "ctl_help.h"

#include "kvferryctl.h"

static const struct {
    const char *name, *args, *doc;
} offline_cmds[] = {
    {"version", "", "the version of kvferryctl"},
    {"plan", "--ctx SPEC --gen SPEC ...", "the transfer plan between two layouts (plan --help)"},
    {"layout", "SPEC [--rank N]", "a preset rank's layout JSON"},
    {"check-layout", "FILE...", "validate layout JSON files (exit 1 naming the field)"},
};

int ctl_help_main(int argc, char **argv)
{
    (void)argc, (void)argv;
    printf("usage: kvferryctl [--socket PATH | --config FILE] [--json] [-l] [--timeout S] COMMAND "
           "[ARGS]\n\ncommands of the daemon (ARGS: key=value, the value JSON when it parses):\n");
    for (size_t i = 0; i < ctl_help_len; i++)
        printf("  %-10s %-8s %s%s\n", ctl_help[i].name, ctl_help[i].args, ctl_help[i].doc,
               strcmp(ctl_help[i].name, "help") == 0 ? " (offline here)" : "");
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
