/* ctl_cmds.h: the control command table: one row per command (name, handler, flags; the help
 * text is the command's row in lib/ctl_help.c, shared with kvferryctl).
 * Handlers run on the loop thread with the peer's credentials already checked for access;
 * ctl_cmds_run checks the admin flag. Adding a command = one handler + one row in ctl_cmds.c + its help row in lib/ctl_help.c
 * (check_control fails on a command without one). */
#ifndef KVF_CTL_CMDS_H
#define KVF_CTL_CMDS_H

#include <jansson.h>
#include <stddef.h>

#include "access.h"

struct daemon;

#define CTL_CMD_ADMIN 0x1        /* mutating: admin uid/gid only */
#define CTL_CMD_ADMIN_TO_SET 0x2 /* admin only when args are given (a setter) */

/* On success stores a new reference in *ret and returns 0; else -errno and a message. */
typedef int (*ctl_cmd_fn)(struct daemon *d, const struct peer_cred *peer, json_t *args,
                          json_t **ret, char *msg, size_t msglen);

struct ctl_cmd {
    const char *name;
    ctl_cmd_fn run;
    unsigned flags;
};

extern const struct ctl_cmd ctl_cmds[];
extern const size_t ctl_cmds_len;

/* Finds and runs `cmd`. Unknown command: -ENOENT; non-admin on a mutating command: -EPERM. */
int ctl_cmds_run(struct daemon *d, const struct peer_cred *peer, const char *cmd, json_t *args,
                 json_t **ret, char *msg, size_t msglen);

#endif
