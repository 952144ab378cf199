/* check_link_order.c: a peer's messages leave in the order it sent them (daemon/link/
 * link_order.c), driven directly on a link and a READY peer built here (no UCX needed for the
 * queue itself; check_link shows the same order end to end over UCX): with nothing in flight an
 * eager message goes out at once, uncopied; behind a rendezvous it waits, copied, until that one
 * landed, and a failed one is dropped without holding the rest; two rendezvous leave in their
 * order whichever lands first; beyond cfg.max_behind the extra messages are dropped and counted;
 * a peer no longer READY gets nothing; what still waits is freed with the peer. */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "link_int.h"
#include "testutil.h"

struct got {
    int n;
    uint16_t type[16];
    uint8_t hdr0[16];
    const void *data[16];
    size_t len[16];
};

static void on_msg(void *arg, struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                   const void *data, size_t len)
{
    (void)p;
    struct got *g = arg;
    ck_assert_int_lt(g->n, 16);
    g->type[g->n] = type;
    g->hdr0[g->n] = hdr_len ? *(const uint8_t *)hdr : 0;
    g->data[g->n] = data;
    g->len[g->n] = len;
    g->n++;
}

static void setup(struct link *l, struct link_peer *p, struct got *g, unsigned max_behind)
{
    memset(l, 0, sizeof *l);
    memset(p, 0, sizeof *p);
    memset(g, 0, sizeof *g);
    l->ops.on_msg = on_msg;
    l->ops.arg = g;
    l->cfg.max_behind = max_behind ? max_behind : LINK_MAX_BEHIND;
    p->link = l;
    p->state = LINK_PEER_READY;
}

static void eager(struct link_peer *p, uint16_t type, uint8_t tag, const void *data, size_t len)
{
    link_order_eager(p, type, &tag, 1, data, len);
}

START_TEST(with_nothing_in_flight_a_message_goes_out_at_once_uncopied)
{
    struct link l;
    struct link_peer p;
    struct got g;
    setup(&l, &p, &g, 0);
    char payload[8] = "abcdefg";
    eager(&p, 5, 1, payload, sizeof payload);
    ck_assert_int_eq(g.n, 1);
    ck_assert_ptr_eq(g.data[0], payload);
    ck_assert_uint_eq(l.st.msgs_recv, 1);
    ck_assert_ptr_null(p.ord_head);
}
END_TEST

START_TEST(messages_behind_a_rendezvous_wait_copied_and_leave_after_it)
{
    struct link l;
    struct link_peer p;
    struct got g;
    setup(&l, &p, &g, 0);
    struct link_ordered *r = link_order_rndv(&p, 7, "\x09", 1, 100);
    ck_assert_ptr_nonnull(r);
    char a[4] = "aaa", b[4] = "bbb";
    eager(&p, 5, 1, a, sizeof a);
    eager(&p, 5, 2, b, sizeof b);
    memset(a, 'x', sizeof a); /* the callback's payload is gone after it returns: copies wait */
    memset(b, 'x', sizeof b);
    ck_assert_int_eq(g.n, 0);
    ck_assert_uint_eq(p.ord_count, 3);
    void *buf = malloc(100);
    link_order_landed(&p, r, buf, 1);
    ck_assert_int_eq(g.n, 3);
    ck_assert_int_eq(g.type[0], 7);
    ck_assert_ptr_eq(g.data[0], buf);
    ck_assert_uint_eq(g.len[0], 100);
    ck_assert_int_eq(g.hdr0[1], 1);
    ck_assert_int_eq(g.hdr0[2], 2);
    ck_assert_ptr_null(p.ord_head);
    ck_assert_uint_eq(p.ord_bytes, 0);
    eager(&p, 5, 3, a, sizeof a); /* nothing in flight again: at once */
    ck_assert_int_eq(g.n, 4);
    ck_assert_ptr_eq(g.data[3], a);
}
END_TEST

START_TEST(a_failed_rendezvous_is_dropped_and_releases_what_waits)
{
    struct link l;
    struct link_peer p;
    struct got g;
    setup(&l, &p, &g, 0);
    struct link_ordered *r = link_order_rndv(&p, 7, "\x09", 1, 100);
    eager(&p, 5, 1, "a", 1);
    link_order_landed(&p, r, NULL, 0);
    ck_assert_int_eq(g.n, 1);
    ck_assert_int_eq(g.hdr0[0], 1);
    ck_assert_uint_eq(l.st.dropped, 1);
}
END_TEST

START_TEST(two_rendezvous_leave_in_their_order_whichever_lands_first)
{
    struct link l;
    struct link_peer p;
    struct got g;
    setup(&l, &p, &g, 0);
    struct link_ordered *r1 = link_order_rndv(&p, 7, "\x01", 1, 10);
    eager(&p, 5, 2, "a", 1);
    struct link_ordered *r2 = link_order_rndv(&p, 7, "\x03", 1, 10);
    eager(&p, 5, 4, "b", 1);
    link_order_landed(&p, r2, malloc(10), 1);
    ck_assert_int_eq(g.n, 0); /* the second landed, the first still comes */
    link_order_landed(&p, r1, malloc(10), 1);
    ck_assert_int_eq(g.n, 4);
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(g.hdr0[i], i + 1);
}
END_TEST

START_TEST(beyond_max_behind_messages_are_dropped_and_counted)
{
    struct link l;
    struct link_peer p;
    struct got g;
    setup(&l, &p, &g, 3); /* the rendezvous and two behind it */
    struct link_ordered *r = link_order_rndv(&p, 7, "\x00", 1, 10);
    for (uint8_t i = 1; i <= 5; i++)
        eager(&p, 5, i, "a", 1);
    ck_assert_uint_eq(l.st.dropped, 3);
    ck_assert_uint_eq(p.ord_count, 3);
    link_order_landed(&p, r, malloc(10), 1);
    ck_assert_int_eq(g.n, 3);
    ck_assert_int_eq(g.hdr0[1], 1);
    ck_assert_int_eq(g.hdr0[2], 2);
}
END_TEST

START_TEST(a_peer_no_longer_ready_gets_nothing_and_what_waits_is_freed)
{
    struct link l;
    struct link_peer p;
    struct got g;
    setup(&l, &p, &g, 0);
    struct link_ordered *r = link_order_rndv(&p, 7, "\x00", 1, 10);
    eager(&p, 5, 1, "a", 1);
    p.state = LINK_PEER_FAILED;
    link_order_landed(&p, r, malloc(10), 1); /* freed, not delivered */
    ck_assert_int_eq(g.n, 0);
    ck_assert_uint_eq(l.st.dropped, 2);
    p.state = LINK_PEER_READY;
    link_order_rndv(&p, 7, "\x00", 1, 10); /* its receive never ends: the peer's free frees it */
    eager(&p, 5, 1, "abc", 3);
    link_order_free(&p);
    ck_assert_ptr_null(p.ord_head);
    ck_assert_uint_eq(p.ord_count, 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("link_order");
    TCase *tc = tcase_create("order");
    tcase_add_test(tc, with_nothing_in_flight_a_message_goes_out_at_once_uncopied);
    tcase_add_test(tc, messages_behind_a_rendezvous_wait_copied_and_leave_after_it);
    tcase_add_test(tc, a_failed_rendezvous_is_dropped_and_releases_what_waits);
    tcase_add_test(tc, two_rendezvous_leave_in_their_order_whichever_lands_first);
    tcase_add_test(tc, beyond_max_behind_messages_are_dropped_and_counted);
    tcase_add_test(tc, a_peer_no_longer_ready_gets_nothing_and_what_waits_is_freed);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
