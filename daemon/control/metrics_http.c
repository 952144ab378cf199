/* metrics_http.c: GET /metrics over HTTP: the daemon's own listening socket and accept, the
 * connections handed to libmicrohttpd on the daemon's loop (metrics_http.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "daemon.h"
#include "log.h"
#include "metrics.h"
#include "metrics_http.h"

#define METRICS_HTTP_BACKLOG 32
#define METRICS_HTTP_ACCEPTS_PER_WAKEUP 32
#define METRICS_HTTP_SWEEP_MS 1000
#define METRICS_HTTP_REFUSAL_LOG_MS 10000 /* refusals logged at most this often, with a count */

struct metrics_http {
    struct daemon *d;
    struct MHD_Daemon *mhd;
    int fd;            /* owned: the listening socket */
    uv_poll_t accept;  /* the listening socket */
    uv_poll_t poll;    /* MHD's epoll fd */
    uv_timer_t tick;   /* MHD's next timeout */
    uv_timer_t sweep;  /* deadlines, MHD run, accepting resumed */
    int open_handles;
    bool accept_paused;
    struct metrics_conns conns;
    struct metrics_conn *adding; /* during MHD_add_connection: the entry its STARTED takes */
    struct sockaddr_storage sa;
    char listen[300];
    unsigned long long scrapes, refused, accept_pauses;
    uint64_t refusal_logged_ms, refusals_unlogged;
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

static struct metrics_conn *conn_of(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return i ? i->socket_context : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version, (void)upload_data, (void)con_cls;
    struct metrics_http *h = cls;
    struct metrics_conn *mc = conn_of(c);
    if (mc) /* answered from here on: not evicted (its deadline still runs) */
        metrics_conns_busy(mc, true, uv_now(&h->d->loop));
    static const char *const text = "text/plain; charset=utf-8";
    if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
        h->refused++;
        *upload_data_size = 0; /* a body is not read */
        return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, text,
                     (char *)"only GET /metrics is served here\n", MHD_RESPMEM_PERSISTENT);
    }
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

/* A request ended (replied, or the connection went): its connection's deadline restarts. */
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)con_cls, (void)toe;
    struct metrics_http *h = cls;
    struct metrics_conn *mc = conn_of(c);
    if (mc)
        metrics_conns_busy(mc, false, uv_now(&h->d->loop));
}

/* STARTED: inside MHD_add_connection, the entry being added is this connection's. CLOSED: its
 * entry goes (the fd is still open here: nothing of ours uses it after). */
static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    (void)c;
    struct metrics_http *h = cls;
    if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
        *socket_context = h->adding;
        if (h->adding)
            h->adding->handed = true;
        return;
    }
    struct metrics_conn *mc = *socket_context;
    *socket_context = NULL;
    if (!mc)
        return;
    if (mc == h->adding)
        h->adding = NULL;
    metrics_conns_remove(&h->conns, mc);
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

static void peer_name(const struct sockaddr *sa, char *buf, size_t len)
{
    const void *a = sa->sa_family == AF_INET6
                        ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
                        : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
    if (!inet_ntop(sa->sa_family, a, buf, (socklen_t)len))
        snprintf(buf, len, "?");
}

/* A 503 and the close: never left hanging in the backlog. What the client sent is read first,
 * so that the close does not reset the connection before the reply is read. */
static void refuse(struct metrics_http *h, int fd, const struct sockaddr *sa)
{
    char body[160], msg[400];
    int bl = snprintf(body, sizeof body, "kvferryd: %u /metrics connections are open (the "
                      "limit is %u, %u per address): try again\n", h->conns.n,
                      METRICS_HTTP_CONNS, METRICS_HTTP_CONNS_PER_IP);
    int ml = snprintf(msg, sizeof msg, "HTTP/1.1 503 Service Unavailable\r\nConnection: close\r\n"
                      "Content-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
                      "Content-Length: %d\r\n\r\n%s", bl, body);
    char sink[1024];
    for (int i = 0; i < 4 && recv(fd, sink, sizeof sink, MSG_DONTWAIT) > 0; i++)
        ;
    (void)!send(fd, msg, (size_t)ml, MSG_DONTWAIT | MSG_NOSIGNAL);
    shutdown(fd, SHUT_WR);
    close(fd);
    uint64_t now = uv_now(&h->d->loop);
    if (h->refusal_logged_ms && now - h->refusal_logged_ms < METRICS_HTTP_REFUSAL_LOG_MS) {
        h->refusals_unlogged++;
        return;
    }
    char who[INET6_ADDRSTRLEN];
    peer_name(sa, who, sizeof who);
    log_warn("metrics http: refused a connection from %s: %u open, the limit is %u (%u per "
             "address); %llu more refused since the last such line", who, h->conns.n,
             METRICS_HTTP_CONNS, METRICS_HTTP_CONNS_PER_IP,
             (unsigned long long)h->refusals_unlogged);
    h->refusal_logged_ms = now;
    h->refusals_unlogged = 0;
}

static void admit(struct metrics_http *h, int fd, const struct sockaddr *sa, socklen_t len)
{
    struct metrics_conn *c, *victim;
    int r = metrics_conns_admit(&h->conns, fd, sa, uv_now(&h->d->loop), &c, &victim);
    if (r < 0) {
        refuse(h, fd, sa);
        return;
    }
    if (victim) /* libmicrohttpd sees the end of its stream and closes it */
        shutdown(victim->fd, SHUT_RDWR);
    h->adding = c;
    enum MHD_Result ok = MHD_add_connection(h->mhd, fd, sa, len); /* fd is MHD's, also on error */
    if (h->adding && (ok != MHD_YES || !h->adding->handed)) {
        log_warn("metrics http: libmicrohttpd did not take a connection: %s", strerror(errno));
        metrics_conns_remove(&h->conns, h->adding);
    }
    h->adding = NULL;
}

static void on_accept(uv_poll_t *p, int status, int events)
{
    (void)status, (void)events;
    struct metrics_http *h = p->data;
    for (int i = 0; i < METRICS_HTTP_ACCEPTS_PER_WAKEUP; i++) {
        struct sockaddr_storage sa;
        socklen_t len = sizeof sa;
        int fd = accept4(h->fd, (struct sockaddr *)&sa, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            admit(h, fd, (struct sockaddr *)&sa, len);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno != EAGAIN && errno != EWOULDBLOCK) { /* EMFILE, ENFILE, ENOBUFS, ...: no spin */
            log_warn("metrics http: accept: %s: pausing for %d ms", strerror(errno),
                     METRICS_HTTP_SWEEP_MS);
            uv_poll_stop(&h->accept);
            h->accept_paused = true;
            h->accept_pauses++;
        }
        break;
    }
    drive(h);
}

/* Every second: connections past their deadline shut down, the accepting resumed after a
 * pause, and MHD run whatever its epoll fd said. */
static void on_sweep(uv_timer_t *t)
{
    struct metrics_http *h = t->data;
    struct metrics_conn *c;
    while ((c = metrics_conns_expired(&h->conns, uv_now(&h->d->loop))))
        shutdown(c->fd, SHUT_RDWR);
    if (h->accept_paused) {
        h->accept_paused = false;
        uv_poll_start(&h->accept, UV_READABLE, on_accept);
    }
    drive(h);
}

int metrics_http_parse_listen(const char *addr, struct sockaddr_storage *ret, char *err,
                              size_t errlen)
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
    if (g != 0 || !res || res->ai_addrlen > sizeof *ret) {
        snprintf(err, errlen, "metrics.listen \"%s\": host must be a numeric address: %s", addr,
                 g ? gai_strerror(g) : "no address");
        if (res)
            freeaddrinfo(res);
        return -EINVAL;
    }
    memset(ret, 0, sizeof *ret);
    memcpy(ret, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    return 0;
}

/* The listening socket at h->sa; h->listen names what it bound (port 0 resolved). */
static int listen_on(struct metrics_http *h, const char *addr, char *err, size_t errlen)
{
    bool v6 = h->sa.ss_family == AF_INET6;
    socklen_t len = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
    int one = 1;
    h->fd = socket(h->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (h->fd < 0 || setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) < 0 ||
        (v6 && setsockopt(h->fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one) < 0) ||
        bind(h->fd, (struct sockaddr *)&h->sa, len) < 0 ||
        listen(h->fd, METRICS_HTTP_BACKLOG) < 0 ||
        getsockname(h->fd, (struct sockaddr *)&h->sa, &len) < 0) {
        int e = errno;
        snprintf(err, errlen, "metrics.listen \"%s\": cannot listen there: %s", addr, strerror(e));
        return -e;
    }
    char ip[INET6_ADDRSTRLEN];
    peer_name((struct sockaddr *)&h->sa, ip, sizeof ip);
    unsigned port = ntohs(v6 ? ((struct sockaddr_in6 *)&h->sa)->sin6_port
                             : ((struct sockaddr_in *)&h->sa)->sin_port);
    snprintf(h->listen, sizeof h->listen, v6 ? "[%s]:%u" : "%s:%u", ip, port);
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
    h->fd = -1;
    int r = metrics_http_parse_listen(addr, &h->sa, err, errlen);
    if (r < 0 || (r = listen_on(h, addr, err, errlen)) < 0)
        goto err_free;
    /* no thread, no listening socket of its own: driven from the loop, fed by admit(). Its
     * own limits sit above the table's, which decides (connections going still hold a slot);
     * the deadline is the table's too. The logger option first, as libmicrohttpd wants. */
    h->mhd = MHD_start_daemon(
        MHD_USE_EPOLL | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET, 0, NULL, NULL, on_request, h,
        MHD_OPTION_EXTERNAL_LOGGER, log_mhd, NULL, MHD_OPTION_CONNECTION_LIMIT,
        (unsigned)(2 * METRICS_HTTP_CONNS + 1), MHD_OPTION_CONNECTION_MEMORY_LIMIT,
        (size_t)METRICS_HTTP_MEM, MHD_OPTION_NOTIFY_CONNECTION, on_connection, h,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, h, MHD_OPTION_END);
    const union MHD_DaemonInfo *efd =
        h->mhd ? MHD_get_daemon_info(h->mhd, MHD_DAEMON_INFO_EPOLL_FD) : NULL;
    r = -EIO;
    snprintf(err, errlen, "metrics.listen: libmicrohttpd did not start on the loop");
    if (!efd || uv_poll_init(&d->loop, &h->poll, efd->epoll_fd) < 0)
        goto err_free;
    h->poll.data = h;
    if (uv_poll_init(&d->loop, &h->accept, h->fd) < 0) {
        MHD_stop_daemon(h->mhd);
        close(h->fd);
        h->open_handles = 1;
        uv_close((uv_handle_t *)&h->poll, on_closed); /* frees h */
        return r;
    }
    err[0] = '\0';
    uv_timer_init(&d->loop, &h->tick);
    uv_timer_init(&d->loop, &h->sweep);
    h->poll.data = h->accept.data = h->tick.data = h->sweep.data = h;
    h->open_handles = 4;
    uv_poll_start(&h->poll, UV_READABLE, on_poll);
    uv_poll_start(&h->accept, UV_READABLE, on_accept);
    uv_timer_start(&h->sweep, on_sweep, METRICS_HTTP_SWEEP_MS, METRICS_HTTP_SWEEP_MS);
    drive(h);
    log_info("metrics: serving http://%s/metrics", h->listen);
    *ret = h;
    return 0;
err_free: /* no handle is on the loop yet */
    if (h->mhd)
        MHD_stop_daemon(h->mhd);
    if (h->fd >= 0)
        close(h->fd);
    free(h);
    return r;
}

void metrics_http_stop(struct metrics_http *h)
{
    if (!h)
        return;
    uv_poll_stop(&h->poll); /* off the loop's epoll before MHD closes its fd */
    uv_poll_stop(&h->accept);
    MHD_stop_daemon(h->mhd); /* closes every connection: their CLOSED notices free the table */
    h->mhd = NULL;
    metrics_conns_done(&h->conns);
    close(h->fd);
    h->fd = -1;
    uv_close((uv_handle_t *)&h->poll, on_closed);
    uv_close((uv_handle_t *)&h->accept, on_closed);
    uv_close((uv_handle_t *)&h->tick, on_closed);
    uv_close((uv_handle_t *)&h->sweep, on_closed);
}

json_t *metrics_http_status(const struct metrics_http *h)
{
    char url[320];
    snprintf(url, sizeof url, "http://%s/metrics", h->listen);
    const struct metrics_conns_counters *k = &h->conns.counters;
    return json_pack("{s:s,s:s,s:I,s:I,s:I,s:I,s:I,s:I,s:I,s:I}", "listen", h->listen, "url",
                     url, "scrapes", (json_int_t)h->scrapes, "refused", (json_int_t)h->refused,
                     "connections", (json_int_t)h->conns.n, "connections_refused",
                     (json_int_t)k->refused, "connections_evicted", (json_int_t)k->evicted,
                     "connections_timed_out", (json_int_t)k->timed_out, "connections_idle_closed",
                     (json_int_t)k->idle_closed, "accept_paused", (json_int_t)h->accept_pauses);
}

void metrics_http_stats(const struct metrics_http *h, json_t *ret)
{
    const struct metrics_conns_counters none = {0}, *k = h ? &h->conns.counters : &none;
    json_object_set_new(ret, "http_scrapes", json_integer(h ? (json_int_t)h->scrapes : 0));
    json_object_set_new(ret, "http_requests_refused",
                        json_integer(h ? (json_int_t)h->refused : 0));
    json_object_set_new(ret, "http_connections_refused", json_integer((json_int_t)k->refused));
    json_object_set_new(ret, "http_connections_evicted", json_integer((json_int_t)k->evicted));
    json_object_set_new(ret, "http_connections_timed_out",
                        json_integer((json_int_t)k->timed_out));
}
