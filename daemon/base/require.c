/* require.c: see require.h. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "logsink.h"
#include "log.h"
#include "require.h"

bool kvf_require_fatal(void)
{
#ifdef KVF_DEBUG
    return true;
#else
    const char *v = getenv("KVF_FATAL_INVARIANTS");
    return v && strcmp(v, "1") == 0;
#endif
}

bool kvf_require_failed(const char *file, int line, const char *cond, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    log_error("invariant failed at %s:%d (%s): %s", file, line, cond, msg);
    if (kvf_require_fatal()) {
        logsink_flush(LOGSINK_EXIT_DRAIN_MS); /* the line above is queued: let it out */
        abort();
    }
    return false;
}
