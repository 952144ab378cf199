/* kvferryctl_watch.c: the live views of kvferryctl (kvferryctl.h):
 *   transfers [--watch] [--interval S] [--count N]   one row per request (in flight, and those
 *       finished within transfers.keep_finished): side, instance, peer, phase, bytes done of
 *       planned, rate, age, outcome;
 *   top [--interval S] [--count N]   per-peer and per-instance rates of completed RECVs, and
 *       per-peer rates of the writer flows this daemon served to others (context side; shown
 *       once there is one), from two `stats` samples an interval apart, above the transfers
 *       table.
 * --watch and top redraw in place on a terminal (cursor home + clear); to a pipe they print one
 * frame after another, each starting with a "kvferry <view> <time>" line. --count N stops after
 * N frames (0: until interrupted). --json prints each frame's JSON, one per line. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvferryctl.h"
#include "kvferryctl_units.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void rate_text(double bps, char *buf, size_t len)
{
    if (!(bps > 0)) {
        snprintf(buf, len, "-");
        return;
    }
    char s[24];
    ctl_size_text((long long)llround(bps), s, sizeof s);
    snprintf(buf, len, "%s/s", s);
}

static double getd(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* One table of requests in flight, then those finished lately (their outcome filled in). */
void ctl_print_transfers(FILE *f, json_t *result)
{
    json_t *live = json_object_get(result, "transfers"), *fin = json_object_get(result, "finished");
    if (json_array_size(live) == 0 && json_array_size(fin) == 0) {
        fprintf(f, "no requests in flight\n");
        return;
    }
    fprintf(f, "%-6s %-5s %-4s %-14s %-21s %-12s %-19s %4s %11s %8s %s\n", "ID", "REQ", "SIDE",
            "INSTANCE", "PEER", "PHASE", "DONE/PLANNED", "%", "RATE", "AGE", "OUTCOME");
    json_t *all = json_array();
    json_array_extend(all, live);
    json_array_extend(all, fin);
    size_t i;
    json_t *x;
    json_array_foreach(all, i, x)
    {
        char done[24], plan[24], dp[64], rate[40], age[32], pct[24] = "-";
        long long bd = ctl_geti(x, "bytes_done"), bp = ctl_geti(x, "bytes_planned");
        ctl_size_text(bd, done, sizeof done);
        if (bp > 0) {
            ctl_size_text(bp, plan, sizeof plan);
            snprintf(pct, sizeof pct, "%lld", bd * 100 / bp);
        } else {
            snprintf(plan, sizeof plan, "?");
        }
        snprintf(dp, sizeof dp, "%s/%s", done, plan);
        rate_text(getd(x, "rate_bps"), rate, sizeof rate);
        ctl_duration_text((double)ctl_geti(x, "age_ms"), age, sizeof age);
        const char *outcome = json_string_value(json_object_get(x, "outcome"));
        char inst[64];
        snprintf(inst, sizeof inst, "%s/%lld", ctl_gets(x, "instance"), ctl_geti(x, "rank"));
        fprintf(f, "%-6lld %-5lld %-4s %-14.14s %-21.21s %-12s %-19s %4s %11s %8s %s\n",
                ctl_geti(x, "id"), ctl_geti(x, "req_id"), ctl_gets(x, "side"), inst,
                ctl_gets(x, "peer"), ctl_gets(x, "phase"), dp, pct, rate, age,
                outcome ? outcome : "-");
    }
    json_decref(all);
}

static int call(const char *sock, const char *cmd, int timeout_ms, json_t **result)
{
    int fd = ctl_client_connect(sock);
    if (fd < 0) {
        fprintf(stderr, "kvferryctl: connect %s: %s (is kvferryd running?)\n", sock,
                strerror(-fd));
        return 3;
    }
    json_t *reply = NULL;
    int r = ctl_client_call(fd, cmd, NULL, timeout_ms, &reply);
    close(fd);
    if (r < 0) {
        fprintf(stderr, "kvferryctl: %s on %s: %s\n", cmd, sock,
                r == -ETIMEDOUT ? "no reply before --timeout" : strerror(-r));
        return 3;
    }
    if (!json_is_true(json_object_get(reply, "ok"))) {
        fprintf(stderr, "kvferryctl: %s: %s\n", cmd,
                ctl_gets(reply, "message"));
        json_decref(reply);
        return 1;
    }
    *result = json_incref(json_object_get(reply, "result"));
    json_decref(reply);
    return 0;
}

/* workers.transfers.per_<what> of a stats result: {"<value>": {"requests", "bytes"}}. */
static json_t *per(json_t *stats, const char *what)
{
    return json_object_get(json_object_get(json_object_get(stats, "workers"), "transfers"), what);
}

static void print_rates(FILE *f, const char *title, json_t *now, json_t *before, double dt)
{
    fprintf(f, "%-40s %12s %10s %12s %10s\n", title, "RATE", "REQ/S", "BYTES", "REQUESTS");
    const char *k;
    json_t *v;
    size_t n = 0;
    json_object_foreach(now, k, v)
    {
        json_t *b = json_object_get(before, k);
        double db = (double)(ctl_geti(v, "bytes") - ctl_geti(b, "bytes"));
        double dr = (double)(ctl_geti(v, "requests") - ctl_geti(b, "requests"));
        char rate[40], total[32];
        rate_text(dt > 0 ? db / dt : 0, rate, sizeof rate);
        ctl_size_text(ctl_geti(v, "bytes"), total, sizeof total);
        fprintf(f, "%-40.40s %12s %10.1f %12s %10lld\n", k, rate, dt > 0 ? dr / dt : 0, total,
                ctl_geti(v, "requests"));
        n++;
    }
    if (!n)
        fprintf(f, "(no completed requests yet)\n");
}

/* Waits `s` seconds: the refresh interval of a live view (not a test's wait). */
static void pause_s(double s)
{
    poll(NULL, 0, (int)(s * 1000));
}

int ctl_watch_main(const char *sock, const char *view, bool watch, double interval_s, long count,
                   double timeout_s, bool as_json)
{
    bool top = strcmp(view, "top") == 0;
    bool tty = isatty(STDOUT_FILENO);
    int tmo = (int)(timeout_s * 1000);
    json_t *before = NULL;
    double t_before = 0;
    int rc = 0;
    if (top) { /* rates need a first sample */
        if ((rc = call(sock, "stats", tmo, &before)) != 0)
            return rc;
        t_before = now_s();
        pause_s(interval_s);
    }
    for (long frame = 0; count == 0 || frame < count; frame++) {
        json_t *xf = NULL, *stats = NULL;
        if ((rc = call(sock, "transfers", tmo, &xf)) != 0)
            break;
        double t_now = now_s();
        if (top && (rc = call(sock, "stats", tmo, &stats)) != 0) {
            json_decref(xf);
            break;
        }
        if (as_json) {
            json_t *o = json_pack("{s:O,s:O}", "transfers", json_object_get(xf, "transfers"),
                                  "finished", json_object_get(xf, "finished"));
            if (top) {
                json_object_set(o, "per_peer", per(stats, "per_peer"));
                json_object_set(o, "per_instance", per(stats, "per_instance"));
                json_object_set(o, "served_per_peer", per(stats, "served_per_peer"));
            }
            char *s = json_dumps(o, JSON_COMPACT);
            if (s)
                puts(s);
            free(s);
            json_decref(o);
        } else {
            if (tty && (watch || top))
                fputs("\033[H\033[2J", stdout);
            time_t wall = time(NULL);
            struct tm tm;
            char ts[32];
            strftime(ts, sizeof ts, "%H:%M:%S", localtime_r(&wall, &tm));
            if (watch || top)
                printf("kvferry %s %s (every %gs)\n", view, ts, interval_s);
            if (top) {
                double dt = t_now - t_before;
                print_rates(stdout, "PEER", per(stats, "per_peer"), per(before, "per_peer"), dt);
                putchar('\n');
                print_rates(stdout, "INSTANCE", per(stats, "per_instance"),
                            per(before, "per_instance"), dt);
                putchar('\n');
                if (json_object_size(per(stats, "served_per_peer"))) {
                    print_rates(stdout, "SERVED TO PEER", per(stats, "served_per_peer"),
                                per(before, "served_per_peer"), dt);
                    putchar('\n');
                }
            }
            ctl_print_transfers(stdout, xf);
        }
        fflush(stdout);
        json_decref(xf);
        if (top) {
            json_decref(before);
            before = stats;
            t_before = t_now;
        }
        if (!watch && !top)
            break;
        if (count == 0 || frame + 1 < count)
            pause_s(interval_s);
    }
    json_decref(before);
    return rc;
}
