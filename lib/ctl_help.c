/* ctl_help.c: the control commands' help, one row each (ctl_help.h). */
#include <string.h>

#include "ctl_help.h"

const struct ctl_help ctl_help[] = {
    {"status", "", "state, version, uptime, config, sockets, instances, live keys (short; -l: every "
                   "field)"},
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
    {"help", "", "this list"},
};
const size_t ctl_help_len = sizeof(ctl_help) / sizeof(ctl_help[0]);

const struct ctl_help *ctl_help_find(const char *name)
{
    for (size_t i = 0; i < ctl_help_len; i++)
        if (strcmp(ctl_help[i].name, name) == 0)
            return &ctl_help[i];
    return NULL;
}
