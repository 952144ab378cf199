/* jlist.c: JSON list lookups for tests that wait on what the daemon reports (declared, with what
 * each does, in tests/integration/jlist.h). Built once into libkvferry-testsupport.a, linked into
 * every test. */
#include "integration/jlist.h"

int tj_is(json_t *v, const char *want)
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

int tj_lists(json_t *a, const char *f1, const char *v1, const char *f2, const char *v2)
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
