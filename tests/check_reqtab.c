/* check_reqtab.c: the request table (reqtab.h) and its hash index (hmap.h): lookups by
 * (context instance, id) among many, collisions and deletions, idle expiry in order, and the
 * meeting rule by SEND generation: a rank that sends again after its SEND ended opens a new
 * generation whose tally starts at zero; a reuse while the old generation has a SEND in flight,
 * or a RECV beyond the named readers, is BAD_REQUEST naming the id and the instance. The
 * request state machine's edges are in check_request_state.c. */
#include <check.h>
#include <stdlib.h>

#include "hmap.h"
#include "reqtab.h"
#include "testutil.h"
#include "transfers.h"

START_TEST(hmap_finds_every_value_among_colliding_hashes_and_deletes_without_tombstones)
{
    struct hmap m;
    hmap_init(&m);
    enum { N = 5000 };
    static int vals[N];
    /* every tenth value shares hash 7: long probe runs across growth and deletion */
    for (int i = 0; i < N; i++)
        ck_assert_int_eq(hmap_put(&m, i % 10 == 0 ? 7 : (uint64_t)i * 977, &vals[i]), 0);
    ck_assert_uint_eq(hmap_count(&m), N);
    ck_assert_int_lt(hmap_put(&m, 1, NULL), 0);
    for (int i = 0; i < N; i += 2) /* delete half, half of them in the colliding run */
        ck_assert(hmap_del(&m, i % 10 == 0 ? 7 : (uint64_t)i * 977, &vals[i]));
    ck_assert(!hmap_del(&m, 7, &vals[0]));
    ck_assert_uint_eq(hmap_count(&m), N / 2);
    for (int i = 1; i < N; i += 2) {
        uint32_t pos = 0;
        int found = 0;
        for (void *v; (v = hmap_next(&m, (uint64_t)i * 977, &pos));)
            found += v == &vals[i];
        ck_assert_msg(found == 1, "value %d found %d times", i, found);
    }
    uint32_t pos = 0, n7 = 0;
    while (hmap_next(&m, 7, &pos))
        n7++;
    ck_assert_uint_eq(n7, 0); /* every value under 7 was even-indexed: all deleted */
    hmap_free(&m);
    ck_assert_ptr_null(hmap_next(&m, 7, &pos));
}
END_TEST

START_TEST(hmap_hashes_tell_strings_and_seeds_apart)
{
    ck_assert(hmap_str("ctx", 1) != hmap_str("ctx", 2));
    ck_assert(hmap_str("ctx", 1) != hmap_str("ctx2", 1));
    ck_assert(hmap_pair(1, 2) != hmap_pair(2, 1));
}
END_TEST


static struct xfer *mk(xfer_side_t side, uint32_t rank, const char *peer)
{
    struct xfer *x = calloc(1, sizeof *x);
    x->side = side;
    x->rank_idx = rank;
    snprintf(x->peer, sizeof x->peer, "%s", peer ? peer : "");
    return x;
}

static uint64_t g_epoch = 1; /* the context instance's epoch of the SENDs send_in makes */

/* A SEND of q from rank: meets, binds, takes the generation. */
static kvf_error_t send_in(struct reqtab *t, struct req *q, struct xfer *s, uint32_t readers,
                           char *msg)
{
    kvf_error_t e = reqtab_send_meets(t, q, s->rank_idx, g_epoch, readers, msg, 512);
    if (e == KVF_OK) {
        s->gen = q->gen;
        ck_assert_int_eq(reqtab_bind(t, q, s), 0);
    }
    return e;
}

START_TEST(reqtab_finds_requests_by_instance_and_id_among_thirty_thousand)
{
    struct reqtab t;
    reqtab_init(&t);
    char inst[32];
    for (uint64_t i = 0; i < 30000; i++) {
        snprintf(inst, sizeof inst, "ctx%llu", (unsigned long long)(i % 7));
        ck_assert_ptr_nonnull(reqtab_open(&t, inst, i));
    }
    ck_assert_uint_eq(reqtab_count(&t), 30000);
    ck_assert_ptr_nonnull(reqtab_find(&t, "ctx3", 3));
    ck_assert_ptr_null(reqtab_find(&t, "ctx4", 3)); /* same id, other instance */
    ck_assert_ptr_eq(reqtab_open(&t, "ctx3", 3), reqtab_find(&t, "ctx3", 3));
    ck_assert_str_eq(reqtab_find(&t, "ctx3", 29998)->instance, "ctx3");
    reqtab_free(&t);
}
END_TEST

START_TEST(reqtab_forgets_idle_entries_oldest_first_and_keeps_live_ones)
{
    struct reqtab t;
    reqtab_init(&t);
    struct xfer *a = mk(XFER_SEND, 0, NULL), *b = mk(XFER_SEND, 0, NULL);
    char msg[512];
    struct req *qa = reqtab_open(&t, "ctx", 1), *qb = reqtab_open(&t, "ctx", 2);
    ck_assert_int_eq(send_in(&t, qa, a, 1, msg), KVF_OK);
    ck_assert_int_eq(send_in(&t, qb, b, 1, msg), KVF_OK);
    reqtab_unbind(&t, a, 100, 50); /* idle until 150 */
    ck_assert_ptr_null(a->req);
    reqtab_expire(&t, 149);
    ck_assert_uint_eq(reqtab_count(&t), 2);
    reqtab_expire(&t, 150);
    ck_assert_uint_eq(reqtab_count(&t), 1);
    ck_assert_ptr_null(reqtab_find(&t, "ctx", 1));
    reqtab_expire(&t, UINT64_MAX); /* b is live: kept */
    ck_assert_ptr_eq(reqtab_find(&t, "ctx", 2), qb);
    reqtab_unbind(&t, b, 200, 50);
    /* a new request of an idle entry takes it off the idle list */
    struct xfer *c = mk(XFER_RECV, 0, NULL);
    ck_assert_int_eq(reqtab_bind(&t, qb, c), 0);
    reqtab_expire(&t, UINT64_MAX);
    ck_assert_ptr_eq(reqtab_find(&t, "ctx", 2), qb);
    reqtab_unbind(&t, c, 300, 0);
    reqtab_expire(&t, 300);
    ck_assert_uint_eq(reqtab_count(&t), 0);
    free(a);
    free(b);
    free(c);
    reqtab_free(&t);
}
END_TEST

START_TEST(reqtab_a_rank_sending_again_after_its_send_ended_is_a_new_generation)
{
    struct reqtab t;
    reqtab_init(&t);
    char msg[512];
    struct req *q = reqtab_open(&t, "ctx", 7);
    struct xfer *s1 = mk(XFER_SEND, 0, NULL), *r1 = mk(XFER_RECV, 0, NULL);
    ck_assert_int_eq(send_in(&t, q, s1, 1, msg), KVF_OK);
    uint64_t g1 = q->gen;
    ck_assert_uint_ne(g1, 0);
    ck_assert_int_eq(reqtab_recv_meets(&t, q, msg, sizeof msg), KVF_OK);
    ck_assert_int_eq(reqtab_bind(&t, q, r1), 0);
    ck_assert_uint_eq(reqtab_recv_done(q, 0), 1);
    reqtab_unbind(&t, r1, 10, 1000);
    reqtab_unbind(&t, s1, 10, 1000); /* SENT: rank 0 ended in generation g1 */
    /* the restarted prefill sends id 7 again: a new generation, nothing served yet */
    struct xfer *s2 = mk(XFER_SEND, 0, NULL);
    ck_assert_int_eq(send_in(&t, q, s2, 1, msg), KVF_OK);
    ck_assert_uint_gt(q->gen, g1);
    ck_assert_uint_eq(q->done, 0);
    ck_assert_ptr_eq(reqtab_send_of(q, 0), s2);
    ck_assert_ptr_null(reqtab_send_of(q, 1));
    free(s1);
    free(r1);
    free(s2);
    reqtab_free(&t);
}
END_TEST

START_TEST(reqtab_a_recv_after_its_generation_ended_waits_for_the_next_one)
{
    struct reqtab t;
    reqtab_init(&t);
    char msg[512];
    struct req *q = reqtab_open(&t, "ctx", 7);
    struct xfer *s1 = mk(XFER_SEND, 0, NULL), *r1 = mk(XFER_RECV, 0, NULL);
    ck_assert_int_eq(send_in(&t, q, s1, 1, msg), KVF_OK);
    ck_assert_int_eq(reqtab_bind(&t, q, r1), 0);
    reqtab_recv_done(q, 0);
    reqtab_unbind(&t, r1, 0, 1000);
    reqtab_unbind(&t, s1, 0, 1000);
    /* the new request's RECV comes before its SEND: it must not meet the old tally */
    struct xfer *r2 = mk(XFER_RECV, 0, NULL);
    ck_assert_int_eq(reqtab_recv_meets(&t, q, msg, sizeof msg), KVF_OK);
    ck_assert_uint_eq(q->gen, 0);
    ck_assert_uint_eq(q->done, 0);
    ck_assert_int_eq(reqtab_bind(&t, q, r2), 0);
    struct xfer *s2 = mk(XFER_SEND, 0, NULL);
    ck_assert_int_eq(send_in(&t, q, s2, 1, msg), KVF_OK);
    ck_assert_uint_ne(q->gen, 0);
    ck_assert_uint_eq(q->done, 0);
    free(s1);
    free(r1);
    free(r2);
    free(s2);
    reqtab_free(&t);
}
END_TEST

START_TEST(reqtab_late_send_of_another_rank_joins_and_counts_the_served_readers)
{
    struct reqtab t;
    reqtab_init(&t);
    char msg[512];
    /* two readers named; one RECV that needed rank 0 only completed before rank 1 sent */
    struct req *q = reqtab_open(&t, "ctx", 9);
    struct xfer *s0 = mk(XFER_SEND, 0, NULL), *r = mk(XFER_RECV, 0, NULL);
    ck_assert_int_eq(send_in(&t, q, s0, 2, msg), KVF_OK);
    uint64_t g = q->gen;
    ck_assert_int_eq(reqtab_bind(&t, q, r), 0);
    reqtab_recv_done(q, 0);
    reqtab_unbind(&t, r, 0, 1000);
    struct xfer *s1 = mk(XFER_SEND, 1, NULL);
    ck_assert_int_eq(send_in(&t, q, s1, 2, msg), KVF_OK);
    ck_assert_uint_eq(q->gen, g);
    ck_assert_uint_eq(q->done, 1);
    /* the second reader joins the same generation */
    ck_assert_int_eq(reqtab_recv_meets(&t, q, msg, sizeof msg), KVF_OK);
    free(s0);
    free(s1);
    free(r);
    reqtab_free(&t);
}
END_TEST

/* Issue 26: a prefill at TP1 (epoch 1) served request 5; it comes back at TP2 (epoch 2) and
 * its rank 1, which the old shape did not have, sends 5 first. It must open a new generation,
 * not join the old, served one (which released it at once with no byte read, and refused the
 * new RECV as a reader too many); rank 0 then joins it. */
START_TEST(reqtab_a_send_of_a_new_instance_epoch_never_joins_an_older_epochs_generation)
{
    struct reqtab t;
    reqtab_init(&t);
    char msg[512];
    struct req *q = reqtab_open(&t, "pre", 5);
    struct xfer *old = mk(XFER_SEND, 0, NULL), *r = mk(XFER_RECV, 0, NULL);
    g_epoch = 1;
    ck_assert_int_eq(send_in(&t, q, old, 1, msg), KVF_OK);
    uint64_t g1 = q->gen;
    ck_assert_int_eq(reqtab_bind(&t, q, r), 0);
    reqtab_recv_done(q, 0);
    reqtab_unbind(&t, r, 0, 1000);
    reqtab_unbind(&t, old, 0, 1000);
    g_epoch = 2;
    struct xfer *n1 = mk(XFER_SEND, 1, NULL), *n0 = mk(XFER_SEND, 0, NULL);
    ck_assert_int_eq(send_in(&t, q, n1, 1, msg), KVF_OK);
    ck_assert_uint_gt(q->gen, g1);
    ck_assert_uint_eq(q->epoch, 2);
    ck_assert_uint_eq(q->done, 0); /* the old tally is not the new request's */
    uint64_t g2 = q->gen;
    ck_assert_int_eq(reqtab_recv_meets(&t, q, msg, sizeof msg), KVF_OK); /* its reader */
    ck_assert_int_eq(send_in(&t, q, n0, 1, msg), KVF_OK);
    ck_assert_uint_eq(q->gen, g2);
    /* an old epoch's SEND in flight is never joined by a new epoch's: refused, naming both */
    reqtab_unbind(&t, n0, 0, 1000);
    g_epoch = 3;
    ck_assert_int_eq(reqtab_send_meets(&t, q, 0, 3, 1, msg, sizeof msg), KVF_E_BAD_REQUEST);
    ck_assert_ptr_nonnull(strstr(msg, "instance epoch 2"));
    g_epoch = 1;
    free(old);
    free(r);
    free(n0);
    free(n1);
    reqtab_free(&t);
}
END_TEST

START_TEST(reqtab_an_id_reused_in_flight_is_bad_request_naming_id_and_instance)
{
    struct reqtab t;
    reqtab_init(&t);
    char msg[512];
    struct req *q = reqtab_open(&t, "prefill-a", 42);
    struct xfer *s0 = mk(XFER_SEND, 0, NULL), *s1 = mk(XFER_SEND, 1, NULL);
    ck_assert_int_eq(send_in(&t, q, s0, 1, msg), KVF_OK);
    ck_assert_int_eq(send_in(&t, q, s1, 1, msg), KVF_OK);
    /* rank 0 again while its SEND is live */
    ck_assert_int_eq(reqtab_send_meets(&t, q, 0, 1, 1, msg, sizeof msg), KVF_E_BAD_REQUEST);
    ck_assert_ptr_nonnull(strstr(msg, "request 42 of context instance prefill-a"));
    /* rank 0's SEND ended, rank 1's is in flight: rank 0 again is still a reuse in flight */
    reqtab_unbind(&t, s0, 0, 1000);
    ck_assert_int_eq(reqtab_send_meets(&t, q, 0, 1, 1, msg, sizeof msg), KVF_E_BAD_REQUEST);
    ck_assert_ptr_nonnull(strstr(msg, "still in flight"));
    /* a RECV: one reader named and one already there: a second one is a reuse in flight */
    struct xfer *r = mk(XFER_RECV, 0, NULL), *remote = mk(XFER_RECV, 0, "10.0.0.2:7000");
    ck_assert_int_eq(reqtab_recv_meets(&t, q, msg, sizeof msg), KVF_OK);
    ck_assert_int_eq(reqtab_bind(&t, q, r), 0);
    ck_assert_int_eq(reqtab_bind(&t, q, remote), 0); /* remote RECVs meet elsewhere: not counted */
    ck_assert_int_eq(reqtab_recv_meets(&t, q, msg, sizeof msg), KVF_E_BAD_REQUEST);
    ck_assert_ptr_nonnull(strstr(msg, "request 42 of context instance prefill-a already has its 1 reader"));
    /* once every SEND ended, the id is free: a new generation */
    reqtab_unbind(&t, s1, 0, 1000);
    reqtab_unbind(&t, r, 0, 1000);
    ck_assert_int_eq(reqtab_send_meets(&t, q, 0, 1, 1, msg, sizeof msg), KVF_OK);
    free(s0);
    free(s1);
    free(r);
    free(remote);
    reqtab_free(&t);
}
END_TEST

static Suite *reqtab_suite(void)
{
    Suite *s = suite_create("reqtab");
    TCase *h = tcase_create("hmap");
    tcase_add_test(h, hmap_finds_every_value_among_colliding_hashes_and_deletes_without_tombstones);
    tcase_add_test(h, hmap_hashes_tell_strings_and_seeds_apart);
    suite_add_tcase(s, h);
    TCase *t = tcase_create("reqtab");
    tcase_add_test(t, reqtab_finds_requests_by_instance_and_id_among_thirty_thousand);
    tcase_add_test(t, reqtab_forgets_idle_entries_oldest_first_and_keeps_live_ones);
    tcase_add_test(t, reqtab_a_rank_sending_again_after_its_send_ended_is_a_new_generation);
    tcase_add_test(t, reqtab_a_recv_after_its_generation_ended_waits_for_the_next_one);
    tcase_add_test(t, reqtab_late_send_of_another_rank_joins_and_counts_the_served_readers);
    tcase_add_test(t, reqtab_an_id_reused_in_flight_is_bad_request_naming_id_and_instance);
    tcase_add_test(t, reqtab_a_send_of_a_new_instance_epoch_never_joins_an_older_epochs_generation);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run(reqtab_suite()); }
