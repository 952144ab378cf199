/* log.c: leveled logging: to stderr, each line dated (ISO 8601, local time with its offset);
 * under systemd (stderr is the journal's stream) to journald's native socket instead, with
 * PRIORITY= and the request's fields (REQ_ID=, PEER=, INSTANCE=), falling back to stderr. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "log.h"

static log_level_t cur_level = LOG_LVL_INFO;
static const char *cur_tag = "kvferry";
static int journal_stderr = -1; /* -1 unknown, 0 no, 1 yes */

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

/* One field of the journal's native protocol: "KEY=value\n", or, for a value that holds a
 * newline, "KEY\n" + its length (64-bit little endian) + value + "\n". iov needs 4 slots. */
static size_t journal_field(struct iovec *iov, const char *key, const char *val, uint64_t *len_le)
{
    size_t n = 0, vlen = strlen(val);
    iov[n++] = (struct iovec){(void *)key, strlen(key)};
    if (!memchr(val, '\n', vlen)) {
        iov[n++] = (struct iovec){"=", 1};
    } else {
        uint64_t v = vlen;
        for (int i = 0; i < 8; i++)
            ((unsigned char *)len_le)[i] = (unsigned char)(v >> (8 * i));
        iov[n++] = (struct iovec){"\n", 1};
        iov[n++] = (struct iovec){len_le, 8};
    }
    iov[n++] = (struct iovec){(void *)val, vlen};
    iov[n++] = (struct iovec){"\n", 1};
    return n;
}

/* Sends one entry to journald's native socket; false when that fails (the caller then writes
 * to stderr). Fields come in as "KEY", "value" pairs. */
static const char *journal_path = "/run/systemd/journal/socket";

void log_set_journal_socket(const char *path)
{
    journal_path = path;
    journal_stderr = -1; /* look at stderr again */
}

static bool journal_send(const char *const *kv, size_t n_kv)
{
    static int fd = -1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", journal_path);
    if (fd < 0 && (fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0)) < 0)
        return false;
    struct iovec iov[8 * 6];
    uint64_t lens[8];
    size_t n = 0;
    for (size_t i = 0; i + 1 < n_kv && i / 2 < 8; i += 2)
        n += journal_field(iov + n, kv[i], kv[i + 1], &lens[i / 2]);
    struct msghdr mh = {
        .msg_name = &sa, .msg_namelen = sizeof(sa), .msg_iov = iov, .msg_iovlen = n};
    return sendmsg(fd, &mh, MSG_NOSIGNAL) >= 0;
}

/* "2026-12-01T10:10:19.123+01:00": local time, milliseconds, the offset from UTC. */
struct iso_time {
    char s[48];
};

static struct iso_time iso_now(void)
{
    struct timespec ts;
    struct tm tm;
    struct iso_time t;
    char zone[8] = "";
    clock_gettime(CLOCK_REALTIME, &ts);
    localtime_r(&ts.tv_sec, &tm);
    size_t n = strftime(t.s, 24, "%Y-%m-%dT%H:%M:%S", &tm);
    strftime(zone, sizeof(zone), "%z", &tm); /* +0100 */
    snprintf(t.s + n, sizeof(t.s) - n, ".%03d%c%c%c:%c%c", (int)(ts.tv_nsec / 1000000), zone[0],
             zone[1], zone[2], zone[3], zone[4]);
    return t;
}

static void log_v(log_level_t lvl, const struct log_ctx *ctx, const char *fmt, va_list ap)
{
    if (lvl > cur_level)
        return;
    if (journal_stderr < 0)
        journal_stderr = stderr_is_journal();
    char msg[2048];
    if (vsnprintf(msg, sizeof(msg), fmt, ap) < 0)
        return;
    if (journal_stderr) {
        char prio[2] = {(char)('0' + syslog_prio[lvl]), '\0'}, req[24];
        const char *kv[16] = {"MESSAGE", msg, "PRIORITY", prio, "SYSLOG_IDENTIFIER", cur_tag};
        size_t n = 6;
        if (ctx && ctx->req_id) {
            snprintf(req, sizeof(req), "%llu", (unsigned long long)ctx->req_id);
            kv[n++] = "REQ_ID", kv[n++] = req;
        }
        if (ctx && ctx->peer && *ctx->peer)
            kv[n++] = "PEER", kv[n++] = ctx->peer;
        if (ctx && ctx->instance && *ctx->instance)
            kv[n++] = "INSTANCE", kv[n++] = ctx->instance;
        if (journal_send(kv, n))
            return;
        fprintf(stderr, "<%d>%s\n", syslog_prio[lvl], msg); /* the stream still has it */
        return;
    }
    fprintf(stderr, "%s %s[%d] %s: %s\n", iso_now().s, cur_tag, (int)getpid(), level_names[lvl],
            msg);
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
