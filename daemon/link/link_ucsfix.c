/* link_ucsfix.c: drops stale async events before UCX's tcp connection manager sees them
 * (docs/UCX.md trap 18; UCX's own fix, "UCS/ASYNC: Filter stale missed fd events" #11458, came
 * in 2026, after every release Debian ships).
 *
 * UCX's async thread queues an event it could not dispatch while our thread held the worker's
 * async lock ("missed"), keyed by the fd; removing the fd's handler leaves it queued. When the
 * fd is closed and the listener's next connection gets the same number, the next
 * ucp_worker_progress dispatches the stale event to that fresh endpoint: an EVWRITE (a reject,
 * or an endpoint made and failed at once, had asked for it) makes it send before it was accepted,
 * and tcp_sockcm_ep.c:416 aborts the process. A stranger flooding the listen port did that.
 *
 * The filter, as UCX's: an event is passed to the connection manager's handler only if its fd's
 * handler, now, asked for it. The fd's current events are recorded here by interposing UCX's
 * public async API (ucs_async_set_event_handler, _modify_handler, _remove_handler: libuct calls
 * them through its PLT, so the executable's definitions win) and the handler
 * (uct_tcp_sa_data_handler, whose address libuct loads from its GOT). These four keep UCX's
 * names: they are UCX's symbols, not this module's API. Any thread (UCX's async thread and the
 * loop): the table is atomic. link_ucsfix_active says whether the interposition took. */
#include "link_int.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <ucs/async/async_fwd.h>

#define UCSFIX_FDS 65536 /* fds past this are not filtered */

typedef ucs_status_t (*set_fn)(ucs_async_mode_t, int, ucs_event_set_types_t, ucs_async_event_cb_t,
                               void *, ucs_async_context_t *);
typedef ucs_status_t (*modify_fn)(int, ucs_event_set_types_t);
typedef ucs_status_t (*remove_fn)(int, int);
typedef void (*handler_fn)(int, ucs_event_set_types_t, void *);

static atomic_int ucsfix_events[UCSFIX_FDS]; /* + 1: the events asked for; 0: no handler */
static atomic_ulong ucsfix_registered, ucsfix_dropped;

static set_fn next_set;
static modify_fn next_modify;
static remove_fn next_remove;
static handler_fn next_handler;
static pthread_once_t ucsfix_once = PTHREAD_ONCE_INIT;

static void *ucsfix_next(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    if (!f) { /* linked without UCX's libraries after us: nothing to forward to */
        fprintf(stderr, "kvferryd: link_ucsfix: %s not found after this binary\n", name);
        abort();
    }
    return f;
}

static void ucsfix_resolve(void)
{
    next_set = (set_fn)ucsfix_next("ucs_async_set_event_handler");
    next_modify = (modify_fn)ucsfix_next("ucs_async_modify_handler");
    next_remove = (remove_fn)ucsfix_next("ucs_async_remove_handler");
    next_handler = (handler_fn)ucsfix_next("uct_tcp_sa_data_handler");
}

static void ucsfix_record(int fd, int events)
{
    if (fd >= 0 && fd < UCSFIX_FDS)
        atomic_store_explicit(&ucsfix_events[fd], events, memory_order_relaxed);
}

ucs_status_t ucs_async_set_event_handler(ucs_async_mode_t mode, int event_fd,
                                         ucs_event_set_types_t events, ucs_async_event_cb_t cb,
                                         void *arg, ucs_async_context_t *async);
ucs_status_t ucs_async_set_event_handler(ucs_async_mode_t mode, int event_fd,
                                         ucs_event_set_types_t events, ucs_async_event_cb_t cb,
                                         void *arg, ucs_async_context_t *async)
{
    pthread_once(&ucsfix_once, ucsfix_resolve);
    ucsfix_record(event_fd, (int)events + 1); /* before: the async thread may dispatch at once */
    ucs_status_t s = next_set(mode, event_fd, events, cb, arg, async);
    if (s != UCS_OK)
        ucsfix_record(event_fd, 0);
    else
        atomic_fetch_add_explicit(&ucsfix_registered, 1, memory_order_relaxed);
    return s;
}

ucs_status_t ucs_async_modify_handler(int fd, ucs_event_set_types_t events);
ucs_status_t ucs_async_modify_handler(int fd, ucs_event_set_types_t events)
{
    pthread_once(&ucsfix_once, ucsfix_resolve);
    ucsfix_record(fd, (int)events + 1);
    return next_modify(fd, events);
}

ucs_status_t ucs_async_remove_handler(int id, int sync);
ucs_status_t ucs_async_remove_handler(int id, int sync)
{
    pthread_once(&ucsfix_once, ucsfix_resolve);
    ucsfix_record(id, 0);
    return next_remove(id, sync);
}

void uct_tcp_sa_data_handler(int fd, ucs_event_set_types_t events, void *arg);
void uct_tcp_sa_data_handler(int fd, ucs_event_set_types_t events, void *arg)
{
    pthread_once(&ucsfix_once, ucsfix_resolve);
    if (fd >= 0 && fd < UCSFIX_FDS) {
        int want = atomic_load_explicit(&ucsfix_events[fd], memory_order_relaxed);
        /* errors always pass (epoll reports them unasked); what the handler did not ask for
         * now is a stale missed event of an fd closed since */
        ucs_event_set_types_t now = want ? (ucs_event_set_types_t)(want - 1) : 0;
        events &= now | UCS_EVENT_SET_EVERR;
        if (!events) {
            atomic_fetch_add_explicit(&ucsfix_dropped, 1, memory_order_relaxed);
            return;
        }
    }
    next_handler(fd, events, arg);
}

int link_ucsfix_active(void)
{
    return atomic_load_explicit(&ucsfix_registered, memory_order_relaxed) > 0;
}

uint64_t link_ucsfix_dropped(void)
{
    return atomic_load_explicit(&ucsfix_dropped, memory_order_relaxed);
}
