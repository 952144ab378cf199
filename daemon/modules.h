/* modules.h: the table of daemon modules (modules.c). A module contributes a section to
 * `status` and `stats` (a JSON object under its name), and may react to a reload or a drain.
 * Adding a module to the daemon = one row in modules.c. Stats also become Prometheus metrics
 * (metrics.h): name counters *_total or list them in metrics.c; name an object keyed by name
 * (per error, per peer) <x>_by_<label>. Every hook may be NULL; a hook that finds
 * its module not started (pointer in struct daemon still NULL) does nothing.
 * Loop thread only. */
#ifndef KVF_MODULES_H
#define KVF_MODULES_H

#include <jansson.h>
#include <stddef.h>

struct daemon;

struct daemon_module {
    const char *name; /* section key: "control", "workers", ... */
    /* Fill `ret` (an empty object the caller owns) with the section. 0 or -errno. */
    int (*status)(struct daemon *d, json_t *ret);
    int (*stats)(struct daemon *d, json_t *ret);
    void (*reloaded)(struct daemon *d);    /* live keys of d->cfg may have changed */
    void (*drain_start)(struct daemon *d); /* stop accepting new work */
    size_t (*in_flight)(struct daemon *d); /* drain waits until every module says 0 */
};

extern const struct daemon_module daemon_modules[];
extern const size_t daemon_modules_len;

#endif
