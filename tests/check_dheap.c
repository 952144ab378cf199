/* check_dheap.c: the deadline heap (daemon/base/dheap.h): pop_due hands out exactly the nodes
 * due, earliest first, against a plain model under random pushes, moves and removals; a node
 * removed or popped is no longer queued and removing it again is a no-op. */
#include <check.h>
#include <stdlib.h>

#include "dheap.h"
#include "testutil.h"

#define N 500

START_TEST(pop_due_gives_what_expired_in_order_against_a_model)
{
    static struct dheap_node nodes[N];
    static bool in[N];
    struct dheap h;
    dheap_init(&h);
    srand(11);
    for (int i = 0; i < N; i++) {
        dheap_node_init(&nodes[i]);
        in[i] = false;
    }
    for (int round = 0; round < 20000; round++) {
        int i = rand() % N;
        int op = rand() % 3;
        if (op < 2) {
            ck_assert_int_eq(dheap_update(&h, &nodes[i], (uint64_t)(rand() % 10000)), 0);
            in[i] = true;
        } else {
            dheap_remove(&h, &nodes[i]);
            dheap_remove(&h, &nodes[i]); /* again: a no-op */
            in[i] = false;
        }
        ck_assert(dheap_queued(&nodes[i]) == in[i]);
    }
    uint32_t queued = 0;
    for (int i = 0; i < N; i++)
        queued += in[i];
    ck_assert_uint_eq(dheap_count(&h), queued);
    for (uint64_t now = 0; now <= 10000; now += 250) {
        uint64_t last = 0;
        for (struct dheap_node *nd; (nd = dheap_pop_due(&h, now));) {
            ck_assert_uint_le(nd->at, now);
            ck_assert_uint_ge(nd->at, last);
            last = nd->at;
            ck_assert(!dheap_queued(nd));
            in[nd - nodes] = false;
        }
        for (int i = 0; i < N; i++) /* nothing due is left behind */
            ck_assert(!in[i] || nodes[i].at > now);
    }
    ck_assert_uint_eq(dheap_count(&h), 0);
    dheap_free(&h);
}
END_TEST

START_TEST(moving_a_deadline_later_or_earlier_reorders_it)
{
    struct dheap h;
    struct dheap_node a, b;
    dheap_init(&h);
    dheap_node_init(&a);
    dheap_node_init(&b);
    ck_assert_int_eq(dheap_update(&h, &a, 10), 0);
    ck_assert_int_eq(dheap_update(&h, &b, 20), 0);
    ck_assert_int_eq(dheap_update(&h, &a, 30), 0); /* later */
    ck_assert_ptr_null(dheap_pop_due(&h, 19));
    ck_assert_ptr_eq(dheap_pop_due(&h, 25), &b);
    ck_assert_ptr_null(dheap_pop_due(&h, 25));
    ck_assert_int_eq(dheap_update(&h, &a, 5), 0); /* earlier */
    ck_assert_ptr_eq(dheap_pop_due(&h, 5), &a);
    ck_assert_uint_eq(dheap_count(&h), 0);
    ck_assert_int_eq(dheap_update(&h, &a, 1), 0);
    dheap_free(&h); /* leaves its nodes unqueued */
    ck_assert(!dheap_queued(&a));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("dheap");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, pop_due_gives_what_expired_in_order_against_a_model);
    tcase_add_test(tc, moving_a_deadline_later_or_earlier_reorders_it);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
