/* ctl_cmds.c: the control commands and their table (see ctl_cmds.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "control.h"
#include "ctl_cmds.h"
#include "ctl_help.h"
#include "daemon.h"
#include "metrics.h"
#include "engine.h"
#include "workers.h"

static int cmd_help(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                    char *msg, size_t msglen)
{
    (void)d, (void)peer, (void)args, (void)msg, (void)msglen;
    json_t *o = json_object();
    for (size_t i = 0; i < ctl_cmds_len; i++) {
        const struct ctl_help *h = ctl_help_find(ctl_cmds[i].name);
        json_object_set_new(o, ctl_cmds[i].name, json_string(h ? h->doc : "(no help row)"));
    }
    *ret = o;
    return 0;
}

static int cmd_status(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                      char *msg, size_t msglen)
{
    (void)peer, (void)args, (void)msg, (void)msglen;
    *ret = control_ops(d->control)->status(d);
    return *ret ? 0 : -ENOMEM;
}

static int cmd_stats(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                     char *msg, size_t msglen)
{
    (void)peer, (void)args, (void)msg, (void)msglen;
    *ret = control_ops(d->control)->stats(d);
    return *ret ? 0 : -ENOMEM;
}

static int cmd_config(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                      char *msg, size_t msglen)
{
    (void)peer, (void)args, (void)msg, (void)msglen;
    *ret = (json_t *)cfg_to_json(&d->cfg);
    return *ret ? 0 : -ENOMEM;
}

static int cmd_log_level(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                         char *msg, size_t msglen)
{
    (void)d, (void)peer;
    json_t *lv = args ? json_object_get(args, "level") : NULL;
    if (args && json_object_size(args) > 0 && !json_is_string(lv)) {
        snprintf(msg, msglen, "args: {\"level\": \"error|warn|info|debug\"}");
        return -EINVAL;
    }
    log_level_t old = log_get_level();
    if (lv) {
        log_level_t nl;
        if (log_level_from_string(json_string_value(lv), &nl) < 0) {
            snprintf(msg, msglen, "unknown log level '%s' (error, warn, info, debug)",
                     json_string_value(lv));
            return -EINVAL;
        }
        log_set_level(nl);
        log_info("log level %s -> %s (control, uid %u)", log_level_to_string(old),
                 log_level_to_string(nl), (unsigned)peer->uid);
    }
    *ret = json_pack("{s:s}", "level", log_level_to_string(log_get_level()));
    if (lv)
        json_object_set_new(*ret, "previous", json_string(log_level_to_string(old)));
    return 0;
}

static int cmd_reload(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                      char *msg, size_t msglen)
{
    (void)args;
    log_info("reload requested over control (uid %u)", (unsigned)peer->uid);
    int r = control_ops(d->control)->reload(d);
    if (r < 0) {
        snprintf(msg, msglen, "%s", d->last_reload.error);
        return r;
    }
    *ret = daemon_reload_json(&d->last_reload);
    return 0;
}

static int cmd_drain(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                     char *msg, size_t msglen)
{
    (void)args, (void)msg, (void)msglen;
    log_info("drain requested over control (uid %u)", (unsigned)peer->uid);
    control_ops(d->control)->drain(d);
    *ret = json_pack("{s:s,s:I}", "state", daemon_state_to_string(d->state), "timeout_ms",
                     (json_int_t)d->cfg.daemon_drain_timeout_ms);
    return 0;
}

static int cmd_workers(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                       char *msg, size_t msglen)
{
    (void)peer, (void)args, (void)msg, (void)msglen;
    if (!d->workers) {
        *ret = json_pack("{s:[],s:[]}", "workers", "instances");
        return *ret ? 0 : -ENOMEM;
    }
    *ret = json_pack("{s:o,s:o}", "workers", workers_list_json(d->workers), "instances",
                     registry_instances_json(&d->workers->reg));
    return *ret ? 0 : -ENOMEM;
}

static int cmd_transfers(struct daemon *d, const struct peer_cred *peer, json_t *args,
                         json_t **ret, char *msg, size_t msglen)
{
    (void)peer, (void)args, (void)msg, (void)msglen;
    uint64_t now = uv_now(&d->loop);
    *ret = json_pack("{s:o,s:o}", "transfers",
                     d->workers ? transfers_json(&d->workers->xt, now) : json_array(), "finished",
                     d->workers ? transfers_finished_json(&d->workers->xt, now) : json_array());
    return *ret ? 0 : -ENOMEM;
}

static int cmd_peers(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                     char *msg, size_t msglen)
{
    (void)peer, (void)args, (void)msg, (void)msglen;
    *ret = engine_peers_json(d);
    return *ret ? 0 : -ENOMEM;
}

static int cmd_arena(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                     char *msg, size_t msglen)
{
    (void)peer, (void)args, (void)msg, (void)msglen;
    *ret = engine_arena_json(d);
    return *ret ? 0 : -ENOMEM;
}

/* The command table: handler and flags; the text of each is its row in lib/ctl_help.c. */
const struct ctl_cmd ctl_cmds[] = {
    {"status", cmd_status, 0},
    {"stats", cmd_stats, 0},
    {"config", cmd_config, 0},
    {"log-level", cmd_log_level, CTL_CMD_ADMIN_TO_SET},
    {"reload", cmd_reload, CTL_CMD_ADMIN},
    {"drain", cmd_drain, CTL_CMD_ADMIN},
    {"workers", cmd_workers, 0},
    {"transfers", cmd_transfers, 0},
    {"metrics", metrics_cmd, 0},
    {"peers", cmd_peers, 0},
    {"arena", cmd_arena, 0},
    {"help", cmd_help, 0},
};
const size_t ctl_cmds_len = sizeof(ctl_cmds) / sizeof(ctl_cmds[0]);

int ctl_cmds_run(struct daemon *d, const struct peer_cred *peer, const char *cmd, json_t *args,
                 json_t **ret, char *msg, size_t msglen)
{
    for (size_t i = 0; i < ctl_cmds_len; i++) {
        const struct ctl_cmd *c = &ctl_cmds[i];
        if (strcmp(c->name, cmd) != 0)
            continue;
        bool mutating = (c->flags & CTL_CMD_ADMIN) ||
                        ((c->flags & CTL_CMD_ADMIN_TO_SET) && args && json_object_size(args) > 0);
        if (mutating && !peer->admin) {
            if (d->control)
                control_counters(d->control)->refused_admin++;
            snprintf(msg, msglen,
                     "'%s' changes the daemon: uid %u is not an admin "
                     "(access.admin_uids/gids)",
                     cmd, (unsigned)peer->uid);
            return -EPERM;
        }
        return c->run(d, peer, args, ret, msg, msglen);
    }
    snprintf(msg, msglen, "unknown command '%.64s' (try 'help')", cmd);
    return -ENOENT;
}
