/* bench_exit_stall.c: how long a worker's exit stalls kvferryd's loop. Starts the real kvferryd
 * ($KVFERRYD, else $BUILD/kvferryd: an A/B runs two builds in one run), then per round forks a
 * worker that fills sealed memfd pools of --gib GiB in all (touched, as a KV cache is), registers
 * them as a generation rank, closes its fds (the daemon's mapping is then the memfds' last
 * reference, as after a worker's real exit) and waits; once the daemon has mapped the pages in
 * (`copy.prefault: register`, stats.workers.prefaults_done) the worker exits while a thread
 * sends `help` on the control socket back to back. Prints, per round, the longest control round
 * trip from the exit until the daemon has released the rank (`status`: no rank left and, where
 * the daemon has an unmapper, nothing pending on it), against the median round trip of the idle
 * loop measured before (the ceiling) and against the worst round trip of one second of the same
 * probes without an exit just before it (the noise floor of a loaded machine), and how long the
 * release took.
 * Usage: bench_exit_stall [GiB, default 4] [rounds, default 3]   (needs that much free memory) */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "bench_stall.h"

/* <cmd>.<sec>.<key> (cmd: "stats" or "status") as a number, or -1 (absent: a daemon without it). */
static double stat_of(const char *path, const char *cmd, const char *sec, const char *key)
{
    int fd = stall_ctl_open(path);
    if (fd < 0)
        return -1;
    static char b[1 << 20];
    size_t n = 0;
    char line[64];
    int len = snprintf(line, sizeof line, "{\"id\":1,\"cmd\":\"%s\"}\n", cmd);
    ssize_t r = write(fd, line, (size_t)len);
    while (r > 0 && n < sizeof b - 1 && !memchr(b, '\n', n))
        if ((r = read(fd, b + n, sizeof b - 1 - n)) > 0)
            n += (size_t)r;
    close(fd);
    b[n] = 0;
    json_t *o = json_loads(b, JSON_DISABLE_EOF_CHECK, NULL);
    json_t *v = json_object_get(json_object_get(json_object_get(o, "result"), sec), key);
    double x = json_is_number(v) ? json_number_value(v) : -1;
    json_decref(o);
    return x;
}

/* Closes every fd of this process on a memfd named `name` (the library keeps dups of the pools'
 * fds for a reconnect): the daemon's mapping is then the memory's last reference. */
static void close_memfds(const char *name)
{
    char want[96], link[128], path[64];
    snprintf(want, sizeof want, "/memfd:%s", name);
    for (int fd = 3; fd < 4096; fd++) {
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n > 0 && (link[n] = 0, strncmp(link, want, strlen(want)) == 0))
            close(fd);
    }
}

/* The worker: pools filled, registered, fds closed; exits when the parent closes `go`. */
static void worker(const char *wsock, const struct layout *l, const char *json, int ready, int go)
{
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    if (!stall_fill_pools(l, "kvf-exit-bench", pools))
        _exit(2);
    struct kvf_client *c;
    struct kvf_options o = {.connect_timeout_ms = 120000, .no_reconnect = 1};
    char err[512];
    if (kvf_connect(wsock, &o, &c) || kvf_register(c, json, pools, l->n_pools, err, sizeof err)) {
        fprintf(stderr, "worker: register failed: %s\n", err);
        _exit(3);
    }
    close_memfds("kvf-exit-bench"); /* ours and the library's: the daemon's mapping alone */
    (void)!write(ready, "R", 1);
    char x;
    (void)!read(go, &x, 1);
    _exit(0); /* the kernel closes the connection: the daemon sees the worker gone */
}

struct pinger {
    const char *csock;
    atomic_bool stop;
    double worst;
    int probes;
};

static void *pinger_main(void *arg)
{
    struct pinger *p = arg;
    while (!atomic_load(&p->stop)) {
        double ms = stall_ctl_rtt(p->csock);
        if (ms >= 0) {
            p->worst = ms > p->worst ? ms : p->worst;
            p->probes++;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    double gib = argc > 1 ? atof(argv[1]) : 4.0;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    struct stall_env e;
    struct layout l;
    uint64_t total = 0;
    if (stall_layout(gib, &l) < 0)
        return 1;
    for (uint32_t i = 0; i < l.n_pools; i++)
        total += l.pools[i].bytes;
    char *json = layout_to_json(&l);
    if (stall_start(&e) < 0)
        return fprintf(stderr, "kvferryd %s did not start\n", e.bin), 1;
    const char *wsock = e.wsock, *csock = e.csock, *bin = e.bin;
    double idle = stall_idle_median(csock);
    int rc = 0;
    for (int round = 0; round < rounds && rc == 0; round++) {
        int ready[2], go[2];
        if (pipe(ready) || pipe(go))
            return 1;
        pid_t w = fork();
        if (w == 0) {
            close(ready[0]);
            close(go[1]);
            worker(wsock, &l, json, ready[1], go[0]);
        }
        close(ready[1]);
        close(go[0]);
        char x;
        if (read(ready[0], &x, 1) != 1) {
            fprintf(stderr, "round %d: the worker did not register\n", round);
            rc = 1;
            break;
        }
        double t_reg = stall_now_ms();
        while (stat_of(csock, "stats", "workers", "prefaults_done") < round + 1 &&
               stall_now_ms() - t_reg < 120000)
            usleep(10000); /* the daemon maps the pages in, as in production */
        struct pinger q = {.csock = csock}, p = {.csock = csock};
        pthread_t t;
        pthread_create(&t, NULL, pinger_main, &q); /* the same probes, no exit: the noise floor */
        usleep(1000000);
        atomic_store(&q.stop, true);
        pthread_join(t, NULL);
        pthread_create(&t, NULL, pinger_main, &p);
        usleep(20000); /* the pinger runs before the exit */
        double t0 = stall_now_ms();
        close(go[1]); /* the worker exits */
        waitpid(w, NULL, 0);
        /* released: the rank is gone and, where the daemon has an unmapper, it is idle (without
         * one the unmap ran inside the close, before the loop answers again) */
        while ((stat_of(csock, "status", "workers", "ranks") != 0 ||
                stat_of(csock, "status", "copy", "unmaps_pending") > 0) &&
               stall_now_ms() - t0 < 60000)
            usleep(1000);
        double mem_ms = stall_now_ms() - t0;
        int probes = p.probes;
        while (p.probes < probes + 20) /* and a little after */
            usleep(1000);
        atomic_store(&p.stop, true);
        pthread_join(t, NULL);
        close(ready[0]);
        double step = stat_of(csock, "stats", "copy", "unmap_step_max_seconds"),
               whole = stat_of(csock, "stats", "copy", "unmap_max_seconds");
        printf("{\"bench\":\"exit_stall\",\"daemon\":\"%s\",\"round\":%d,\"pool_bytes\":%llu,"
               "\"pools\":%u,\"released_ms\":%.1f,\"control_rtt_idle_median_ms\":%.3f,"
               "\"control_rtt_worst_ms\":%.1f,\"probes\":%d,\"stall_over_idle\":%.0f,"
               "\"no_exit_1s_worst_ms\":%.1f,\"no_exit_probes\":%d,\"unmap_max_ms\":%.1f,"
               "\"unmap_step_max_ms\":%.1f}\n",
               bin, round, (unsigned long long)total, l.n_pools, mem_ms, idle, p.worst,
               p.probes, p.worst / (idle > 0 ? idle : 1e-3), q.worst, q.probes,
               whole < 0 ? -1 : whole * 1e3, step < 0 ? -1 : step * 1e3);
        fflush(stdout);
        if (mem_ms >= 60000) {
            fprintf(stderr, "round %d: the rank was not released\n", round);
            rc = 1;
        }
    }
    stall_stop(&e);
    free(json);
    return rc;
}
