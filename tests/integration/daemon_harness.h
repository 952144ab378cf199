/* daemon_harness.h: runs the real build/kvferryd for integration tests: a private temp dir with
 * a config file, a NOTIFY_SOCKET datagram socket the test reads sd_notify messages from, the
 * daemon's stderr in a log file, and a tiny blocking JSON-lines client. Bodies in
 * tests/support/daemon_harness.c. */
#ifndef KVF_DAEMON_HARNESS_H
#define KVF_DAEMON_HARNESS_H

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "testutil.h"

struct dh {
    char dir[64], cfg[100], log[100];
    char sock[TU_SUN_PATH_MAX + 1], notify_path[TU_SUN_PATH_MAX + 1];
    int notify_fd;
    pid_t pid;
    char notes[16384]; /* every sd_notify message so far, separated by "|" */
    size_t notes_len;
};

int64_t dh_now_ms(void);

void dh_write_file(const char *path, const char *text);

/* Config = sockets.dir in the temp dir + `extra` (YAML, dotted keys). */
void dh_config(struct dh *h, const char *extra);

/* Reads notify datagrams until one contains `needle` (true) or timeout_ms passes (false). */
bool dh_wait_notify(struct dh *h, const char *needle, int timeout_ms);

/* Binds <dir>/notify, the daemon's NOTIFY_SOCKET (writable by anyone: a daemon may run as
 * another user). */
void dh_notify_open(struct dh *h);

/* Starts kvferryd; `wrapper` (e.g. valgrind argv, NULL-terminated) may be NULL. Waits for
 * READY=1 and fails the test if it does not come. */
void dh_start_full(struct dh *h, const char *extra, const char *watchdog_usec,
                   const char *const *wrapper, int ready_timeout_ms);

void dh_start(struct dh *h, const char *extra);

/* Waits for the daemon to exit; returns its exit status, or -1 on timeout (then kills it). */
int dh_wait_exit(struct dh *h, int timeout_ms);

/* SIGTERM, wait, return the exit status. */
int dh_stop(struct dh *h);

void dh_cleanup(struct dh *h);

int dh_connect(const struct dh *h);

/* Reads one line (byte by byte, so nothing after it is consumed) into buf. Returns its length,
 * 0 on EOF before any byte, -ETIMEDOUT, or -errno. */
int dh_read_line(int fd, char *buf, size_t len, int timeout_ms);

/* Sends a line and returns the parsed reply (NULL on no reply). A failed send is not the end: a
 * refused connection has its one error line waiting for us. */
json_t *dh_call_fd(int fd, const char *line);

json_t *dh_call(const struct dh *h, const char *line);

/* Runs a shell command, captures stdout+stderr into out; returns the exit status. */
int dh_sh(const char *cmd, char *out, size_t len);

#endif
