/* metrics.h: the `metrics` control command: every module's stats section (daemon_stats_json)
 * as Prometheus text (format 0.0.4, lib/prom.h), plus kvferry_build_info and
 * kvferry_uptime_seconds. The reply is {"text": "...", "dropped": N,
 * "content_type": "text/plain; version=0.0.4; charset=utf-8"}; `kvferryctl metrics` prints the
 * text raw.
 * How a stats key becomes a metric (prom_from_json): kvferry_<module>_<key>, typed, explained
 * and given a unit by its module's metric table (modules.h, struct prom_doc): counter, gauge or
 * histogram (a hist.h object); an object declared with a label is keyed by name and its keys
 * become label values; _s/_ms/_us/_ns keys become _seconds. A key no table declares is left out
 * and counted in kvferry_metrics_undeclared (nothing is typed from its name).
 * Scraping without an HTTP port: node_exporter's textfile collector, e.g. a timer running
 * `kvferryctl metrics > DIR/kvferry.prom.tmp && mv DIR/kvferry.prom.tmp DIR/kvferry.prom`.
 * Loop thread only. */
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
