/* check_worker_exit.c: a worker with a large pool exits (its memfds held by nothing but the
 * daemon's mapping, so the daemon's unmap frees every page) while another pair of real
 * kvferry-sim workers moves requests: the release runs on the unmapper thread
 * (daemon/base/unmapper.h), not the loop, so the pair keeps moving through it and ends bitwise
 * right (whether one of its requests completes inside a release is timing: printed, not
 * asserted; scripts/bench-exit measures the loop's stall); the same rank registers again at once and is served; the pools' memory leaves the
 * daemon (RssShmem, and no mapping of the memfd left in /proc/<pid>/maps). */
#include <check.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include "kvferry.h"
#include "layout.h"
#include "preset.h"
#include "wtest.h"

#define BIG_BYTES (1ull << 30) /* the exiting rank's pools: a large rank's worth of pages */
#define MEMFD_NAME "kvf-exit-test"
#define PAIR_SPEC "kimi-linear-48b"
#define PAIR_TOKENS "128"

static const char *cfg(void)
{
    static char b[192];
    return tu_fmt(b, sizeof b, "copy:\n  threads: 2\nworkers:\n  max_blocks: 16777216\n"
                  "deadlines:\n  send_wait: %ums\n  transfer: %ums\n", tu_ms(5000), tu_ms(5000));
}

static json_t *section(struct wenv *e, const char *cmd, const char *sec)
{
    json_t *r = wt_ctl(e, cmd), *s = json_incref(json_object_get(r, sec));
    json_decref(r);
    return s;
}

static long long int_of(json_t *o, const char *key)
{
    return json_integer_value(json_object_get(o, key));
}

static long long stat_int(struct wenv *e, const char *sec, const char *key)
{
    json_t *s = section(e, "stats", sec);
    long long v = int_of(s, key);
    json_decref(s);
    return v;
}

/* The daemon's RssShmem (kB), and whether its maps still name the test's memfds. */
static long long daemon_shmem_kib(const struct wenv *e, bool *mapped)
{
    char path[64], line[512];
    long long kib = -1;
    snprintf(path, sizeof path, "/proc/%d/status", (int)e->daemon);
    FILE *f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        sscanf(line, "RssShmem: %lld kB", &kib);
    if (f)
        fclose(f);
    *mapped = false;
    snprintf(path, sizeof path, "/proc/%d/maps", (int)e->daemon);
    f = fopen(path, "r");
    while (f && fgets(line, sizeof line, f))
        *mapped |= strstr(line, "/memfd:" MEMFD_NAME) != NULL;
    if (f)
        fclose(f);
    ck_assert_int_ge(kib, 0);
    return kib;
}

/* A forked worker: sealed memfd pools of BIG_BYTES in all, their pages in (the kernel writes
 * them: MADV_POPULATE_WRITE), registered as context rank 0 of "big"; then every fd on the
 * memfds closed (the library keeps dups for a reconnect), so the daemon's mapping is their
 * last reference. Writes 'R' (or 'F') to `ready`; exits when `go` closes, or is killed. */
struct big {
    pid_t pid;
    int ready, go;
    long long prefaulted; /* stats.workers.prefaults_done before it */
};

static void close_fds_on(dev_t dev, ino_t ino)
{
    for (int fd = 3; fd < 1024; fd++) {
        struct stat st;
        if (fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
            close(fd);
    }
}

static void big_main(const char *wsock, int ready, int go)
{
    struct preset_spec ps;
    struct layout l;
    char err[512] = "", spec[64];
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    struct stat st[LAYOUT_MAX_POOLS];
    uint64_t per512 = 0;
    if (preset_parse("tiny:blocks=512", &ps, err, sizeof err) ||
        preset_build(&ps, "big", ROLE_CONTEXT, -1, &l, err, sizeof err))
        goto fail;
    for (uint32_t i = 0; i < l.n_pools; i++)
        per512 += l.pools[i].bytes;
    snprintf(spec, sizeof spec, "tiny:blocks=%llu", (unsigned long long)(BIG_BYTES / per512 * 512));
    if (preset_parse(spec, &ps, err, sizeof err) ||
        preset_build(&ps, "big", ROLE_CONTEXT, -1, &l, err, sizeof err))
        goto fail;
    for (uint32_t i = 0; i < l.n_pools; i++) {
        int fd = memfd_create(MEMFD_NAME, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, (off_t)l.pools[i].bytes) < 0 ||
            fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK) < 0 || fstat(fd, &st[i]) < 0)
            goto fail;
        void *m = mmap(NULL, l.pools[i].bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED || madvise(m, l.pools[i].bytes, MADV_POPULATE_WRITE) < 0)
            goto fail;
        munmap(m, l.pools[i].bytes);
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_HOST, .device = -1,
                                     .bytes = l.pools[i].bytes, .fd = fd};
    }
    char *json = layout_to_json(&l);
    struct kvf_client *c;
    struct kvf_options o = {.connect_timeout_ms = (int)tu_ms(30000), .no_reconnect = 1};
    if (!json || kvf_connect(wsock, &o, &c) ||
        kvf_register(c, json, pools, l.n_pools, err, sizeof err))
        goto fail;
    for (uint32_t i = 0; i < l.n_pools; i++)
        close_fds_on(st[i].st_dev, st[i].st_ino);
    (void)!write(ready, "R", 1);
    char x;
    (void)!read(go, &x, 1);
    _exit(0); /* the kernel closes the connection: the daemon sees the worker gone */
fail:
    fprintf(stderr, "big worker: %s (%s)\n", err, strerror(errno));
    (void)!write(ready, "F", 1);
    _exit(1);
}

/* Forks a big worker (it fills and registers on its own). */
static struct big big_spawn(struct wenv *e)
{
    int r[2], g[2];
    ck_assert_int_eq(pipe2(r, O_CLOEXEC), 0); /* the sims started later hold none */
    ck_assert_int_eq(pipe2(g, O_CLOEXEC), 0);
    struct big b = {.prefaulted = stat_int(e, "workers", "prefaults_done")};
    b.pid = fork();
    ck_assert_int_ge(b.pid, 0);
    if (b.pid == 0) {
        close(r[0]);
        close(g[1]);
        big_main(e->wsock, r[1], g[0]);
    }
    close(r[1]);
    close(g[0]);
    b.ready = r[0];
    b.go = g[1];
    return b;
}

static bool prefaulted_past(struct wenv *e, void *arg)
{
    return stat_int(e, "workers", "prefaults_done") > *(long long *)arg;
}

/* Waits until b registered and the daemon mapped its pages in. */
static void big_ready(struct wenv *e, const struct big *b)
{
    struct pollfd p = {.fd = b->ready, .events = POLLIN};
    char x = 0;
    ck_assert_int_eq(poll(&p, 1, (int)tu_ms(60000)), 1);
    ck_assert_int_eq(read(b->ready, &x, 1), 1);
    ck_assert_msg(x == 'R', "the big worker did not register");
    long long before = b->prefaulted;
    ck_assert(wt_until(e, 60000, prefaulted_past, &before));
}

static struct big big_start(struct wenv *e)
{
    struct big b = big_spawn(e);
    big_ready(e, &b);
    return b;
}

static void big_exit(struct big *b)
{
    close(b->go);
    ck_assert_int_eq(wt_wait(b->pid, 10000), 0);
    close(b->ready);
}

static bool big_gone(struct wenv *e, void *arg)
{
    (void)arg;
    return !wt_listed(e, "workers", "workers", "instance", "big", NULL, NULL);
}

/* Polls the daemon's stats until the unmapper is idle and has unmapped more than *unmaps
 * (updated). Returns whether a RECV completed between two answers that both saw the
 * release still pending: the loop served a worker while the unmapper ran. */
static bool watch_release(struct wenv *e, long long *unmaps)
{
    long long done_at_first = -1;
    bool overlap = false;
    int64_t until = wt_now_ms() + tu_ms(60000);
    for (;;) {
        json_t *s = wt_ctl(e, "stats");
        json_t *copy = json_object_get(s, "copy");
        long long pending = int_of(copy, "unmaps_pending"), total = int_of(copy, "unmaps_total");
        long long done = int_of(json_object_get(json_object_get(s, "workers"), "transfers"),
                                "done");
        json_decref(s);
        if (pending > 0 && done_at_first < 0)
            done_at_first = done;
        else if (pending > 0 && done > done_at_first)
            overlap = true;
        if ((pending == 0 && total > *unmaps) || wt_now_ms() > until) {
            ck_assert_int_eq(pending, 0);
            *unmaps = total;
            return overlap;
        }
    }
}

static bool moving(struct wenv *e, void *arg)
{
    return wt_xfer_stat(e, "done") > *(long long *)arg;
}

/* A context/generation pair of n requests (12 MB each: ms of copy, so the pair is still moving
 * while a release runs), parity checked by the generation. */
static void pair(struct wenv *e, int attempt, int n, pid_t *ctx, pid_t *gen)
{
    char cl[32], gl[32], ci[32], gi[32], nr[16];
    snprintf(cl, sizeof cl, "ctx%d.log", attempt);
    snprintf(gl, sizeof gl, "gen%d.log", attempt);
    snprintf(ci, sizeof ci, "c%d", attempt);
    snprintf(gi, sizeof gi, "g%d", attempt);
    snprintf(nr, sizeof nr, "%d", n);
    *ctx = wt_sim(e, cl, "--role", "context", "--instance", ci, "--spec", PAIR_SPEC, "--rank",
                  "0", "--requests", nr, "--prompt-tokens", PAIR_TOKENS, (char *)NULL);
    *gen = wt_sim(e, gl, "--role", "generation", "--instance", gi, "--spec", PAIR_SPEC, "--rank",
                  "0", "--requests", nr, "--prompt-tokens", PAIR_TOKENS, "--ctx-instance", ci,
                  "--parity", "all", (char *)NULL);
}

START_TEST(worker_exit_releases_its_pools_off_the_loop_while_others_are_served)
{
    struct wenv e;
    wt_start(&e, cfg());
    bool mapped;
    long long base_kib = daemon_shmem_kib(&e, &mapped), unmaps = 0;
    bool overlap = false;
    /* a few attempts: a fast machine may end a release between two stats answers */
    for (int attempt = 0; attempt < 4 && !overlap; attempt++) {
        struct big b = big_start(&e);
        ck_assert_int_ge(daemon_shmem_kib(&e, &mapped), base_kib + BIG_BYTES / 1024 * 9 / 10);
        ck_assert(mapped); /* the daemon's prefault mapped the big rank's pages in */
        pid_t c, g;
        long long done0 = wt_xfer_stat(&e, "done");
        pair(&e, attempt, 100, &c, &g); /* still moving when the release runs */
        ck_assert(wt_until(&e, 60000, moving, &done0));
        big_exit(&b); /* its pools' last reference is the daemon's mapping */
        ck_assert(wt_until(&e, 10000, big_gone, NULL));
        struct big again = big_spawn(&e); /* the same rank, at once, during the release */
        overlap = watch_release(&e, &unmaps);
        int rg = wt_wait(g, 120000), rc = wt_wait(c, 120000);
        char gl[32];
        snprintf(gl, sizeof gl, "gen%d.log", attempt);
        char *l = wt_log(&e, gl);
        ck_assert_msg(rg == 0 && rc == 0 && strstr(l, "parity OK"), "gen %d ctx %d:\n%s", rg, rc,
                      l);
        free(l);
        big_ready(&e, &again); /* registered (its rank's slot was free) and prefaulted */
        big_exit(&again);
        ck_assert(wt_until(&e, 10000, big_gone, NULL));
        watch_release(&e, &unmaps);
        long long kib = daemon_shmem_kib(&e, &mapped);
        fprintf(stderr, "attempt %d: a request completed during the release: %s; RssShmem "
                "%lld kB after (%lld before the big ranks); %lld unmaps\n", attempt,
                overlap ? "yes" : "no", kib, base_kib, unmaps);
        ck_assert_msg(!mapped, "a memfd of the exited ranks is still mapped");
        ck_assert_int_lt(kib, base_kib + BIG_BYTES / 1024 / 10); /* their memory left */
    }
    /* Seen on most runs; not asserted: whether a request ends inside a release is timing (under
     * TSan in CI a 1 GiB release ended before any request four times out of four). The loop's
     * stall at an exit is measured by scripts/bench-exit, not here. */
    if (!overlap)
        fprintf(stderr, "no request happened to complete inside a release (timing, not a fault)\n");
    ck_assert_int_eq(kill(e.daemon, 0), 0);
    wt_stop(&e); /* SIGTERM: exits 0 with nothing left (the harness checks) */
}
END_TEST

/* SIGTERM while the unmapper still releases a rank: the daemon finishes the release, exits 0
 * (and, under ASan, leak-free). */
START_TEST(worker_exit_daemon_stop_finishes_a_pending_release)
{
    struct wenv e;
    wt_start(&e, cfg());
    struct big b = big_start(&e);
    big_exit(&b);
    ck_assert(wt_until(&e, 10000, big_gone, NULL));
    fprintf(stderr, "stopping with %lld unmap(s) pending\n",
            stat_int(&e, "copy", "unmaps_pending"));
    wt_stop(&e);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("worker_exit");
    TCase *tc = tcase_create("release");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, worker_exit_releases_its_pools_off_the_loop_while_others_are_served);
    tcase_add_test(tc, worker_exit_daemon_stop_finishes_a_pending_release);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
