/* check_metrics_conns.c: the /metrics listener's connection table (daemon/control/
 * metrics_conns.h): a connection over its address's limit evicts that address's oldest idle
 * one and no other, busy ones are never evicted (then it is refused), the total is a hard
 * limit where those going count for nothing, and the deadline runs from accept or the last
 * reply, whatever else happens. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>

#include "metrics_conns.h"
#include "testutil.h"

static struct sockaddr_in from(const char *ip)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    ck_assert_int_eq(inet_pton(AF_INET, ip, &sa.sin_addr), 1);
    return sa;
}

static struct metrics_conn *add(struct metrics_conns *t, const char *ip, uint64_t now,
                                struct metrics_conn **victim)
{
    struct sockaddr_in sa = from(ip);
    struct metrics_conn *c = NULL, *v = NULL;
    int r = metrics_conns_admit(t, 100 + (int)t->n, (struct sockaddr *)&sa, now, &c, &v);
    if (victim)
        *victim = v;
    return r == 0 ? c : NULL;
}

START_TEST(over_its_address_limit_a_connection_evicts_that_address_oldest_idle_one)
{
    struct metrics_conns t = {0};
    struct metrics_conn *a[METRICS_HTTP_CONNS_PER_IP], *v;
    for (int i = 0; i < METRICS_HTTP_CONNS_PER_IP; i++) {
        a[i] = add(&t, "10.0.0.1", (uint64_t)i, &v);
        ck_assert_ptr_nonnull(a[i]);
        ck_assert_ptr_null(v);
    }
    ck_assert_ptr_nonnull(add(&t, "10.0.0.2", 9, &v)); /* another address: its own limit */
    ck_assert_ptr_null(v);
    metrics_conns_busy(a[0], true, 10); /* being answered: not a victim */
    ck_assert_ptr_nonnull(add(&t, "10.0.0.1", 11, &v));
    ck_assert_ptr_eq(v, a[1]);
    ck_assert(a[1]->going);
    ck_assert_uint_eq(t.counters.evicted, 1);
    metrics_conns_remove(&t, a[1]);
    for (int i = 2; i < METRICS_HTTP_CONNS_PER_IP; i++)
        metrics_conns_busy(a[i], true, 12);
    /* every other one of the address is busy, and so is the newest once it asks */
    struct metrics_conn *newest = t.head;
    metrics_conns_busy(newest, true, 12);
    ck_assert_ptr_null(add(&t, "10.0.0.1", 13, &v));
    ck_assert_uint_eq(t.counters.refused, 1);
    metrics_conns_busy(a[4], false, 14); /* replied: idle again, the only candidate */
    ck_assert_ptr_nonnull(add(&t, "10.0.0.1", 15, &v));
    ck_assert_ptr_eq(v, a[4]);
    metrics_conns_done(&t);
    ck_assert_uint_eq(t.n, 0);
}
END_TEST

START_TEST(the_total_is_a_hard_limit_and_those_going_do_not_count)
{
    struct metrics_conns t = {0};
    char ip[32];
    for (int i = 0; i < METRICS_HTTP_CONNS; i++) {
        snprintf(ip, sizeof ip, "10.0.1.%d", i);
        ck_assert_ptr_nonnull(add(&t, ip, 0, NULL));
    }
    ck_assert_ptr_null(add(&t, "10.0.2.1", 1, NULL));
    ck_assert_uint_eq(t.counters.refused, 1);
    ck_assert_ptr_eq(metrics_conns_expired(&t, 1000ull * METRICS_HTTP_IDLE_S), t.head);
    ck_assert_ptr_nonnull(add(&t, "10.0.2.1", 1, NULL)); /* one going: room for one */
    ck_assert_ptr_null(add(&t, "10.0.2.2", 1, NULL));
    metrics_conns_done(&t);
}
END_TEST

START_TEST(the_deadline_runs_from_accept_or_the_last_reply)
{
    struct metrics_conns t = {0};
    struct metrics_conn *a = add(&t, "10.0.0.1", 0, NULL), *b = add(&t, "10.0.0.2", 0, NULL);
    uint64_t dl = 1000ull * METRICS_HTTP_IDLE_S;
    metrics_conns_busy(a, true, 100);
    metrics_conns_busy(b, true, 100);
    metrics_conns_busy(b, false, 5000); /* b replied at 5 s: 10 s from there */
    ck_assert_ptr_null(metrics_conns_expired(&t, dl - 1));
    ck_assert_ptr_eq(metrics_conns_expired(&t, dl), a); /* busy or not: a's time is up */
    ck_assert_ptr_null(metrics_conns_expired(&t, dl)); /* told once */
    ck_assert_ptr_null(metrics_conns_expired(&t, 5000 + dl - 1));
    ck_assert_ptr_eq(metrics_conns_expired(&t, 5000 + dl), b);
    ck_assert_uint_eq(t.counters.timed_out, 1); /* a: none answered */
    ck_assert_uint_eq(t.counters.idle_closed, 1); /* b: idle after its reply */
    ck_assert_uint_eq(t.n_going, 2);
    metrics_conns_remove(&t, a);
    ck_assert_uint_eq(t.n, 1);
    ck_assert_uint_eq(t.n_going, 1);
    metrics_conns_done(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("metrics_conns");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, over_its_address_limit_a_connection_evicts_that_address_oldest_idle_one);
    tcase_add_test(tc, the_total_is_a_hard_limit_and_those_going_do_not_count);
    tcase_add_test(tc, the_deadline_runs_from_accept_or_the_last_reply);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
