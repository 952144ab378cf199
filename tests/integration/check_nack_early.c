/* check_nack_early.c: the context side learns the end of a reader that failed before anything
 * could tell it (issue 13 item 4's gaps, docs/DESIGN.md §7), with real daemons: context
 * instance ctx (tp 2) homed at daemon A, a generation rank (tp 1, reading both context ranks) at
 * daemon B.
 *  - before its table came: ctx's rank 1 is not registered yet, so A answers B's table request
 *    UNKNOWN_INSTANCE and B asks again; the reader is cancelled (or its lookup deadline passes:
 *    UNKNOWN_INSTANCE, or its worker is SIGKILLed) while it waits. Once rank 1 registers, B gets
 *    the table, finds the writers the failed reader would have read and NACKs both: rank 0's
 *    SEND, waiting already, ends FAILED with the reason within a second of the registration,
 *    and rank 1's SEND, coming later, at once; also when the reader's request is one its plan
 *    would refuse (a block id twice: the writers its shape reads);
 *  - its writer's daemon not connected: rank 1 lives on a third daemon C (SIGSTOPped, so B's
 *    connection to it cannot finish); the reader is cancelled; the NACK for rank 1 waits at B
 *    and goes out once C runs again: its SEND ends FAILED within a second of the SIGCONT
 *    (rank 0's, read from A while the reader was cancelled, ends at once: FAILED, or SENT when
 *    its flow put every byte first; a NACK that came while that flow still read once left it
 *    to its deadline).
 * Each case failed before engine_pnack.c: those SENDs waited for their deadline (60 s here).
 *  - its home restarted: A is killed (B knew it: a request of another instance moved), a
 *    reader of ctx fails at B while A is down (its table never came: PEER_UNREACHABLE); A
 *    comes back at the same address, ctx registers again and SENDs the same id. The failed
 *    reader was of the old incarnation: B drops its NACK (reader_nacks_stale) when the table
 *    comes from the new one, whose SENDs wait for their reader and are served. Before, B told
 *    them and both ended FAILED PEER_UNREACHABLE at once (chaos seed 52021, issue 26). */
#include <check.h>

#include "remoteutil.h"

#define CTX "tiny:tp=2,blocks=128,slots=16"
#define GEN "tiny:blocks=128,slots=16"
#define LONG "deadlines:\n  send_wait: 60s\n  transfer: 30s\n  lookup: 30s\n"
#define SHORT_LOOKUP "deadlines:\n  send_wait: 60s\n  transfer: 30s\n  lookup: 400ms\n"
#define WITHIN_MS 1000u

struct early {
    struct two t;
    struct ru_inst ctx, gen;
    uint32_t readers[64];
};

static void early_start(struct early *x, const char *gen_cfg)
{
    two_start(&x->t, LONG, gen_cfg, NULL);
    uint64_t rng = 51;
    ru_inst_init(&x->ctx, CTX, "ctx", ROLE_CONTEXT, 8, &rng, 0x5a);
    ru_inst_init(&x->gen, GEN, "gen", ROLE_GENERATION, 8, &rng, RU_POISON);
    memset(x->readers, 0, sizeof x->readers);
    ru_readers(&x->ctx, &x->gen, -1, x->readers);
    ck_assert_uint_eq(x->readers[0], 1); /* the generation rank reads both context ranks */
    ck_assert_uint_eq(x->readers[1], 1);
    ru_inst_register(&x->gen, &x->t.b);
}

static void early_stop(struct early *x)
{
    ru_inst_free(&x->ctx);
    ru_inst_free(&x->gen);
    two_stop(&x->t, 1);
}

static void send_req(struct ru_inst *ctx, uint32_t rank, uint64_t req)
{
    struct ru_rank *r = &ctx->r[rank];
    ck_assert_int_eq(kvf_send(r->c, req, r->l.n_groups, r->counts, r->ids, 1), 0);
}

static void recv_req(struct early *x, uint64_t req)
{
    struct kvf_recv_args a;
    ru_recv_args(&x->gen.r[0], req, "ctx", x->t.a.addr, &a);
    ck_assert_int_eq(kvf_recv(x->gen.r[0].c, &a), 0);
}

/* The SEND of req from ctx's rank ends FAILED with `want` in its message within WITHIN_MS of
 * t0; returns the time it took. */
static uint64_t send_fails(struct ru_inst *ctx, uint32_t rank, uint64_t req, uint64_t t0,
                           kvf_error_t want, const char *what, const struct ru_daemon *d1,
                           const struct ru_daemon *d2)
{
    struct kvf_event ev;
    int k = ru_wait_event(&ctx->r[rank], req, &ev, 10000);
    uint64_t took = ru_now_ms() - t0;
    if (k != KVF_EV_FAILED || took >= WITHIN_MS) {
        ru_dump_log(d1, "context daemon");
        ru_dump_log(d2, "generation daemon");
    }
    ck_assert_msg(k == KVF_EV_FAILED, "%s: rank %u's SEND ended %d (%s)", what, rank, k,
                  ev.message);
    ck_assert_msg(ev.error == (int32_t)want && strstr(ev.message, "no reader can come") &&
                  strstr(ev.message, kvf_error_to_string(want)),
                  "%s: rank %u's SEND: %s: %s", what, rank, kvf_error_to_string(ev.error),
                  ev.message);
    ck_assert_msg(took < WITHIN_MS, "%s: rank %u's SEND ended %llu ms later", what, rank,
                  (unsigned long long)took);
    fprintf(stderr, "%s: rank %u's SEND FAILED %s %llu ms later: %s\n", what, rank,
            kvf_error_to_string(ev.error), (unsigned long long)took, ev.message);
    return took;
}

/* Rank 1 registers now (the table becomes complete at A): both SENDs end FAILED. */
static void table_comes(struct early *x, uint64_t req, kvf_error_t want, const char *what)
{
    uint64_t t0 = ru_now_ms();
    ru_rank_register(&x->ctx, 1, &x->t.a, NULL);
    send_fails(&x->ctx, 0, req, t0, want, what, &x->t.a, &x->t.b);
    ru_wait_peers_stat(&x->t.a, "reader_nacks_recv", 2, 5000); /* the NACK for rank 1 too */
    send_req(&x->ctx, 1, req);
    send_fails(&x->ctx, 1, req, ru_now_ms(), want, what, &x->t.a, &x->t.b);
    ck_assert_int_ge(ru_peers_stat(&x->t.b, "reader_nacks_queued"), 1);
}

START_TEST(a_reader_cancelled_before_its_table_came_ends_the_sends)
{
    struct early x;
    early_start(&x, LONG);
    ru_rank_register(&x.ctx, 0, &x.t.a, NULL); /* rank 1 not yet: the table is incomplete */
    send_req(&x.ctx, 0, 100);
    recv_req(&x, 100);
    ru_wait_peers_stat(&x.t.b, "table_retries", 1, 5000); /* B asks A again and again */
    ck_assert_int_eq(kvf_cancel(x.gen.r[0].c, 100), 0);
    struct kvf_event ev;
    ck_assert_int_eq(ru_wait_event(&x.gen.r[0], 100, &ev, 10000), KVF_EV_FAILED);
    ck_assert_int_eq(ev.error, KVF_E_CANCELLED);
    table_comes(&x, 100, KVF_E_CANCELLED, "cancelled before the table");
    early_stop(&x);
}
END_TEST

/* Its request would be refused by its plan too (a block id twice): the writers its shape reads
 * are told all the same (before, nobody: its plan failed, so its writers stayed unknown). */
START_TEST(a_refused_request_cancelled_before_its_table_came_ends_the_sends)
{
    struct early x;
    early_start(&x, LONG);
    ru_rank_register(&x.ctx, 0, &x.t.a, NULL);
    send_req(&x.ctx, 0, 104);
    uint32_t *dup = malloc(x.gen.r[0].n_ids * sizeof *dup);
    ck_assert_ptr_nonnull(dup);
    ru_ids_with_a_duplicate(&x.gen.r[0], dup);
    struct kvf_recv_args a;
    ru_recv_args(&x.gen.r[0], 104, "ctx", x.t.a.addr, &a);
    a.ids = dup;
    ck_assert_int_eq(kvf_recv(x.gen.r[0].c, &a), 0);
    ru_wait_peers_stat(&x.t.b, "table_retries", 1, 5000);
    ck_assert_int_eq(kvf_cancel(x.gen.r[0].c, 104), 0);
    struct kvf_event ev;
    ck_assert_int_eq(ru_wait_event(&x.gen.r[0], 104, &ev, 10000), KVF_EV_FAILED);
    ck_assert_int_eq(ev.error, KVF_E_CANCELLED);
    table_comes(&x, 104, KVF_E_CANCELLED, "refused request cancelled before the table");
    ck_assert_int_eq(ru_peers_stat(&x.t.b, "reader_nacks_unsent"), 0);
    free(dup);
    early_stop(&x);
}
END_TEST

static int do_recv(struct ru_rank *r, void *arg)
{
    struct kvf_recv_args a;
    ru_recv_args(r, 103, "ctx", arg, &a);
    return kvf_recv(r->c, &a);
}

START_TEST(a_reader_whose_worker_died_before_its_table_came_ends_the_sends)
{
    struct early x;
    early_start(&x, LONG);
    uint64_t rng = 52;
    struct ru_inst dead;
    ru_inst_init(&dead, GEN, "dead", ROLE_GENERATION, 8, &rng, RU_POISON);
    ru_rank_register(&x.ctx, 0, &x.t.a, NULL);
    send_req(&x.ctx, 0, 103);
    pid_t pid = ru_rank_fork(&dead, 0, &x.t.b, do_recv, x.t.a.addr); /* RECVs 103, then waits */
    ru_wait_peers_stat(&x.t.b, "table_retries", 1, 5000);
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ru_wait_peers_stat(&x.t.b, "reader_nacks_queued", 1, 5000); /* B saw its worker go */
    table_comes(&x, 103, KVF_E_PEER_LOST, "worker killed before the table");
    ru_inst_free(&dead);
    early_stop(&x);
}
END_TEST

START_TEST(a_reader_whose_table_never_came_in_time_ends_the_sends)
{
    struct early x;
    early_start(&x, SHORT_LOOKUP);
    ru_rank_register(&x.ctx, 0, &x.t.a, NULL);
    send_req(&x.ctx, 0, 101);
    recv_req(&x, 101);
    struct kvf_event ev; /* deadlines.lookup passes at B: UNKNOWN_INSTANCE */
    ck_assert_int_eq(ru_wait_event(&x.gen.r[0], 101, &ev, 10000), KVF_EV_FAILED);
    ck_assert_msg(ev.error == KVF_E_UNKNOWN_INSTANCE, "%s: %s", kvf_error_to_string(ev.error),
                  ev.message);
    table_comes(&x, 101, KVF_E_UNKNOWN_INSTANCE, "UNKNOWN_INSTANCE before the table");
    early_stop(&x);
}
END_TEST

START_TEST(a_reader_whose_writers_daemon_is_not_connected_ends_its_send_once_it_is)
{
    struct early x;
    early_start(&x, LONG);
    struct ru_daemon c;
    ck_assert_int_eq(ru_daemon_start(&c, x.t.top, "c", 1, x.t.secret, LONG), 0);
    ru_rank_register(&x.ctx, 0, &x.t.a, x.t.a.addr);
    ru_rank_register(&x.ctx, 1, &c, x.t.a.addr); /* C forwards its layout to the home A */
    ru_wait_peers_stat(&c, "layouts_forwarded", 1, 5000);
    send_req(&x.ctx, 0, 102);
    send_req(&x.ctx, 1, 102);
    ru_wait_listed(&c, "transfers", "transfers", "side", "send", NULL, NULL, 5000);
    ck_assert_int_eq(kill(c.pid, SIGSTOP), 0); /* B's connection to C cannot finish */
    recv_req(&x, 102);
    ru_wait_peers_stat(&x.t.a, "flows", 1, 5000); /* B planned: its flow from A is on */
    ck_assert_int_eq(kvf_cancel(x.gen.r[0].c, 102), 0);
    struct kvf_event ev;
    ck_assert_int_eq(ru_wait_event(&x.gen.r[0], 102, &ev, 10000), KVF_EV_FAILED);
    /* rank 0 at A: its flow may have put every byte before the cancel reached A (SENT), else
     * the reader's NACK ends it (FAILED); either way at once, not at its deadline */
    uint64_t t_a = ru_now_ms();
    int k = ru_wait_event(&x.ctx.r[0], 102, &ev, 10000);
    ck_assert_msg((k == KVF_EV_SENT || (k == KVF_EV_FAILED && ev.error == KVF_E_CANCELLED)) &&
                  ru_now_ms() - t_a < WITHIN_MS, "rank 0's SEND at A: %d %s: %s", k,
                  kvf_error_to_string(ev.error), ev.message);
    ru_wait_peers_stat(&x.t.b, "reader_nacks_queued", 1, 5000); /* rank 1's waits at B */
    uint64_t t0 = ru_now_ms();
    ck_assert_int_eq(kill(c.pid, SIGCONT), 0);
    send_fails(&x.ctx, 1, 102, t0, KVF_E_CANCELLED, "writer's daemon not connected (after SIGCONT)",
               &c, &x.t.b);
    ck_assert_int_eq(ru_peers_stat(&x.t.b, "reader_nacks_unsent"), 0);
    ck_assert_int_eq(ru_daemon_stop(&c), 0);
    early_stop(&x);
}
END_TEST

/* B's NACKs waiting for A resolved: dropped as stale, or told to A. */
static void until_nacks_resolved(struct early *x)
{
    uint64_t end = ru_now_ms() + (uint64_t)tu_ms(10000);
    while (ru_peers_stat(&x->t.b, "reader_nacks_stale") < 1 &&
           ru_peers_stat(&x->t.a, "reader_nacks_recv") < 1) {
        ck_assert_msg(ru_now_ms() < end, "B's waiting NACK neither dropped nor told to A");
        ru_sleep_ms(10);
    }
}

START_TEST(a_reader_failed_while_its_home_was_down_is_not_told_to_the_restarted_home)
{
    struct early x;
    early_start(&x, LONG);
    uint64_t rng = 52021;
    struct ru_inst warm;
    ru_inst_init(&warm, GEN, "warm", ROLE_CONTEXT, 8, &rng, 0x33);
    ru_inst_register(&warm, &x.t.a);
    ru_move_one(x.t.a.addr, &warm, &x.gen, 1, 91, tu_ms(10000)); /* B knows A's daemon id */
    ru_inst_free(&warm);
    ru_daemon_kill9(&x.t.a);
    recv_req(&x, 300); /* ctx's table never came from the old A: the reader fails */
    struct kvf_event ev;
    ck_assert_int_eq(ru_wait_event(&x.gen.r[0], 300, &ev, 10000), KVF_EV_FAILED);
    /* unreachable, or lost when B's fetch went out on its link to the old A before it saw the
     * kill (a loaded machine) */
    ck_assert_msg(ev.error == KVF_E_PEER_UNREACHABLE || ev.error == KVF_E_PEER_LOST, "%s: %s",
                  kvf_error_to_string(ev.error), ev.message);
    ru_wait_peers_stat(&x.t.b, "reader_nacks_queued", 1, 5000);
    ck_assert_int_eq(ru_daemon_restart(&x.t.a), 0); /* a new incarnation, the same address */
    ru_inst_free(&x.ctx);
    rng = 51;
    ru_inst_init(&x.ctx, CTX, "ctx", ROLE_CONTEXT, 8, &rng, 0x5a);
    ru_inst_register(&x.ctx, &x.t.a);
    uint32_t readers[64] = {0};
    ru_fill_and_send(&x.ctx, &x.gen, 300, -1, 300, readers);
    until_nacks_resolved(&x);
    json_t *tr = ru_ctl(&x.t.a, "transfers"), *o;
    size_t i, waiting = 0;
    json_array_foreach(json_object_get(tr, "transfers"), i, o)
        waiting += tj_is(json_object_get(o, "side"), "send");
    json_decref(tr);
    ck_assert_msg(waiting == 2, "%zu of the new incarnation's 2 SENDs wait for their reader: "
                  "the old reader's NACK ended the others", waiting);
    recv_req(&x, 300);
    int k = ru_wait_event(&x.gen.r[0], 300, &ev, 20000);
    ck_assert_msg(k == KVF_EV_DONE, "the new RECV ended %d %s: %s", k,
                  kvf_error_to_string(ev.error), ev.message);
    for (uint32_t r = 0; r < 2; r++) {
        k = ru_wait_event(&x.ctx.r[r], 300, &ev, 20000);
        ck_assert_msg(k == KVF_EV_SENT, "rank %u's SEND of the new incarnation ended %d %s: %s",
                      r, k, kvf_error_to_string(ev.error), ev.message);
    }
    ru_assert_parity(&x.gen.r[0], 0, 300, "after the home restarted");
    ck_assert_int_eq(ru_peers_stat(&x.t.b, "reader_nacks_stale"), 1);
    ck_assert_int_le(ru_peers_stat(&x.t.a, "reader_nacks_recv"), 0);
    early_stop(&x);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("nack_early");
    TCase *tc = tcase_create("early");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_reader_cancelled_before_its_table_came_ends_the_sends);
    tcase_add_test(tc, a_refused_request_cancelled_before_its_table_came_ends_the_sends);
    tcase_add_test(tc, a_reader_whose_worker_died_before_its_table_came_ends_the_sends);
    tcase_add_test(tc, a_reader_whose_table_never_came_in_time_ends_the_sends);
    tcase_add_test(tc, a_reader_whose_writers_daemon_is_not_connected_ends_its_send_once_it_is);
    tcase_add_test(tc, a_reader_failed_while_its_home_was_down_is_not_told_to_the_restarted_home);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
