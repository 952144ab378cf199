/* check_metrics_http.c: the /metrics HTTP listener (metrics.listen, daemon/control/metrics_http.c)
 * of a real kvferryd, spoken to over real TCP sockets: GET /metrics is the scrape (valid
 * exposition, the right content type, the same families as the control command), other paths
 * and methods are refused with the right codes, the header size limit holds and the daemon keeps
 * serving, a clean start logs nothing of libmicrohttpd's, and a bad metrics.listen stops the
 * start with a message naming the key (the connection limits: check_metrics_http_limits). */
#include <arpa/inet.h>
#include <check.h>
#include <netinet/in.h>

#include "httpc.h"
#include "promcheck.h"

static char *roundtrip(int port, const char *req)
{
    return httpc_roundtrip(NULL, port, req);
}

static char *roundtrip_fd(int fd, const char *req, size_t len)
{
    return httpc_roundtrip_fd(fd, req, len, 10000);
}

static void start(struct dh *h)
{
    dh_start(h, "metrics.listen: \"127.0.0.1:0\"\n");
}

START_TEST(get_metrics_over_http_is_the_scrape)
{
    struct dh h;
    start(&h);
    int port = httpc_port(&h);
    char *r = roundtrip(port, "GET /metrics HTTP/1.1\r\nHost: kvf\r\nConnection: close\r\n\r\n");
    ck_assert_msg(!strncmp(r, "HTTP/1.1 200", 12), "reply: %.200s", r);
    ck_assert_ptr_nonnull(strcasestr(r, "\r\nContent-Type: text/plain; version=0.0.4"));
    const char *body = httpc_body(r);
    char err[256] = "";
    ck_assert_msg(pc_validate(body, true, err, sizeof err) == 0, "%s", err);
    ck_assert_ptr_nonnull(strstr(body, "# TYPE kvferry_control_commands_total counter\n"));
    ck_assert_ptr_nonnull(strstr(body, "# TYPE kvferry_workers_transfers_end_to_end_seconds "
                                       "histogram\n"));
    ck_assert_ptr_nonnull(strstr(body, "\nkvferry_metrics_undeclared 0\n"));
    free(r);
    /* the control command's families are the same (values move: uptime, commands) */
    json_t *c = dh_call(&h, "{\"id\":2,\"cmd\":\"metrics\"}");
    ck_assert_ptr_nonnull(c);
    const char *text = json_string_value(json_object_get(json_object_get(c, "result"), "text"));
    ck_assert_ptr_nonnull(text);
    r = roundtrip(port, "GET /metrics HTTP/1.0\r\n\r\n");
    body = httpc_body(r);
    size_t types_http = 0, types_ctl = 0;
    for (const char *p = body; (p = strstr(p, "# TYPE ")); p++)
        types_http++;
    for (const char *p = text; (p = strstr(p, "# TYPE ")); p++) {
        types_ctl++;
        const char *nl = strchr(p, '\n');
        char line[256];
        snprintf(line, sizeof line, "%.*s", (int)(nl - p + 1), p);
        ck_assert_msg(strstr(body, line), "HTTP scrape lacks %s", line);
    }
    ck_assert_uint_eq(types_http, types_ctl);
    json_decref(c);
    free(r);
    c = dh_call(&h, "{\"id\":3,\"cmd\":\"status\"}");
    json_t *st = json_object_get(json_object_get(json_object_get(c, "result"), "control"),
                                 "metrics_http");
    ck_assert_int_eq(json_integer_value(json_object_get(st, "scrapes")), 2);
    json_decref(c);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(other_paths_and_methods_are_refused_and_serving_goes_on)
{
    struct dh h;
    start(&h);
    int port = httpc_port(&h);
    char *r = roundtrip(port, "GET / HTTP/1.1\r\nHost: kvf\r\nConnection: close\r\n\r\n");
    ck_assert_msg(!strncmp(r, "HTTP/1.1 404", 12), "reply: %.200s", r);
    ck_assert_ptr_nonnull(strstr(r, "/metrics only"));
    free(r);
    r = roundtrip(port, "POST /metrics HTTP/1.1\r\nHost: kvf\r\nContent-Length: 3\r\n"
                        "Connection: close\r\n\r\nabc");
    ck_assert_msg(!strncmp(r, "HTTP/1.1 405", 12), "reply: %.200s", r);
    ck_assert_ptr_nonnull(strcasestr(r, "\r\nAllow: GET"));
    free(r);
    /* headers beyond METRICS_HTTP_MEM (64 KiB): refused, not buffered without bound */
    size_t big = 200 * 1024;
    char *req = malloc(big + 128);
    ck_assert_ptr_nonnull(req);
    int n = snprintf(req, 128, "GET /metrics HTTP/1.1\r\nHost: kvf\r\nX-Big: ");
    memset(req + n, 'a', big);
    memcpy(req + n + big, "\r\n\r\n", 5);
    r = roundtrip_fd(httpc_connect(NULL, port), req, strlen(req));
    ck_assert_msg(strncmp(r, "HTTP/1.1 200", 12) != 0, "a 200 KiB header was served: %.80s", r);
    free(r);
    free(req);
    /* garbage is not HTTP: refused */
    r = roundtrip(port, "\x01\x02 nonsense\r\n\r\n");
    ck_assert(strncmp(r, "HTTP/1.1 200", 12) != 0);
    free(r);
    r = roundtrip(port, "GET /metrics HTTP/1.1\r\nHost: kvf\r\nConnection: close\r\n\r\n");
    ck_assert_msg(!strncmp(r, "HTTP/1.1 200", 12), "after refusals: %.200s", r);
    free(r);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

/* libmicrohttpd has nothing to say at a clean start (it warned that its logger option was not
 * the first one); an inet6 listener serves too. */
START_TEST(a_clean_start_logs_no_warning_of_the_listener)
{
    struct dh h;
    dh_start(&h, "metrics.listen: \"[::1]:0\"\n");
    int port = httpc_port(&h);
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_ge(fd, 0);
    struct sockaddr_in6 sa = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                              .sin6_addr = IN6ADDR_LOOPBACK_INIT};
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof sa), 0);
    char *r = roundtrip_fd(fd, HTTPC_GET, strlen(HTTPC_GET));
    ck_assert_msg(!strncmp(r, "HTTP/1.1 200", 12), "reply: %.200s", r);
    free(r);
    ck_assert_int_eq(dh_stop(&h), 0);
    char cmd[256], out[16384];
    dh_sh(tu_fmt(cmd, sizeof cmd, "cat %s", h.log), out, sizeof out);
    ck_assert_msg(strstr(out, "metrics: serving http://[::1]:"), "%s", out);
    ck_assert_msg(!strstr(out, "metrics http:"), "libmicrohttpd spoke at a clean start:\n%s", out);
    dh_cleanup(&h);
}
END_TEST

START_TEST(bad_listen_address_stops_the_start_naming_the_key)
{
    static const char *const bad[] = {"nonsense", "127.0.0.1:99999", "localhost:9464",
                                      "127.0.0.1:"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct dh h;
        memset(&h, 0, sizeof h);
        tu_tmpdir(h.dir, sizeof h.dir);
        tu_fmt(h.cfg, sizeof h.cfg, "%s/kvferry.yaml", h.dir);
        char extra[128], cmd[512], bin[256], out[4096];
        tu_fmt(extra, sizeof extra, "metrics.listen: \"%s\"\n", bad[i]);
        dh_config(&h, extra);
        tu_bin("kvferryd", bin, sizeof bin);
        int rc = dh_sh(tu_fmt(cmd, sizeof cmd, "timeout 30 %s --config %s 2>&1", bin, h.cfg), out,
                       sizeof out);
        ck_assert_msg(rc != 0 && rc != 124, "%s: exit %d", bad[i], rc);
        ck_assert_msg(strstr(out, "metrics.listen"), "%s: no mention of metrics.listen: %s",
                      bad[i], out);
        dh_cleanup(&h);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics_http");
    TCase *tc = tcase_create("http");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, get_metrics_over_http_is_the_scrape);
    tcase_add_test(tc, other_paths_and_methods_are_refused_and_serving_goes_on);
    tcase_add_test(tc, a_clean_start_logs_no_warning_of_the_listener);
    tcase_add_test(tc, bad_listen_address_stops_the_start_naming_the_key);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
