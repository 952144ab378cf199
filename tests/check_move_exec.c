/* check_move_exec.c: the executors' table (daemon/move/move_exec.h): every row complete, and the
 * host executor through it: check bounds each side, gather and scatter of whole and partial
 * extents and direct move exactly the program's bytes, and an inline executor completes with
 * MOVE_DONE without calling its done callback; the GPU row refuses a program it did not bind. */
#include <check.h>
#include <errno.h>
#include <string.h>

#include "exec_gpu.h"
#include "move_exec.h"
#include "testutil.h"

/* Three runs of 4 bytes: source bytes 8.., 16.., 24.. into destination bytes 32..44. */
static const struct copy_op prog_ops[] = {
    {.src_pool = 0, .dst_pool = 0, .src_off = 8, .ext_off = 0, .dst_off = 32, .len = 4,
     .count = 3, .src_stride = 8, .dst_stride = 4},
};
static const uint8_t want[12] = {8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26, 27};

static uint8_t src_bytes[64], dst_bytes[64];
static struct copy_mem src_mem, dst_mem;
static int done_calls;

static void count_done(void *user, int status)
{
    (void)user, (void)status;
    done_calls++;
}

static struct move_prog setup(void)
{
    for (int i = 0; i < 64; i++)
        src_bytes[i] = (uint8_t)i;
    memset(dst_bytes, 0, sizeof dst_bytes);
    src_mem = (struct copy_mem){.n = 1, .base = {src_bytes}, .size = {64}};
    dst_mem = (struct copy_mem){.n = 1, .base = {dst_bytes}, .size = {64}};
    done_calls = 0;
    return (struct move_prog){prog_ops, 1, &src_mem, &dst_mem};
}

START_TEST(every_executor_row_is_complete_and_named)
{
    for (int k = 0; k < MOVE_EXEC__COUNT; k++) {
        const struct move_exec *ex = move_execs[k];
        ck_assert_ptr_nonnull(ex);
        ck_assert_ptr_eq(move_exec_of((move_exec_kind_t)k), ex);
        ck_assert_ptr_nonnull(ex->check);
        ck_assert_ptr_nonnull(ex->gather);
        ck_assert_ptr_nonnull(ex->scatter);
        ck_assert_ptr_nonnull(ex->direct);
        ck_assert_str_eq(move_exec_kind_to_string((move_exec_kind_t)k), ex->name);
    }
    ck_assert_str_eq(move_exec_of(MOVE_EXEC_HOST)->name, "host");
    ck_assert_str_eq(move_exec_of(MOVE_EXEC_GPU)->name, "gpu");
    ck_assert_str_eq(move_exec_kind_to_string(MOVE_EXEC__COUNT), "unknown");
}
END_TEST

START_TEST(host_gather_then_scatter_moves_the_programs_bytes_inline)
{
    struct move_prog p = setup();
    const struct move_exec *ex = move_exec_of(MOVE_EXEC_HOST);
    uint8_t ext[12] = {0}, part[8] = {0};
    char msg[128];
    ck_assert_int_eq(ex->gather(&p, 0, 12, ext, count_done, NULL, msg, sizeof msg), MOVE_DONE);
    ck_assert_mem_eq(ext, want, 12);
    ck_assert_int_eq(ex->gather(&p, 2, 10, part, count_done, NULL, msg, sizeof msg), MOVE_DONE);
    ck_assert_mem_eq(part, want + 2, 8);
    ck_assert_int_eq(ex->scatter(&p, ext, 0, 12, count_done, NULL, msg, sizeof msg), MOVE_DONE);
    ck_assert_mem_eq(dst_bytes + 32, want, 12);
    for (int i = 0; i < 64; i++)
        if (i < 32 || i >= 44)
            ck_assert_uint_eq(dst_bytes[i], 0);
    ck_assert_int_eq(done_calls, 0);
}
END_TEST

START_TEST(host_scatter_of_a_sub_range_writes_only_its_bytes)
{
    struct move_prog p = setup();
    char msg[128];
    ck_assert_int_eq(move_exec_of(MOVE_EXEC_HOST)->scatter(&p, want + 5, 5, 9, count_done, NULL,
                                                           msg, sizeof msg),
                     MOVE_DONE);
    for (int i = 0; i < 64; i++)
        ck_assert_uint_eq(dst_bytes[i], i >= 37 && i < 41 ? want[i - 32] : 0);
    ck_assert_int_eq(done_calls, 0);
}
END_TEST

START_TEST(host_direct_equals_gather_plus_scatter)
{
    struct move_prog p = setup();
    char msg[128];
    ck_assert_int_eq(move_exec_of(MOVE_EXEC_HOST)->direct(&p, count_done, NULL, msg, sizeof msg),
                     MOVE_DONE);
    ck_assert_mem_eq(dst_bytes + 32, want, 12);
    ck_assert_int_eq(done_calls, 0);
}
END_TEST

START_TEST(host_check_refuses_a_program_that_leaves_its_pools)
{
    struct move_prog p = setup();
    const struct move_exec *ex = move_exec_of(MOVE_EXEC_HOST);
    char msg[128] = "";
    ck_assert_int_eq(ex->check(&p, 's', msg, sizeof msg), 0);
    ck_assert_int_eq(ex->check(&p, 'd', msg, sizeof msg), 0);
    struct copy_op out = prog_ops[0];
    out.dst_off = 60; /* the last run would end at byte 72 of 64 */
    p.ops = &out;
    ck_assert_int_eq(ex->check(&p, 's', msg, sizeof msg), 0);
    ck_assert_int_eq(ex->check(&p, 'd', msg, sizeof msg), -ERANGE);
    ck_assert_ptr_nonnull(strstr(msg, "destination"));
    p.dst = NULL; /* a side without pools is refused, not read */
    ck_assert_int_eq(ex->check(&p, 'd', msg, sizeof msg), -ERANGE);
}
END_TEST

/* The GPU row launches only through a binding (exec_gpu_bind): an unbound one is refused with
 * its reason and nothing runs, on any machine; its check bounds the pools as the host row. */
START_TEST(gpu_row_refuses_an_unbound_program_and_checks_bounds)
{
    struct move_prog p = setup();
    struct exec_gpu x;
    memset(&x, 0, sizeof x);
    x.mp = p;
    const struct move_exec *ex = move_exec_of(MOVE_EXEC_GPU);
    uint8_t ext[12];
    char msg[128] = "";
#ifdef KVF_HAVE_CUDA
    ck_assert_int_eq(ex->gather(&x.mp, 0, 12, ext, count_done, NULL, msg, sizeof msg), -EINVAL);
    ck_assert_ptr_nonnull(strstr(msg, "bound"));
#else /* a build without CUDA (make asan) refuses every GPU copy, naming why */
    ck_assert_int_eq(ex->gather(&x.mp, 0, 12, ext, count_done, NULL, msg, sizeof msg), -ENOTSUP);
    ck_assert_ptr_nonnull(strstr(msg, "without CUDA"));
#endif
    ck_assert_int_lt(ex->scatter(&x.mp, ext, 0, 12, count_done, NULL, msg, sizeof msg), 0);
    ck_assert_int_lt(ex->direct(&x.mp, count_done, NULL, msg, sizeof msg), 0);
    ck_assert_int_eq(done_calls, 0);
    ck_assert_int_eq(ex->check(&x.mp, 's', msg, sizeof msg), 0);
    struct copy_op out = prog_ops[0];
    out.src_off = 60;
    x.mp.ops = &out;
    ck_assert_int_eq(ex->check(&x.mp, 's', msg, sizeof msg), -ERANGE);
    ck_assert_ptr_nonnull(strstr(msg, "source"));
    exec_gpu_unbind(&x); /* unbound: nothing to release */
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("move_exec");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, every_executor_row_is_complete_and_named);
    suite_add_tcase(s, tc);
    tc = tcase_create("host");
    tcase_add_test(tc, host_gather_then_scatter_moves_the_programs_bytes_inline);
    tcase_add_test(tc, host_scatter_of_a_sub_range_writes_only_its_bytes);
    tcase_add_test(tc, host_direct_equals_gather_plus_scatter);
    tcase_add_test(tc, host_check_refuses_a_program_that_leaves_its_pools);
    suite_add_tcase(s, tc);
    tc = tcase_create("gpu");
    tcase_add_test(tc, gpu_row_refuses_an_unbound_program_and_checks_bounds);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
