/* kvferryctl_print.c: replies as text for people (tables and aligned key/value lines). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvferryctl.h"

#define PRINT_COLS_MAX 32

static void scalar(FILE *f, json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING: fputs(json_string_value(v), f); break;
    case JSON_INTEGER: fprintf(f, "%lld", (long long)json_integer_value(v)); break;
    case JSON_REAL: fprintf(f, "%g", json_real_value(v)); break;
    case JSON_TRUE: fputs("yes", f); break;
    case JSON_FALSE: fputs("no", f); break;
    case JSON_NULL: fputs("-", f); break;
    default: {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        fputs(s ? s : "?", f);
        free(s);
    }
    }
}

static size_t scalar_width(json_t *v)
{
    char buf[64];
    switch (json_typeof(v)) {
    case JSON_STRING: return strlen(json_string_value(v));
    case JSON_INTEGER: return (size_t)snprintf(buf, sizeof(buf), "%lld",
                                              (long long)json_integer_value(v));
    case JSON_REAL: return (size_t)snprintf(buf, sizeof(buf), "%g", json_real_value(v));
    case JSON_TRUE: return 3;
    case JSON_FALSE: return 2;
    case JSON_NULL: return 1;
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
        if (c < nc && scalar_width(v) > w[c])
            w[c] = scalar_width(v);
    }
    fputs(indent, f);
    for (size_t c = 0; c < nc; c++)
        fprintf(f, "%-*s%s", (int)w[c], cols[c], c + 1 < nc ? "  " : "\n");
    json_array_foreach(rows, i, row)
    {
        fputs(indent, f);
        for (size_t c = 0; c < nc; c++) {
            json_t *cell = json_object_get(row, cols[c]);
            size_t cw = cell ? scalar_width(cell) : 1;
            if (cell)
                scalar(f, cell);
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
        scalar(f, v);
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

void ctl_print_human(FILE *f, const char *cmd, json_t *result)
{
    (void)cmd;
    if (json_is_object(result))
        object(f, "", result);
    else if (is_table(result))
        table(f, "", result);
    else {
        scalar(f, result);
        fputc('\n', f);
    }
}
