/* metrics.c: the `metrics` control command (metrics.h): each section of the stats document
 * walked into Prometheus text against its module's declarations (modules.h): nothing is typed
 * from its name; a number no row declares is left out and counted (kvferry_metrics_undeclared,
 * and one warning in the log naming the first such key). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "control.h"
#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "prom.h"

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
    set.declared_only = true;
    r = control_ops(d->control)->metrics_walk(d, &set);
    if (r < 0)
        goto out;
    static bool warned; /* loop thread only */
    if (set.undeclared && !warned) {
        warned = true;
        log_warn("metrics: %llu stats value(s) have no metric declaration and are left out of "
                 "the scrape, first: %s (declare it in its module's metric table)",
                 (unsigned long long)set.undeclared, set.undeclared_first);
    }
    r = prom_set_add_int(&set, "kvferry_metrics_undeclared", PROM_GAUGE,
                         "Stats values left out of this scrape because no module declares them.",
                         NULL, 0, (int64_t)set.undeclared);
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
