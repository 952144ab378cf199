/* modules.h: the table of daemon modules (modules.c). A module contributes a section to
 * `status` and `stats` (a JSON object under its name), and may react to a reload or a drain.
 * Adding a module to the daemon = one row in modules.c. Stats also become Prometheus metrics
 * (metrics.h): every number a module's stats hook puts out is declared in the module's own
 * metric table (type, unit, HELP; paths relative to its section, see struct prom_doc); a number
 * not declared is left out of the scrape and counted in kvferry_metrics_undeclared. Every hook
 * may be NULL; a hook that finds
 * its module not started (pointer in struct daemon still NULL) does nothing.
 * Loop thread only. */
#ifndef KVF_MODULES_H
#define KVF_MODULES_H

#include <jansson.h>
#include <stddef.h>

struct daemon;
struct prom_doc;

struct daemon_module {
    const char *name; /* section key: "control", "workers", ... */
    /* Fill `ret` (an empty object the caller owns) with the section. 0 or -errno. */
    int (*status)(struct daemon *d, json_t *ret);
    int (*stats)(struct daemon *d, json_t *ret);
    void (*reloaded)(struct daemon *d);    /* live keys of d->cfg may have changed */
    void (*drain_start)(struct daemon *d); /* stop accepting new work */
    size_t (*in_flight)(struct daemon *d); /* drain waits until every module says 0 */
    const struct prom_doc *metrics;        /* its stats keys declared (metrics.h) */
    const size_t *n_metrics;
    /* The live config keys (cfg_table's `live`) this module uses, each with the value it uses
     * now, read from where it keeps it (a copy in its own state is reported from that copy), as
     * cfg_value_json renders it: {"arena.reserve_timeout": 5000, ...}. status.live merges them;
     * a test reloads every live key and checks its user's value (check_live_keys). */
    int (*live)(struct daemon *d, json_t *ret);
};

extern const struct daemon_module daemon_modules[];
extern const size_t daemon_modules_len;

#endif
