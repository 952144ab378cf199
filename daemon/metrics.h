/* metrics.h: the `metrics` control command: every module's stats section (daemon_stats_json)
 * as Prometheus text (format 0.0.4, lib/prom.h), plus kvferry_build_info and
 * kvferry_uptime_seconds. The reply is {"text": "...", "content_type": "text/plain; version=0.0.4; ..",
 * "dropped": N}; `kvferryctl metrics` prints the text raw.
 * How a stats key becomes a metric: counters are the keys ending in _total and the keys listed in
 * metrics.c's doc table; an object named <x>_by_<label> (or listed with a label) is keyed by name
 * and its keys become label values. A module that wants its counters typed right either names them
 * *_total or adds rows to that table. Loop thread only. */
#ifndef KVF_METRICS_H
#define KVF_METRICS_H

#include <jansson.h>
#include <stddef.h>

#include "access.h"

struct daemon;

/* Renders the daemon's metrics. Stores a malloc'd text in *ret (caller frees) and the number of
 * series dropped (duplicates, limits) in *dropped when not NULL. Returns 0 or -errno. */
int metrics_render(struct daemon *d, char **ret, size_t *dropped);

/* The control command (row in ctl_cmds.c). */
int metrics_cmd(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                char *msg, size_t msglen);

#endif
