/* metrics_http.h: the optional HTTP listener for Prometheus (metrics.listen, default off):
 * GET /metrics answers metrics_render's text (the same as `kvferryctl metrics`); any other path
 * is 404, any other method 405. The daemon owns the listening socket and accepts on its loop;
 * each connection the admission table (metrics_conns.h) lets in is handed to libmicrohttpd,
 * which runs without threads of its own: its epoll fd is watched by a uv_poll on the loop, its
 * timeouts by a uv_timer, and a one-second sweep runs it whatever its epoll said (and closes
 * connections past their deadline), so every request is answered on the loop thread (the only
 * one that reads the daemon's state) and no state of libmicrohttpd's can stop the accepting.
 * Limits: metrics.listen is "host:port" (numeric host, IPv4 or [IPv6], port 0 picks one); the
 * connection limits and deadline of metrics_conns.h (a connection over them is answered 503
 * and closed: never left in the backlog); request headers beyond METRICS_HTTP_MEM bytes are
 * refused by libmicrohttpd; accept() failing for want of descriptors pauses the accepting for
 * a sweep. Owned by struct control; loop thread only. */
#ifndef KVF_METRICS_HTTP_H
#define KVF_METRICS_HTTP_H

#include <jansson.h>
#include <stddef.h>
#include <sys/socket.h>

#include "metrics_conns.h"

#define METRICS_HTTP_MEM (64 * 1024)

struct daemon;
struct metrics_http;

/* Parses metrics.listen ("host:port", "[v6]:port", numeric) into *ret. On error writes why
 * (naming metrics.listen) into err and returns -EINVAL. The start refuses what this refuses,
 * and so does --check-config (daemon_check.h). */
int metrics_http_parse_listen(const char *addr, struct sockaddr_storage *ret, char *err,
                              size_t errlen);
/* Starts serving on addr. On error writes why (naming metrics.listen) into err and returns
 * -errno; *ret is then NULL. */
int metrics_http_start(struct daemon *d, const char *addr, struct metrics_http **ret, char *err,
                       size_t errlen);
/* Stops listening, closes every connection; the memory goes when the loop has closed the
 * handles. NULL is accepted. */
void metrics_http_stop(struct metrics_http *h);
/* {"listen": "127.0.0.1:9464", "url": "http://.../metrics", "scrapes": N, "refused": N (requests
 * refused: 404, 405), "connections": N (open), "connections_refused": N (503: the table was
 * full), "connections_evicted": N, "connections_timed_out": N (no request answered by the
 * deadline), "connections_idle_closed": N (kept alive past it), "accept_paused": N}. */
json_t *metrics_http_status(const struct metrics_http *h);
/* The counters into the control section of stats as http_*: scrapes, requests_refused,
 * connections_refused, connections_evicted, connections_timed_out (0 when h is NULL: no
 * listener), so that Prometheus can alert on refusals. */
void metrics_http_stats(const struct metrics_http *h, json_t *ret);

#endif
