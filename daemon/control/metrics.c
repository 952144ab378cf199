/* metrics.c: the `metrics` control command (metrics.h): the stats document walked into
 * Prometheus text. The doc table below types and explains the stats keys that are counters
 * without a _total suffix and the objects keyed by name; keys not listed follow the generic
 * rules of prom_from_json (a _total suffix is a counter, anything else a gauge). Rows may name
 * keys of modules not started (or not built) here: they then match nothing. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "daemon.h"
#include "metrics.h"
#include "prom.h"

#define C PROM_COUNTER
#define G PROM_GAUGE

static const struct prom_doc metrics_docs[] = {
    {"daemon.uptime_s", G, NULL, "Seconds since kvferryd started (whole seconds)."},
    {"daemon.reloads_ok", C, NULL, "Config reloads that applied."},
    {"daemon.reloads_failed", C, NULL, "Config reloads refused; the old config stayed."},
    {"daemon.watchdog_sent", C, NULL, "WATCHDOG=1 notifications sent to systemd."},

    {"control.connections_accepted", C, NULL, "Control connections accepted."},
    {"control.connections_refused_access", C, NULL,
     "Control connections refused: peer uid/gid not allowed."},
    {"control.connections_refused_limit", C, NULL,
     "Control connections refused: control.max_conns or max_conns_per_uid reached."},
    {"control.connections_open", G, NULL, "Control connections open now."},
    {"control.commands", C, NULL, "Control commands run."},
    {"control.errors", C, NULL, "Control commands answered with an error."},
    {"control.malformed", C, NULL, "Control lines that were not a valid request."},
    {"control.lines_too_long", C, NULL, "Control lines longer than control.max_line."},
    {"control.idle_timeouts", C, NULL, "Control connections closed for idleness."},
    {"control.refused_not_admin", C, NULL, "Mutating control commands refused to a non-admin."},

    {"workers.accepted", C, NULL, "Worker connections accepted."},
    {"workers.refused_access", C, NULL, "Worker connections refused: peer not allowed."},
    {"workers.refused_limit", C, NULL, "Worker connections refused: connection limit reached."},
    {"workers.registered", C, NULL, "Ranks registered."},
    {"workers.register_refused", C, NULL, "REGISTER requests refused."},
    {"workers.bad_frames", C, NULL, "Worker connections closed for a bad frame."},
    {"workers.lost", C, NULL, "Worker connections that ended without being asked to."},
    {"workers.transfers.sends", C, NULL, "SEND requests received from context ranks."},
    {"workers.transfers.recvs", C, NULL, "RECV requests received from generation ranks."},
    {"workers.transfers.done", C, NULL, "RECV requests completed (data landed)."},
    {"workers.transfers.sent", C, NULL, "SEND requests completed (blocks reusable)."},
    {"workers.transfers.bytes_local", C, NULL, "Bytes moved by the local path."},
    {"workers.transfers.failed", C, "error", "Transfer requests failed, by typed error."},
    {"workers.transfers.in_flight", G, NULL, "Transfer requests in flight now."},
    {"workers.transfers.bytes_remote", C, NULL, "Bytes moved to or from other daemons."},

    /* peers and arena (the engine's sections) */
    {"peers.remote_recvs", C, NULL, "RECV_REQ messages received from other daemons."},
    {"peers.remote_done", C, NULL, "Remote requests completed."},
    {"peers.remote_failed", C, NULL, "Remote requests failed."},
    {"peers.flows", C, NULL, "Writer flows started."},
    {"peers.flows_done", C, NULL, "Writer flows completed."},
    {"peers.flows_failed", C, NULL, "Writer flows failed."},
    {"peers.chunks_put", C, NULL, "Chunks moved by UCX put."},
    {"peers.chunks_am", C, NULL, "Chunks moved by active-message rendezvous."},
    {"peers.bytes_put", C, NULL, "Bytes moved by UCX put."},
    {"peers.bytes_am", C, NULL, "Bytes moved by active-message rendezvous."},
    {"peers.chunks_landed", C, NULL, "Chunks landed and scattered."},
    {"peers.bytes_landed", C, NULL, "Bytes landed and scattered."},
    {"peers.staging_fallbacks", C, NULL, "Transfers that fell back to staging."},
    {"peers.bound_violations", C, NULL, "Chunks refused by a bounds check."},
    {"peers.stale_epochs", C, NULL, "Messages refused for a stale epoch."},
    {"peers.tables_served", C, NULL, "Instance tables served to other daemons."},
    {"peers.tables_fetched", C, NULL, "Instance tables fetched from home daemons."},
    {"peers.table_nacks", C, NULL, "Instance table requests refused."},
    {"peers.layouts_forwarded", C, NULL, "Layouts forwarded to a home daemon."},
    {"peers.peers_lost", C, NULL, "Peer daemons lost."},
    {"peers.nacks_sent", C, NULL, "NACKs sent to other daemons."},
    {"peers.nacks_recv", C, NULL, "NACKs received from other daemons."},
    {"peers.paths", C, "path", "Path decisions, by path."},
    {"arena.slots_total", G, NULL, "Slots the arena is cut into (a size, not a counter)."},
    {"arena.enabled", G, NULL, "1 when the daemon has an arena (cluster mode)."},
};

#undef C
#undef G

int metrics_render(struct daemon *d, char **ret, size_t *dropped)
{
    struct prom_set set;
    prom_set_init(&set);
    struct prom_label ver = {"version", KVF_VERSION};
    int r = prom_set_add_int(&set, "kvferry_build_info", PROM_GAUGE,
                             "kvferryd build: version label, value always 1.", &ver, 1, 1);
    if (r < 0)
        goto out;
    uv_update_time(&d->loop);
    r = prom_set_add_real(&set, "kvferry_uptime_seconds", PROM_GAUGE,
                          "Seconds since kvferryd started.", NULL, 0,
                          (double)(uv_now(&d->loop) - d->start_ms) / 1000.0);
    if (r < 0)
        goto out;
    json_t *stats = daemon_stats_json(d);
    if (!stats) {
        r = -ENOMEM;
        goto out;
    }
    r = prom_from_json(&set, "kvferry", stats, metrics_docs,
                       sizeof(metrics_docs) / sizeof(metrics_docs[0]));
    json_decref(stats);
    if (r < 0)
        goto out;
    size_t lost = set.dropped;
    r = prom_set_add_int(&set, "kvferry_metrics_series_dropped", PROM_GAUGE,
                         "Stats values left out of this scrape (duplicate series, limits).", NULL,
                         0, (int64_t)lost);
    if (r < 0)
        goto out;
    r = prom_set_render(&set, ret, NULL);
    if (r == 0 && dropped)
        *dropped = lost;
out:
    prom_set_done(&set);
    return r;
}

int metrics_cmd(struct daemon *d, const struct peer_cred *peer, json_t *args, json_t **ret,
                char *msg, size_t msglen)
{
    (void)peer, (void)args;
    char *text = NULL;
    size_t dropped = 0;
    int r = metrics_render(d, &text, &dropped);
    if (r < 0) {
        snprintf(msg, msglen, "rendering metrics failed: %s",
                 r == -ENOMEM ? "out of memory" : "internal error");
        return r;
    }
    *ret = json_pack("{s:s,s:s,s:I}", "text", text, "content_type",
                     "text/plain; version=0.0.4; charset=utf-8", "dropped", (json_int_t)dropped);
    free(text);
    return *ret ? 0 : -ENOMEM;
}
