/* log.h: leveled logging to stderr, lines dated in ISO 8601; under systemd (stderr is the
 * journal) each entry goes to journald with PRIORITY= and, from log_req, the request's fields
 * REQ_ID=, PEER= and INSTANCE= (journalctl -u kvferry REQ_ID=42). lib/ logs at debug only; daemon/
 * logs an error once, where its meaning is decided, as "what failed: why". The level is global and
 * may change at run time. Single-threaded use (the daemon loop); tools may call it from one thread.
 */
#ifndef KVF_LOG_H
#define KVF_LOG_H

typedef enum { LOG_LVL_ERROR = 0, LOG_LVL_WARN, LOG_LVL_INFO, LOG_LVL_DEBUG } log_level_t;

void log_set_level(log_level_t lvl);
log_level_t log_get_level(void);
const char *log_level_to_string(log_level_t lvl);
/* Returns 0 and writes *ret, or -EINVAL for an unknown name. */
int log_level_from_string(const char *name, log_level_t *ret);
/* Prefix each line with a tag, e.g. the program name. Borrowed: must outlive logging. */
void log_set_tag(const char *tag);

#include <stdint.h>

void log_msg(log_level_t lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* What a line is about, for the journal's fields; 0 / NULL / "": absent. Borrowed. */
struct log_ctx {
    uint64_t req_id;
    const char *peer;     /* the peer daemon's address or name */
    const char *instance; /* the context instance */
};
void log_msg_ctx(log_level_t lvl, const struct log_ctx *ctx, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Where journal entries go (tests; default /run/systemd/journal/socket). Borrowed. */
void log_set_journal_socket(const char *path);
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
