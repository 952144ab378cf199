/* require.h: invariants checked at run time (docs/DESIGN.md §5b). KVF_REQUIRE(cond, fmt, ...)
 * evaluates cond once and yields it. When it is false the failure is logged as an error
 * ("invariant failed at file:line (cond): message") and then, where invariants are fatal, the
 * process aborts: in builds with -DKVF_DEBUG, and wherever KVF_FATAL_INVARIANTS=1 is in the
 * environment (make check sets it for every test and the daemons they start). Elsewhere
 * (release) it returns false and the caller fails the one request it was working on:
 *     if (!KVF_REQUIRE(w->idx < rx->n_w, "writer %u of %u", w->idx, rx->n_w))
 *         return rx_fail(...);
 * Any thread (it only logs). */
#ifndef KVF_REQUIRE_H
#define KVF_REQUIRE_H

#include <stdbool.h>

bool kvf_require_failed(const char *file, int line, const char *cond, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Whether a failed invariant aborts here (KVF_DEBUG build or KVF_FATAL_INVARIANTS=1). */
bool kvf_require_fatal(void);

#define KVF_REQUIRE(cond, ...) \
    ((cond) ? true : kvf_require_failed(__FILE__, __LINE__, #cond, __VA_ARGS__))

#endif
