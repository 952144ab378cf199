/* kvferryctl.h: helpers of kvferryctl (the operator's client of kvferryd's control socket):
 * kvferryctl_client.c speaks the JSON-lines protocol, kvferryctl_print.c prints replies for
 * people. Single-threaded tool. */
#ifndef KVF_KVFERRYCTL_H
#define KVF_KVFERRYCTL_H

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>

#define CTL_REPLY_MAX (64u * 1024 * 1024) /* longest reply line we read */

/* Connects to the control socket at path. Returns an fd or -errno. */
int ctl_client_connect(const char *path);
/* Sends {"id":1,"cmd":cmd,"args":args} and waits up to timeout_ms for the reply with id 1.
 * args is borrowed and may be NULL. On success stores the reply object (new reference) in *ret
 * and returns 0; -ETIMEDOUT, -ECONNRESET (closed without a reply), -EBADMSG (not JSON) or
 * -errno otherwise. */
int ctl_client_call(int fd, const char *cmd, json_t *args, int timeout_ms, json_t **ret);

/* kvferryctl_why.c: explains a failed connect (err: errno) on f: what is wrong with path, and
 * the fix (missing directory, a directory or file instead of a socket, mode and group, stale). */
void ctl_explain_connect(FILE *f, const char *path, int err);

/* Prints a result for people: scalars as aligned "key  value" lines, nested objects as
 * sections, arrays of objects as tables, numbers in human units; `status` and `workers` short
 * (100 columns) unless `all` (-l). */
void ctl_print_human(FILE *f, const char *cmd, json_t *result, bool all);
/* `kvferryctl help`, offline (kvferryctl_help.c): the daemon's commands from lib/ctl_help.c. */
int ctl_help_main(int argc, char **argv);
/* The live views (kvferryctl_watch.c): `transfers` (once, or --watch) and `top`, 100 columns
 * wide. Returns the exit code (0, 1 the daemon refused, 3 unreachable). */
struct ctl_live {
    bool watch;        /* transfers: refresh */
    double interval_s; /* between frames */
    double window_s;   /* top: rates over the samples of the last window_s seconds */
    long count;        /* frames; 0: until interrupted (q on a terminal) */
};
void ctl_print_transfers(FILE *f, json_t *result);
int ctl_watch_main(const char *sock, const char *view, const struct ctl_live *o, double timeout_s,
                   bool as_json);
/* The live views' terminal (kvferryctl_screen.c, ncurses): start (-1: no usable terminal),
 * draw a frame (text lines, clipped to the window; kept and redrawn on a resize), wait up to s
 * seconds (true: the user pressed q), stop (the terminal as it was). */
int ctl_screen_start(void);
void ctl_screen_draw(const char *text, size_t len);
bool ctl_screen_wait(double s);
void ctl_screen_stop(void);
/* The short forms (kvferryctl_status.c). */
void ctl_print_status(FILE *f, json_t *status);
void ctl_print_workers(FILE *f, json_t *workers);

#endif
