/* log.c: leveled logging to stderr. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static log_level_t cur_level = LOG_LVL_INFO;
static const char *cur_tag = "kvferry";
static int journal_stderr = -1; /* -1 unknown, 0 no, 1 yes */

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const int syslog_prio[] = {3, 4, 6, 7};

void log_set_level(log_level_t lvl) { cur_level = lvl; }
log_level_t log_get_level(void) { return cur_level; }
void log_set_tag(const char *tag) { cur_tag = tag; }

const char *log_level_to_string(log_level_t lvl)
{
    if ((unsigned)lvl > LOG_LVL_DEBUG)
        return "unknown";
    return level_names[lvl];
}

int log_level_from_string(const char *name, log_level_t *ret)
{
    for (unsigned i = 0; i <= LOG_LVL_DEBUG; i++)
        if (strcmp(name, level_names[i]) == 0) {
            *ret = (log_level_t)i;
            return 0;
        }
    return -EINVAL;
}

/* JOURNAL_STREAM names the device:inode of the journal socket when stderr is connected to it. */
static int stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    struct stat st;
    unsigned long dev, ino;
    if (!js || sscanf(js, "%lu:%lu", &dev, &ino) != 2 || fstat(2, &st) < 0)
        return 0;
    return st.st_dev == dev && st.st_ino == ino;
}

void log_msg(log_level_t lvl, const char *fmt, ...)
{
    if (lvl > cur_level)
        return;
    if (journal_stderr < 0)
        journal_stderr = stderr_is_journal();
    char line[2048];
    int n;
    if (journal_stderr) {
        n = snprintf(line, sizeof(line), "<%d>", syslog_prio[lvl]);
    } else {
        struct timespec ts;
        struct tm tm;
        clock_gettime(CLOCK_REALTIME, &ts);
        gmtime_r(&ts.tv_sec, &tm);
        n = snprintf(line, sizeof(line), "%02d:%02d:%02d.%03ld %s[%d] %s: ", tm.tm_hour, tm.tm_min,
                     tm.tm_sec, ts.tv_nsec / 1000000, cur_tag, (int)getpid(),
                     level_names[lvl]);
    }
    va_list ap;
    va_start(ap, fmt);
    if (n >= 0 && (size_t)n < sizeof(line))
        n += vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n >= sizeof(line) - 1)
        n = (int)sizeof(line) - 2;
    line[n++] = '\n';
    (void)!fwrite(line, 1, (size_t)n, stderr);
}
