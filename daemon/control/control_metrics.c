/* control_metrics.c: the control section's stats keys (control.c, control_stats), declared:
 * type, HELP, unit. Paths are relative to the section. */
#include "control_metrics.h"

#define C PROM_COUNTER
#define G PROM_GAUGE

const struct prom_doc control_metrics[] = {
    {"connections_accepted", C, NULL, "Control connections accepted.", "connections"},
    {"connections_refused_access", C, NULL,
     "Control connections refused: peer uid/gid not allowed.", "connections"},
    {"connections_refused_limit", C, NULL,
     "Control connections refused: control.max_conns or max_conns_per_uid reached.",
     "connections"},
    {"connections_accept_failed", C, NULL,
     "Control socket accept() failures (each pauses the listener; EMFILE: out of fds).",
     "failures"},
    {"connections_open", G, NULL, "Control connections open now.", "connections"},
    {"commands", C, NULL, "Control commands run.", "commands"},
    {"errors", C, NULL, "Control commands answered with an error.", "commands"},
    {"malformed", C, NULL, "Control lines that were not a valid request.", "lines"},
    {"lines_too_long", C, NULL, "Control lines longer than control.max_line.", "lines"},
    {"idle_timeouts", C, NULL, "Control connections closed for idleness.", "connections"},
    {"refused_not_admin", C, NULL, "Mutating control commands refused to a non-admin.",
     "commands"},
    {"access_revoked", C, NULL,
     "Control connections closed at a command: a reload took their uid's access away.",
     "connections"},
    {"http_scrapes", C, NULL, "GET /metrics answered over HTTP (metrics.listen).", "requests"},
    {"http_requests_refused", C, NULL, "HTTP requests refused: another path (404) or method "
     "(405).", "requests"},
    {"http_connections_refused", C, NULL,
     "HTTP connections answered 503: the listener's connection table was full.", "connections"},
    {"http_connections_evicted", C, NULL,
     "HTTP connections closed to admit a newer one from the same address, at its limit.",
     "connections"},
    {"http_connections_timed_out", C, NULL,
     "HTTP connections closed: no request answered within the deadline of their accept.",
     "connections"},
};
const size_t control_metrics_len = sizeof(control_metrics) / sizeof(control_metrics[0]);
