/* metrics_http.h: the optional HTTP listener for Prometheus (metrics.listen, default off):
 * GET /metrics answers metrics_render's text (the same as `kvferryctl metrics`); any other path
 * is 404, any other method 405. libmicrohttpd runs without threads of its own: its epoll fd is
 * watched by a uv_poll on the daemon's loop and its timeouts by a uv_timer, so every request is
 * answered on the loop thread (the only one that reads the daemon's state).
 * Limits: metrics.listen is "host:port" (numeric host, IPv4 or [IPv6], port 0 picks one), at most
 * METRICS_HTTP_CONNS connections (METRICS_HTTP_CONNS_PER_IP per address), a connection idle for
 * METRICS_HTTP_IDLE_S seconds is closed, request headers beyond METRICS_HTTP_MEM bytes are refused
 * by libmicrohttpd. Owned by struct control; loop thread only. */
#ifndef KVF_METRICS_HTTP_H
#define KVF_METRICS_HTTP_H

#include <jansson.h>
#include <stddef.h>

#define METRICS_HTTP_CONNS 16
#define METRICS_HTTP_CONNS_PER_IP 8
#define METRICS_HTTP_IDLE_S 10
#define METRICS_HTTP_MEM (64 * 1024)

struct daemon;
struct metrics_http;

/* Starts serving on addr. On error writes why (naming metrics.listen) into err and returns
 * -errno; *ret is then NULL. */
int metrics_http_start(struct daemon *d, const char *addr, struct metrics_http **ret, char *err,
                       size_t errlen);
/* Stops listening, closes every connection; the memory goes when the loop has closed the
 * handles. NULL is accepted. */
void metrics_http_stop(struct metrics_http *h);
/* {"listen": "127.0.0.1:9464", "url": "http://.../metrics", "scrapes": N, "refused": N}. */
json_t *metrics_http_status(const struct metrics_http *h);

#endif
