/* ctl_help.h: the one text of the control commands: name, arguments as kvferryctl spells them,
 * what it does. The daemon's command table (daemon/control/ctl_cmds.c) holds handlers and flags
 * and answers `help` from this table; kvferryctl prints it offline. A command without a row here
 * is refused at the daemon's start (ctl_cmds_check) and by check_ctl_human. */
#ifndef KVF_CTL_HELP_H
#define KVF_CTL_HELP_H

#include <stddef.h>

struct ctl_help {
    const char *name;
    const char *args; /* kvferryctl's spelling: "[LEVEL]", "" */
    const char *doc;
};

extern const struct ctl_help ctl_help[];
extern const size_t ctl_help_len;

/* The row of `name`, or NULL. */
const struct ctl_help *ctl_help_find(const char *name);

#endif
