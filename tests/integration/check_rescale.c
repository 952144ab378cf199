/* check_rescale.c: instance epochs (issue 26, docs/DESIGN.md §7 "Epochs"): a prefill instance
 * that stops and comes back under the same name in another shape (TP larger or smaller, PP,
 * another pool arrangement) or the same one, and sends the same request ids again, moves the
 * new request's bytes (kvferry-sim checks every byte; each round has its own pattern seed, so
 * an old request's bytes cannot pass). Real kvferryd daemons and kvferry-sim processes, on one
 * daemon and across two. Each restart happens after the old requests ended (read) and while
 * they were in flight (SENT to nobody yet, the old instance killed). The new instance's ranks
 * start from the highest down, each one's SENDs seen waiting before the next starts: a SEND of
 * a rank the old shape did not have comes first, the order that joined the old, served record
 * before epochs (its SENDs ended SENT at once with no byte read, the RECVs then failed).
 * Attention-DP rows: the decode names DP rank 1 while the prefill has attention-DP and none
 * otherwise (its readers' expectations follow the epoch); the prefill's ranks leave the count
 * of their readers to the daemon, and the rank the decode does not read is killed once it is
 * done (its SENDs wait for nobody). Across two daemons the
 * decode's daemon held the table of the other shape (cached 10 s): its RECVs were refused by
 * their plan against that table, BAD_REQUEST "attention-DP context (tp 2) needs the DP rank
 * that ran the request, got -1" (chaos seed 41017, issue 26). */
#include <check.h>

#include "remoteutil.h"
#include "wtest.h" /* wt_wait */

#define EXTRA "arena:\n  size: 32MiB\n  chunk: 4MiB\ngates:\n  min_bytes: 0\n" \
              "deadlines:\n  lookup: 20s\n  send_wait: 20s\n  transfer: 20s\n"
#define N_REQ "2"

struct env {
    struct two t;
    bool two; /* the decode instance at b (else at a, with the prefill) */
};

/* A wtest environment whose sims log into a's dir and connect to d's worker socket. */
static struct wenv at(struct env *v, const struct ru_daemon *d)
{
    struct wenv w;
    memset(&w, 0, sizeof w);
    tu_fmt(w.dir, sizeof w.dir, "%s", v->t.a.dir);
    tu_fmt(w.wsock, sizeof w.wsock, "%s", d->worker);
    return w;
}

static char *slurp(struct env *v, const char *log)
{
    struct wenv w = at(v, &v->t.a);
    return wt_log(&w, log);
}

/* SENDs of instance "pre" waiting at a. */
static long long sends_waiting(struct env *v)
{
    json_t *r = ru_ctl(&v->t.a, "transfers"), *x;
    size_t k;
    long long n = 0;
    json_array_foreach(json_object_get(r, "transfers"), k, x)
        n += tj_is(json_object_get(x, "side"), "send") &&
             tj_is(json_object_get(x, "instance"), "pre") &&
             tj_is(json_object_get(x, "state"), "waiting");
    json_decref(r);
    return n;
}

static void until_sends_waiting(struct env *v, long long want, const char *what)
{
    uint64_t end = ru_now_ms() + (uint64_t)tu_ms(20000);
    long long n;
    while ((n = sends_waiting(v)) < want) {
        ck_assert_msg(ru_now_ms() < end, "%s: %lld SENDs of pre waiting, not %lld", what, n, want);
        ru_sleep_ms(10);
    }
}

static void until_no_workers(struct env *v)
{
    uint64_t end = ru_now_ms() + (uint64_t)tu_ms(10000);
    for (;;) {
        size_t n = 0;
        for (int i = 0; i < 2; i++) {
            json_t *r = ru_ctl(i ? &v->t.b : &v->t.a, "workers");
            n += json_array_size(json_object_get(r, "workers"));
            json_decref(r);
        }
        if (n == 0)
            return;
        ck_assert_msg(ru_now_ms() < end, "%zu workers still registered", n);
        ru_sleep_ms(10);
    }
}

/* Starts every rank of prefill `spec` (highest first, each one's SENDs waiting before the
 * next); returns how many, their pids in pids. */
static bool adp(const char *spec)
{
    return strstr(spec, "adp=") != NULL;
}

static uint32_t start_prefill(struct env *v, const char *spec, const char *seed, pid_t *pids)
{
    struct preset_spec ps;
    char err[256];
    ck_assert_msg(preset_parse(spec, &ps, err, sizeof err) == 0, "%s", err);
    uint32_t n = preset_n_ranks(&ps);
    for (uint32_t i = n; i-- > 0;) {
        char rank[8], log[64];
        tu_fmt(rank, sizeof rank, "%u", i);
        tu_fmt(log, sizeof log, "pre-%s-%u.log", seed, i);
        struct wenv w = at(v, &v->t.a);
        pids[i] = wt_sim(&w, log, "--role", "context", "--instance", "pre", "--spec", spec,
                         "--rank", rank, "--requests", N_REQ, "--readers", adp(spec) ? "0" : "1",
                         "--seed", seed,
                         (char *)NULL);
        until_sends_waiting(v, (long long)(n - i) * 2, spec);
    }
    return n;
}

static pid_t start_decode(struct env *v, const char *spec, const char *seed)
{
    char log[64];
    tu_fmt(log, sizeof log, "dec-%s.log", seed);
    struct wenv w = at(v, v->two ? &v->t.b : &v->t.a);
    /* at b the prefill's home is named; at a it is registered there */
    const char *home[] = {"--ctx-home", v->t.a.addr}, *dp[] = {"--ctx-dp-rank", "1"};
    const char *x[4] = {NULL};
    int n = 0;
    if (adp(spec))
        x[n++] = dp[0], x[n++] = dp[1];
    if (v->two)
        x[n++] = home[0], x[n++] = home[1];
    return wt_sim(&w, log, "--role", "generation", "--instance", "dec", "--spec", "tiny", "--rank",
                  "0", "--requests", N_REQ, "--ctx-instance", "pre", "--seed", seed, x[0], x[1],
                  x[2], x[3], (char *)NULL);
}

/* The prefill of spec moves requests 1..N_REQ to the decode with pattern seed; every process
 * exits 0, the decode checked every byte and the prefill's SENDs read theirs. */
static void round_trip(struct env *v, const char *spec, const char *seed)
{
    pid_t pre[LAYOUT_MAX_TP * 2];
    uint32_t n = start_prefill(v, spec, seed, pre);
    pid_t dec = start_decode(v, spec, seed);
    char log[64];
    tu_fmt(log, sizeof log, "dec-%s.log", seed);
    int rd = wt_wait(dec, tu_ms(40000));
    char *dl = slurp(v, log);
    ck_assert_msg(rd == 0 && strstr(dl, "ok " N_REQ " failed 0") && strstr(dl, "parity OK"),
                  "%s seed %s: decode exit %d:\n%s", spec, seed, rd, dl);
    free(dl);
    for (uint32_t i = 0; i < n; i++) {
        if (adp(spec) && i != 1) { /* not the decode's DP rank: its SENDs have no reader */
            kill(pre[i], SIGKILL);
            wt_wait(pre[i], 5000);
            continue;
        }
        int rp = wt_wait(pre[i], tu_ms(40000));
        tu_fmt(log, sizeof log, "pre-%s-%u.log", seed, i);
        char *pl = slurp(v, log);
        /* SENT with the bytes read, not released empty by an old record's tally */
        ck_assert_msg(rp == 0 && strstr(pl, "ok " N_REQ " failed 0") && !strstr(pl, " bytes 0 "),
                      "%s seed %s: prefill rank %u exit %d:\n%s", spec, seed, i, rp, pl);
        free(pl);
    }
    until_no_workers(v);
}

/* The old prefill's SENDs wait for a reader that never comes; it is killed with them in
 * flight. */
static void killed_in_flight(struct env *v, const char *spec, const char *seed)
{
    pid_t pre[LAYOUT_MAX_TP * 2];
    uint32_t n = start_prefill(v, spec, seed, pre);
    for (uint32_t i = 0; i < n; i++) {
        kill(pre[i], SIGKILL);
        wt_wait(pre[i], 5000);
    }
    until_no_workers(v);
}

static void env_start(struct env *v, bool two)
{
    memset(v, 0, sizeof *v);
    v->two = two;
    two_start(&v->t, EXTRA, EXTRA, NULL);
}

static void env_stop(struct env *v, long long rounds)
{
    /* every round moved between the daemons when the decode was at b, none otherwise */
    long long moved = ru_peers_stat(&v->t.b, "remote_done");
    ck_assert_int_eq(moved < 0 ? 0 : moved, v->two ? rounds * 2 : 0);
    /* nothing left: no request, no landing or staging slot held */
    for (int i = 0; i < 2; i++) {
        const struct ru_daemon *d = i ? &v->t.b : &v->t.a;
        json_t *r = ru_ctl(d, "transfers");
        ck_assert_uint_eq(json_array_size(json_object_get(r, "transfers")), 0);
        json_decref(r);
        ru_wait_arenas_idle(d, i ? "b" : "a", 5000);
    }
    two_stop(&v->t, 1);
}

/* from -> to after the old requests were read, then -> from again with the old ones in flight. */
static void restart(const char *from, const char *to, bool two)
{
    struct env v;
    env_start(&v, two);
    round_trip(&v, from, "1");
    round_trip(&v, to, "2");
    killed_in_flight(&v, to, "3");
    round_trip(&v, from, "4");
    env_stop(&v, 3);
}

#define ROW(name, from, to)                                                                        \
    START_TEST(name##_one_daemon) { restart(from, to, false); }                                   \
    END_TEST                                                                                       \
    START_TEST(name##_two_daemons) { restart(from, to, true); }                                   \
    END_TEST

ROW(rescale_same_tp_moves_the_new_bytes, "tiny", "tiny")
ROW(rescale_tp1_to_tp2_and_back_moves_the_new_bytes, "tiny", "tiny:tp=2")
ROW(rescale_tp2_to_tp1_and_back_moves_the_new_bytes, "tiny:tp=2", "tiny")
ROW(rescale_pp1_to_pp2_and_back_moves_the_new_bytes, "tiny", "tiny:pp=2")
ROW(relayout_layer_to_block_major_and_back_moves_the_new_bytes, "tiny", "tiny:arr=block")
ROW(adp_to_no_adp_and_back_moves_the_new_bytes, "tiny:tp=2,adp=1", "tiny:tp=2")

int main(void)
{
    Suite *s = suite_create("rescale");
    TCase *one = tcase_create("one_daemon"), *two = tcase_create("two_daemons");
    tcase_set_timeout(one, 240);
    tcase_set_timeout(two, 240);
#define ADD(name)                                                                                  \
    tcase_add_test(one, name##_one_daemon);                                                        \
    tcase_add_test(two, name##_two_daemons)
    ADD(rescale_same_tp_moves_the_new_bytes);
    ADD(rescale_tp1_to_tp2_and_back_moves_the_new_bytes);
    ADD(rescale_tp2_to_tp1_and_back_moves_the_new_bytes);
    ADD(rescale_pp1_to_pp2_and_back_moves_the_new_bytes);
    ADD(relayout_layer_to_block_major_and_back_moves_the_new_bytes);
    ADD(adp_to_no_adp_and_back_moves_the_new_bytes);
    suite_add_tcase(s, one);
    suite_add_tcase(s, two);
    return tu_run(s);
}
