/* log.h: leveled logging. An entry (level, time, message and, from log_req, the request's
 * fields) goes to a sink: by default written at once to stderr, a line dated in ISO 8601, or,
 * where stderr is the journal's stream (JOURNAL_STREAM), "<prio>message" for the stream to file
 * at that priority. The daemon installs its own sink (daemon/base/logsink.h: a bounded queue
 * and a thread, so a blocked stderr never stalls the loop, and the journal's native protocol
 * through sd_journal_sendv with REQ_ID=, PEER=, INSTANCE=: journalctl -u kvferry REQ_ID=42);
 * lib/ itself never links libsystemd. lib/ logs at debug only; daemon/ logs an error once, where
 * its meaning is decided, as "what failed: why". The level is global and may change at run time.
 * Level, tag and sink are set by one thread (the daemon loop, a tool's main) before or while it
 * logs; the formatting functions below are pure and any thread may call them. */
#ifndef KVF_LOG_H
#define KVF_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

typedef enum { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG } log_level_t;

void log_set_level(log_level_t lvl);
log_level_t log_get_level(void);
const char *log_level_to_string(log_level_t lvl);
/* Returns 0 and writes *ret, or -EINVAL for an unknown name. */
int log_level_from_string(const char *name, log_level_t *ret);
/* Prefix each line with a tag, e.g. the program name. Borrowed: must outlive logging. */
void log_set_tag(const char *tag);

void log_msg(log_level_t lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What a line is about, for the journal's fields; 0 / NULL / "": absent. Borrowed. */
struct log_ctx {
    uint64_t req_id;
    const char *peer;     /* the peer daemon's address or name */
    const char *instance; /* the context instance */
};
void log_msg_ctx(log_level_t lvl, const struct log_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* One entry as a sink sees it; every pointer borrowed for the call. */
struct log_entry {
    log_level_t lvl;
    struct timespec ts;        /* when it was logged (CLOCK_REALTIME) */
    const struct log_ctx *ctx; /* NULL: none */
    const char *msg;
};
typedef void (*log_sink_fn)(const struct log_entry *e, void *arg);
/* Where entries at or above the level go from now on; NULL: straight to stderr. */
void log_set_sink(log_sink_fn fn, void *arg);
const char *log_get_tag(void);
/* syslog's priority of a level (error 3, warn 4, info 6, debug 7). */
int log_syslog_priority(log_level_t lvl);
/* Whether stderr is the journal's stream: JOURNAL_STREAM names its device and inode. */
bool log_stderr_is_journal(void);
/* The stderr line of e into buf, '\n' ended (truncated to fit len): "2026-12-01T10:10:19.123+01:00
 * tag[pid] warn: msg", or "<4>msg" when journal_stream. Returns its length. */
size_t log_format_line(const struct log_entry *e, bool journal_stream, char *buf, size_t len);
/* log_req(LOG_LVL_INFO, req_id, peer, instance, "engine: ...", ...) */
#define log_req(lvl, req, peer_, inst, ...)                                                        \
    log_msg_ctx(lvl, &(struct log_ctx){.req_id = (req), .peer = (peer_), .instance = (inst)},      \
                __VA_ARGS__)

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_get_level() >= LOG_LVL_DEBUG)                                                      \
            log_msg(LOG_LVL_DEBUG, __VA_ARGS__);                                                   \
    } while (0)

#endif
