/* check_xstream.c: which GPU mark a copy of a streaming SEND waits for (daemon/xfer/xstream.h,
 * issue 28): the mark of the READY that made its first byte final, and where that READY's
 * final bytes end; a READY on the host's word (no event) gives no wait; ranges made final
 * before the first READY that named an event wait for the first kept mark (longer, never
 * less); a plain SEND or one without marks never waits. The marks are stand-in pointers: no
 * CUDA here, only the choice. */
#include <check.h>
#include <stdlib.h>

#include "testutil.h"
#include "xstream.h"

static struct CUevent_st *ev(uintptr_t i)
{
    return (struct CUevent_st *)(0x1000 + 16 * i);
}

/* A SEND whose layers below upto are final, with a row of 8 layers of 100 bytes each. */
struct fixture {
    struct xfer x;
    struct xstream st;
    struct xstream_mark marks[XSTREAM_MARKS];
    uint64_t below[XSTREAM_MARKS];
};

static void setup(struct fixture *f, uint32_t upto)
{
    memset(f, 0, sizeof *f);
    f->x.stream = &f->st;
    f->st.upto = upto;
    f->st.full = 8;
    f->st.bound = 8;
    for (uint32_t u = 0; u < XSTREAM_MARKS; u++)
        f->below[u] = 100ull * (u < 8 ? u : 8);
}

START_TEST(xstream_copy_waits_for_the_ready_that_made_its_first_byte_final)
{
    struct fixture f;
    setup(&f, 6);
    f.st.marks = f.marks;
    f.marks[2] = (struct xstream_mark){true, ev(2)}; /* READY(2, event) */
    f.marks[3] = (struct xstream_mark){true, ev(3)}; /* READY(3, event) */
    f.marks[6] = (struct xstream_mark){true, ev(6)}; /* READY(6, event): layers 3..5 at once */
    uint64_t end = 0;
    ck_assert_ptr_eq(xstream_gpu_mark_at(&f.x, f.below, 0, &end), ev(2));
    ck_assert_uint_eq(end, 200);
    ck_assert_ptr_eq(xstream_gpu_mark_at(&f.x, f.below, 199, &end), ev(2));
    ck_assert_uint_eq(end, 200);
    ck_assert_ptr_eq(xstream_gpu_mark_at(&f.x, f.below, 200, &end), ev(3));
    ck_assert_uint_eq(end, 300);
    ck_assert_ptr_eq(xstream_gpu_mark_at(&f.x, f.below, 300, &end), ev(6));
    ck_assert_uint_eq(end, 600);
    end = 7;
    ck_assert_ptr_null(xstream_gpu_mark_at(&f.x, f.below, 600, &end)); /* not final: none */
    ck_assert_uint_eq(end, 7);
    /* by layers: the first READY at or past them; everything final: the last one */
    ck_assert_ptr_eq(xstream_gpu_mark(&f.x, 1), ev(2));
    ck_assert_ptr_eq(xstream_gpu_mark(&f.x, 4), ev(6));
    ck_assert_ptr_eq(xstream_gpu_mark(&f.x, f.st.upto), ev(6));
}
END_TEST

START_TEST(xstream_host_word_ready_gives_no_wait_and_earlier_layers_wait_for_the_first_mark)
{
    struct fixture f;
    setup(&f, 8);
    f.st.marks = f.marks; /* kept from READY(3, event) on; READY(1) came before, on the host */
    f.marks[3] = (struct xstream_mark){true, ev(3)};
    f.marks[5] = (struct xstream_mark){true, NULL}; /* READY(5) on the host's word */
    f.marks[8] = (struct xstream_mark){true, ev(8)};
    uint64_t end = 0;
    ck_assert_ptr_eq(xstream_gpu_mark_at(&f.x, f.below, 0, &end), ev(3)); /* longer, never less */
    ck_assert_uint_eq(end, 300);
    ck_assert_ptr_null(xstream_gpu_mark_at(&f.x, f.below, 300, &end));
    ck_assert_uint_eq(end, 500);
    ck_assert_ptr_eq(xstream_gpu_mark_at(&f.x, f.below, 500, &end), ev(8));
    ck_assert_uint_eq(end, 800);
}
END_TEST

START_TEST(xstream_plain_send_or_no_marks_never_waits)
{
    struct fixture f;
    setup(&f, 4);
    uint64_t end = 9;
    ck_assert_ptr_null(xstream_gpu_mark_at(&f.x, f.below, 0, &end)); /* no event READY yet */
    ck_assert_ptr_null(xstream_gpu_mark(&f.x, 4));
    ck_assert_uint_eq(end, 9);
    f.x.stream = NULL; /* a plain SEND */
    ck_assert_ptr_null(xstream_gpu_mark_at(&f.x, f.below, 0, &end));
    ck_assert_ptr_null(xstream_gpu_mark(&f.x, 0));
    ck_assert_ptr_null(xstream_gpu_mark(NULL, 0));
    ck_assert(xstream_final(&f.x));
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("xstream");
    TCase *tc = tcase_create("gpu_marks");
    tcase_add_test(tc, xstream_copy_waits_for_the_ready_that_made_its_first_byte_final);
    tcase_add_test(tc,
                   xstream_host_word_ready_gives_no_wait_and_earlier_layers_wait_for_the_first_mark);
    tcase_add_test(tc, xstream_plain_send_or_no_marks_never_waits);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
