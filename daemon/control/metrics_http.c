/* metrics_http.c: GET /metrics over HTTP with libmicrohttpd on the daemon's loop
 * (metrics_http.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "metrics_http.h"

struct metrics_http {
    struct daemon *d;
    struct MHD_Daemon *mhd;
    uv_poll_t poll;  /* MHD's epoll fd */
    uv_timer_t tick; /* MHD's next timeout */
    int open_handles;
    struct sockaddr_storage sa;
    char listen[300];
    unsigned long long scrapes, refused;
};

static void log_mhd(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n && msg[n - 1] == '\n')
        msg[--n] = '\0';
    log_warn("metrics http: %s", msg);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned code, const char *type,
                             char *body, enum MHD_ResponseMemoryMode mode)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(body), body, mode);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", type);
    if (code == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(r, "Allow", "GET, HEAD");
    enum MHD_Result q = MHD_queue_response(c, code, r);
    MHD_destroy_response(r);
    return q;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version, (void)upload_data;
    struct metrics_http *h = cls;
    static const char *const text = "text/plain; charset=utf-8";
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        h->refused++;
        *upload_data_size = 0; /* a body is not read */
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text,
                     (char *)"only GET /metrics is served here\n", MHD_RESPMEM_PERSISTENT);
    }
    (void)con_cls;
    if (strcmp(url, "/metrics") != 0) {
        h->refused++;
        return reply(c, MHD_HTTP_NOT_FOUND, text,
                     (char *)"kvferryd serves Prometheus text at /metrics only\n",
                     MHD_RESPMEM_PERSISTENT);
    }
    char *body = NULL;
    if (metrics_render(h->d, &body, NULL) < 0)
        return reply(c, MHD_HTTP_INTERNAL_SERVER_ERROR, text,
                     (char *)"rendering metrics failed (out of memory)\n",
                     MHD_RESPMEM_PERSISTENT);
    h->scrapes++;
    return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", body,
                 MHD_RESPMEM_MUST_FREE);
}

static void on_tick(uv_timer_t *t);

/* Runs what MHD has ready, then arms the timer for its next timeout (0: work is pending). */
static void drive(struct metrics_http *h)
{
    MHD_run(h->mhd);
    MHD_UNSIGNED_LONG_LONG ms = 0;
    if (MHD_get_timeout(h->mhd, &ms) == MHD_YES)
        uv_timer_start(&h->tick, on_tick, ms, 0);
    else
        uv_timer_stop(&h->tick);
}

static void on_tick(uv_timer_t *t)
{
    drive(t->data);
}

static void on_poll(uv_poll_t *p, int status, int events)
{
    (void)status, (void)events;
    drive(p->data);
}

/* "host:port", "[v6]:port": a numeric address into h->sa. */
static int parse_listen(struct metrics_http *h, const char *addr, char *err, size_t errlen)
{
    char host[256];
    const char *colon = strrchr(addr, ':');
    size_t hl = colon ? (size_t)(colon - addr) : 0;
    if (!colon || hl == 0 || hl >= sizeof host || !colon[1]) {
        snprintf(err, errlen, "metrics.listen \"%s\": expected host:port, e.g. 127.0.0.1:9464",
                 addr);
        return -EINVAL;
    }
    memcpy(host, addr, hl);
    host[hl] = '\0';
    if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
        memmove(host, host + 1, hl - 2);
        host[hl - 2] = '\0';
    }
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535) {
        snprintf(err, errlen, "metrics.listen \"%s\": port must be 0..65535", addr);
        return -EINVAL;
    }
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_NUMERICSERV | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM},
                    *res = NULL;
    int g = getaddrinfo(host, colon + 1, &hints, &res);
    if (g != 0 || !res || res->ai_addrlen > sizeof h->sa) {
        snprintf(err, errlen, "metrics.listen \"%s\": host must be a numeric address: %s", addr,
                 g ? gai_strerror(g) : "no address");
        if (res)
            freeaddrinfo(res);
        return -EINVAL;
    }
    memcpy(&h->sa, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

static void on_closed(uv_handle_t *hd)
{
    struct metrics_http *h = hd->data;
    if (--h->open_handles == 0)
        free(h);
}

int metrics_http_start(struct daemon *d, const char *addr, struct metrics_http **ret, char *err,
                       size_t errlen)
{
    *ret = NULL;
    struct metrics_http *h = calloc(1, sizeof *h);
    if (!h) {
        snprintf(err, errlen, "metrics.listen: out of memory");
        return -ENOMEM;
    }
    h->d = d;
    int r = parse_listen(h, addr, err, errlen);
    if (r < 0) {
        free(h);
        return r;
    }
    unsigned flags = MHD_USE_EPOLL | MHD_USE_ERROR_LOG; /* no thread: driven from the loop */
    if (h->sa.ss_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    h->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, h, MHD_OPTION_SOCK_ADDR,
                              (struct sockaddr *)&h->sa, MHD_OPTION_CONNECTION_LIMIT,
                              (unsigned)METRICS_HTTP_CONNS, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
                              (unsigned)METRICS_HTTP_CONNS_PER_IP, MHD_OPTION_CONNECTION_TIMEOUT,
                              (unsigned)METRICS_HTTP_IDLE_S, MHD_OPTION_CONNECTION_MEMORY_LIMIT,
                              (size_t)METRICS_HTTP_MEM, MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL,
                              MHD_OPTION_END);
    if (!h->mhd) {
        snprintf(err, errlen, "metrics.listen \"%s\": cannot listen there (address in use, or "
                 "not an address of this host)", addr);
        free(h);
        return -EADDRNOTAVAIL;
    }
    const union MHD_DaemonInfo *fd = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD);
    const union MHD_DaemonInfo *port = MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_BIND_PORT);
    char ip[INET6_ADDRSTRLEN] = "";
    if (h->sa.ss_family == AF_INET6)
        inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&h->sa)->sin6_addr, ip, sizeof ip);
    else
        inet_ntop(AF_INET, &((struct sockaddr_in *)&h->sa)->sin_addr, ip, sizeof ip);
    snprintf(h->listen, sizeof h->listen, h->sa.ss_family == AF_INET6 ? "[%s]:%u" : "%s:%u", ip,
             port ? (unsigned)port->port : 0u);
    if (!fd || uv_poll_init(&d->loop, &h->poll, fd->epoll_fd) < 0) {
        snprintf(err, errlen, "metrics.listen: cannot watch libmicrohttpd's epoll fd");
        MHD_stop_daemon(h->mhd);
        free(h);
        return -EIO;
    }
    uv_timer_init(&d->loop, &h->tick);
    h->poll.data = h->tick.data = h;
    h->open_handles = 2;
    uv_poll_start(&h->poll, UV_READABLE, on_poll);
    drive(h);
    log_info("metrics: serving http://%s/metrics", h->listen);
    *ret = h;
    return 0;
}

void metrics_http_stop(struct metrics_http *h)
{
    if (!h)
        return;
    uv_poll_stop(&h->poll); /* off the loop's epoll before MHD closes its fd */
    MHD_stop_daemon(h->mhd);
    h->mhd = NULL;
    uv_close((uv_handle_t *)&h->poll, on_closed);
    uv_close((uv_handle_t *)&h->tick, on_closed);
}

json_t *metrics_http_status(const struct metrics_http *h)
{
    char url[320];
    snprintf(url, sizeof url, "http://%s/metrics", h->listen);
    return json_pack("{s:s,s:s,s:I,s:I}", "listen", h->listen, "url", url, "scrapes",
                     (json_int_t)h->scrapes, "refused", (json_int_t)h->refused);
}
