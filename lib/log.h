/* log.h: leveled logging to stderr (journald picks it up, with <N> priority prefixes when
 * stderr is the journal). lib/ logs at debug only; daemon/ logs an error once, where its
 * meaning is decided, as "what failed: why". The level is global and may change at run time.
 * Single-threaded use (the daemon loop); tools may call it from one thread. */
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

void log_msg(log_level_t lvl, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_debug(...)                                                                             \
    do {                                                                                           \
        if (log_get_level() >= LOG_LVL_DEBUG)                                                      \
            log_msg(LOG_LVL_DEBUG, __VA_ARGS__);                                                   \
    } while (0)

#endif
