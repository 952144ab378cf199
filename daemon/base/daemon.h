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

/* The plain functions of these types (daemon_types.c). The daemon's life (init, reload, drain,
 * status documents) is declared by daemon_life.h at the top, where it is defined: the modules
 * below reach it only through the ops tables they are given (control_ops). */
const char *daemon_state_to_string(daemon_state_t s);
/* last_reload as JSON: {"attempted","ok","time_s","error","applied","restart_needed"}. */
json_t *daemon_reload_json(const struct daemon_reload *r);

#endif
