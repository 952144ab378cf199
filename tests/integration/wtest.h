/* wtest.h: helpers for the worker integration suites (bodies in tests/support/wtest.c): a real
 * kvferryd in a private temp dir with a short-deadline config, real kvferry-sim processes, and
 * the control socket. */
#ifndef KVF_WTEST_H
#define KVF_WTEST_H

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "jlist.h"
#include "testutil.h"

struct wenv {
    char dir[64];
    char cfg[128], wsock[TU_SUN_PATH_MAX + 1], csock[TU_SUN_PATH_MAX + 1];
    pid_t daemon;
};

int64_t wt_now_ms(void);

/* 1 when the daemon's loop answers a control command: it runs only after READY=1, so every
 * socket is listening and SIGTERM drains. Probing the worker socket itself would take connection
 * slots (workers.max_conns) for a moment. */
int wt_answers(const char *path);

/* Starts (or restarts, same dir) kvferryd; waits until it answers on its control socket. */
void wt_daemon_start(struct wenv *e);

void wt_start(struct wenv *e, const char *extra_yaml);

/* Exit status of a child, waiting at most timeout_ms (then SIGKILL and -1). */
int wt_wait(pid_t p, int timeout_ms);

void wt_stop(struct wenv *e);

/* Starts kvferry-sim with the given arguments (NULL-terminated) plus --socket; output goes to
 * <dir>/<log>. */
pid_t wt_sim(struct wenv *e, const char *log, ...);

/* The whole content of <dir>/<log> (malloc'd). */
char *wt_log(struct wenv *e, const char *log);

/* One control command; returns its "result" (new reference). */
json_t *wt_ctl(struct wenv *e, const char *cmd);

/* Length of the array result[key] of a control command. */
size_t wt_ctl_count(struct wenv *e, const char *cmd, const char *key);

/* stats.workers.transfers.<key>, or -1. */
long long wt_xfer_stat(struct wenv *e, const char *key);

/* 1 when result[key] of a control command lists an object whose field f1 reads v1 and, when
 * f2 is not NULL, whose field f2 reads v2 (tj_lists). */
int wt_listed(struct wenv *e, const char *cmd, const char *key, const char *f1, const char *v1,
              const char *f2, const char *v2);

/* Asks done(e, arg) every 10 ms until it holds or timeout_ms (scaled by tu_ms) pass; returns
 * whether it held. The one polling loop of the tests that wait on a daemon's control answers. */
bool wt_until(struct wenv *e, int timeout_ms, bool (*done)(struct wenv *e, void *arg), void *arg);

/* Waits (asking every 10 ms) until wt_listed holds; fails the test after timeout_ms. */
void wt_until_listed(struct wenv *e, int timeout_ms, const char *cmd, const char *key,
                     const char *f1, const char *v1, const char *f2, const char *v2);

#endif
