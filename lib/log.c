/* log.c: leveled logging (log.h): entries formatted here, handed to a sink; the default one
 * writes each line to stderr at once, dated (ISO 8601, local time with its offset), or with
 * the journal stream's "<prio>" prefix under systemd. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static log_level_t cur_level = LOG_LVL_INFO;
static const char *cur_tag = "kvferry";
static int journal_stderr = -1; /* -1 unknown, 0 no, 1 yes (the default sink's) */
static log_sink_fn cur_sink;
static void *cur_sink_arg;

static const char *const level_names[] = {"error", "warn", "info", "debug"};
static const int syslog_prio[] = {3, 4, 6, 7};

void log_set_level(log_level_t lvl)
{
    cur_level = lvl;
}
log_level_t log_get_level(void)
{
    return cur_level;
}
void log_set_tag(const char *tag)
{
    cur_tag = tag;
}
const char *log_get_tag(void)
{
    return cur_tag;
}
void log_set_sink(log_sink_fn fn, void *arg)
{
    cur_sink = fn;
    cur_sink_arg = arg;
    journal_stderr = -1; /* look at stderr again */
}
int log_syslog_priority(log_level_t lvl)
{
    return syslog_prio[(unsigned)lvl > LOG_LVL_DEBUG ? LOG_LVL_DEBUG : (unsigned)lvl];
}

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
bool log_stderr_is_journal(void)
{
    const char *js = getenv("JOURNAL_STREAM");
    struct stat st;
    unsigned long dev, ino;
    if (!js || sscanf(js, "%lu:%lu", &dev, &ino) != 2 || fstat(2, &st) < 0)
        return 0;
    return st.st_dev == dev && st.st_ino == ino;
}

/* "2026-12-01T10:10:19.123+01:00": local time, milliseconds, the offset from UTC. */
struct iso_time {
    char s[48];
};

static struct iso_time iso_time(const struct timespec *at)
{
    struct timespec ts = *at;
    struct tm tm;
    struct iso_time t;
    char zone[8] = "";
    localtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(t.s, 24, "%Y-%m-%dT%H:%M:%S", &tm);
    strftime(zone, sizeof(zone), "%z", &tm); /* +0100 */
    snprintf(t.s + n, sizeof(t.s) - n, ".%03d%c%c%c:%c%c", (int)(ts.tv_nsec / 1000000), zone[0],
             zone[1], zone[2], zone[3], zone[4]);
    return t;
}

size_t log_format_line(const struct log_entry *e, bool journal_stream, char *buf, size_t len)
{
    unsigned lvl = (unsigned)e->lvl > LOG_LVL_DEBUG ? LOG_LVL_DEBUG : (unsigned)e->lvl;
    int n = journal_stream
                ? snprintf(buf, len, "<%d>%s\n", syslog_prio[lvl], e->msg)
                : snprintf(buf, len, "%s %s[%d] %s: %s\n", iso_time(&e->ts).s, cur_tag,
                           (int)getpid(), level_names[lvl], e->msg);
    if (n < 0 || len == 0)
        return 0;
    if ((size_t)n >= len) { /* cut: still one line */
        buf[len - 2] = '\n';
        return len - 1;
    }
    return (size_t)n;
}

/* The default sink: one blocking write to stderr. */
static void write_stderr(const struct log_entry *e)
{
    if (journal_stderr < 0)
        journal_stderr = log_stderr_is_journal();
    char line[2300];
    size_t n = log_format_line(e, journal_stderr == 1, line, sizeof line);
    fwrite(line, 1, n, stderr);
    fflush(stderr);
}

static void log_v(log_level_t lvl, const struct log_ctx *ctx, const char *fmt, va_list ap)
{
    if (lvl > cur_level)
        return;
    char msg[2048];
    if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
        return;
    struct log_entry e = {.lvl = lvl, .ctx = ctx, .msg = msg};
    clock_gettime(CLOCK_REALTIME, &e.ts);
    if (cur_sink)
        cur_sink(&e, cur_sink_arg);
    else
        write_stderr(&e);
}

void log_msg(log_level_t lvl, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v(lvl, NULL, fmt, ap);
    va_end(ap);
}

void log_msg_ctx(log_level_t lvl, const struct log_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    log_v(lvl, ctx, fmt, ap);
    va_end(ap);
}
