/* cfg_units.c: sizes and durations as text, for the config file and kvferryctl.
 *
 * Sizes are whole numbers of bytes with an optional BINARY unit; every unit is a power of 1024:
 *   "1024", "1024B", "64k" = "64K" = "64KiB", "512m" = "512M" = "512MiB", "4G" = "4GiB", "1TiB".
 * Decimal-looking units ("KB", "MB", ...) are refused rather than guessed at. No fractions.
 * Durations are whole numbers with a unit: "200ms", "30s", "5m", "1h". A number without a unit
 * is refused (is "2" two milliseconds or two seconds?), except "0", the same in every unit.
 * Whitespace is allowed around the number and between number and unit.
 * Negative values, empty text, junk after the unit and values past 2^64-1 are refused:
 * -EINVAL for text that is not a size/duration, -ERANGE for one that does not fit.
 * The formatters print the largest unit that divides the value exactly, so that
 * parse(format(v)) == v for every v. Pure functions; thread-safe. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cfg.h"

struct unit {
    const char *name;
    uint64_t mult;
};

static const struct unit size_units[] = {
    {"", 1},
    {"B", 1},
    {"k", 1ULL << 10},
    {"K", 1ULL << 10},
    {"KiB", 1ULL << 10},
    {"m", 1ULL << 20},
    {"M", 1ULL << 20},
    {"MiB", 1ULL << 20},
    {"g", 1ULL << 30},
    {"G", 1ULL << 30},
    {"GiB", 1ULL << 30},
    {"t", 1ULL << 40},
    {"T", 1ULL << 40},
    {"TiB", 1ULL << 40},
};

static const struct unit duration_units[] = {
    {"ms", 1},
    {"s", 1000},
    {"m", 60 * 1000},
    {"h", 3600 * 1000},
};

/* Parses "<ws><digits><ws><unit><ws>" with one of units[]. */
static int parse_with_units(const char *s, const struct unit *units, size_t n_units, uint64_t *ret)
{
    if (!s)
        return -EINVAL;
    while (isspace((unsigned char)*s))
        s++;
    if (!isdigit((unsigned char)*s))
        return -EINVAL; /* empty, sign, junk */
    uint64_t v = 0;
    bool overflow = false;
    while (isdigit((unsigned char)*s)) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            v = v * 10 + d;
        s++;
    }
    while (isspace((unsigned char)*s))
        s++;
    const char *u = s;
    while (*s && !isspace((unsigned char)*s))
        s++;
    size_t ulen = (size_t)(s - u);
    while (isspace((unsigned char)*s))
        s++;
    if (*s)
        return -EINVAL;
    for (size_t i = 0; i < n_units; i++) {
        if (strlen(units[i].name) != ulen || strncmp(units[i].name, u, ulen) != 0)
            continue;
        if (overflow || v > UINT64_MAX / units[i].mult)
            return -ERANGE;
        *ret = v * units[i].mult;
        return 0;
    }
    return -EINVAL;
}

int cfg_parse_size(const char *s, uint64_t *ret)
{
    return parse_with_units(s, size_units, sizeof(size_units) / sizeof(size_units[0]), ret);
}

int cfg_parse_duration_ms(const char *s, uint64_t *ret)
{
    static const struct unit zero[] = {{"", 1}};
    uint64_t v;
    if (parse_with_units(s, zero, 1, &v) == 0 && v == 0) {
        *ret = 0;
        return 0;
    }
    return parse_with_units(s, duration_units, sizeof(duration_units) / sizeof(duration_units[0]),
                            ret);
}

static int put(char *buf, size_t len, uint64_t v, const char *unit)
{
    int n = snprintf(buf, len, "%llu%s", (unsigned long long)v, unit);
    if (n < 0 || (size_t)n >= len)
        return -ENOSPC;
    return 0;
}

int cfg_format_size(uint64_t v, char *buf, size_t len)
{
    static const struct unit out[] = {
        {"TiB", 1ULL << 40}, {"GiB", 1ULL << 30}, {"MiB", 1ULL << 20}, {"KiB", 1ULL << 10}};
    if (v != 0)
        for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++)
            if (v % out[i].mult == 0)
                return put(buf, len, v / out[i].mult, out[i].name);
    return put(buf, len, v, "");
}

int cfg_format_duration_ms(uint64_t v, char *buf, size_t len)
{
    static const struct unit out[] = {{"h", 3600 * 1000}, {"m", 60 * 1000}, {"s", 1000}};
    if (v != 0)
        for (size_t i = 0; i < sizeof(out) / sizeof(out[0]); i++)
            if (v % out[i].mult == 0)
                return put(buf, len, v / out[i].mult, out[i].name);
    return put(buf, len, v, "ms");
}
