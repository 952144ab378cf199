/* check_remote_layout_once.c: the generation layout travels once per (peer, registration)
 * (daemon/engine/engine_laycache.h), between two real daemons: many requests of one instance
 * send it once and name it afterwards; a generation instance that registers again with another
 * layout is planned against the new one; more instances than WIRE_LAYOUT_SLOTS evict the least
 * recently used layout, which is sent again. Every request's bytes are checked bitwise. */
#include <check.h>

#include "remoteutil.h"
#include "wire.h"

#define EXTRA "arena:\n  size: 32MiB\n  chunk: 4MiB\ngates:\n  min_bytes: 0\n  min_blocks: 0\n"
enum { NB = 2 };

/* Moves request req from ctx to gen (one rank each, NB blocks) and checks every byte. */
static void move_tiny(struct two *t, struct ru_inst *ctx, struct ru_inst *gen, uint64_t req)
{
    ru_move_one(t->a.addr, ctx, gen, req, 0x600d + req, 40000);
}

/* The laycache counters of both daemons: sent/referenced by b (generation), decoded/missed by
 * a (context). */
static void expect(struct two *t, long long sent, long long referenced)
{
    ck_assert_int_eq(ru_peers_stat(&t->b, "layouts_sent"), sent);
    ck_assert_int_eq(ru_peers_stat(&t->b, "layouts_referenced"), referenced);
    ck_assert_int_eq(ru_peers_stat(&t->a, "layouts_decoded"), sent);
    ck_assert_int_eq(ru_peers_stat(&t->a, "layouts_missed"), 0);
}

/* Two daemons, a tiny context instance at a and a tiny generation instance "gen" at b. */
static void start_pair(struct two *t, struct ru_inst *ctx, struct ru_inst *gen, uint64_t *rng)
{
    two_start(t, EXTRA, EXTRA, NULL);
    ru_inst_init(ctx, "tiny", "ctx", ROLE_CONTEXT, NB, rng, 0x5a);
    ru_inst_init(gen, "tiny", "gen", ROLE_GENERATION, NB, rng, RU_POISON);
    ru_inst_register(ctx, &t->a);
    ru_inst_register(gen, &t->b);
}

START_TEST(remote_many_requests_send_the_layout_once)
{
    struct two t;
    uint64_t rng = 0x1a;
    struct ru_inst ctx, gen;
    start_pair(&t, &ctx, &gen, &rng);
    for (uint64_t q = 1; q <= 20; q++)
        move_tiny(&t, &ctx, &gen, q);
    expect(&t, 1, 19);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

static void wait_no_workers(const struct ru_daemon *d)
{
    uint64_t end = ru_now_ms() + 10000;
    for (;;) {
        json_t *r = ru_ctl(d, "workers");
        size_t n = json_array_size(json_object_get(r, "workers"));
        json_decref(r);
        if (n == 0)
            return;
        ck_assert_msg(ru_now_ms() < end, "%zu worker(s) still connected after 10 s", n);
        ru_sleep_ms(10);
    }
}

START_TEST(remote_reregistered_generation_is_planned_against_its_new_layout)
{
    struct two t;
    uint64_t rng = 0x2b;
    struct ru_inst ctx, gen;
    start_pair(&t, &ctx, &gen, &rng);
    move_tiny(&t, &ctx, &gen, 1);
    move_tiny(&t, &ctx, &gen, 2);
    expect(&t, 1, 1);
    /* the same instance again, its KV rows head-major now: a new registration, a new layout */
    ru_inst_free(&gen);
    wait_no_workers(&t.b);
    ru_inst_init(&gen, "tiny:order=hnd", "gen", ROLE_GENERATION, NB, &rng, RU_POISON);
    ru_inst_register(&gen, &t.b);
    move_tiny(&t, &ctx, &gen, 3); /* planned against the old layout, the bytes would be wrong */
    move_tiny(&t, &ctx, &gen, 4);
    expect(&t, 2, 2);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

START_TEST(remote_layouts_past_the_slot_limit_are_evicted_and_sent_again)
{
    struct two t;
    two_start(&t, EXTRA, EXTRA, NULL);
    uint64_t rng = 0x3c;
    enum { NG = WIRE_LAYOUT_SLOTS + 1 };
    struct ru_inst ctx, gen[NG];
    ru_inst_init(&ctx, "tiny", "ctx", ROLE_CONTEXT, NB, &rng, 0x5a);
    ru_inst_register(&ctx, &t.a);
    for (uint32_t i = 0; i < NG; i++) {
        char id[16];
        snprintf(id, sizeof id, "gen%u", i);
        ru_inst_init(&gen[i], "tiny", id, ROLE_GENERATION, NB, &rng, RU_POISON);
        ru_inst_register(&gen[i], &t.b);
    }
    uint64_t q = 1;
    for (uint32_t i = 0; i < WIRE_LAYOUT_SLOTS; i++) /* every slot taken */
        move_tiny(&t, &ctx, &gen[i], q++);
    move_tiny(&t, &ctx, &gen[WIRE_LAYOUT_SLOTS - 1], q++); /* held: named */
    expect(&t, WIRE_LAYOUT_SLOTS, 1);
    move_tiny(&t, &ctx, &gen[WIRE_LAYOUT_SLOTS], q++); /* one past the limit: evicts gen0's */
    move_tiny(&t, &ctx, &gen[1], q++);                 /* still held */
    expect(&t, WIRE_LAYOUT_SLOTS + 1, 2);
    move_tiny(&t, &ctx, &gen[0], q++); /* evicted: sent again (evicting gen2's) */
    move_tiny(&t, &ctx, &gen[0], q++);
    expect(&t, WIRE_LAYOUT_SLOTS + 2, 3);
    ru_inst_free(&ctx);
    for (uint32_t i = 0; i < NG; i++)
        ru_inst_free(&gen[i]);
    two_stop(&t, 1);
}
END_TEST

static Suite *layout_once_suite(void)
{
    Suite *s = suite_create("remote_layout_once");
    TCase *t = tcase_create("two_daemons");
    tcase_set_timeout(t, 240);
    tcase_add_test(t, remote_many_requests_send_the_layout_once);
    tcase_add_test(t, remote_reregistered_generation_is_planned_against_its_new_layout);
    tcase_add_test(t, remote_layouts_past_the_slot_limit_are_evicted_and_sent_again);
    suite_add_tcase(s, t);
    return s;
}

int main(void) { return tu_run(layout_once_suite()); }
