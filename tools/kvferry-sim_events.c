/* kvferry-sim_events.c: the rank's history for a checker (--events PREFIX; scripts/chaos-check).
 * One JSON object a line in PREFIX.r<rank>.jsonl, each written with one write(2) on an O_APPEND
 * fd, so a rank killed with SIGKILL leaves every line it wrote whole. Each line carries "t", the
 * wall clock in ms (CLOCK_REALTIME: the harness stamps its faults on the same clock), and "ev":
 *   start       instance, role, rank, pid, spec, first_req, requests, prompt_tokens,
 *               deadline_ms, cancel_pct, ctx_instance
 *   registered  | setup_failed (error)
 *   issue       req, rc (0, or the errno name kvf_send / kvf_recv returned)
 *   cancel      req, rc (kvf_cancel)
 *   end         req, kind (DONE, SENT, FAILED), error (FAILED), bytes, message, held (true
 *               when FAILED with KVF_EVF_HELD): every terminal event the library returned, a
 *               duplicate or a stray one included
 *   released    req, message: a held RECV's blocks may be reused (KVF_EV_RELEASED)
 *   conn        kind (DISCONNECTED, RECONNECTED), error
 *   verify      req, ok, where (the first wrong byte): every DONE request's parity check
 *   stuck       pending: no event within --event-wait-ms while requests were in flight
 *   exit        code, ok, failed, parity_bad
 * The sim owns the fd; without --events every call is a no-op. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kvferry-sim.h"

int sim_events_open(struct sim_events *e, const char *prefix, int32_t rank)
{
    e->fd = -1;
    if (!prefix)
        return 0;
    char path[4096];
    if ((size_t)snprintf(path, sizeof path, "%s.r%d.jsonl", prefix, rank) >= sizeof path)
        return -ENAMETOOLONG;
    e->fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    return e->fd < 0 ? -errno : 0;
}

void sim_events_close(struct sim_events *e)
{
    if (e->fd >= 0)
        close(e->fd);
    e->fd = -1;
}

/* Writes obj (stolen) with "t" and "ev" added, as one line. */
static void emit(struct sim_events *e, const char *ev, json_t *obj)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    json_object_set_new(obj, "t", json_real((double)ts.tv_sec * 1e3 + ts.tv_nsec / 1e6));
    json_object_set_new(obj, "ev", json_string(ev));
    char *s = json_dumps(obj, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(obj);
    if (!s)
        return;
    size_t n = strlen(s);
    s[n] = '\n'; /* replaces the NUL: written by length */
    ssize_t w = write(e->fd, s, n + 1);
    (void)w; /* a history that cannot be written shows as a missing end to the checker */
    s[n] = '\0';
    free(s);
}

void sim_events_start(struct sim_events *e, const struct sim_opts *o)
{
    if (e->fd < 0)
        return;
    json_t *j = json_pack("{s:s, s:s, s:i, s:i, s:s, s:I, s:i, s:I, s:i, s:i, s:s?}", "instance",
                          o->instance, "role", o->role, "rank", (int)o->rank, "pid", (int)getpid(),
                          "spec", o->spec, "first_req", (json_int_t)o->first_req, "requests",
                          (int)o->requests, "prompt_tokens", (json_int_t)o->prompt_tokens,
                          "deadline_ms", (int)o->deadline_ms, "cancel_pct", (int)o->cancel_pct,
                          "ctx_instance", o->ctx_instance);
    if (j)
        emit(e, "start", j);
}

void sim_events_note(struct sim_events *e, const char *ev, const char *error)
{
    if (e->fd < 0)
        return;
    json_t *j = json_object();
    if (error)
        json_object_set_new(j, "error", json_string(error));
    emit(e, ev, j);
}

void sim_events_call(struct sim_events *e, const char *ev, uint64_t req, int rc)
{
    if (e->fd < 0)
        return;
    json_t *j = json_pack("{s:I, s:s}", "req", (json_int_t)req, "rc",
                          rc ? strerrorname_np(-rc) : "0");
    if (j)
        emit(e, ev, j);
}

static const char *kind_name(int32_t kind)
{
    switch (kind) {
    case KVF_EV_SENT: return "SENT";
    case KVF_EV_DONE: return "DONE";
    case KVF_EV_FAILED: return "FAILED";
    case KVF_EV_DISCONNECTED: return "DISCONNECTED";
    case KVF_EV_RECONNECTED: return "RECONNECTED";
    case KVF_EV_RELEASED: return "RELEASED";
    default: return "UNKNOWN";
    }
}

void sim_events_event(struct sim_events *e, const struct kvf_event *ev)
{
    if (e->fd < 0)
        return;
    bool conn = ev->kind == KVF_EV_DISCONNECTED || ev->kind == KVF_EV_RECONNECTED;
    json_t *j = json_pack("{s:s}", "kind", kind_name(ev->kind));
    if (!j)
        return;
    if (!conn) {
        json_object_set_new(j, "req", json_integer((json_int_t)ev->req_id));
        json_object_set_new(j, "bytes", json_integer((json_int_t)ev->bytes));
    }
    if (ev->kind == KVF_EV_FAILED || ev->error)
        json_object_set_new(j, "error", json_string(kvf_error_to_string(ev->error)));
    if (ev->flags & KVF_EVF_HELD)
        json_object_set_new(j, "held", json_true());
    if (ev->message[0])
        json_object_set_new(j, "message", json_stringn(ev->message,
                                                       strnlen(ev->message, KVF_MESSAGE_MAX)));
    emit(e, conn ? "conn" : ev->kind == KVF_EV_RELEASED ? "released" : "end", j);
}

void sim_events_verify(struct sim_events *e, uint64_t req, bool ok, const char *where)
{
    if (e->fd < 0)
        return;
    json_t *j = json_pack("{s:I, s:b}", "req", (json_int_t)req, "ok", ok);
    if (j && !ok && where)
        json_object_set_new(j, "where", json_string(where));
    if (j)
        emit(e, "verify", j);
}

void sim_events_count(struct sim_events *e, const char *ev, const char *key, uint64_t n)
{
    if (e->fd < 0)
        return;
    json_t *j = json_pack("{s:I}", key, (json_int_t)n);
    if (j)
        emit(e, ev, j);
}

void sim_events_exit(struct sim_events *e, int code, uint64_t ok, uint64_t failed,
                     uint64_t parity_bad)
{
    if (e->fd < 0)
        return;
    json_t *j = json_pack("{s:i, s:I, s:I, s:I}", "code", code, "ok", (json_int_t)ok, "failed",
                          (json_int_t)failed, "parity_bad", (json_int_t)parity_bad);
    if (j)
        emit(e, "exit", j);
}
