/* daemon_metrics.c: the stats document walked into a metric set (daemon.h,
 * daemon_metrics_walk): the daemon's own section against the table below, each module's section
 * against the table its row in modules.c names. Loop thread only. */
#include <errno.h>
#include <stdio.h>

#include "daemon_life.h"
#include "modules.h"
#include "prom.h"

/* The daemon section (daemon.c, daemon_stats_json). */
static const struct prom_doc daemon_docs[] = {
    {"uptime_s", PROM_GAUGE, NULL, "Time since kvferryd started (whole seconds).", NULL},
    {"reloads_ok", PROM_COUNTER, NULL, "Config reloads that applied.", "reloads"},
    {"reloads_failed", PROM_COUNTER, NULL, "Config reloads refused; the old config stayed.",
     "reloads"},
    {"watchdog_sent", PROM_COUNTER, NULL, "WATCHDOG=1 notifications sent to systemd.",
     "notifications"},
};

/* One section as kvferry_<section>_<key>, against its declarations. */
static int walk_section(struct prom_set *set, const json_t *stats, const char *section,
                        const struct prom_doc *docs, size_t n_docs)
{
    const json_t *sec = json_object_get(stats, section);
    if (!sec)
        return 0; /* a module without stats, or not started */
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "kvferry_%s", section);
    return prom_from_json(set, prefix, sec, docs, n_docs);
}

int daemon_metrics_walk(struct daemon *d, struct prom_set *set)
{
    json_t *stats = daemon_stats_json(d);
    if (!stats)
        return -ENOMEM;
    int r = walk_section(set, stats, "daemon", daemon_docs,
                         sizeof(daemon_docs) / sizeof(daemon_docs[0]));
    for (size_t i = 0; r == 0 && i < daemon_modules_len; i++) {
        const struct daemon_module *m = &daemon_modules[i];
        r = walk_section(set, stats, m->name, m->metrics, m->n_metrics ? *m->n_metrics : 0);
    }
    json_decref(stats);
    return r;
}
