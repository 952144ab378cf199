/* check_bounce_copy.c: the bounce path between two daemons with its copies on the copy threads
 * (daemon/engine/bounce_host.c): the context side's copy threads writing the landing slots in
 * the peer's arena mapped over shared memory (bounce_stage.c, the default), or its puts straight
 * from the context pools (bounce_put.c, arena.shm_write put), with real kvferry-sim workers:
 * bytes land bitwise right every way (copied into the peer's slots, puts from the pools, or
 * gathered first: arena.direct_run 0); a generation worker killed while a scatter into its pools
 * runs, a context worker killed while a gather from its pools runs (into a staging slot or into
 * the peer's slot, or while puts from them stream), and a generation daemon killed while the
 * copy threads write its arena, leave the daemons up and serving, with no copy, pin, deferred
 * unmap, arena slot, request, worker or held peer left behind. */
#include <check.h>

#include "remoteutil.h"
#include "wtest.h" /* wt_wait */

#define SPEC "kimi-linear-48b:blocks=64,slots=4" /* small enough for TSan builds */
#define TOKENS "1024"
#define ARENA_ "arena:\n  size: 64MiB\n  chunk: 4MiB\n  window: 4\n"
#define GATES "gates:\n  min_bytes: 0\n"
#define ARENA ARENA_ GATES
#define PUT "  shm_write: put\n" /* UCX puts on the loop, not the copy threads into the slot */
#define ARENA_PUT ARENA_ PUT GATES
#define ARENA_GATHER ARENA_ PUT "  direct_run: 0\n" GATES /* every chunk gathered, then put */
/* deadlines far away: TSan builds on a loaded machine move a request in seconds */
#define COPY1 "copy:\n  threads: 1\ndeadlines:\n  send_wait: 30s\n  transfer: 60s\n"

static pid_t sim(const struct two *t, int gen, const char *tag, int n, pid_t hold)
{
    char bin[256], inst[32], peer[32], nr[16], hp[16];
    tu_bin("kvferry-sim", bin, sizeof bin);
    tu_fmt(inst, sizeof inst, "%s-%s", tag, gen ? "g" : "c");
    tu_fmt(peer, sizeof peer, "%s-c", tag);
    tu_fmt(nr, sizeof nr, "%d", n);
    tu_fmt(hp, sizeof hp, "%d", (int)hold);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0 && !getenv("KVF_TEST_VERBOSE"))
            dup2(fd, 1);
        if (gen)
            execl(bin, bin, "--role", "generation", "--instance", inst, "--spec", SPEC,
                  "--rank", "0", "--socket", t->b.worker, "--ctx-instance", peer, "--ctx-home", t->a.addr,
                  "--requests", nr, "--prompt-tokens", TOKENS, "--parity", "all", "--quiet",
                  (char *)NULL);
        else if (hold > 0)
            execl(bin, bin, "--role", "context", "--instance", inst, "--spec", SPEC, "--rank", "0", "--socket",
                  t->a.worker, "--requests", nr, "--prompt-tokens", TOKENS, "--readers", "1",
                  "--hold-while-pid", hp, "--quiet", (char *)NULL);
        else
            execl(bin, bin, "--role", "context", "--instance", inst, "--spec", SPEC, "--rank", "0", "--socket",
                  t->a.worker, "--requests", nr, "--prompt-tokens", TOKENS, "--readers", "1",
                  "--quiet", (char *)NULL);
        _exit(127);
    }
    return pid;
}


/* A pair of `n` requests whose generation checks every byte; 0 when both exited 0. */
static int run_pair(const struct two *t, const char *tag, int n)
{
    pid_t g = sim(t, 1, tag, n, 0);
    pid_t c = sim(t, 0, tag, n, g);
    int rg = wt_wait(g, 120000), rc = wt_wait(c, 120000);
    if (rg || rc)
        fprintf(stderr, "%s: generation exit %d, context exit %d\n", tag, rg, rc);
    return rg || rc;
}

/* The integer at a dotted path ("peers.paths.x") of a control command's result, or -1. */
static long long ctl_at(const struct ru_daemon *d, const char *cmd, const char *path)
{
    return ru_ctl_int(d, cmd, path);
}

static long long copy_int(const struct ru_daemon *d, const char *key)
{
    char k[64];
    tu_fmt(k, sizeof k, "copy.%s", key);
    return ctl_at(d, "status", k);
}

/* Waits until d holds no copy, pin, deferred unmap, slot, request or worker. */
static void assert_released(const struct ru_daemon *d, const char *who)
{
    uint64_t until = ru_now_ms() + tu_ms(15000);
    long long v[7];
    for (;;) {
        v[0] = copy_int(d, "running_jobs");
        v[1] = copy_int(d, "pinned_mappings");
        v[2] = copy_int(d, "deferred_unmaps");
        v[3] = ru_ctl_int(d, "arena", "slots_in_use");
        v[4] = ru_ctl_int(d, "arena", "quarantined_slots");
        json_t *x = ru_ctl(d, "transfers"), *w = ru_ctl(d, "workers");
        v[5] = (long long)json_array_size(json_object_get(x, "transfers"));
        v[6] = (long long)json_array_size(json_object_get(w, "workers"));
        json_decref(x);
        json_decref(w);
        int clear = 1;
        for (int i = 0; i < 7; i++)
            clear &= v[i] <= 0;
        if (clear || ru_now_ms() > until)
            break;
        ru_sleep_ms(20);
    }
    ck_assert_msg(v[0] == 0 && v[1] == 0 && v[2] == 0 && v[3] <= 0 && v[4] <= 0 && v[5] == 0 &&
                      v[6] == 0,
                  "%s daemon holds: %lld copy jobs, %lld pins, %lld deferred unmaps, %lld slots "
                  "in use, %lld quarantined, %lld transfers, %lld workers",
                  who, v[0], v[1], v[2], v[3], v[4], v[5], v[6]);
}

START_TEST(bounce_copies_puts_from_the_pools_and_gathers_land_bitwise_right)
{
    struct two t;
    two_start(&t, ARENA COPY1, ARENA COPY1, NULL);
    int bad = run_pair(&t, "copy", 3);
    long long copied = ctl_at(&t.a, "stats", "peers.paths.chunk_copied_to_peer");
    long long gathers = ctl_at(&t.a, "stats", "peers.host_gathers");
    long long direct = ctl_at(&t.a, "stats", "peers.direct_puts");
    /* the ways' table (bounce_way.h) counts the same chunks under its row */
    long long way = ctl_at(&t.a, "stats", "peers.chunk_ways.copy_to_peer");
    fprintf(stderr, "copies into the peer's slots: %lld chunks, %lld gathers, %lld puts\n", copied,
            gathers, direct);
    two_stop(&t, !bad);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_gt(copied, 0);
    ck_assert_int_eq(way, copied);
    ck_assert_int_eq(gathers, copied);
    ck_assert_int_eq(direct, 0);

    two_start(&t, ARENA_PUT COPY1, ARENA COPY1, NULL);
    bad = run_pair(&t, "direct", 3);
    direct = ctl_at(&t.a, "stats", "peers.direct_puts");
    long long scat = ctl_at(&t.b, "stats", "peers.host_scatters");
    fprintf(stderr, "puts from the pools: %lld direct puts, %lld scatters on the copy threads\n",
            direct, scat);
    two_stop(&t, !bad);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_gt(direct, 0);
    ck_assert_int_gt(scat, 0);

    two_start(&t, ARENA_GATHER COPY1, ARENA COPY1, NULL);
    bad = run_pair(&t, "gather", 3);
    long long gath = ctl_at(&t.a, "stats", "peers.host_gathers");
    long long off = ctl_at(&t.a, "stats", "peers.paths.chunk_gather_direct_off");
    long long wput = ctl_at(&t.a, "stats", "peers.chunk_ways.gather_put");
    long long woff = ctl_at(&t.a, "stats", "peers.chunk_ways.put_from_pools:direct_off");
    direct = ctl_at(&t.a, "stats", "peers.direct_puts");
    two_stop(&t, !bad);
    ck_assert_int_eq(wput, gath); /* every gathered chunk put after, refused the direct put */
    ck_assert_int_eq(woff, off);
    ck_assert_int_eq(bad, 0);
    ck_assert_int_gt(gath, 0);
    ck_assert_int_gt(off, 0);
    ck_assert_int_eq(direct, 0);
}
END_TEST

/* Kills `victim` (a sim of daemon d) while d runs a copy job, then checks both daemons. */
static void kill_mid_copy(struct two *t, const struct ru_daemon *d, int kill_gen, const char *what)
{
    pid_t g = sim(t, 1, what, 400, 0);
    pid_t c = sim(t, 0, what, 400, 0);
    uint64_t until = ru_now_ms() + tu_ms(60000);
    long long running = 0; /* as seen just before the kill: a second read could see it ended */
    while (ru_now_ms() < until && (running = copy_int(d, "running_jobs")) <= 0)
        ru_sleep_ms(1);
    kill(kill_gen ? g : c, SIGKILL);
    long long deferred = copy_int(d, "deferred_unmaps");
    fprintf(stderr, "%s: killed with %lld copy job(s) running, %lld unmap(s) deferred\n", what,
            running, deferred);
    kill(kill_gen ? c : g, SIGKILL);
    wt_wait(g, 5000);
    wt_wait(c, 5000);
    ck_assert_int_gt(running, 0);
    ck_assert_int_eq(kill(t->a.pid, 0), 0);
    ck_assert_int_eq(kill(t->b.pid, 0), 0);
    assert_released(&t->a, "context");
    assert_released(&t->b, "generation");
}

START_TEST(bounce_worker_killed_mid_copy_leaves_both_daemons_serving)
{
    struct two t;
    /* the context side gathers (direct_run 0), so both daemons run copy jobs */
    two_start(&t, ARENA_GATHER COPY1, ARENA COPY1, NULL);
    kill_mid_copy(&t, &t.b, 1, "gen-killed-mid-scatter");
    kill_mid_copy(&t, &t.a, 0, "ctx-killed-mid-gather");
    int bad = run_pair(&t, "after", 2); /* everyone else is still served */
    assert_released(&t.a, "context");
    assert_released(&t.b, "generation");
    two_stop(&t, !bad);
    ck_assert_int_eq(bad, 0);

    /* the copy threads write the peer's landing slots: its pools stay pinned under the copy */
    two_start(&t, ARENA COPY1, ARENA COPY1, NULL);
    kill_mid_copy(&t, &t.a, 0, "ctx-killed-mid-peer-copy");
    bad = run_pair(&t, "after-copy", 2);
    ck_assert_int_gt(ctl_at(&t.a, "stats", "peers.paths.chunk_copied_to_peer"), 0);
    two_stop(&t, !bad);
    ck_assert_int_eq(bad, 0);
}
END_TEST

static long long link_peers(const struct ru_daemon *d)
{
    json_t *r = ru_ctl(d, "status");
    long long n = (long long)json_array_size(json_object_get(json_object_get(r, "link"), "peers"));
    json_decref(r);
    return n;
}

START_TEST(bounce_generation_daemon_killed_while_copies_write_its_arena)
{
    struct two t;
    two_start(&t, ARENA COPY1, ARENA COPY1, NULL);
    pid_t g = sim(&t, 1, "peer", 400, 0);
    pid_t c = sim(&t, 0, "peer", 400, 0);
    uint64_t until = ru_now_ms() + 60000;
    long long running = 0;
    while (ru_now_ms() < until &&
           ((running = copy_int(&t.a, "running_jobs")) <= 0 ||
            ctl_at(&t.a, "stats", "peers.paths.chunk_copied_to_peer") <= 0))
        ru_sleep_ms(1);
    ru_daemon_kill9(&t.b); /* its arena stays mapped in a until a's copies into it ended */
    fprintf(stderr, "generation daemon killed with %lld copy job(s) running on the context side\n",
            running);
    kill(g, SIGKILL);
    kill(c, SIGKILL);
    wt_wait(g, 5000);
    wt_wait(c, 5000);
    ck_assert_int_gt(running, 0);
    ck_assert_int_eq(kill(t.a.pid, 0), 0);
    assert_released(&t.a, "context");
    until = ru_now_ms() + 15000; /* the peer, held while copies wrote its arena, is freed */
    while (link_peers(&t.a) > 0 && ru_now_ms() < until)
        ru_sleep_ms(20);
    ck_assert_int_eq(link_peers(&t.a), 0);
    /* a new generation daemon is served by the same context daemon */
    ck_assert_int_eq(ru_daemon_start(&t.b, t.top, "b", 0, t.secret, ARENA COPY1), 0);
    int bad = run_pair(&t, "after", 2);
    two_stop(&t, !bad);
    ck_assert_int_eq(bad, 0);
}
END_TEST

START_TEST(bounce_context_killed_while_puts_from_its_pools_stream)
{
    struct two t;
    two_start(&t, ARENA_PUT COPY1, ARENA COPY1, NULL);
    pid_t g = sim(&t, 1, "put", 400, 0);
    pid_t c = sim(&t, 0, "put", 400, 0);
    uint64_t until = ru_now_ms() + tu_ms(60000);
    while (ru_now_ms() < until && ctl_at(&t.a, "stats", "peers.direct_puts") <= 0)
        ru_sleep_ms(1);
    ck_assert_int_gt(ctl_at(&t.a, "stats", "peers.direct_puts"), 0);
    kill(c, SIGKILL);
    kill(g, SIGKILL);
    wt_wait(g, 5000);
    wt_wait(c, 5000);
    assert_released(&t.a, "context");
    assert_released(&t.b, "generation");
    int bad = run_pair(&t, "after", 2);
    two_stop(&t, !bad);
    ck_assert_int_eq(bad, 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("bounce_copy");
    TCase *tc = tcase_create("two_daemons");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, bounce_copies_puts_from_the_pools_and_gathers_land_bitwise_right);
    tcase_add_test(tc, bounce_worker_killed_mid_copy_leaves_both_daemons_serving);
    tcase_add_test(tc, bounce_generation_daemon_killed_while_copies_write_its_arena);
    tcase_add_test(tc, bounce_context_killed_while_puts_from_its_pools_stream);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
