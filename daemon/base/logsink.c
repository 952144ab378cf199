/* logsink.c: the bounded log queue and its writer thread (logsink.h). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <systemd/sd-journal.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "logsink.h"

struct qent {
    struct qent *next;
    size_t bytes;             /* what it counts against LOGSINK_MAX_BYTES */
    log_level_t lvl;
    struct timespec ts;
    uint64_t req_id;
    const char *peer, *instance; /* into text, NULL: absent */
    char text[];                 /* msg, then peer and instance */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t more, idle; /* more: queued or stopping; idle: queue empty, nothing writing */
    pthread_t thread;
    bool running, stopping, writing, journal;
    bool stuck; /* a stop found the output blocked: later stops do not wait again */
    struct qent *head, *tail;  /* owned while queued */
    size_t bytes;
    uint64_t written, dropped, dropped_reported;
    struct timespec first_drop; /* of the drops not yet reported */
} q = {.mu = PTHREAD_MUTEX_INITIALIZER,
       .more = PTHREAD_COND_INITIALIZER,
       .idle = PTHREAD_COND_INITIALIZER};

static char *dup_into(char **at, const char *s)
{
    if (!s || !*s)
        return NULL;
    char *p = *at;
    size_t n = strlen(s) + 1;
    memcpy(p, s, n);
    *at += n;
    return p;
}

/* log.h's sink: runs on the logging thread; never blocks on the output. */
static void enqueue(const struct log_entry *e, void *arg)
{
    (void)arg;
    const char *peer = e->ctx ? e->ctx->peer : NULL, *inst = e->ctx ? e->ctx->instance : NULL;
    size_t text = strlen(e->msg) + 1 + (peer ? strlen(peer) + 1 : 0) +
                  (inst ? strlen(inst) + 1 : 0);
    size_t bytes = sizeof(struct qent) + text;
    pthread_mutex_lock(&q.mu);
    struct qent *n = q.bytes + bytes <= LOGSINK_MAX_BYTES ? malloc(bytes) : NULL;
    if (!n) {
        if (q.dropped == q.dropped_reported)
            q.first_drop = e->ts;
        q.dropped++;
        pthread_mutex_unlock(&q.mu);
        return;
    }
    *n = (struct qent){.bytes = bytes, .lvl = e->lvl, .ts = e->ts,
                       .req_id = e->ctx ? e->ctx->req_id : 0};
    char *at = n->text;
    dup_into(&at, e->msg);
    n->peer = dup_into(&at, peer);
    n->instance = dup_into(&at, inst);
    if (q.tail)
        q.tail->next = n;
    else
        q.head = n;
    q.tail = n;
    q.bytes += bytes;
    pthread_cond_signal(&q.more);
    pthread_mutex_unlock(&q.mu);
}

/* All of buf to fd 2, waiting as long as it takes (this thread's to wait). */
static void write_all(const char *buf, size_t len)
{
    while (len) {
        ssize_t n = write(2, buf, len);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n < 0 && errno == EAGAIN) { /* someone made stderr non-blocking */
            struct pollfd p = {.fd = 2, .events = POLLOUT};
            poll(&p, 1, -1);
        } else if (n < 0 && errno != EINTR) {
            return; /* closed or broken: nothing to tell it with */
        }
    }
}

/* One "KEY=value" field into buf (cut to fit). */
static struct iovec field(char *buf, size_t len, const char *key, const char *val)
{
    snprintf(buf, len, "%s=%s", key, val);
    return (struct iovec){buf, strlen(buf)};
}

/* The journal's native protocol, by libsystemd. false: the stream gets the line instead. */
static bool journal_send(const struct qent *e)
{
    char msg[2100], prio[40], ident[80], req[40], peer[300], inst[300], num[24];
    struct iovec iov[6];
    int n = 0;
    iov[n++] = field(msg, sizeof msg, "MESSAGE", e->text);
    snprintf(num, sizeof num, "%d", log_syslog_priority(e->lvl));
    iov[n++] = field(prio, sizeof prio, "PRIORITY", num);
    iov[n++] = field(ident, sizeof ident, "SYSLOG_IDENTIFIER", log_get_tag());
    if (e->req_id) {
        snprintf(num, sizeof num, "%" PRIu64, e->req_id);
        iov[n++] = field(req, sizeof req, "REQ_ID", num);
    }
    if (e->peer)
        iov[n++] = field(peer, sizeof peer, "PEER", e->peer);
    if (e->instance)
        iov[n++] = field(inst, sizeof inst, "INSTANCE", e->instance);
    return sd_journal_sendv(iov, n) >= 0;
}

static void write_one(const struct qent *e)
{
    if (q.journal && journal_send(e))
        return;
    const struct log_ctx ctx = {.req_id = e->req_id, .peer = e->peer, .instance = e->instance};
    struct log_entry le = {.lvl = e->lvl, .ts = e->ts, .ctx = &ctx, .msg = e->text};
    char line[2300];
    write_all(line, log_format_line(&le, q.journal, line, sizeof line));
}

/* Says how many entries were dropped, once the output took one again. */
static void report_drops(uint64_t dropped, struct timespec since)
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    char msg[200];
    snprintf(msg, sizeof msg, "log: %" PRIu64 " line(s) dropped: the log output was blocked for "
             "%lld s (%u bytes queued at most)", dropped,
             (long long)(now.tv_sec - since.tv_sec), LOGSINK_MAX_BYTES);
    struct qent *e = calloc(1, sizeof *e + strlen(msg) + 1);
    if (!e)
        return;
    e->lvl = LOG_LVL_WARN;
    e->ts = now;
    memcpy(e->text, msg, strlen(msg) + 1);
    write_one(e);
    free(e);
}

static void *writer_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&q.mu);
    for (;;) {
        while (!q.head && !q.stopping) {
            q.writing = false;
            pthread_cond_broadcast(&q.idle);
            pthread_cond_wait(&q.more, &q.mu);
        }
        if (!q.head) /* stopping, all written */
            break;
        struct qent *e = q.head; /* ours now */
        q.head = e->next;
        if (!q.head)
            q.tail = NULL;
        q.bytes -= e->bytes;
        q.writing = true;
        uint64_t drops = q.dropped - q.dropped_reported;
        struct timespec since = q.first_drop;
        q.dropped_reported = q.dropped;
        pthread_mutex_unlock(&q.mu);
        write_one(e);
        free(e);
        if (drops) /* the output took a line: it recovered */
            report_drops(drops, since);
        pthread_mutex_lock(&q.mu);
        q.written++;
    }
    q.writing = false;
    pthread_cond_broadcast(&q.idle);
    pthread_mutex_unlock(&q.mu);
    return NULL;
}

static void at_exit(void)
{
    logsink_stop(LOGSINK_EXIT_DRAIN_MS);
}

int logsink_start(void)
{
    static bool registered;
    if (q.running)
        return 0;
    if (!registered && atexit(at_exit) == 0) /* exit() and return from main drain too */
        registered = true;
    q.journal = log_stderr_is_journal();
    q.stopping = false;
    int r = pthread_create(&q.thread, NULL, writer_main, NULL);
    if (r)
        return -r;
    q.running = true;
    log_set_sink(enqueue, NULL);
    return 0;
}

/* Waits (mutex held) until the queue is written or end passes; whether it was. */
static bool drain_locked(const struct timespec *end)
{
    int r = 0;
    while ((q.head || q.writing) && r != ETIMEDOUT)
        r = pthread_cond_timedwait(&q.idle, &q.mu, end);
    return !q.head && !q.writing;
}

static struct timespec deadline(int ms)
{
    struct timespec end;
    clock_gettime(CLOCK_REALTIME, &end);
    end.tv_sec += ms / 1000;
    end.tv_nsec += (long)(ms % 1000) * 1000000;
    if (end.tv_nsec >= 1000000000) {
        end.tv_sec++;
        end.tv_nsec -= 1000000000;
    }
    return end;
}

bool logsink_flush(int drain_ms)
{
    struct timespec end = deadline(drain_ms);
    pthread_mutex_lock(&q.mu);
    bool drained = drain_locked(&end);
    pthread_mutex_unlock(&q.mu);
    return drained;
}

void logsink_stop(int drain_ms)
{
    if (!q.running || q.stuck)
        return;
    struct timespec end = deadline(drain_ms);
    pthread_mutex_lock(&q.mu);
    bool drained = drain_locked(&end);
    if (drained) {
        q.stopping = true;
        pthread_cond_signal(&q.more);
    }
    pthread_mutex_unlock(&q.mu);
    if (!drained) { /* the output is blocked: the thread keeps waiting on it, the sink stays */
        q.stuck = true;
        return;
    }
    log_set_sink(NULL, NULL);
    pthread_join(q.thread, NULL);
    q.running = false;
}

void logsink_get_stats(struct logsink_stats *ret)
{
    pthread_mutex_lock(&q.mu);
    *ret = (struct logsink_stats){.written = q.written, .dropped = q.dropped,
                                  .queued_bytes = q.bytes};
    pthread_mutex_unlock(&q.mu);
}
