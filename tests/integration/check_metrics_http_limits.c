/* check_metrics_http_limits.c: the /metrics listener (daemon/control/metrics_http.c) of a real
 * kvferryd under connections that hold it: a full table refuses the next connection with a 503
 * (counted in status) instead of leaving it hung, and serves again as soon as the holders go;
 * connections that never finish a request are closed at their deadline however slowly they
 * trickle bytes; a scraper sharing an address with eight slow-header connections is served. */
#include <check.h>

#include "httpc.h"

#define CONNS 16       /* METRICS_HTTP_CONNS */
#define CONNS_PER_IP 8 /* METRICS_HTTP_CONNS_PER_IP */
#define DEADLINE_MS 10000 /* METRICS_HTTP_IDLE_S */

static void start(struct dh *h)
{
    dh_start(h, "metrics.listen: \"127.0.0.1:0\"\n");
}

static json_int_t status_count(const struct dh *h, const char *key)
{
    json_t *m = httpc_status(h);
    json_t *v = json_object_get(m, key);
    ck_assert_msg(json_is_integer(v), "control.metrics_http has no %s", key);
    json_int_t n = json_integer_value(v);
    json_decref(m);
    return n;
}

/* Scrapes until one is served or timeout_ms pass: a 503 (the table still full while the daemon
 * hears the closes) is answered at once, so this waits on replies, not on time. */
static bool scrape_served(int port, const char *from, int timeout_ms)
{
    int64_t end = dh_now_ms() + tu_ms((unsigned)timeout_ms);
    do {
        char *r = httpc_roundtrip_fd(httpc_connect(from, port), HTTPC_GET, strlen(HTTPC_GET),
                                     2000);
        bool ok = !strncmp(r, "HTTP/1.1 200", 12);
        free(r);
        if (ok)
            return true;
    } while (dh_now_ms() < end);
    return false;
}

/* CONNS connections held open, CONNS_PER_IP from each of two addresses, each with `partial`
 * sent (NULL: nothing). */
static void hold(int port, int *fds, const char *partial)
{
    for (int i = 0; i < CONNS; i++) {
        fds[i] = httpc_connect(i < CONNS_PER_IP ? "127.0.0.2" : "127.0.0.3", port);
        if (partial)
            ck_assert_int_eq(send(fds[i], partial, strlen(partial), MSG_NOSIGNAL),
                             (ssize_t)strlen(partial));
    }
}

START_TEST(a_full_table_refuses_the_next_connection_and_recovers_when_the_holders_go)
{
    struct dh h;
    start(&h);
    int port = httpc_port(&h);
    int fds[CONNS];
    hold(port, fds, NULL);
    ck_assert(!scrape_served(port, "127.0.0.1", 0)); /* full: not served... */
    /* ...but answered at once, before it says anything: not left in the backlog */
    char *r = httpc_roundtrip_fd(httpc_connect("127.0.0.4", port), "", 0, 10000);
    ck_assert_msg(!strncmp(r, "HTTP/1.1 503", 12), "the 17th connection got: %.120s", r);
    free(r);
    ck_assert_int_ge(status_count(&h, "connections_refused"), 2);
    ck_assert_int_eq(status_count(&h, "connections"), CONNS);
    json_t *st = dh_call(&h, "{\"id\":2,\"cmd\":\"stats\"}"); /* and for Prometheus */
    json_t *ctl = json_object_get(json_object_get(st, "result"), "control");
    ck_assert_int_ge(json_integer_value(json_object_get(ctl, "http_connections_refused")), 2);
    json_decref(st);
    for (int i = 0; i < CONNS; i++)
        close(fds[i]);
    ck_assert_msg(scrape_served(port, "127.0.0.1", 5000), "no scrape served after the holders "
                  "closed");
    ck_assert_msg(scrape_served(port, "127.0.0.4", 5000), "the refused address is not served");
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(connections_that_trickle_a_request_are_closed_at_its_deadline)
{
    struct dh h;
    start(&h);
    int port = httpc_port(&h);
    int fds[CONNS];
    hold(port, fds, "GET /metrics HTTP/1.1\r\n");
    /* a header byte every 500 ms from each: never idle, never done */
    int64_t t0 = dh_now_ms(), end = t0 + tu_ms(DEADLINE_MS * 2);
    int open_left = CONNS;
    while (open_left > 0 && dh_now_ms() < end) {
        for (int i = 0; i < CONNS; i++)
            if (fds[i] >= 0 && send(fds[i], "X", 1, MSG_NOSIGNAL) != 1) {
                close(fds[i]);
                fds[i] = -1;
                open_left--;
            }
        for (int i = 0; i < CONNS; i++)
            if (fds[i] >= 0 && httpc_wait_closed(fds[i], 500 / CONNS)) {
                close(fds[i]);
                fds[i] = -1;
                open_left--;
            }
    }
    int64_t took = dh_now_ms() - t0;
    ck_assert_msg(open_left == 0, "%d trickling connections still open after %lld ms", open_left,
                  (long long)took);
    ck_assert_int_ge(took, DEADLINE_MS - 1000);
    ck_assert_int_eq(status_count(&h, "connections_timed_out"), CONNS);
    ck_assert(scrape_served(port, "127.0.0.1", 5000));
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

static int slow_header(int port)
{
    static const char part[] = "GET /metrics HTTP/1.1\r\nX-Slow: a";
    int fd = httpc_connect("127.0.0.5", port);
    ck_assert_int_eq(send(fd, part, sizeof part - 1, MSG_NOSIGNAL), (ssize_t)sizeof part - 1);
    return fd;
}

START_TEST(a_scraper_sharing_an_address_with_slow_header_connections_is_served)
{
    struct dh h;
    start(&h);
    int port = httpc_port(&h);
    int fds[CONNS_PER_IP + 2];
    for (int i = 0; i < CONNS_PER_IP; i++)
        fds[i] = slow_header(port);
    /* each round the address holds its limit of slow connections: a scrape from it takes the
     * place of the oldest, and only that one */
    for (int round = 0; round < 3; round++) {
        if (round > 0)
            fds[CONNS_PER_IP + round - 1] = slow_header(port);
        char *r = httpc_roundtrip("127.0.0.5", port, HTTPC_GET);
        ck_assert_msg(!strncmp(r, "HTTP/1.1 200", 12), "round %d: a scrape from the slow "
                      "connections' address got: %.120s", round, r);
        free(r);
        ck_assert_msg(httpc_wait_closed(fds[round], 5000), "round %d: the oldest stays", round);
        for (int i = round + 1; i < CONNS_PER_IP + round; i++)
            ck_assert_msg(!httpc_wait_closed(fds[i], 0), "round %d: slow connection %d closed",
                          round, i);
    }
    ck_assert_int_eq(status_count(&h, "connections_evicted"), 3);
    ck_assert_int_eq(status_count(&h, "connections_refused"), 0);
    for (int i = 0; i < CONNS_PER_IP + 2; i++)
        close(fds[i]);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics_http_limits");
    TCase *tc = tcase_create("limits");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_full_table_refuses_the_next_connection_and_recovers_when_the_holders_go);
    tcase_add_test(tc, connections_that_trickle_a_request_are_closed_at_its_deadline);
    tcase_add_test(tc, a_scraper_sharing_an_address_with_slow_header_connections_is_served);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
