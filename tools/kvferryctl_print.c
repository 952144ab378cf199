/* kvferryctl_print.c: replies as text for people (tables and aligned key/value lines), numbers in
 * human units by their key's name (kvferryctl_units.c); `status` and `workers` in short forms
 * unless -l (kvferryctl_status.c), `config` spelled as kvferry.yaml spells it. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cfg.h"
#include "kvferryctl.h"
#include "kvferryctl_units.h"

#define PRINT_COLS_MAX 32

static void scalar(FILE *f, const char *key, json_t *v)
{
    char human[64];
    if (ctl_human(key, v, human, sizeof(human))) {
        fputs(human, f);
        return;
    }
    switch (json_typeof(v)) {
    case JSON_STRING:
        fputs(json_string_value(v), f);
        break;
    case JSON_INTEGER:
        fprintf(f, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL:
        fprintf(f, "%g", json_real_value(v));
        break;
    case JSON_TRUE:
        fputs("yes", f);
        break;
    case JSON_FALSE:
        fputs("no", f);
        break;
    case JSON_NULL:
        fputs("-", f);
        break;
    default: {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        fputs(s ? s : "?", f);
        free(s);
    }
    }
}

static size_t scalar_width(const char *key, json_t *v)
{
    char buf[64];
    if (ctl_human(key, v, buf, sizeof(buf)))
        return strlen(buf);
    switch (json_typeof(v)) {
    case JSON_STRING:
        return strlen(json_string_value(v));
    case JSON_INTEGER:
        return (size_t)snprintf(buf, sizeof(buf), "%lld", (long long)json_integer_value(v));
    case JSON_REAL:
        return (size_t)snprintf(buf, sizeof(buf), "%g", json_real_value(v));
    case JSON_TRUE:
        return 3;
    case JSON_FALSE:
        return 2;
    case JSON_NULL:
        return 1;
    default: {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        size_t n = s ? strlen(s) : 1;
        free(s);
        return n;
    }
    }
}

static bool is_table(json_t *v)
{
    if (!json_is_array(v) || json_array_size(v) == 0)
        return false;
    size_t i;
    json_t *e;
    json_array_foreach(v, i, e) if (!json_is_object(e)) return false;
    return true;
}

/* An array of objects as a table: columns are the keys of the first row (and new ones after). */
static void table(FILE *f, const char *indent, json_t *rows)
{
    const char *cols[PRINT_COLS_MAX];
    size_t w[PRINT_COLS_MAX], nc = 0, i;
    json_t *row, *v;
    const char *k;
    json_array_foreach(rows, i, row) json_object_foreach(row, k, v)
    {
        size_t c;
        for (c = 0; c < nc && strcmp(cols[c], k) != 0; c++)
            ;
        if (c == nc && nc < PRINT_COLS_MAX) {
            cols[nc] = k;
            w[nc++] = strlen(k);
        }
        if (c < nc && scalar_width(k, v) > w[c])
            w[c] = scalar_width(k, v);
    }
    fputs(indent, f);
    for (size_t c = 0; c < nc; c++)
        fprintf(f, "%-*s%s", (int)w[c], cols[c], c + 1 < nc ? "  " : "\n");
    json_array_foreach(rows, i, row)
    {
        fputs(indent, f);
        for (size_t c = 0; c < nc; c++) {
            json_t *cell = json_object_get(row, cols[c]);
            size_t cw = cell ? scalar_width(cols[c], cell) : 1;
            if (cell)
                scalar(f, cols[c], cell);
            else
                fputc('-', f);
            if (c + 1 < nc)
                fprintf(f, "%*s", (int)(w[c] - cw + 2), "");
        }
        fputc('\n', f);
    }
}

static void object(FILE *f, const char *indent, json_t *o)
{
    size_t kw = 0;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) if (!json_is_object(v) && !is_table(v) && strlen(k) > kw) kw =
        strlen(k);
    /* scalars first, aligned; then sections */
    json_object_foreach(o, k, v)
    {
        if (json_is_object(v) || is_table(v))
            continue;
        fprintf(f, "%s%-*s  ", indent, (int)kw, k);
        scalar(f, k, v);
        fputc('\n', f);
    }
    char sub[64];
    snprintf(sub, sizeof(sub), "%s  ", indent);
    json_object_foreach(o, k, v)
    {
        if (json_is_object(v)) {
            fprintf(f, "%s%s:\n", indent, k);
            if (json_object_size(v) == 0)
                fprintf(f, "%s(empty)\n", sub);
            else
                object(f, sub, v);
        } else if (is_table(v)) {
            fprintf(f, "%s%s:\n", indent, k);
            table(f, sub, v);
        }
    }
}

/* ---- peers and arena: the transfer engine's tables ---- */

static void print_peer_rows(FILE *f, json_t *peers)
{
    fprintf(f, "%-40s %-22s %-3s %-11s %7s %-7s %5s %9s %9s %10s %10s\n", "PEER", "ADDRESS",
            "DIR", "STATE", "SEEN", "PATH", "REQS", "CHUNKS_TX", "CHUNKS_RX", "SENT", "RECEIVED");
    size_t i;
    json_t *p;
    json_array_foreach(peers, i, p)
    {
        char tx[32], rx[32], seen[32] = "-";
        long long seen_ms = ctl_geti(p, "seen_ms"); /* last keepalive heard */
        if (seen_ms >= 0)
            snprintf(seen, sizeof seen, "%.1fs", (double)seen_ms / 1000.0);
        ctl_size_text(ctl_geti(p, "bytes_sent"), tx, sizeof tx);
        ctl_size_text(ctl_geti(p, "bytes_recv"), rx, sizeof rx);
        fprintf(f, "%-40s %-22s %-3s %-11s %7s %-7s %5lld %9lld %9lld %10s %10s\n",
                ctl_gets(p, "peer"), ctl_gets(p, "addr"), ctl_gets(p, "direction"),
                ctl_gets(p, "state"), seen,
                json_is_true(json_object_get(p, "put_fast")) ? "shm-put" : "am-rndv",
                ctl_geti(p, "requests"), ctl_geti(p, "chunks_sent"), ctl_geti(p, "chunks_recv"), tx, rx);
    }
}

static void print_peers(FILE *f, json_t *r)
{
    fprintf(f, "self    %s\nlisten  %s\n", ctl_gets(r, "self"),
            *ctl_gets(r, "listen") ? ctl_gets(r, "listen") : "(none: outbound only)");
    if (!json_is_true(json_object_get(r, "enabled"))) {
        fprintf(f, "inter-daemon traffic is off (cluster.secret_file unset)\n");
        return;
    }
    json_t *peers = json_object_get(r, "peers");
    if (json_array_size(peers) == 0)
        fprintf(f, "no peers\n");
    else
        print_peer_rows(f, peers);
    json_t *lost = json_object_get(r, "lost"); /* lost a moment ago (a bounded list) */
    if (json_array_size(lost) == 0)
        return;
    fprintf(f, "%-40s %-22s %-11s %8s %8s %s\n", "LOST PEER", "ADDRESS", "STATE", "SEEN",
            "LOST", "SLOTS");
    size_t i;
    json_t *p;
    json_array_foreach(lost, i, p)
        fprintf(f, "%-40s %-22s %-11s %7.1fs %7.1fs %s (%s)\n", ctl_gets(p, "peer"),
                ctl_gets(p, "addr"), ctl_gets(p, "state"), (double)ctl_geti(p, "seen_ms") / 1000.0,
                (double)ctl_geti(p, "lost_ms") / 1000.0,
                json_is_true(json_object_get(p, "held")) ? "held" : "free", ctl_gets(p, "why"));
}

static void print_arena(FILE *f, json_t *r)
{
    if (!json_is_true(json_object_get(r, "enabled"))) {
        fprintf(f, "no arena: %s\n", ctl_gets(r, "why"));
        return;
    }
    char cap[32], slot[32], q[32];
    ctl_size_text(ctl_geti(r, "capacity_bytes"), cap, sizeof cap);
    ctl_size_text(ctl_geti(r, "slot_bytes"), slot, sizeof slot);
    ctl_size_text(ctl_geti(r, "quarantined_bytes"), q, sizeof q);
    json_t *st = json_object_get(r, "staging");
    fprintf(f, "arena (%s): landing %s in %lld slots of %s", ctl_gets(r, "placement"), cap,
            ctl_geti(r, "slots_total"), slot);
    if (json_is_object(st)) {
        char sc[32];
        ctl_size_text(ctl_geti(st, "capacity_bytes"), sc, sizeof sc);
        fprintf(f, ", staging %s in %lld slots\n", sc, ctl_geti(st, "slots_total"));
    } else {
        fprintf(f, " (staging shares them)\n");
    }
    fprintf(f, "%-12s %8s %8s\n", "SLOTS", "LANDING", "STAGING");
    fprintf(f, "%-12s %8lld %8lld\n%-12s %8lld %8lld\n%-12s %8lld %8s  (%s)\n", "in use",
            ctl_geti(r, "slots_in_use"), ctl_geti(st, "slots_in_use"), "free", ctl_geti(r, "slots_free"),
            ctl_geti(st, "slots_free"), "quarantined", ctl_geti(r, "quarantined_slots"), "-", q);
    fprintf(f, "waiting requests %lld\n", ctl_geti(r, "waiting_requests"));
    fprintf(f, "grants %lld, first-credit timeouts %lld, stale reports %lld, bound violations "
            "%lld, reclaimed %lld, refused waiters %lld\n", ctl_geti(r, "grants_total"),
            ctl_geti(r, "timeouts_total"), ctl_geti(r, "stale_reports_total"),
            ctl_geti(r, "bound_violations_total"), ctl_geti(r, "reclaimed_total"),
            ctl_geti(r, "refused_waiters_total"));
    char share[32];
    ctl_size_text(ctl_geti(r, "peer_share_bytes"), share, sizeof share);
    fprintf(f, "per-peer share %s (arena.peer_share)", share);
    size_t i;
    json_t *h;
    json_array_foreach(json_object_get(r, "holders"), i, h)
    {
        char b[32];
        ctl_size_text(ctl_geti(h, "bytes"), b, sizeof b);
        json_t *lv = json_object_get(h, "lost"); /* only on a lost holder: what it waits for */
        const char *lost = json_is_string(lv) ? json_string_value(lv) : "";
        fprintf(f, "%s %s %s%s%s%s", i ? "," : "; held:", ctl_gets(h, "peer"), b,
                *lost ? " (lost: " : "", lost, *lost ? ")" : "");
    }
    fprintf(f, "\n");
}

void ctl_print_human(FILE *f, const char *cmd, json_t *result, bool all)
{
    if (!all && cmd && strcmp(cmd, "status") == 0 && json_is_object(result)) {
        ctl_print_status(f, result);
        return;
    }
    if (!all && cmd && strcmp(cmd, "workers") == 0 && json_is_object(result)) {
        ctl_print_workers(f, result);
        return;
    }
    if (!all && cmd && strcmp(cmd, "transfers") == 0 && json_is_object(result)) {
        ctl_print_transfers(f, result);
        return;
    }
    if (cmd && strcmp(cmd, "config") == 0 && json_is_object(result)) {
        json_t *human = ctl_config_human(result);
        object(f, "", human);
        json_decref(human);
        return;
    }
    if (cmd && strcmp(cmd, "peers") == 0 && json_is_object(result)) {
        print_peers(f, result);
        return;
    }
    if (cmd && strcmp(cmd, "arena") == 0 && json_is_object(result)) {
        print_arena(f, result);
        return;
    }
    if (json_is_string(json_object_get(result, "text"))) /* preformatted (metrics): raw */
        fputs(json_string_value(json_object_get(result, "text")), f);
    else if (json_is_object(result))
        object(f, "", result);
    else if (is_table(result))
        table(f, "", result);
    else {
        scalar(f, NULL, result);
        fputc('\n', f);
    }
}
