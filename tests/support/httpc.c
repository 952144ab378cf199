/* httpc.c: the HTTP test client (tests/integration/httpc.h). */
#include <arpa/inet.h>
#include <netinet/in.h>

#include "integration/httpc.h"

json_t *httpc_status(const struct dh *h)
{
    json_t *r = dh_call(h, "{\"id\":1,\"cmd\":\"status\"}");
    ck_assert_ptr_nonnull(r);
    json_t *m = json_object_get(
        json_object_get(json_object_get(r, "result"), "control"), "metrics_http");
    ck_assert_msg(json_is_object(m), "status has no control.metrics_http");
    json_incref(m);
    json_decref(r);
    return m;
}

int httpc_port(const struct dh *h)
{
    json_t *m = httpc_status(h);
    const char *listen = json_string_value(json_object_get(m, "listen"));
    ck_assert_ptr_nonnull(listen);
    const char *colon = strrchr(listen, ':');
    ck_assert_ptr_nonnull(colon);
    int port = atoi(colon + 1);
    json_decref(m);
    ck_assert_int_gt(port, 0);
    return port;
}

int httpc_connect(const char *from, int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    if (from) {
        struct sockaddr_in src = {.sin_family = AF_INET};
        ck_assert_int_eq(inet_pton(AF_INET, from, &src.sin_addr), 1);
        ck_assert_int_eq(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
    }
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    return fd;
}

char *httpc_roundtrip_fd(int fd, const char *req, size_t req_len, int timeout_ms)
{
    size_t off = 0;
    while (off < req_len) {
        ssize_t w = send(fd, req + off, req_len - off, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the server may close early (a refused request): read what it said */
        off += (size_t)w;
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    int64_t end = dh_now_ms() + tu_ms((unsigned)timeout_ms);
    for (;;) {
        int64_t left = end - dh_now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        if (len + 1 == cap) {
            buf = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(buf);
        }
        ssize_t r = recv(fd, buf + len, cap - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    buf[len] = '\0';
    close(fd);
    return buf;
}

char *httpc_roundtrip(const char *from, int port, const char *req)
{
    return httpc_roundtrip_fd(httpc_connect(from, port), req, strlen(req), 10000);
}

const char *httpc_body(const char *reply)
{
    const char *b = strstr(reply, "\r\n\r\n");
    ck_assert_ptr_nonnull(b);
    return b + 4;
}

bool httpc_wait_closed(int fd, int timeout_ms)
{
    int64_t end = dh_now_ms() + tu_ms((unsigned)timeout_ms);
    char c[256];
    for (;;) {
        int64_t left = end - dh_now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            return false;
        ssize_t r = recv(fd, c, sizeof c, MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return true;
    }
}
