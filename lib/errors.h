/* errors.h: internal to lib/. The one helper behind every "field: what is wrong" refusal of the
 * layout and preset modules: format the message into the caller's buffer, return -EINVAL.
 * (The typed errors themselves are public, in kvferry.h.) Pure; any thread. */
#ifndef KVF_ERRORS_H
#define KVF_ERRORS_H

#include <stddef.h>

/* Writes the message into err (truncated to errlen, always NUL-terminated; nothing when err is
 * NULL or errlen 0) and returns -EINVAL, so a check reads `return err_inval(err, len, ...);`. */
__attribute__((format(printf, 3, 4))) int err_inval(char *err, size_t errlen, const char *fmt, ...);

#endif
