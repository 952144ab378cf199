/* ucxlog.h: UCX's own messages (UCX_LOG_LEVEL, warn by default: "UCX  ERROR shmget(...)
 * failed") go through the daemon's log instead of UCX's direct write to stderr, so they reach
 * the journal with a priority and never block the thread that logs them (logsink.h). A message
 * is "ucx: <file>:<line>: <text>" at the matching level (fatal and error: error; warn: warn;
 * diag and info: info; lower: debug). UCX's fatal-error path still writes stderr itself before
 * it aborts. Call once from main, after logsink_start; UCX may then log from any thread. */
#ifndef KVF_UCXLOG_H
#define KVF_UCXLOG_H

void ucxlog_route(void);

#endif
