/* daemon.h: the daemon object of kvferryd. One struct daemon per process, on the loop thread.
 * It owns the loop, the effective config, the start time, the config path and the result of the
 * last reload; each module (control socket, later: registry, peers, arena, transfers) hangs off it
 * and reports through the module table in modules.c (status and stats sections, reload and drain
 * hooks), so a new module adds one row there and one pointer here.
 * Lifecycle (main.c): daemon_init -> daemon_load_config -> modules start -> daemon_ready ->
 * uv_run -> modules stop -> daemon_done. Not thread-safe: the loop thread only. */
#ifndef KVF_DAEMON_H
#define KVF_DAEMON_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "access.h"
#include "cfg.h"
#include "log.h"
#include "notify.h"

struct control;
struct workers;
struct engine;
struct gpu;
struct unmapper;

typedef enum { DAEMON_STARTING, DAEMON_RUNNING, DAEMON_DRAINING, DAEMON_STOPPED } daemon_state_t;

/* Outcome of the last reload (SIGHUP or the `reload` command). */
struct daemon_reload {
    bool attempted;
    bool ok;
    int64_t time_s;          /* wall clock, seconds since the epoch */
    char error[CFG_ERR_MAX]; /* "file:line:column: message" when !ok */
    json_t *restart_needed;  /* owned: array of key names changed but not live */
    json_t *applied;         /* owned: array of live key names that changed */
};

struct daemon_counters {
    uint64_t reloads_ok;
    uint64_t reloads_failed;
};

struct daemon {
    uv_loop_t loop;
    struct kvf_config cfg; /* owned: the effective config; live keys swap on reload */
    struct access access;  /* owned: access.* resolved to uids/gids */
    char *config_path;     /* owned; NULL: built-in defaults */
    bool log_level_pinned; /* --log-level given: config's log.level is ignored */
    uint64_t start_ms;     /* uv_now at init */
    int64_t start_wall_s;
    daemon_state_t state;
    struct daemon_reload last_reload;
    struct daemon_counters counters;
    struct notify notify; /* sd_notify and the watchdog timer */
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t drain_timer;
    uint64_t drain_deadline_ms;
    int exit_code;

    /* modules, each owned; NULL until started */
    struct control *control;
    struct workers *workers;        /* worker socket, registry, transfers (workers.h) */
    struct engine *engine;          /* inter-daemon transfers: link, arena, peers (engine.h) */
    struct gpu *gpu;                /* CUDA plumbing (gpu.h); CPU mode without a GPU */
    struct copyeng *copy;           /* host copy threads (copyeng.h) */
    struct unmapper *unmapper;      /* pool unmaps off the loop (unmapper.h); freed last */
};

/* Inits the loop, timers and the signal handlers (started: a signal during the start is handled
 * when the loop runs). Returns 0 or -errno. */
int daemon_init(struct daemon *d);
/* Loads `path` (NULL: defaults) as the initial config and resolves access lists. On error
 * writes a message into err and returns -errno. */
int daemon_load_config(struct daemon *d, const char *path, char *err, size_t errlen);
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

const char *daemon_state_to_string(daemon_state_t s);
/* Seconds since start. */
uint64_t daemon_uptime_s(const struct daemon *d);

/* status/stats documents: the daemon's own keys plus every module's section (modules.c). */
json_t *daemon_status_json(struct daemon *d);
json_t *daemon_stats_json(struct daemon *d);
/* The stats document walked into `set` section by section, each against its declarations
 * (modules.h; daemon_metrics.c). Returns 0 or -errno. */
struct prom_set;
int daemon_metrics_walk(struct daemon *d, struct prom_set *set);
/* last_reload as JSON: {"attempted","ok","time_s","error","applied","restart_needed"}. */
json_t *daemon_reload_json(const struct daemon_reload *r);

#endif
