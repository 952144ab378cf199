/* kvferryctl_status.c: the short forms of `status` and `workers`, which fit 100 columns (every
 * field with -l, through the generic printer). Lines longer than that are cut with "...". */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "kvferryctl.h"
#include "kvferryctl_units.h"

#define COLS 100

__attribute__((format(printf, 3, 4))) static void line(FILE *f, const char *label, const char *fmt,
                                                       ...)
{
    char buf[1024];
    int n = snprintf(buf, sizeof(buf), "%-10s", label);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, sizeof(buf) - (size_t)n, fmt, ap);
    va_end(ap);
    if (strlen(buf) > COLS)
        memcpy(buf + COLS - 3, "...", 4);
    fprintf(f, "%s\n", buf);
}

static void print_reload(FILE *f, json_t *r)
{
    json_t *lr = json_object_get(r, "last_reload");
    char when[40];
    if (!json_is_true(json_object_get(lr, "attempted"))) {
        line(f, "config", "%s (not reloaded)", ctl_gets(r, "config_path"));
        return;
    }
    ctl_time_text(ctl_geti(lr, "time_s"), when, sizeof(when));
    json_t *rn = json_object_get(lr, "restart_needed");
    if (json_is_true(json_object_get(lr, "ok")))
        line(f, "config", "%s; reloaded %s%s", ctl_gets(r, "config_path"), when,
             json_array_size(rn) ? ", some changes need a restart (-l)" : "");
    else
        line(f, "config", "%s; reload FAILED %s: %s", ctl_gets(r, "config_path"), when,
             ctl_gets(lr, "error"));
}

static void print_instances(FILE *f, json_t *insts)
{
    char buf[1024] = "";
    size_t off = 0, i;
    json_t *in;
    json_array_foreach(insts, i, in)
    {
        int n = snprintf(buf + off, sizeof(buf) - off, "%s%s (%s, %lld/%lld ranks%s)",
                         i ? ", " : "", ctl_gets(in, "id"), ctl_gets(in, "role"),
                         ctl_geti(in, "registered"), ctl_geti(in, "ranks"),
                         json_is_true(json_object_get(in, "home")) ? ", home" : "");
        if (n < 0 || (size_t)n >= sizeof(buf) - off)
            break;
        off += (size_t)n;
    }
    if (off)
        line(f, "instances", "%s", buf);
}

void ctl_print_status(FILE *f, json_t *r)
{
    char up[32], since[40];
    ctl_duration_text((double)ctl_geti(r, "uptime_s") * 1000, up, sizeof(up));
    ctl_time_text(ctl_geti(r, "started_at_s"), since, sizeof(since));
    line(f, "kvferryd", "%s  %s  pid %lld  up %s (since %s)  log %s", ctl_gets(r, "version"),
         ctl_gets(r, "state"), ctl_geti(r, "pid"), up, since, ctl_gets(r, "log_level"));
    print_reload(f, r);
    json_t *c = json_object_get(r, "control"), *w = json_object_get(r, "workers");
    if (json_is_object(c))
        line(f, "control", "%s  %lld/%lld connections%s", ctl_gets(c, "socket"),
             ctl_geti(c, "connections"), ctl_geti(c, "max_conns"),
             json_is_false(json_object_get(c, "listening")) ? "  NOT listening" : "");
    if (json_is_object(w)) {
        line(f, "workers", "%s  %lld connections, %lld ranks, %lld requests in flight%s",
             ctl_gets(w, "socket"), ctl_geti(w, "connections"), ctl_geti(w, "ranks"),
             ctl_geti(w, "transfers_in_flight"),
             json_is_true(json_object_get(w, "draining")) ? "  DRAINING" : "");
        print_instances(f, json_object_get(w, "instances"));
    }
    json_t *p = json_object_get(r, "peers");
    if (json_is_object(p)) {
        json_t *lk = json_object_get(p, "link");
        if (!strcmp(ctl_gets(lk, "state"), "waiting")) /* the daemon runs, its link does not */
            line(f, "peers", "LINK WAITING %lld ms: %s", (long long)ctl_geti(lk, "waiting_ms"),
                 ctl_gets(lk, "why"));
        else if (!json_is_true(json_object_get(p, "enabled")))
            line(f, "peers", "off (cluster.secret_file unset: single node)");
        else {
            size_t i, upn = 0;
            json_t *e;
            json_array_foreach(json_object_get(p, "peers"), i, e) upn +=
                strcmp(ctl_gets(e, "state"), "up") == 0 ||
                strcmp(ctl_gets(e, "state"), "ready") == 0;
            line(f, "peers", "self %s  listen %s  %zu peers (%zu up)", ctl_gets(p, "self"),
                 *ctl_gets(p, "listen") ? ctl_gets(p, "listen") : "(none)",
                 json_array_size(json_object_get(p, "peers")), upn);
        }
    }
    json_t *a = json_object_get(r, "arena");
    if (json_is_object(a)) {
        char cap[32];
        ctl_size_text(ctl_geti(a, "capacity_bytes"), cap, sizeof(cap));
        if (!json_is_true(json_object_get(a, "enabled")))
            line(f, "arena", "off: %s", ctl_gets(a, "why"));
        else
            line(f, "arena", "%s landing, %lld/%lld slots in use, %lld waiting", cap,
                 ctl_geti(a, "slots_in_use"), ctl_geti(a, "slots_total"),
                 ctl_geti(a, "waiting_requests"));
    }
    json_t *g = json_object_get(r, "gpu");
    if (json_is_object(g)) {
        if (strcmp(ctl_gets(g, "mode"), "cpu") == 0)
            line(f, "gpu", "cpu mode: %s", ctl_gets(g, "reason"));
        else
            line(f, "gpu", "%s, %lld devices", ctl_gets(g, "mode"), ctl_geti(g, "device_count"));
    }
    json_t *rl = json_object_get(r, "rails");
    if (json_is_object(rl)) {
        size_t ng = json_array_size(json_object_get(rl, "gpus"));
        size_t nn = json_array_size(json_object_get(rl, "nics"));
        if (json_object_get(rl, "error"))
            line(f, "rails", "unknown: %s", ctl_gets(rl, "error"));
        else if (!nn)
            line(f, "rails", "no RDMA NIC: host transports only");
        else
            line(f, "rails", "%zu GPUs on %zu RDMA NICs (kvferry-topo: each GPU's)", ng, nn);
    }
    /* sections this printer does not know still show up, by name */
    static const char *const known[] = {"version",       "pid",         "state",     "uptime_s",
                                        "started_at_s",  "config_path", "log_level", "last_reload",
                                        "watchdog_usec", "control",     "workers",   "peers",
                                        "arena",         "gpu",         "live",
                                        "rails"};
    char other[512] = "";
    size_t off = 0;
    const char *k;
    json_t *v;
    json_object_foreach(r, k, v)
    {
        bool is_known = false;
        for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++)
            is_known |= strcmp(k, known[i]) == 0;
        int n =
            is_known ? 0 : snprintf(other + off, sizeof(other) - off, "%s%s", off ? ", " : "", k);
        if (n > 0 && (size_t)n < sizeof(other) - off)
            off += (size_t)n;
    }
    if (off)
        line(f, "more", "%s", other);
    fprintf(f, "(every field: kvferryctl -l status)\n");
}

/* The workers table with the columns that matter, headed short; -l has them all. */
void ctl_print_workers(FILE *f, json_t *r)
{
    static const struct {
        const char *key, *head;
        int width;
    } cols[] = {{"conn_id", "CONN", 5},
                {"pid", "PID", 8},
                {"uid", "UID", 6},
                {"name", "NAME", 16},
                {"instance", "INSTANCE", 12},
                {"role", "ROLE", 10},
                {"rank", "RANK", 5},
                {"pool_bytes", "POOLS", 9},
                {"memory", "MEM", 5},
                {"in_flight", "REQS", 5},
                {"age_ms", "AGE", 8}};
    const size_t nc = sizeof(cols) / sizeof(cols[0]);
    json_t *ws = json_object_get(r, "workers");
    if (json_array_size(ws) == 0)
        fprintf(f, "no workers connected\n");
    else {
        for (size_t c = 0; c < nc; c++)
            fprintf(f, "%-*s%s", c + 1 < nc ? cols[c].width : 0, cols[c].head,
                    c + 1 < nc ? " " : "\n");
        size_t i;
        json_t *w;
        json_array_foreach(ws, i, w)
        {
            for (size_t c = 0; c < nc; c++) {
                json_t *v = json_object_get(w, cols[c].key);
                char buf[64];
                if (!ctl_human(cols[c].key, v, buf, sizeof(buf))) {
                    if (json_is_string(v))
                        snprintf(buf, sizeof(buf), "%s", json_string_value(v));
                    else if (json_is_integer(v))
                        snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
                    else
                        snprintf(buf, sizeof(buf), "-");
                }
                if ((int)strlen(buf) > cols[c].width) /* cut what does not fit its column */
                    memcpy(buf + cols[c].width - 1, "~", 2);
                fprintf(f, "%-*s%s", c + 1 < nc ? cols[c].width : 0, buf, c + 1 < nc ? " " : "\n");
            }
        }
    }
    json_t *insts = json_object_get(r, "instances");
    if (json_array_size(insts)) {
        fprintf(f, "%-16s %-12s %6s %10s %5s %6s\n", "INSTANCE", "ROLE", "RANKS", "REGISTERED",
                "HOME", "EPOCH");
        size_t i;
        json_t *in;
        json_array_foreach(insts, i, in) fprintf(
            f, "%-16.16s %-12.12s %6lld %10lld %5s %6lld\n", ctl_gets(in, "id"),
            ctl_gets(in, "role"), ctl_geti(in, "ranks"), ctl_geti(in, "registered"),
            json_is_true(json_object_get(in, "home")) ? "yes" : "no", ctl_geti(in, "epoch"));
    }
}
