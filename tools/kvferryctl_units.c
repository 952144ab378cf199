/* kvferryctl_units.c: see kvferryctl_units.h. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "cfg.h"
#include "kvferryctl_units.h"

long long ctl_geti(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (long long)json_integer_value(v) : 0;
}

const char *ctl_gets(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_string(v) ? json_string_value(v) : "-";
}

void ctl_size_text(long long v, char *buf, size_t len)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double x = (double)v;
    int u = 0;
    while (x >= 1024 && u < 5)
        x /= 1024, u++;
    if (v < 0)
        snprintf(buf, len, "%lld", v);
    else if (u == 0 || x == (double)(long long)x)
        snprintf(buf, len, "%lld%s", (long long)x, units[u]);
    else
        snprintf(buf, len, "%.1f%s", x, units[u]);
}

void ctl_duration_text(double ms, char *buf, size_t len)
{
    if (ms < 0) {
        snprintf(buf, len, "-");
        return;
    }
    long long s = (long long)(ms / 1000);
    if (ms < 1000)
        snprintf(buf, len, ms == (double)(long long)ms ? "%.0fms" : "%.2fms", ms);
    else if (ms < 60000)
        snprintf(buf, len, "%.1fs", ms / 1000);
    else if (s < 3600)
        snprintf(buf, len, "%lldm%02llds", s / 60, s % 60);
    else if (s < 86400)
        snprintf(buf, len, "%lldh%02lldm", s / 3600, s / 60 % 60);
    else
        snprintf(buf, len, "%lldd%02lldh", s / 86400, s / 3600 % 24);
}

void ctl_time_text(long long epoch_s, char *buf, size_t len)
{
    time_t t = (time_t)epoch_s;
    struct tm tm;
    char zone[8] = "";
    if (epoch_s <= 0 || !localtime_r(&t, &tm)) {
        snprintf(buf, len, "-");
        return;
    }
    size_t n = strftime(buf, len, "%Y-%m-%dT%H:%M:%S", &tm);
    strftime(zone, sizeof(zone), "%z", &tm);
    if (n && n + 7 <= len)
        snprintf(buf + n, len - n, "%c%c%c:%c%c", zone[0], zone[1], zone[2], zone[3], zone[4]);
}

static bool ends(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

bool ctl_human(const char *key, json_t *v, char *buf, size_t len)
{
    if (!key || !json_is_number(v))
        return false;
    double x = json_number_value(v);
    /* path decisions name their gate (fragment_state_below_min_bytes): counts, not sizes */
    if (ends(key, "_min_bytes") || ends(key, "_min_blocks"))
        return false;
    if (ends(key, "_bytes") || strcmp(key, "bytes") == 0 || strncmp(key, "bytes_", 6) == 0)
        ctl_size_text((long long)x, buf, len);
    else if (ends(key, "_at_s") || strcmp(key, "time_s") == 0)
        ctl_time_text((long long)x, buf, len);
    else if (ends(key, "_ms"))
        ctl_duration_text(x, buf, len);
    else if (ends(key, "_usec"))
        ctl_duration_text(x / 1000, buf, len);
    else if (ends(key, "_s"))
        ctl_duration_text(x * 1000, buf, len);
    else if (ends(key, "_gbps"))
        snprintf(buf, len, "%.2fGB/s", x);
    else
        return false;
    return true;
}

json_t *ctl_config_human(json_t *config)
{
    json_t *out = json_deep_copy(config), *sect, *v;
    const char *s, *k;
    json_object_foreach(out, s, sect)
    {
        json_object_foreach(sect, k, v)
        {
            char full[128], text[64];
            snprintf(full, sizeof(full), "%s.%s", s, k);
            const struct cfg_key *ck = NULL;
            for (size_t i = 0; i < cfg_table_len && !ck; i++)
                if (strcmp(cfg_table[i].key, full) == 0)
                    ck = &cfg_table[i];
            if (!ck || !json_is_integer(v))
                continue;
            long long x = (long long)json_integer_value(v);
            if (ck->type == CFG_SIZE)
                cfg_format_size((uint64_t)x, text, sizeof(text));
            else if (ck->type == CFG_DURATION)
                cfg_format_duration_ms((uint64_t)x, text, sizeof(text));
            else if (ck->type == CFG_INT && ck->def[0] == '0' && ck->def[1]) /* octal: 0660 */
                snprintf(text, sizeof(text), "%04llo", x);
            else
                continue;
            json_object_set_new(sect, k, json_string(text));
        }
    }
    return out;
}
