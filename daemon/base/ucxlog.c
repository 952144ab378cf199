/* ucxlog.c: UCX's log messages into the daemon's log (ucxlog.h). */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <ucs/debug/log_def.h>

#include "log.h"
#include "ucxlog.h"

static ucs_log_func_rc_t ucx_line(const char *file, unsigned line, const char *function,
                                  ucs_log_level_t level, const ucs_log_component_config_t *comp,
                                  const char *fmt, va_list ap)
{
    (void)function;
    (void)comp;
    log_level_t lvl = level <= UCS_LOG_LEVEL_ERROR  ? LOG_LVL_ERROR
                      : level == UCS_LOG_LEVEL_WARN ? LOG_LVL_WARN
                      : level <= UCS_LOG_LEVEL_INFO ? LOG_LVL_INFO
                                                    : LOG_LVL_DEBUG;
    if (lvl <= log_get_level()) {
        char msg[1024];
        vsnprintf(msg, sizeof msg, fmt, ap);
        const char *base = strrchr(file, '/');
        log_msg(lvl, "ucx: %s:%u: %s", base ? base + 1 : file, line, msg);
    }
    return UCS_LOG_FUNC_RC_STOP; /* UCX's own handler would write stderr */
}

void ucxlog_route(void)
{
    ucs_log_push_handler(ucx_line);
}
