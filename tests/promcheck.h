/* promcheck.h: an independent validator of the Prometheus text exposition format 0.0.4, for the
 * tests (bodies in tests/support/promcheck.c). It is written from the format's grammar, not from
 * lib/prom.c, and checks every line:
 *   # HELP <name> <text>       text escapes: \\ and \n only
 *   # TYPE <name> <counter|gauge|histogram|summary|untyped>
 *   # any other comment
 *   <name>[{<label>="<value>"(,<label>="<value>")*[,]}] <value> [<timestamp ms>]
 * names [a-zA-Z_:][a-zA-Z0-9_:]*, label names [a-zA-Z_][a-zA-Z0-9_]* (not starting "__"),
 * label value escapes \\ \" \n only, values Go floats (incl. NaN, +Inf, -Inf), the text ends in
 * a newline; and the format's rules across lines: at most one HELP and one TYPE per family, TYPE
 * before the family's first sample, a family's samples together, no label twice in a sample, no
 * series twice. With `strict`, also: every family has HELP and TYPE (what kvferryd promises). */
#ifndef KVF_PROMCHECK_H
#define KVF_PROMCHECK_H

#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Validates `text`. Returns 0 when valid, else the (1-based) number of the first bad line with a
 * message in err. */
int pc_validate(const char *text, bool strict, char *err, size_t errlen);

/* Whether promtool is on PATH: 1 yes; 0 no (the caller skips, saying so); -1 no, but
 * KVF_REQUIRE_PROMTOOL=1 (CI: scripts/install-deps puts it in /usr/local/bin) says it must be. */
static inline int pc_promtool(void)
{
    if (system("command -v promtool >/dev/null 2>&1") == 0)
        return 1;
    const char *req = getenv("KVF_REQUIRE_PROMTOOL");
    return req && strcmp(req, "1") == 0 ? -1 : 0;
}

/* The value of the sample line of `text` that starts with `series` + ' '; NAN when absent. */
static inline double pc_value(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (!strncmp(p, series, n) && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    return NAN;
}

#endif
