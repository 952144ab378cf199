/* daemon.c: the daemon object: loop, signals, config and reload, drain, status documents. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "daemon_life.h"
#include "logsink.h"
#include "modules.h"

#define DAEMON_DRAIN_TICK_MS 20
#define DAEMON_RELOAD_KEYS_MAX 128

/* Allowed edges of the daemon's state machine: starting -> running -> draining -> stopped. A
 * drain may also begin before READY=1 (SIGTERM during start). */
static const bool state_edges[DAEMON_STOPPED + 1][DAEMON_STOPPED + 1] = {
    [DAEMON_STARTING] = {[DAEMON_RUNNING] = true, [DAEMON_DRAINING] = true},
    [DAEMON_RUNNING] = {[DAEMON_DRAINING] = true},
    [DAEMON_DRAINING] = {[DAEMON_STOPPED] = true},
};

/* Returns 0, or -EINVAL (and changes nothing) for an edge the table does not allow. */
static int daemon_set_state(struct daemon *d, daemon_state_t to)
{
    if (!state_edges[d->state][to]) {
        log_debug("daemon: %s -> %s refused", daemon_state_to_string(d->state),
                  daemon_state_to_string(to));
        return -EINVAL;
    }
    log_info("daemon: %s -> %s", daemon_state_to_string(d->state), daemon_state_to_string(to));
    d->state = to;
    return 0;
}

static void on_signal(uv_signal_t *s, int signum)
{
    struct daemon *d = s->data;
    if (signum == SIGHUP) {
        log_info("SIGHUP: reloading %s", d->config_path ? d->config_path : "(defaults)");
        (void)daemon_reload(d);
        return;
    }
    log_info("%s: draining", signum == SIGTERM ? "SIGTERM" : "SIGINT");
    daemon_drain(d);
}

int daemon_init(struct daemon *d)
{
    memset(d, 0, sizeof(*d));
    int r = uv_loop_init(&d->loop);
    if (r < 0)
        return r;
    uv_signal_t *sigs[] = {&d->sig_term, &d->sig_int, &d->sig_hup};
    for (size_t i = 0; i < 3; i++) {
        uv_signal_init(&d->loop, sigs[i]);
        sigs[i]->data = d;
    }
    /* from the start: a signal during the start is handled once the loop runs (after READY) */
    if ((r = uv_signal_start(&d->sig_term, on_signal, SIGTERM)) < 0 ||
        (r = uv_signal_start(&d->sig_int, on_signal, SIGINT)) < 0 ||
        (r = uv_signal_start(&d->sig_hup, on_signal, SIGHUP)) < 0)
        return r;
    uv_timer_init(&d->loop, &d->drain_timer);
    d->drain_timer.data = d;
    d->start_ms = uv_now(&d->loop);
    d->start_wall_s = (int64_t)time(NULL);
    d->state = DAEMON_STARTING;
    return 0;
}

int daemon_load_config(struct daemon *d, const char *path, char *err, size_t errlen)
{
    struct kvf_config c;
    struct access a;
    int r = daemon_check_config(path, &c, &a, err, errlen);
    if (r < 0)
        return r;
    if (path && !(d->config_path = strdup(path))) {
        access_done(&a);
        cfg_free(&c);
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    d->cfg = c;
    d->access = a;
    if (!d->log_level_pinned)
        log_set_level((log_level_t)d->cfg.log_level);
    return 0;
}

int daemon_ready(struct daemon *d)
{
    int r;
    /* A stop signal that came during the start waits in libuv's signal pipe: handle it now, so
     * that a daemon about to stop never says READY=1 (it drains from STARTING; STOPPING=1). */
    uv_run(&d->loop, UV_RUN_NOWAIT);
    if (d->state != DAEMON_STARTING)
        return 0;
    if ((r = notify_start(&d->notify, &d->loop)) < 0)
        return r;
    if ((r = daemon_set_state(d, DAEMON_RUNNING)) < 0)
        return r;
    char st[256];
    snprintf(st, sizeof(st), "running; control %s", d->control ? control_path(d->control) : "-");
    notify_ready(st);
    log_info("kvferryd %s ready (pid %d)", KVF_VERSION, (int)getpid());
    return 0;
}

/* ---- reload ---- */

static void reload_failed(struct daemon *d, int r, const char *err)
{
    struct daemon_reload *lr = &d->last_reload;
    lr->ok = false;
    snprintf(lr->error, sizeof(lr->error), "%s", err[0] ? err : strerror(-r));
    d->counters.reloads_failed++;
    log_error("reload failed: %s; keeping the old config", lr->error);
    notify_ready("running; last reload failed, old config kept");
}

int daemon_reload(struct daemon *d)
{
    struct daemon_reload *lr = &d->last_reload;
    char err[CFG_ERR_MAX] = "";
    struct kvf_config fresh, next;
    struct access acc;
    int r;

    notify_reloading();
    json_decref(lr->applied);
    json_decref(lr->restart_needed);
    lr->applied = lr->restart_needed = NULL;
    lr->attempted = true;
    lr->time_s = (int64_t)time(NULL);
    lr->error[0] = '\0';

    r = d->config_path ? cfg_load_file(d->config_path, &fresh, err, sizeof(err))
                       : cfg_defaults(&fresh);
    if (r < 0) {
        reload_failed(d, r, err);
        return r;
    }
    if ((r = cfg_copy(&d->cfg, &next)) < 0) {
        cfg_free(&fresh);
        reload_failed(d, r, "out of memory");
        return r;
    }
    const char *names[DAEMON_RELOAD_KEYS_MAX];
    size_t n = cfg_diff_restart_needed(&d->cfg, &fresh, names, DAEMON_RELOAD_KEYS_MAX);
    lr->restart_needed = json_array();
    for (size_t i = 0; i < n && i < DAEMON_RELOAD_KEYS_MAX; i++)
        json_array_append_new(lr->restart_needed, json_string(names[i]));
    lr->applied = json_array();
    int64_t old_level = next.log_level;
    const char *live[DAEMON_RELOAD_KEYS_MAX];
    size_t n_live = cfg_apply_live(&next, &fresh, live, DAEMON_RELOAD_KEYS_MAX);
    for (size_t i = 0; i < n_live && i < DAEMON_RELOAD_KEYS_MAX; i++)
        json_array_append_new(lr->applied, json_string(live[i]));
    bool level_changed = next.log_level != old_level;
    cfg_free(&fresh);
    if ((r = access_resolve(&next, &acc, err, sizeof(err))) < 0) {
        cfg_free(&next);
        json_decref(lr->applied);
        json_decref(lr->restart_needed);
        lr->applied = lr->restart_needed = NULL;
        reload_failed(d, r, err);
        return r;
    }
    cfg_free(&d->cfg);
    d->cfg = next;
    acc.generation = d->access.generation + 1; /* open connections decide again (access.h) */
    access_done(&d->access);
    d->access = acc;
    if (level_changed && !d->log_level_pinned)
        log_set_level((log_level_t)d->cfg.log_level);
    for (size_t i = 0; i < daemon_modules_len; i++)
        if (daemon_modules[i].reloaded)
            daemon_modules[i].reloaded(d);
    lr->ok = true;
    d->counters.reloads_ok++;
    log_info("reload: %zu live key(s) applied, %zu key(s) changed that need a restart",
             json_array_size(lr->applied), n);
    for (size_t i = 0; i < n && i < DAEMON_RELOAD_KEYS_MAX; i++)
        log_warn("reload: %s changed but needs a restart to take effect", names[i]);
    notify_ready(d->state == DAEMON_DRAINING ? "draining" : "running");
    return 0;
}

/* ---- drain ---- */

static size_t in_flight(struct daemon *d)
{
    size_t n = 0;
    for (size_t i = 0; i < daemon_modules_len; i++)
        if (daemon_modules[i].in_flight)
            n += daemon_modules[i].in_flight(d);
    return n;
}

static void drain_tick(uv_timer_t *t)
{
    struct daemon *d = t->data;
    size_t n = in_flight(d);
    if (n > 0 && uv_now(&d->loop) < d->drain_deadline_ms)
        return;
    if (n > 0)
        log_warn("drain: daemon.drain_timeout passed with %zu in flight: stopping anyway", n);
    else
        log_info("drain: nothing in flight: stopping");
    uv_timer_stop(t);
    daemon_set_state(d, DAEMON_STOPPED);
    d->exit_code = 0;
    uv_stop(&d->loop);
}

void daemon_drain(struct daemon *d)
{
    if (daemon_set_state(d, DAEMON_DRAINING) < 0)
        return; /* already draining or stopped */
    notify_stopping("draining");
    for (size_t i = 0; i < daemon_modules_len; i++)
        if (daemon_modules[i].drain_start)
            daemon_modules[i].drain_start(d);
    d->drain_deadline_ms = uv_now(&d->loop) + d->cfg.daemon_drain_timeout_ms;
    uv_timer_start(&d->drain_timer, drain_tick, 0, DAEMON_DRAIN_TICK_MS);
}

/* ---- teardown ---- */

static void close_if_open(uv_handle_t *h)
{
    if (h->loop && !uv_is_closing(h))
        uv_close(h, NULL);
}

void daemon_stop(struct daemon *d)
{
    close_if_open((uv_handle_t *)&d->sig_term);
    close_if_open((uv_handle_t *)&d->sig_int);
    close_if_open((uv_handle_t *)&d->sig_hup);
    close_if_open((uv_handle_t *)&d->drain_timer);
    notify_stop(&d->notify);
}

static void walk_close(uv_handle_t *h, void *arg)
{
    (void)arg;
    if (!uv_is_closing(h)) {
        log_warn("teardown: closing a %s handle left open", uv_handle_type_name(h->type));
        uv_close(h, NULL);
    }
}

int daemon_done(struct daemon *d)
{
    daemon_stop(d);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    uv_walk(&d->loop, walk_close, NULL);
    uv_run(&d->loop, UV_RUN_DEFAULT);
    int r = uv_loop_close(&d->loop);
    json_decref(d->last_reload.applied);
    json_decref(d->last_reload.restart_needed);
    access_done(&d->access);
    cfg_free(&d->cfg);
    free(d->config_path);
    d->config_path = NULL;
    return r;
}

/* ---- status documents ---- */

uint64_t daemon_uptime_s(const struct daemon *d)
{
    return (uv_now((uv_loop_t *)&d->loop) - d->start_ms) / 1000;
}

typedef int (*section_fn)(struct daemon *d, json_t *ret);

static int add_sections(struct daemon *d, json_t *doc, bool stats)
{
    for (size_t i = 0; i < daemon_modules_len; i++) {
        section_fn fn = stats ? daemon_modules[i].stats : daemon_modules[i].status;
        if (!fn)
            continue;
        json_t *sec = json_object();
        int r = fn(d, sec);
        if (r < 0) {
            json_decref(sec);
            return r;
        }
        json_object_set_new(doc, daemon_modules[i].name, sec);
    }
    return 0;
}

static json_t *ids_json(const struct id_set *ids, size_t n)
{
    json_t *a = json_array();
    char num[16];
    for (size_t i = 0; a && i < n && i < ids->n; i++) {
        snprintf(num, sizeof num, "%u", ids->ids[i]);
        json_array_append_new(a, json_string(num));
    }
    return a;
}

/* status.live: every live key with the value its user holds now (modules.h `live`): the daemon's
 * own (access.* as resolved to ids, which both listeners check, allow_gids without the sockets'
 * group that access_resolve appends last; log.level as the logger has it),
 * then each module's. A key two modules claim shows as an error, which check_live_keys catches. */
static json_t *live_json(struct daemon *d)
{
    json_t *o = json_object();
    if (!o)
        return NULL;
    const struct access *a = &d->access;
    size_t own_gids = a->allow_gids.n ? a->allow_gids.n - 1 : 0;
    json_object_set_new(o, "access.allow_uids", ids_json(&a->allow_uids, a->allow_uids.n));
    json_object_set_new(o, "access.allow_gids", ids_json(&a->allow_gids, own_gids));
    json_object_set_new(o, "access.admin_uids", ids_json(&a->admin_uids, a->admin_uids.n));
    json_object_set_new(o, "access.admin_gids", ids_json(&a->admin_gids, a->admin_gids.n));
    json_object_set_new(o, "log.level", json_string(log_level_to_string(log_get_level())));
    for (size_t i = 0; i < daemon_modules_len; i++) {
        if (!daemon_modules[i].live)
            continue;
        json_t *sec = json_object();
        if (!sec || daemon_modules[i].live(d, sec) < 0) {
            json_decref(sec);
            json_decref(o);
            return NULL;
        }
        const char *k;
        json_t *v;
        json_object_foreach(sec, k, v)
        {
            if (json_object_get(o, k))
                json_object_set_new(o, k, json_sprintf("claimed twice (again by %s)",
                                                       daemon_modules[i].name));
            else
                json_object_set(o, k, v);
        }
        json_decref(sec);
    }
    return o;
}

json_t *daemon_status_json(struct daemon *d)
{
    json_t *o = json_pack(
        "{s:s,s:i,s:s,s:I,s:I,s:o,s:s,s:o}", "version", KVF_VERSION, "pid", (int)getpid(), "state",
        daemon_state_to_string(d->state), "uptime_s", (json_int_t)daemon_uptime_s(d),
        "started_at_s", (json_int_t)d->start_wall_s, "config_path",
        d->config_path ? json_string(d->config_path) : json_null(), "log_level",
        log_level_to_string(log_get_level()), "last_reload", daemon_reload_json(&d->last_reload));
    if (o)
        json_object_set_new(o, "watchdog_usec", json_integer((json_int_t)d->notify.watchdog_usec));
    if (o)
        json_object_set_new(o, "live", live_json(d));
    if (o && add_sections(d, o, false) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *daemon_stats_json(struct daemon *d)
{
    json_t *o = json_pack("{s:{s:I,s:I,s:I}}", "daemon", "uptime_s", (json_int_t)daemon_uptime_s(d),
                          "reloads_ok", (json_int_t)d->counters.reloads_ok, "reloads_failed",
                          (json_int_t)d->counters.reloads_failed);
    struct logsink_stats ls;
    logsink_get_stats(&ls);
    if (o) {
        json_object_set_new(json_object_get(o, "daemon"), "watchdog_sent",
                            json_integer((json_int_t)d->notify.watchdog_sent));
        json_object_set_new(json_object_get(o, "daemon"), "log_lines_dropped",
                            json_integer((json_int_t)ls.dropped));
    }
    if (o && add_sections(d, o, true) < 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

const struct control_ops daemon_control_ops = {
    .reload = daemon_reload,
    .drain = daemon_drain,
    .status = daemon_status_json,
    .stats = daemon_stats_json,
    .metrics_walk = daemon_metrics_walk,
};
