/* check_reader_nack.c: the context side always learns the end (issue 13 item 4, docs/DESIGN.md
 * §7). A reader whose worker is SIGKILLed, or whose layout is refused as incompatible, ends the
 * context rank's SEND FAILED with the reason within a second (not at its 90 s deadline), on the
 * same daemon and between two real daemons; so does a reader whose request its plan refuses (a
 * block id twice), between two daemons. The dead reader is a real process (a forked rank
 * with its own libkvferry connection) killed with SIGKILL. A restarted prefill that reuses the
 * id is served: the failures belong to the SEND generation they were counted in. */
#include <check.h>

#include "remoteutil.h"

#define TINY "tiny:blocks=128,slots=16"
#define TINY_BAD TINY ",hd=64" /* head inner bytes differ: PEER_INCOMPATIBLE */
#define LONG_DEADLINES "deadlines:\n  send_wait: 60s\n  transfer: 30s\n"
#define WITHIN_MS 1000u

static void recv_args(struct ru_rank *r, uint64_t req, const char *home, struct kvf_recv_args *a)
{
    *a = (struct kvf_recv_args){.req_id = req,
                                .ctx_instance = "ctx",
                                .ctx_dp_rank = -1,
                                .ctx_home = home,
                                .n_groups = r->l.n_groups,
                                .counts = r->counts,
                                .ids = r->ids};
}

/* Transfers of daemon d on side ("send" or "recv"). */
static size_t listed(const struct ru_daemon *d, const char *side)
{
    json_t *r = ru_ctl(d, "transfers"), *x;
    size_t k, n = 0;
    json_array_foreach(json_object_get(r, "transfers"), k, x)
        n += tj_is(json_object_get(x, "side"), side);
    json_decref(r);
    return n;
}

static void until_listed(const struct ru_daemon *d, const char *side, size_t want, unsigned ms)
{
    uint64_t until = ru_now_ms() + ms;
    while (listed(d, side) != want) {
        ck_assert_msg(ru_now_ms() < until, "%zu %s transfers listed, want %zu", listed(d, side),
                      side, want);
        ru_sleep_ms(10);
    }
}

struct recv_of {
    uint64_t req;
    const char *home;
};

static int do_recv(struct ru_rank *r, void *arg)
{
    const struct recv_of *o = arg;
    struct kvf_recv_args a;
    recv_args(r, o->req, o->home, &a);
    return kvf_recv(r->c, &a);
}

/* A generation rank in its own process: registers with d, RECVs req, then waits to be killed. */
static pid_t reader_process(struct ru_inst *gen, const struct ru_daemon *d, uint64_t req,
                            const char *home)
{
    struct recv_of o = {req, home};
    return ru_rank_fork(gen, 0, d, do_recv, &o);
}

static void kill_reader(pid_t pid)
{
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    int st;
    ck_assert_int_eq(waitpid(pid, &st, 0), pid);
    ck_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
}

/* SENDs req from the context rank and waits for its end: FAILED with want within WITHIN_MS. */
static void send_fails_fast(struct ru_inst *ctx, uint64_t req, uint32_t n_readers,
                            kvf_error_t want, const char *what)
{
    struct ru_rank *r = &ctx->r[0];
    uint64_t t0 = ru_now_ms();
    ck_assert_int_eq(kvf_send(r->c, req, r->l.n_groups, r->counts, r->ids, n_readers), 0);
    struct kvf_event ev;
    int k = ru_wait_event(r, req, &ev, 10000);
    uint64_t took = ru_now_ms() - t0;
    ck_assert_msg(k == KVF_EV_FAILED, "%s: the SEND ended %d (%s)", what, k, ev.message);
    ck_assert_msg(ev.error == (int32_t)want, "%s: %s: %s", what, kvf_error_to_string(ev.error), ev.message);
    ck_assert_msg(strstr(ev.message, "no reader can come"), "%s: %s", what, ev.message);
    ck_assert_msg(took < WITHIN_MS, "%s: the SEND ended after %llu ms", what,
                  (unsigned long long)took);
    fprintf(stderr, "%s: SEND FAILED %s %llu ms after it was sent: %s\n", what,
            kvf_error_to_string(ev.error), (unsigned long long)took, ev.message);
}

/* The context rank's SEND is already waiting when the failing reader's RECV (of ids: NULL, its
 * own) comes: both end FAILED `want`, the SEND with the reader's reason `why`. */
static void send_then_failed(struct ru_inst *ctx, struct ru_inst *bad, uint64_t req,
                             uint32_t n_readers, const char *home, const uint32_t *ids,
                             kvf_error_t want, const char *why, const struct ru_daemon *cd,
                             const struct ru_daemon *gd, const char *what)
{
    struct ru_rank *r = &ctx->r[0];
    ck_assert_int_eq(kvf_send(r->c, req, r->l.n_groups, r->counts, r->ids, n_readers), 0);
    until_listed(cd, "send", 1, 5000);
    struct kvf_recv_args a;
    recv_args(&bad->r[0], req, home, &a);
    if (ids)
        a.ids = ids;
    uint64_t t0 = ru_now_ms();
    ck_assert_int_eq(kvf_recv(bad->r[0].c, &a), 0);
    struct kvf_event ev;
    ck_assert_int_eq(ru_wait_event(&bad->r[0], req, &ev, 10000), KVF_EV_FAILED);
    ck_assert_msg(ev.error == (int32_t)want, "%s: reader %s: %s", what,
                  kvf_error_to_string(ev.error), ev.message);
    int k = ru_wait_event(r, req, &ev, 10000);
    uint64_t took = ru_now_ms() - t0;
    if (k != KVF_EV_FAILED) {
        ru_dump_log(cd, "context daemon");
        if (gd)
            ru_dump_log(gd, "generation daemon");
    }
    ck_assert_msg(k == KVF_EV_FAILED, "%s: the SEND ended %d (%s)", what, k, ev.message);
    ck_assert_msg(ev.error == (int32_t)want, "%s: %s: %s", what, kvf_error_to_string(ev.error),
                  ev.message);
    ck_assert_msg(strstr(ev.message, why) && strstr(ev.message, "no reader can come"),
                  "%s: no reason: %s", what, ev.message);
    ck_assert_msg(took < WITHIN_MS, "%s: the SEND ended %llu ms after the RECV", what,
                  (unsigned long long)took);
    fprintf(stderr, "%s: SEND FAILED %s %llu ms after the failing RECV: %s\n", what,
            kvf_error_to_string(ev.error), (unsigned long long)took, ev.message);
}

static void send_then_refused(struct ru_inst *ctx, struct ru_inst *bad, uint64_t req,
                              uint32_t n_readers, const char *home, const struct ru_daemon *cd,
                              const struct ru_daemon *gd, const char *what)
{
    send_then_failed(ctx, bad, req, n_readers, home, NULL, KVF_E_PEER_INCOMPATIBLE,
                     "head inner bytes differ", cd, gd, what);
}

START_TEST(nack_dead_reader_on_the_same_daemon_ends_the_send)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = LONG_DEADLINES, .spec = TINY, .blocks = 8,
                                            .rng = 31, .gen_at = TWO_GEN_UNREGISTERED});
    for (uint32_t n_readers = 0; n_readers <= 1; n_readers++) { /* 0: counted by the daemon */
        uint64_t req = 10 + n_readers;
        pid_t pid = reader_process(&t.gen, &t.a, req, NULL);
        until_listed(&t.a, "recv", 1, 5000);
        kill_reader(pid);
        until_listed(&t.a, "recv", 0, 5000); /* the daemon saw the reader go */
        send_fails_fast(&t.ctx, req, n_readers, KVF_E_PEER_LOST,
                        n_readers ? "same daemon, dead reader" : "same daemon, dead reader, n_readers 0");
    }
    ck_assert_uint_eq(listed(&t.a, "send"), 0);
    two_stop(&t, 1);
}
END_TEST

START_TEST(nack_refused_reader_on_the_same_daemon_ends_the_send)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = LONG_DEADLINES, .spec = TINY,
                                            .gen_spec = TINY_BAD, .gen_id = "bad", .blocks = 8,
                                            .rng = 32, .gen_at = TWO_GEN_AT_A});
    send_then_refused(&t.ctx, &t.gen, 20, 1, NULL, &t.a, NULL, "same daemon, refused reader");
    send_then_refused(&t.ctx, &t.gen, 21, 0, NULL, &t.a, NULL, "same daemon, refused reader, n_readers 0");
    /* the RECV first: the SEND that comes later finds the refusal */
    struct kvf_recv_args a;
    struct kvf_event ev;
    recv_args(&t.gen.r[0], 22, NULL, &a);
    ck_assert_int_eq(kvf_recv(t.gen.r[0].c, &a), 0);
    ck_assert_int_eq(ru_wait_event(&t.gen.r[0], 22, &ev, 10000), KVF_EV_FAILED);
    send_fails_fast(&t.ctx, 22, 1, KVF_E_PEER_INCOMPATIBLE, "same daemon, refused before the SEND");
    two_stop(&t, 1);
}
END_TEST

START_TEST(nack_dead_reader_between_daemons_ends_the_send)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = LONG_DEADLINES, .extra_b = LONG_DEADLINES,
                                            .spec = TINY, .blocks = 8, .rng = 33,
                                            .gen_at = TWO_GEN_UNREGISTERED});
    pid_t pid = reader_process(&t.gen, &t.b, 40, t.a.addr);
    /* its RECV_REQ waits at the context daemon for the SEND */
    ru_wait_peers_stat(&t.a, "flows", 1, 5000);
    kill_reader(pid);
    ru_wait_peers_stat(&t.a, "reader_nacks_recv", 1, 5000);
    send_fails_fast(&t.ctx, 40, 1, KVF_E_PEER_LOST, "two daemons, dead reader");
    ck_assert_uint_eq(listed(&t.a, "send"), 0);
    two_stop(&t, 1);
}
END_TEST

START_TEST(nack_refused_reader_between_daemons_ends_the_send)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = LONG_DEADLINES, .extra_b = LONG_DEADLINES,
                                            .spec = TINY, .gen_spec = TINY_BAD, .gen_id = "bad",
                                            .blocks = 8, .rng = 34});
    send_then_refused(&t.ctx, &t.gen, 50, 1, t.a.addr, &t.a, &t.b, "two daemons, refused reader");
    /* the verdict is cached at the generation daemon: the next refusal still tells the SEND */
    send_then_refused(&t.ctx, &t.gen, 51, 0, t.a.addr, &t.a, &t.b,
                      "two daemons, refused reader (cached verdict), n_readers 0");
    two_stop(&t, 1);
}
END_TEST

/* A prefill that restarted reuses the id of a request whose readers failed: the failures stay
 * with the ended SEND generation, so the new SEND waits for its reader and is served (the
 * failures were once kept by id alone and ended the new SEND FAILED at once). */
static void restarted_is_served(struct ru_inst *ctx, struct ru_inst *gen, uint64_t req,
                                const char *home, const char *what)
{
    uint32_t readers[64] = {0};
    ru_fill_and_send(ctx, gen, req, -1, 77 + req, readers);
    struct kvf_recv_args a;
    recv_args(&gen->r[0], req, home, &a);
    ck_assert_int_eq(kvf_recv(gen->r[0].c, &a), 0);
    struct kvf_event ev;
    int k = ru_wait_event(&gen->r[0], req, &ev, 20000);
    ck_assert_msg(k == KVF_EV_DONE, "%s: the RECV ended %d (%s)", what, k, ev.message);
    k = ru_wait_event(&ctx->r[0], req, &ev, 20000);
    ck_assert_msg(k == KVF_EV_SENT, "%s: the SEND ended %d (%s)", what, k, ev.message);
    ru_assert_parity(&gen->r[0], 0, 77 + req, what);
}

START_TEST(nack_reused_id_does_not_see_the_old_failures)
{
    struct two t;
    two_start(&t, LONG_DEADLINES, LONG_DEADLINES, NULL);
    uint64_t rng = 35;
    struct ru_inst ctx, bad, gen, bad2, gen2;
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 8, &rng, 0x5a);
    ru_inst_init(&bad, TINY_BAD, "bad", ROLE_GENERATION, 8, &rng, RU_POISON);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 8, &rng, RU_POISON);
    ru_inst_init(&bad2, TINY_BAD, "bad2", ROLE_GENERATION, 8, &rng, RU_POISON);
    ru_inst_init(&gen2, TINY, "gen2", ROLE_GENERATION, 8, &rng, RU_POISON);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&bad, &t.a);
    ru_inst_register(&gen, &t.a);
    ru_inst_register(&bad2, &t.b);
    ru_inst_register(&gen2, &t.b);
    /* same daemon: the refusal comes before the SEND (a pending failure the SEND adopted) */
    struct kvf_recv_args a;
    struct kvf_event ev;
    recv_args(&bad.r[0], 60, NULL, &a);
    ck_assert_int_eq(kvf_recv(bad.r[0].c, &a), 0);
    ck_assert_int_eq(ru_wait_event(&bad.r[0], 60, &ev, 10000), KVF_EV_FAILED);
    send_fails_fast(&ctx, 60, 1, KVF_E_PEER_INCOMPATIBLE, "same daemon, refused, first request");
    restarted_is_served(&ctx, &gen, 60, NULL, "same daemon, restarted request");
    /* two daemons: a READER_NACK for the SEND in flight */
    send_then_refused(&ctx, &bad2, 61, 1, t.a.addr, &t.a, &t.b, "two daemons, first request");
    restarted_is_served(&ctx, &gen2, 61, t.a.addr, "two daemons, restarted request");
    ck_assert_uint_eq(listed(&t.a, "send"), 0);
    ru_inst_free(&ctx);
    ru_inst_free(&bad);
    ru_inst_free(&gen);
    ru_inst_free(&bad2);
    ru_inst_free(&gen2);
    two_stop(&t, 1);
}
END_TEST

/* A reader cancelled while no rank of its context instance was registered here, more than
 * deadlines.lookup before the instance registered (a RECV of it issued after the cancel failed
 * UNKNOWN_INSTANCE meanwhile), was an earlier incarnation's: the new instance's SEND of that id
 * waits for its reader and is served. It once adopted the failure and ended CANCELLED at once,
 * and its reader then waited send_wait (chaos seed 77031: the context daemon had restarted, the
 * cancelled RECVs' instance never registered again before the next one did). */
START_TEST(nack_reader_failed_before_a_late_registration_is_not_counted)
{
    struct two t;
    two_start(&t, "deadlines:\n  lookup: 500ms\n  send_wait: 5s\n  transfer: 10s\n", NULL, NULL);
    uint64_t rng = 77;
    struct ru_inst ctx, gen;
    ru_inst_init(&ctx, TINY, "ctx", ROLE_CONTEXT, 8, &rng, 0x5a);
    ru_inst_init(&gen, TINY, "gen", ROLE_GENERATION, 8, &rng, RU_POISON);
    ru_inst_register(&gen, &t.a); /* ctx not yet: no rank of it registered */
    struct kvf_recv_args a;
    struct kvf_event ev;
    recv_args(&gen.r[0], 70, NULL, &a);
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    ck_assert_int_eq(kvf_cancel(gen.r[0].c, 70), 0);
    ck_assert_int_eq(ru_wait_event(&gen.r[0], 70, &ev, 10000), KVF_EV_FAILED);
    ck_assert_int_eq(ev.error, KVF_E_CANCELLED);
    recv_args(&gen.r[0], 71, NULL, &a); /* waits deadlines.lookup for the instance, in vain */
    ck_assert_int_eq(kvf_recv(gen.r[0].c, &a), 0);
    ck_assert_int_eq(ru_wait_event(&gen.r[0], 71, &ev, 10000), KVF_EV_FAILED);
    ck_assert_msg(ev.error == KVF_E_UNKNOWN_INSTANCE, "%s: %s", kvf_error_to_string(ev.error),
                  ev.message);
    ru_inst_register(&ctx, &t.a);
    restarted_is_served(&ctx, &gen, 70, NULL, "a reader cancelled before a late registration");
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, 1);
}
END_TEST

/* A reader whose request its plan refuses (a block id twice: admitted, every id in range) tells
 * the writers its shape reads; before, its SEND waited for its deadline. The next request of a
 * good reader is served. */
START_TEST(nack_bad_request_reader_between_daemons_ends_the_send)
{
    struct two t;
    two_start_insts(&t, &(struct two_insts){.extra_a = LONG_DEADLINES, .extra_b = LONG_DEADLINES,
                                            .spec = TINY, .blocks = 8, .rng = 36});
    uint32_t *dup = malloc(t.gen.r[0].n_ids * sizeof *dup);
    ck_assert_ptr_nonnull(dup);
    ru_ids_with_a_duplicate(&t.gen.r[0], dup);
    send_then_failed(&t.ctx, &t.gen, 55, 1, t.a.addr, dup, KVF_E_BAD_REQUEST, "twice", &t.a, &t.b,
                     "two daemons, a block id twice");
    ck_assert_int_eq(ru_peers_stat(&t.b, "reader_nacks_unsent"), 0);
    restarted_is_served(&t.ctx, &t.gen, 56, t.a.addr, "two daemons, the next request");
    free(dup);
    two_stop(&t, 1);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("reader_nack");
    TCase *tc = tcase_create("nack");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, nack_dead_reader_on_the_same_daemon_ends_the_send);
    tcase_add_test(tc, nack_refused_reader_on_the_same_daemon_ends_the_send);
    tcase_add_test(tc, nack_dead_reader_between_daemons_ends_the_send);
    tcase_add_test(tc, nack_refused_reader_between_daemons_ends_the_send);
    tcase_add_test(tc, nack_reused_id_does_not_see_the_old_failures);
    tcase_add_test(tc, nack_reader_failed_before_a_late_registration_is_not_counted);
    tcase_add_test(tc, nack_bad_request_reader_between_daemons_ends_the_send);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(suite());
}
