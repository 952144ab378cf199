/* check_worker_events.c: events never cost a connection (issue 13, item 1). A real kvferryd and
 * a real libkvferry client: a burst of 4096 terminal events reaches a worker that polls late, a
 * storm of 4000 cancels ends every request CANCELLED (the library reads while it writes), and
 * only a worker that truly stops reading is disconnected, after workers.read_timeout, told why. */
#include "wtest.h"
#include "wraw.h"

static json_int_t status_int(struct wenv *e, const char *key)
{
    return wr_workers_int(e, "status", key);
}

static json_int_t stat_int(struct wenv *e, const char *key)
{
    return wr_workers_int(e, "stats", key);
}

/* Waits (control socket only: the worker reads nothing meanwhile) until status key == want. */
static void wait_status(struct wenv *e, const char *key, json_int_t want, int timeout_ms)
{
    int64_t end = wt_now_ms() + timeout_ms;
    json_int_t v;
    while ((v = status_int(e, key)) != want && wt_now_ms() < end)
        usleep(20000);
    ck_assert_msg(v == want, "workers.%s is %lld, expected %lld", key, (long long)v, (long long)want);
}

/* The one worker connection's field from `workers`. */
static json_int_t conn_int(struct wenv *e, const char *key)
{
    json_t *r = wt_ctl(e, "workers");
    json_t *a = json_object_get(r, "workers");
    ck_assert_uint_eq(json_array_size(a), 1);
    json_int_t v = json_integer_value(json_object_get(json_array_get(a, 0), key));
    json_decref(r);
    return v;
}

struct gen {
    struct rank r;
    struct kvf_client *c;
    uint32_t counts[LAYOUT_MAX_GROUPS], ids[LAYOUT_MAX_GROUPS];
};

static void gen_start(struct wenv *e, struct gen *g)
{
    memset(g, 0, sizeof *g);
    rank_make(&g->r, "tiny", "gen", ROLE_GENERATION, F_SEAL_SHRINK);
    struct kvf_options o = {.no_reconnect = 1, .name = "burst"};
    ck_assert_int_eq(kvf_connect(e->wsock, &o, &g->c), 0);
    char err[512];
    ck_assert_msg(kvf_register(g->c, g->r.json, g->r.pools, g->r.l.n_pools, err, sizeof err) == 0,
                  "%s", err);
    for (uint32_t i = 0; i < g->r.l.n_groups; i++)
        g->counts[i] = 1;
}

static void gen_recv(struct gen *g, uint64_t id)
{
    struct kvf_recv_args a = {.req_id = id, .ctx_instance = "absent", .ctx_dp_rank = -1,
                              .n_groups = g->r.l.n_groups, .counts = g->counts, .ids = g->ids};
    ck_assert_int_eq(kvf_recv(g->c, &a), 0);
}

static void gen_stop(struct gen *g)
{
    g->c = kvf_close(g->c);
    rank_free(&g->r);
}

/* Polls until n request events came; counts those of (kind, error); fails on a DISCONNECTED. */
static void expect_events(struct gen *g, uint32_t n, int kind, int error)
{
    uint8_t *seen = calloc(n + 1, 1);
    uint32_t got = 0;
    int64_t end = wt_now_ms() + 20000;
    struct kvf_event ev;
    while (got < n && wt_now_ms() < end) {
        int rc = kvf_poll(g->c, &ev, 100);
        ck_assert_int_ge(rc, 0);
        if (rc == 0)
            continue;
        ck_assert_msg(ev.kind != KVF_EV_DISCONNECTED, "disconnected after %u events: %s", got,
                      ev.message);
        ck_assert_msg(ev.kind == kind && ev.error == error, "request %llu: kind %d error %s: %s",
                      (unsigned long long)ev.req_id, ev.kind,
                      kvf_error_to_string((kvf_error_t)ev.error), ev.message);
        ck_assert_uint_ge(ev.req_id, 1);
        ck_assert_uint_le(ev.req_id, n);
        ck_assert_msg(!seen[ev.req_id], "request %llu ended twice", (unsigned long long)ev.req_id);
        seen[ev.req_id] = 1;
        got++;
    }
    ck_assert_uint_eq(got, n);
    free(seen);
}

START_TEST(worker_event_burst_of_4096_reaches_a_worker_that_polls_late)
{
    struct wenv e;
    wt_start(&e, "deadlines:\n  lookup: 2s\n  send_wait: 60s\n  transfer: 60s\n"
                 "workers:\n  read_timeout: 60s\n");
    struct gen g;
    gen_start(&e, &g);
    for (uint64_t id = 1; id <= 4096; id++)
        gen_recv(&g, id);
    /* all 4096 end at their lookup deadline while the worker reads nothing */
    wait_status(&e, "transfers_in_flight", 0, 30000);
    json_int_t peak = conn_int(&e, "events_queued_peak");
    ck_assert_msg(peak >= 2048, "only %lld events had to wait: the burst did not fill the socket",
                  (long long)peak);
    expect_events(&g, 4096, KVF_EV_FAILED, KVF_E_UNKNOWN_INSTANCE);
    ck_assert_int_eq(stat_int(&e, "lost"), 0);
    ck_assert_int_eq(status_int(&e, "connections"), 1);
    /* the same connection keeps working */
    gen_recv(&g, 1);
    expect_events(&g, 1, KVF_EV_FAILED, KVF_E_UNKNOWN_INSTANCE);
    gen_stop(&g);
    wt_stop(&e);
}
END_TEST

START_TEST(worker_cancel_storm_of_4000_ends_every_request_cancelled)
{
    struct wenv e;
    wt_start(&e, "deadlines:\n  lookup: 60s\n  send_wait: 60s\n  transfer: 60s\n"
                 "workers:\n  read_timeout: 1s\n");
    struct gen g;
    gen_start(&e, &g);
    for (uint64_t id = 1; id <= 4000; id++)
        gen_recv(&g, id);
    /* 8 bursts of 500 cancels, the worker busy elsewhere in between, never polling: for 1.6 s
     * its events are read only by the cancels themselves (a library that did not read while it
     * writes would leave them queued past workers.read_timeout and be disconnected) */
    for (uint64_t id = 1; id <= 4000; id++) {
        ck_assert_int_eq(kvf_cancel(g.c, id), 0);
        if (id % 500 == 0)
            usleep(200 * 1000); /* the scenario: other work, not a wait for the daemon */
    }
    expect_events(&g, 4000, KVF_EV_FAILED, KVF_E_CANCELLED);
    ck_assert_int_eq(stat_int(&e, "read_timeouts"), 0);
    ck_assert_int_eq(stat_int(&e, "lost"), 0);
    ck_assert_int_eq(status_int(&e, "connections"), 1);
    gen_stop(&g);
    wt_stop(&e);
}
END_TEST

START_TEST(worker_that_stops_reading_is_disconnected_after_read_timeout_told_why)
{
    struct wenv e;
    wt_start(&e, "deadlines:\n  lookup: 300ms\n  send_wait: 60s\n  transfer: 60s\n"
                 "workers:\n  read_timeout: 1s\n");
    struct gen g;
    gen_start(&e, &g);
    const uint32_t n = 2000;
    for (uint64_t id = 1; id <= n; id++)
        gen_recv(&g, id);
    int64_t t0 = wt_now_ms();
    wait_status(&e, "connections", 0, 15000); /* the worker calls nothing meanwhile */
    int64_t took = wt_now_ms() - t0;
    printf("stalled reader: disconnected %lld ms after its last call (lookup 300 ms + "
           "read_timeout 1000 ms)\n", (long long)took);
    ck_assert_int_ge(took, 1000);
    ck_assert_int_eq(stat_int(&e, "read_timeouts"), 1);
    /* what the socket held arrives, then the reason; the rest end PEER_LOST in the library */
    uint32_t unknown = 0, lost = 0;
    char why[KVF_MESSAGE_MAX] = "";
    struct kvf_event ev;
    int64_t end = wt_now_ms() + 10000;
    while (!why[0] && wt_now_ms() < end) {
        if (kvf_poll(g.c, &ev, 100) != 1)
            continue;
        if (ev.kind == KVF_EV_DISCONNECTED)
            snprintf(why, sizeof why, "%s", ev.message);
        else if (ev.error == KVF_E_UNKNOWN_INSTANCE)
            unknown++;
        else if (ev.error == KVF_E_PEER_LOST)
            lost++;
    }
    ck_assert_msg(strstr(why, "workers.read_timeout") && strstr(why, "read none"), "%s", why);
    ck_assert_uint_eq(unknown + lost, n);
    ck_assert_uint_gt(unknown, 0);
    ck_assert_uint_gt(lost, 0);
    gen_stop(&g);
    wt_stop(&e);
}
END_TEST

START_TEST(worker_deadline_counts_from_a_fresh_clock)
{
    struct wenv e;
    wt_start(&e, "deadlines:\n  lookup: 500ms\n  send_wait: 60s\n  transfer: 60s\n");
    struct gen g;
    gen_start(&e, &g);
    enum { N = 300 };
    int64_t sent[N + 1];
    for (uint64_t id = 1; id <= N; id++) {
        sent[id] = wt_now_ms();
        gen_recv(&g, id);
    }
    /* no request ends before 500 ms after it was sent: not even one handled late in a busy
     * loop iteration (whose cached time is older than the request) */
    int64_t early = INT64_MAX;
    uint32_t got = 0;
    struct kvf_event ev;
    int64_t end = wt_now_ms() + 20000;
    while (got < N && wt_now_ms() < end) {
        if (kvf_poll(g.c, &ev, 100) != 1)
            continue;
        ck_assert_int_eq(ev.error, KVF_E_UNKNOWN_INSTANCE);
        int64_t took = wt_now_ms() - sent[ev.req_id];
        early = took < early ? took : early;
        got++;
    }
    ck_assert_uint_eq(got, N);
    printf("deadlines.lookup 500 ms: the earliest of %d ended %lld ms after it was sent\n", N,
           (long long)early);
    ck_assert_int_ge(early, 500);
    gen_stop(&g);
    wt_stop(&e);
}
END_TEST

static Suite *worker_events_suite(void)
{
    Suite *s = suite_create("worker_events");
    TCase *t = tcase_create("bursts");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, worker_event_burst_of_4096_reaches_a_worker_that_polls_late);
    tcase_add_test(t, worker_cancel_storm_of_4000_ends_every_request_cancelled);
    tcase_add_test(t, worker_that_stops_reading_is_disconnected_after_read_timeout_told_why);
    tcase_add_test(t, worker_deadline_counts_from_a_fresh_clock);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run(worker_events_suite()); }
