/* check_engine_due.c: the engine's tick asks a part only while it holds something due
 * (engine_due, engine_clock.c; docs/DESIGN.md §5b): a registration keeps the earlier time, a
 * registration kicks the tick within one period even when it was armed far ahead, and every
 * part's tick says "nothing held" (0) when it holds nothing, so an idle part drops out. */
#include <check.h>
#include <string.h>
#include <uv.h>

#include "daemon.h"
#include "engine_fence.h"
#include "engine_gpu.h"
#include "engine_lost.h"
#include "engine_pnack.h"
#include "engine_quar.h"
#include "engine_tab.h"
#include "testutil.h"

static int fired;

static void on_tick(uv_timer_t *h)
{
    (void)h;
    fired++;
}

START_TEST(due_keeps_the_earlier_registration_per_part)
{
    static struct engine e; /* no tick: registrations only */
    memset(&e, 0, sizeof e);
    ck_assert_uint_eq(engine_next_due(&e), 0);
    engine_due(&e, EPART_LOST, 5000);
    engine_due(&e, EPART_LOST, 9000);
    ck_assert_uint_eq(e.due[EPART_LOST], 5000);
    engine_due(&e, EPART_LOST, 3000);
    ck_assert_uint_eq(e.due[EPART_LOST], 3000);
    engine_due(&e, EPART_TAB, 0); /* 0: at the next tick */
    ck_assert_uint_eq(e.due[EPART_TAB], ENGINE_DUE_NEXT);
    ck_assert_uint_eq(engine_next_due(&e), ENGINE_DUE_NEXT);
    for (int p = 0; p < EPART__COUNT; p++)
        if (p != EPART_LOST && p != EPART_TAB)
            ck_assert_uint_eq(e.due[p], 0);
}
END_TEST

START_TEST(due_brings_a_far_armed_tick_back_within_one_period)
{
    static struct daemon d;
    static struct engine e;
    memset(&d, 0, sizeof d);
    memset(&e, 0, sizeof e);
    ck_assert_int_eq(uv_loop_init(&d.loop), 0);
    e.d = &d;
    ck_assert_int_eq(uv_timer_init(&d.loop, &e.tick), 0);
    e.tick_cb = on_tick;
    e.tick_inited = true;
    uv_timer_start(&e.tick, on_tick, 60000, ENGINE_TICK_MS); /* armed for a table's drop */
    engine_due(&e, EPART_FENCE, ENGINE_DUE_NEXT);
    ck_assert(uv_is_active((uv_handle_t *)&e.tick));
    ck_assert_uint_le(uv_timer_get_due_in(&e.tick), ENGINE_TICK_MS);
    fired = 0;
    uv_run(&d.loop, UV_RUN_ONCE);
    ck_assert_int_eq(fired, 1);
    e.stopping = true; /* a stopping engine is not kicked */
    uv_timer_stop(&e.tick);
    engine_due(&e, EPART_GPU, ENGINE_DUE_NEXT);
    ck_assert(!uv_is_active((uv_handle_t *)&e.tick));
    uv_close((uv_handle_t *)&e.tick, NULL);
    uv_run(&d.loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&d.loop), 0);
}
END_TEST

START_TEST(parts_holding_nothing_drop_out_of_the_tick)
{
    static struct daemon d;
    static struct engine e;
    memset(&d, 0, sizeof d);
    memset(&e, 0, sizeof e);
    e.d = &d;
    ck_assert_uint_eq(tab_tick(&e, 1000), 0);
    ck_assert_uint_eq(pnack_tick(&e, 1000), 0);
    ck_assert_uint_eq(quar_tick(&e, 1000), 0);
    ck_assert_uint_eq(fence_tick(&e, 1000), 0);
    ck_assert_uint_eq(lost_redial(&e, 1000), 0);
    ck_assert_uint_eq(home_tick(&e, 1000), 0);
    ck_assert_uint_eq(egpu_tick(&e, 1000), 0);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine_due");
    TCase *tc = tcase_create("registration");
    tcase_add_test(tc, due_keeps_the_earlier_registration_per_part);
    tcase_add_test(tc, due_brings_a_far_armed_tick_back_within_one_period);
    tcase_add_test(tc, parts_holding_nothing_drop_out_of_the_tick);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
