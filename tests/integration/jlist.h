/* jlist.h: does a JSON array (a control command's list: transfers, workers, instances) hold an
 * object with given field values? For tests that wait on what the daemon reports, not on
 * time. Header-only. */
#ifndef KVF_JLIST_H
#define KVF_JLIST_H

#include <jansson.h>
#include <string.h>

#include "testutil.h"

/* 1 when the JSON value v (string, integer or boolean) reads as text want. */
static inline int tj_is(json_t *v, const char *want)
{
    char num[32];
    if (json_is_string(v))
        return !strcmp(json_string_value(v), want);
    if (json_is_integer(v))
        return !strcmp(tu_fmt(num, sizeof num, "%lld", (long long)json_integer_value(v)), want);
    if (json_is_boolean(v))
        return !strcmp(json_is_true(v) ? "true" : "false", want);
    return 0;
}

/* 1 when array a holds an object whose field f1 reads v1 and, when f2 is not NULL, whose field
 * f2 reads v2. */
static inline int tj_lists(json_t *a, const char *f1, const char *v1, const char *f2,
                           const char *v2)
{
    json_t *x;
    size_t k;
    json_array_foreach(a, k, x)
    {
        if (tj_is(json_object_get(x, f1), v1) && (!f2 || tj_is(json_object_get(x, f2), v2)))
            return 1;
    }
    return 0;
}

#endif
