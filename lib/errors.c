/* errors.c: names of the typed errors (kvferry.h), and err_inval (errors.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "errors.h"
#include "kvferry.h"

static const char *const error_names[KVF_E__COUNT] = {
    [KVF_OK] = "OK",
    [KVF_E_PEER_INCOMPATIBLE] = "PEER_INCOMPATIBLE",
    [KVF_E_NO_ROUTE] = "NO_ROUTE",
    [KVF_E_UNKNOWN_INSTANCE] = "UNKNOWN_INSTANCE",
    [KVF_E_PEER_UNREACHABLE] = "PEER_UNREACHABLE",
    [KVF_E_PEER_LOST] = "PEER_LOST",
    [KVF_E_TIMEOUT] = "TIMEOUT",
    [KVF_E_BOUND_VIOLATION] = "BOUND_VIOLATION",
    [KVF_E_CANCELLED] = "CANCELLED",
    [KVF_E_BAD_REQUEST] = "BAD_REQUEST",
    [KVF_E_INTERNAL] = "INTERNAL",
};

const char *kvf_error_to_string(kvf_error_t e)
{
    if ((unsigned)e >= KVF_E__COUNT)
        return "UNKNOWN";
    return error_names[e];
}

int kvf_error_from_string(const char *name)
{
    for (int i = 0; i < KVF_E__COUNT; i++)
        if (strcmp(error_names[i], name) == 0)
            return i;
    return -1;
}

int err_inval(char *err, size_t errlen, const char *fmt, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -EINVAL;
}
