/* logsink.h: the daemon's log output, kept off the loop. log_msg (any thread) copies the entry
 * into a bounded queue (LOGSINK_MAX_BYTES) and returns; one thread of this module writes the
 * queue out: to stderr with blocking writes (a pipe nobody reads, a slow terminal: the thread
 * waits, the loop never does), or, where stderr is the journal's stream, to the journal through
 * sd_journal_sendv (MESSAGE=, PRIORITY=, SYSLOG_IDENTIFIER=, REQ_ID=, PEER=, INSTANCE=; its
 * sendmsg can block too), the stream's "<prio>" line when that fails. While the queue is full
 * new entries are dropped and counted; the thread reports the count once the output takes lines
 * again ("log: N line(s) dropped: the log output was blocked for S s").
 *
 * Ownership: the queue and the counters belong to the mutex; an entry belongs to the queue until
 * the thread pops it, then to the thread. One sink per process (log.h's sink is global):
 * logsink_start in main before anything logs much, logsink_stop last (an exit() elsewhere
 * drains through atexit, LOGSINK_EXIT_DRAIN_MS at most). */
#ifndef KVF_LOGSINK_H
#define KVF_LOGSINK_H

#include <stdbool.h>
#include <stdint.h>

#define LOGSINK_MAX_BYTES (256u << 10) /* queued entries' bytes, headers included */
#define LOGSINK_EXIT_DRAIN_MS 2000   /* at exit: how long the queue may take to be written */

/* Installs the sink (log_set_sink) and starts its thread. 0 or -errno (logging then stays
 * direct). */
int logsink_start(void);

/* Waits up to drain_ms for the queue to be written, then uninstalls the sink and joins the
 * thread. An output still blocked then keeps the thread (it dies with the process) and the
 * sink installed (later entries are queued or dropped, never written on the caller's thread;
 * later stops return at once).
 * Idempotent. */
void logsink_stop(int drain_ms);

/* Waits up to drain_ms for what is queued now to be written (any thread: a fatal path before
 * abort()); whether it was. */
bool logsink_flush(int drain_ms);

struct logsink_stats {
    uint64_t written, dropped; /* entries written out; dropped since start */
    uint64_t queued_bytes;
};
void logsink_get_stats(struct logsink_stats *ret);

#endif
