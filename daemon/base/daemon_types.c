/* daemon_types.c: the plain functions of daemon.h's types: the state's name, the last reload as
 * JSON. They need nothing of the daemon's life, so every module may call them. */
#include "daemon.h"

const char *daemon_state_to_string(daemon_state_t s)
{
    switch (s) {
    case DAEMON_STARTING:
        return "starting";
    case DAEMON_RUNNING:
        return "running";
    case DAEMON_DRAINING:
        return "draining";
    case DAEMON_STOPPED:
        return "stopped";
    }
    return "unknown";
}

json_t *daemon_reload_json(const struct daemon_reload *r)
{
    if (!r->attempted)
        return json_pack("{s:b}", "attempted", 0);
    json_t *o =
        json_pack("{s:b,s:b,s:I}", "attempted", 1, "ok", r->ok, "time_s", (json_int_t)r->time_s);
    if (!o)
        return NULL;
    if (!r->ok)
        json_object_set_new(o, "error", json_string(r->error));
    if (r->applied)
        json_object_set(o, "applied", r->applied);
    if (r->restart_needed)
        json_object_set(o, "restart_needed", r->restart_needed);
    return o;
}
