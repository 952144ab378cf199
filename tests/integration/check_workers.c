/* check_workers.c: the same-daemon path end to end, with a real kvferryd and real kvferry-sim
 * processes: the parity matrix (every received byte checked against the global pattern), both
 * orders of SEND and RECV, workers killed mid-run, and an incompatible pairing. */
#include "wtest.h"

struct geo {
    const char *name, *ctx, *gen;
    const char *readers;  /* generation ranks: each SEND's n_readers */
    const char *prompt;
    const char *gen_extra[3]; /* extra generation arguments */
};

static const struct geo geos[] = {
    {"tp1_to_tp1", "tiny", "tiny", "1", "300", {NULL}},
    {"tp2_to_tp2_adp_off", "tiny:tp=2", "tiny:tp=2", "2", "300", {NULL}},
    {"tp2_to_tp2_adp_on", "tiny:tp=2,adp=1", "tiny:tp=2,adp=1", "2", "300", {"--ctx-dp-rank", "1", NULL}},
    {"tp2_to_tp4", "tiny:tp=2", "tiny:tp=4", "4", "300", {NULL}},
    {"tp4_to_tp2", "tiny:tp=4", "tiny:tp=2", "2", "300", {NULL}},
    {"pp2_to_pp1", "tiny:pp=2", "tiny", "1", "300", {NULL}},
    {"pp1_to_pp2", "tiny", "tiny:pp=2", "2", "300", {NULL}},
    {"pp_uneven_to_pp1", "tiny:pp=2,pp_layers=3+5", "tiny", "1", "300", {NULL}},
    {"dep2_to_dep4", "tiny:tp=2,adp=1", "tiny:tp=4,adp=1", "4", "300", {"--ctx-dp-rank", "0", NULL}},
    {"layer_major_to_block_major_split", "tiny:arr=layer", "tiny:arr=block,state=split,kv=split",
     "1", "300", {NULL}},
    {"prefix_cached", "tiny", "tiny", "1", "300", {"--gen-cached-tokens", "128", NULL}},
    {"kimi_tp1_to_tp1", "kimi-linear-48b:blocks=16,slots=2", "kimi-linear-48b:blocks=16,slots=2",
     "1", "300", {NULL}},
    {"kimi_tp2_to_tp4", "kimi-linear-48b:tp=2,blocks=16,slots=2",
     "kimi-linear-48b:tp=4,blocks=16,slots=2", "4", "200", {NULL}},
    {"kimi_pp2_to_pp1", "kimi-linear-48b:pp=2,blocks=16,slots=2",
     "kimi-linear-48b:blocks=16,slots=2", "1", "200", {NULL}},
    /* layout v2 planning: replicated KV heads, PP on one side, conversions on the way */
    {"qwen3_next_tp2_pp2_to_tp4", "qwen3-next-80b:hd=16,tp=2,pp=2,blocks=16,slots=2,tpb=16",
     "qwen3-next-80b:hd=16,tp=4,blocks=16,slots=2,tpb=16", "4", "200", {NULL}},
    {"qwen3_next_nhd_to_hnd", "qwen3-next-80b:hd=16,tp=2,blocks=16,slots=2,tpb=16",
     "qwen3-next-80b:hd=16,tp=2,blocks=16,slots=2,tpb=16,order=hnd", "2", "200", {NULL}},
    {"tokens_per_block_16_to_32", "tiny:tpb=16,blocks=32", "tiny:tpb=32,blocks=32", "1", "320",
     {NULL}},
    /* 21 context blocks of 16 to 11 of 32 (and back): the RECV gives the token count, the
     * rows past the prompt's last token stay as the generation rank left them */
    {"tokens_per_block_16_to_32_odd", "tiny:tpb=16,blocks=32", "tiny:tpb=32,blocks=32", "1",
     "328", {"--send-tokens", NULL}},
    {"tokens_per_block_32_to_16_odd", "tiny:tpb=32,blocks=32", "tiny:tpb=16,blocks=32", "1",
     "328", {"--send-tokens", NULL}},
    {"llama_3_70b_tp8_to_tp16", "llama-3-70b:tp=8,blocks=4,tpb=16",
     "llama-3-70b:tp=16,blocks=4,tpb=16", "16", "48", {NULL}},
};

START_TEST(workers_parity_matrix_through_the_local_path)
{
    const struct geo *g = &geos[_i];
    struct wenv e;
    wt_start(&e, NULL);
    pid_t c = wt_sim(&e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec", g->ctx,
                     "--all-ranks", "--requests", "3", "--prompt-tokens", g->prompt, "--readers",
                     g->readers, (char *)NULL);
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec", g->gen,
                     "--all-ranks", "--requests", "3", "--prompt-tokens", g->prompt,
                     "--ctx-instance", "ctx", g->gen_extra[0] ? g->gen_extra[0] : "--quiet",
                     g->gen_extra[1] ? g->gen_extra[1] : "--quiet", (char *)NULL);
    int gq = wt_wait(q, 50000), gc = wt_wait(c, 20000);
    char *gl = wt_log(&e, "gen.log"), *cl = wt_log(&e, "ctx.log");
    ck_assert_msg(gq == 0, "%s: generation exit %d:\n%s", g->name, gq, gl);
    ck_assert_msg(gc == 0, "%s: context exit %d:\n%s", g->name, gc, cl);
    ck_assert_msg(strstr(gl, "parity OK") && !strstr(gl, "FAILED"), "%s:\n%s", g->name, gl);
    free(gl);
    free(cl);
    ck_assert_uint_eq(wt_ctl_count(&e, "transfers", "transfers"), 0);
    wt_stop(&e);
}
END_TEST

/* Transfers listed with field f reading v and state "waiting". */
static size_t waiting_count(struct wenv *e, const char *f, const char *v)
{
    json_t *r = wt_ctl(e, "transfers"), *x;
    size_t k, n = 0;
    json_array_foreach(json_object_get(r, "transfers"), k, x)
        n += tj_is(json_object_get(x, f), v) && tj_is(json_object_get(x, "state"), "waiting");
    json_decref(r);
    return n;
}

/* Waits (asking every 10 ms) until at least want transfers with f = v are waiting. */
static void until_waiting(struct wenv *e, const char *f, const char *v, size_t want, int ms)
{
    int64_t end = wt_now_ms() + ms;
    size_t n;
    while ((n = waiting_count(e, f, v)) < want) {
        ck_assert_msg(wt_now_ms() < end, "%zu transfer(s) with %s=%s waiting after %d ms, not %zu",
                      n, f, v, ms, want);
        usleep(10000);
    }
}

static pid_t ordering_ctx(struct wenv *e)
{
    return wt_sim(e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec", "tiny:tp=2",
                  "--all-ranks", "--requests", "2", "--readers", "2", (char *)NULL);
}

static pid_t ordering_gen(struct wenv *e)
{
    return wt_sim(e, "gen.log", "--role", "generation", "--instance", "gen", "--spec", "tiny:tp=2",
                  "--all-ranks", "--requests", "2", "--ctx-instance", "ctx", (char *)NULL);
}

/* One side starts late; while it is late, the other side's requests wait in the daemon. The
 * late side starts once every request of the early one is seen waiting (an event, not a delay
 * that a loaded machine can outlast), and the deadlines are far from anything this test
 * measures: a late side's start under load must not meet deadlines.lookup or send_wait. */
static void ordering(int recv_first)
{
    struct wenv e;
    wt_start(&e, "deadlines:\n  lookup: 30s\n  send_wait: 30s\n  transfer: 30s\n");
    pid_t c = -1, q = -1;
    if (recv_first)
        q = ordering_gen(&e);
    else
        c = ordering_ctx(&e);
    /* the early side's requests (2 ranks x 2) wait in the daemon while the other side is late */
    until_waiting(&e, "side", recv_first ? "recv" : "send", 4, 20000);
    if (recv_first)
        c = ordering_ctx(&e);
    else
        q = ordering_gen(&e);
    int gq = wt_wait(q, 30000), gc = wt_wait(c, 30000);
    char *gl = wt_log(&e, "gen.log");
    ck_assert_msg(gq == 0 && gc == 0, "gen %d ctx %d:\n%s", gq, gc, gl);
    ck_assert_ptr_nonnull(strstr(gl, "parity OK"));
    free(gl);
    wt_stop(&e);
}

START_TEST(workers_send_before_recv_meets) { ordering(0); }
END_TEST
START_TEST(workers_recv_before_send_meets) { ordering(1); }
END_TEST

START_TEST(workers_generation_killed_mid_run_leaves_the_others_served)
{
    struct wenv e;
    wt_start(&e, "deadlines:\n  send_wait: 1s\n  transfer: 1s\n");
    /* a pair that must finish, and a second pair whose generation worker gets killed. The pair
     * that finishes does not race the 1 s deadlines (kept short for cb's unclaimed SENDs): ga's
     * RECVs wait up to 10 s, and ca starts once ga is registered, so its SENDs find them. */
    pid_t ga = wt_sim(&e, "ga.log", "--role", "generation", "--instance", "ga", "--spec", "tiny",
                      "--rank", "0", "--requests", "30", "--ctx-instance", "ca", "--deadline-ms",
                      "10000", (char *)NULL);
    pid_t cb = wt_sim(&e, "cb.log", "--role", "context", "--instance", "cb", "--spec", "tiny",
                      "--rank", "0", "--requests", "400", (char *)NULL);
    pid_t gb = wt_sim(&e, "gb.log", "--role", "generation", "--instance", "gb", "--spec", "tiny",
                      "--rank", "0", "--requests", "400", "--ctx-instance", "cb", (char *)NULL);
    wt_until_listed(&e, 10000, "workers", "workers", "instance", "ga", NULL, NULL);
    pid_t ca = wt_sim(&e, "ca.log", "--role", "context", "--instance", "ca", "--spec", "tiny",
                      "--rank", "0", "--requests", "30", "--start-delay-ms", "300", (char *)NULL);
    /* mid-run: gb registered and requests completing */
    wt_until_listed(&e, 10000, "workers", "workers", "instance", "gb", NULL, NULL);
    for (int64_t end = wt_now_ms() + 10000; wt_xfer_stat(&e, "done") < 1;) {
        ck_assert_msg(wt_now_ms() < end, "no request done within 10 s");
        usleep(10000);
    }
    kill(gb, SIGKILL);
    ck_assert_int_eq(wt_wait(gb, 5000), 128 + SIGKILL);
    /* the killed worker's registration and requests are gone at once */
    int64_t t0 = wt_now_ms();
    int gone = 0;
    while (!gone && wt_now_ms() - t0 < 2000) {
        json_t *r = wt_ctl(&e, "transfers");
        json_t *a = json_object_get(r, "transfers"), *x;
        size_t k;
        gone = 1;
        json_array_foreach(a, k, x)
            gone &= strcmp(json_string_value(json_object_get(x, "instance")), "gb") != 0;
        json_decref(r);
        if (!gone)
            usleep(10000);
    }
    ck_assert_msg(gone, "requests of the killed worker still listed");
    int rga = wt_wait(ga, 40000), rca = wt_wait(ca, 40000);
    char *l = wt_log(&e, "ga.log");
    ck_assert_msg(rga == 0 && rca == 0 && strstr(l, "parity OK"), "ga %d ca %d:\n%s", rga, rca, l);
    free(l);
    /* cb's unclaimed SENDs are released at their deadline; then nothing is left in flight */
    kill(cb, SIGKILL);
    wt_wait(cb, 5000);
    for (int i = 0; i < 200 && wt_ctl_count(&e, "transfers", "transfers") > 0; i++)
        usleep(10000);
    ck_assert_uint_eq(wt_ctl_count(&e, "transfers", "transfers"), 0);
    ck_assert_uint_eq(wt_ctl_count(&e, "workers", "workers"), 0);
    wt_stop(&e);
}
END_TEST

START_TEST(workers_context_killed_while_recv_waits_fails_it_quickly_with_peer_lost)
{
    struct wenv e;
    wt_start(&e, "deadlines:\n  send_wait: 20s\n  transfer: 20s\n");
    pid_t c = wt_sim(&e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec", "tiny",
                     "--rank", "0", "--requests", "2", "--start-delay-ms", "20000", (char *)NULL);
    /* registered, sleeping before its SENDs */
    wt_until_listed(&e, 10000, "workers", "instances", "id", "ctx", "home", "true");
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec", "tiny",
                     "--rank", "0", "--requests", "2", "--ctx-instance", "ctx", "--expect-error",
                     "PEER_LOST", (char *)NULL);
    /* both its RECVs wait for the context's SENDs: now the context goes away. Both, not one: a
     * RECV the daemon reads after the context is gone finds no rank of it and fails
     * UNKNOWN_INSTANCE at deadlines.lookup, not PEER_LOST */
    until_waiting(&e, "instance", "gen", 2, 10000);
    int64_t t0 = wt_now_ms();
    kill(c, SIGKILL);
    wt_wait(c, 5000);
    int rq = wt_wait(q, 10000);
    int64_t dt = wt_now_ms() - t0;
    char *l = wt_log(&e, "gen.log");
    ck_assert_msg(rq == 0, "generation exit %d:\n%s", rq, l);
    ck_assert_msg(dt < 3000, "PEER_LOST took %lld ms", (long long)dt);
    ck_assert_ptr_nonnull(strstr(l, "went away"));
    free(l);
    wt_stop(&e);
}
END_TEST

/* The generation side fails PEER_INCOMPATIBLE with the reason, and the context side learns it:
 * its SENDs end FAILED with the same verdict (not at their deadline, 90 s here by default). */
START_TEST(workers_incompatible_pair_fails_both_sides_with_the_reason)
{
    struct wenv e;
    wt_start(&e, NULL);
    pid_t c = wt_sim(&e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec", "tiny:tp=2",
                     "--all-ranks", "--requests", "2", "--readers", "2", "--expect-error",
                     "PEER_INCOMPATIBLE", (char *)NULL);
    wt_until_listed(&e, 10000, "workers", "instances", "id", "ctx", "home", "true");
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec",
                     "tiny:tp=2,hd=64", "--all-ranks", "--requests", "2", "--ctx-instance", "ctx",
                     "--expect-error", "PEER_INCOMPATIBLE", (char *)NULL);
    int rq = wt_wait(q, 20000), rc = wt_wait(c, 20000);
    char *gl = wt_log(&e, "gen.log"), *cl = wt_log(&e, "ctx.log");
    ck_assert_msg(rq == 0, "generation exit %d:\n%s", rq, gl);
    ck_assert_ptr_nonnull(strstr(gl, "head inner bytes differ"));
    /* the context side heard the verdict from its readers */
    ck_assert_msg(rc == 0 && strstr(cl, "head inner bytes differ"), "context exit %d:\n%s", rc, cl);
    free(gl);
    free(cl);
    wt_stop(&e);
}
END_TEST

/* Rule 8 through the daemon: a generation layout without the context's recurrent-state group
 * is PEER_INCOMPATIBLE naming the group (never DONE with the attention bytes alone), and the
 * context's SENDs are not served: they end FAILED with the same verdict. */
START_TEST(workers_generation_omitting_a_group_is_refused_naming_it)
{
    struct wenv e;
    wt_start(&e, NULL);
    pid_t c = wt_sim(&e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec",
                     "qwen3-next-80b:hd=16,tp=2,blocks=8,slots=2,tpb=16", "--all-ranks",
                     "--requests", "2", "--prompt-tokens", "64", "--readers", "2", "--expect-error",
                     "PEER_INCOMPATIBLE", (char *)NULL);
    until_waiting(&e, "side", "send", 4, 20000); /* both ranks registered and sending */
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec",
                     "qwen3-next-80b:hd=16,tp=2,blocks=8,slots=2,tpb=16,omit=gdn", "--all-ranks",
                     "--requests", "2", "--prompt-tokens", "64", "--ctx-instance", "ctx",
                     "--expect-error", "PEER_INCOMPATIBLE", (char *)NULL);
    int rq = wt_wait(q, 20000), rc = wt_wait(c, 20000);
    char *gl = wt_log(&e, "gen.log"), *cl = wt_log(&e, "ctx.log");
    ck_assert_msg(rq == 0, "generation exit %d:\n%s", rq, gl);
    /* exit 0 under --expect-error: every request failed with that error, none completed */
    ck_assert_msg(strstr(gl, "PEER_INCOMPATIBLE: groups.gdn: omitted by generation rank"), "%s",
                  gl);
    ck_assert_msg(rc == 0 && strstr(cl, "groups.gdn: omitted by generation rank"),
                  "context exit %d:\n%s", rc, cl);
    free(gl);
    free(cl);
    wt_stop(&e);
}
END_TEST

START_TEST(workers_sigterm_fails_waiting_requests_with_an_event_and_exits_0)
{
    struct wenv e;
    wt_start(&e, "daemon:\n  drain_timeout: 300ms\ndeadlines:\n  send_wait: 20s\n  transfer: 20s\n");
    pid_t c = wt_sim(&e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec", "tiny",
                     "--rank", "0", "--requests", "1", "--start-delay-ms", "20000", (char *)NULL);
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec", "tiny",
                     "--rank", "0", "--requests", "2", "--ctx-instance", "ctx", "--expect-error",
                     "CANCELLED", (char *)NULL);
    for (int i = 0; i < 200 && wt_ctl_count(&e, "transfers", "transfers") < 2; i++)
        usleep(10000);
    ck_assert_uint_eq(wt_ctl_count(&e, "transfers", "transfers"), 2);
    int64_t t0 = wt_now_ms();
    kill(e.daemon, SIGTERM);
    int rd = wt_wait(e.daemon, 10000);
    e.daemon = 0;
    ck_assert_int_eq(rd, 0);
    ck_assert_int_lt(wt_now_ms() - t0, 3000);
    int rq = wt_wait(q, 10000);
    char *l = wt_log(&e, "gen.log");
    ck_assert_msg(rq == 0 && strstr(l, "the daemon is stopping"), "generation exit %d:\n%s", rq, l);
    free(l);
    kill(c, SIGKILL);
    wt_wait(c, 5000);
    wt_stop(&e);
}
END_TEST

static Suite *workers_suite(void)
{
    Suite *s = suite_create("workers");
    TCase *p = tcase_create("parity");
    tcase_set_timeout(p, 60);
    tcase_add_loop_test(p, workers_parity_matrix_through_the_local_path, 0,
                        (int)(sizeof geos / sizeof geos[0]));
    tcase_add_test(p, workers_send_before_recv_meets);
    tcase_add_test(p, workers_recv_before_send_meets);
    suite_add_tcase(s, p);
    TCase *f = tcase_create("faults");
    tcase_set_timeout(f, 60);
    tcase_add_test(f, workers_generation_killed_mid_run_leaves_the_others_served);
    tcase_add_test(f, workers_context_killed_while_recv_waits_fails_it_quickly_with_peer_lost);
    tcase_add_test(f, workers_incompatible_pair_fails_both_sides_with_the_reason);
    tcase_add_test(f, workers_generation_omitting_a_group_is_refused_naming_it);
    tcase_add_test(f, workers_sigterm_fails_waiting_requests_with_an_event_and_exits_0);
    suite_add_tcase(s, f);
    return s;
}

int main(void) { return tu_run(workers_suite()); }
