/* daemon_life.h: the life of the daemon object (daemon.c, daemon_metrics.c): init, config, READY,
 * reload, drain, stop, and the status/stats documents built from the module table. Only main.c
 * and this folder call these by name; a module below that must reach them is given an ops table
 * at creation (control_ops: drain, reload, status, stats, metrics). Loop thread only. */
#ifndef KVF_DAEMON_LIFE_H
#define KVF_DAEMON_LIFE_H

#include "daemon.h"

struct control_ops;

/* Inits the loop, timers and the signal handlers (started: a signal during the start is handled
 * when the loop runs). Returns 0 or -errno. */
int daemon_init(struct daemon *d);
/* Loads `path` (NULL: defaults) as the initial config through daemon_check_config. On error
 * writes a message into err and returns -errno. */
int daemon_load_config(struct daemon *d, const char *path, char *err, size_t errlen);
/* daemon_check.c: `path` (NULL: the defaults) loaded and checked for all that the start would
 * refuse, before anything is opened: the file and its rules, access.* resolved, socket paths,
 * the secret file, metrics.listen, listen.address, transport.ucx_tls, the arena's placement
 * and shape. On success *ret and *access_ret are the caller's (cfg_free, access_done); on
 * error writes "path: why" (or the parser's "file:line:col: ...") into err and returns -errno.
 * Used by the start and by --check-config, so that both refuse the same. */
int daemon_check_config(const char *path, struct kvf_config *ret, struct access *access_ret,
                        char *err, size_t errlen);
/* Starts the watchdog, sends READY=1; or, when a stop signal came during the start, leaves the
 * daemon draining without READY=1 (the loop then stops it). Returns 0 or -errno. */
int daemon_ready(struct daemon *d);
/* Parses the config file again, validates, swaps live keys; on error keeps the old config.
 * Records the result in last_reload. Returns 0 or -errno. */
int daemon_reload(struct daemon *d);
/* Starts draining (idempotent): STOPPING=1, stop accepting new work, wait for in-flight work up
 * to daemon.drain_timeout, then stop the loop. */
void daemon_drain(struct daemon *d);
/* Closes the daemon's own handles; the caller then runs the loop to let close callbacks run.
 * Safe on a half-initialized daemon. */
void daemon_stop(struct daemon *d);
/* Closes any handle still open, closes the loop and frees everything. Returns uv_loop_close(). */
int daemon_done(struct daemon *d);

/* Seconds since start. */
uint64_t daemon_uptime_s(const struct daemon *d);

/* status/stats documents: the daemon's own keys plus every module's section (modules.c). */
json_t *daemon_status_json(struct daemon *d);
json_t *daemon_stats_json(struct daemon *d);
/* The stats document walked into `set` section by section, each against its declarations
 * (modules.h; daemon_metrics.c). Returns 0 or -errno. */
struct prom_set;
int daemon_metrics_walk(struct daemon *d, struct prom_set *set);

/* The ops the control module gets at creation: these functions of this header. */
extern const struct control_ops daemon_control_ops;

#endif
