/* kvferryctl_watch.c: the live views of kvferryctl (kvferryctl.h), 100 columns wide:
 *   transfers [--watch] [--interval S] [--count N]   one row per request (in flight, and those
 *       finished within transfers.keep_finished): request id, side, instance, peer (the daemon
 *       at its other end: a RECV's writers', a SEND's remote reader's; "local": this one),
 *       phase, bytes done of planned, rate, age, outcome;
 *   top [--interval S] [--window S] [--count N]   per-peer and per-instance rates of completed
 *       RECVs, and per-peer rates of the writer flows this daemon served to others (context
 *       side; shown once there is one), over the `stats` samples of the last --window seconds
 *       (10: a burst stays visible between frames), above the transfers table.
 * --watch and top draw on a terminal with ncurses (kvferryctl_screen.c: clipped to the window,
 * redrawn on a resize, q quits); to a pipe they print one frame after another, each starting
 * with a "kvferry <view> <time>" line. --count N stops after N frames (0: until interrupted).
 * --json prints each frame's JSON, one per line. */
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

static void short_size(long long v, char *buf, size_t len);

static void rate_text(double bps, char *buf, size_t len)
{
    if (!(bps > 0)) {
        snprintf(buf, len, "-");
        return;
    }
    char s[24];
    short_size((long long)llround(bps), s, sizeof s);
    snprintf(buf, len, "%s/s", s);
}

static double getd(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : 0;
}

/* A size in at most 6 characters: "512B", "3.5K", "460.1M" (kvferryctl_units.c's text
 * without "iB"). */
static void short_size(long long v, char *buf, size_t len)
{
    ctl_size_text(v, buf, len);
    char *ib = strstr(buf, "iB");
    if (ib)
        *ib = '\0';
}

/* One table of requests in flight, then those finished lately (their outcome filled in):
 * 93 columns and the outcome. */
void ctl_print_transfers(FILE *f, json_t *result)
{
    json_t *live = json_object_get(result, "transfers"), *fin = json_object_get(result, "finished");
    if (json_array_size(live) == 0 && json_array_size(fin) == 0) {
        fprintf(f, "no requests in flight\n");
        return;
    }
    fprintf(f, "%-6s %-4s %-12s %-18s %-12s %-13s %3s %9s %7s %s\n", "REQ", "SIDE", "INSTANCE",
            "PEER", "PHASE", "DONE/PLANNED", "%", "RATE", "AGE", "OUTCOME");
    json_t *all = json_array();
    json_array_extend(all, live);
    json_array_extend(all, fin);
    size_t i;
    json_t *x;
    json_array_foreach(all, i, x)
    {
        char done[24], plan[24], dp[64], rate[40], age[32], pct[24] = "-";
        long long bd = ctl_geti(x, "bytes_done"), bp = ctl_geti(x, "bytes_planned");
        short_size(bd, done, sizeof done);
        if (bp > 0) {
            short_size(bp, plan, sizeof plan);
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
        fprintf(f, "%-6lld %-4s %-12.12s %-18.18s %-12.12s %-13s %3s %9s %7s %s\n",
                ctl_geti(x, "req_id"), ctl_gets(x, "side"), inst, ctl_gets(x, "peer"),
                ctl_gets(x, "phase"), dp, pct, rate, age, outcome ? outcome : "-");
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

/* top's samples of `stats`, oldest first: the rates of a frame run from the oldest sample
 * within the window to the newest. At most RING_MAX (a window of many short intervals keeps
 * the last RING_MAX samples). */
#define RING_MAX 256
struct ring {
    json_t *stats[RING_MAX]; /* owned */
    double t[RING_MAX];
    size_t n;
};

static void ring_drop_oldest(struct ring *r)
{
    json_decref(r->stats[0]);
    memmove(r->stats, r->stats + 1, (r->n - 1) * sizeof *r->stats);
    memmove(r->t, r->t + 1, (r->n - 1) * sizeof *r->t);
    r->n--;
}

static void ring_push(struct ring *r, json_t *stats, double t, double window_s)
{
    if (r->n == RING_MAX)
        ring_drop_oldest(r);
    r->stats[r->n] = stats;
    r->t[r->n++] = t;
    /* the oldest kept is the last one at least window_s old (the window's full span) */
    while (r->n > 2 && t - r->t[1] >= window_s)
        ring_drop_oldest(r);
}

static void ring_free(struct ring *r)
{
    for (size_t i = 0; i < r->n; i++)
        json_decref(r->stats[i]);
    r->n = 0;
}

/* 88 columns. */
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

/* Waits `s` seconds: the refresh interval of a live view printing to a pipe. */
static void pause_s(double s)
{
    poll(NULL, 0, (int)(s * 1000));
}

/* One frame as text: the header line, top's rates (over r's oldest to newest sample), the
 * transfers table. */
static void frame_text(FILE *f, const char *view, const struct ctl_live *o, json_t *xf,
                       const struct ring *r)
{
    time_t wall = time(NULL);
    struct tm tm;
    char ts[32];
    strftime(ts, sizeof ts, "%H:%M:%S", localtime_r(&wall, &tm));
    bool top = r != NULL;
    if (top && r->n >= 2) {
        json_t *now = r->stats[r->n - 1], *old = r->stats[0];
        double dt = r->t[r->n - 1] - r->t[0];
        fprintf(f, "kvferry %s %s (every %gs, rates over the last %.1fs)\n", view, ts,
                o->interval_s, dt);
        print_rates(f, "PEER", per(now, "per_peer"), per(old, "per_peer"), dt);
        fputc('\n', f);
        print_rates(f, "INSTANCE", per(now, "per_instance"), per(old, "per_instance"), dt);
        fputc('\n', f);
        if (json_object_size(per(now, "served_per_peer"))) {
            print_rates(f, "SERVED TO PEER", per(now, "served_per_peer"),
                        per(old, "served_per_peer"), dt);
            fputc('\n', f);
        }
    } else if (o->watch || top) {
        fprintf(f, "kvferry %s %s (every %gs)\n", view, ts, o->interval_s);
    }
    ctl_print_transfers(f, xf);
}

static void frame_json(const char *view, json_t *xf, json_t *stats)
{
    json_t *o = json_pack("{s:O,s:O}", "transfers", json_object_get(xf, "transfers"), "finished",
                          json_object_get(xf, "finished"));
    if (strcmp(view, "top") == 0) {
        json_object_set(o, "per_peer", per(stats, "per_peer"));
        json_object_set(o, "per_instance", per(stats, "per_instance"));
        json_object_set(o, "served_per_peer", per(stats, "served_per_peer"));
    }
    char *s = json_dumps(o, JSON_COMPACT);
    if (s)
        puts(s);
    free(s);
    json_decref(o);
}

int ctl_watch_main(const char *sock, const char *view, const struct ctl_live *o, double timeout_s,
                   bool as_json)
{
    bool top = strcmp(view, "top") == 0, live = o->watch || top;
    int tmo = (int)(timeout_s * 1000);
    struct ring ring = {.n = 0};
    int rc = 0;
    if (top) { /* rates need a first sample */
        json_t *first = NULL;
        if ((rc = call(sock, "stats", tmo, &first)) != 0)
            return rc;
        ring_push(&ring, first, now_s(), o->window_s);
        pause_s(o->interval_s);
    }
    bool screen = live && !as_json && isatty(STDOUT_FILENO) && ctl_screen_start() == 0;
    for (long frame = 0; o->count == 0 || frame < o->count; frame++) {
        json_t *xf = NULL, *stats = NULL;
        if ((rc = call(sock, "transfers", tmo, &xf)) != 0)
            break;
        double t_now = now_s();
        if (top && (rc = call(sock, "stats", tmo, &stats)) != 0) {
            json_decref(xf);
            break;
        }
        if (as_json) {
            frame_json(view, xf, stats);
            json_decref(stats);
        } else {
            if (top)
                ring_push(&ring, stats, t_now, o->window_s);
            char *text = NULL;
            size_t len = 0;
            FILE *m = open_memstream(&text, &len);
            if (m) {
                frame_text(m, view, o, xf, top ? &ring : NULL);
                fclose(m);
                if (screen)
                    ctl_screen_draw(text, len);
                else
                    fwrite(text, 1, len, stdout);
            }
            free(text);
        }
        fflush(stdout);
        json_decref(xf);
        if (!live)
            break;
        if (o->count != 0 && frame + 1 >= o->count)
            break;
        if (!screen)
            pause_s(o->interval_s);
        else if (ctl_screen_wait(o->interval_s))
            break; /* q */
    }
    if (screen)
        ctl_screen_stop();
    ring_free(&ring);
    return rc;
}
