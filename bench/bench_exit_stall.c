/* bench_exit_stall.c: how long a worker's exit stalls kvferryd's loop. Starts the real kvferryd
 * ($KVFERRYD, else $BUILD/kvferryd: an A/B runs two builds in one run), then per round forks a
 * worker that fills sealed memfd pools of --gib GiB in all (touched, as a KV cache is), registers
 * them as a generation rank, closes its fds (the daemon's mapping is then the memfds' last
 * reference, as after a worker's real exit) and waits; once the daemon has mapped the pages in
 * (`copy.prefault: register`, stats.workers.prefaults_done) the worker exits while a thread
 * sends `help` on the control socket back to back. Prints, per round, the longest control round
 * trip from the exit until the pool's memory is back (/proc/meminfo Shmem), against the median
 * round trip of the idle loop measured before (the ceiling) and against the worst round trip of
 * one second of the same probes without an exit just before it (the noise floor of a loaded
 * machine), and how long the memory took to come back.
 * Usage: bench_exit_stall [GiB, default 4] [rounds, default 3]   (needs that much free memory) */
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kvferry.h"
#include "layout.h"
#include "preset.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static int ctl_open(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* One `help` round trip on a fresh connection (what a client pays), in ms; -1 on failure. */
static double ctl_rtt(const char *path)
{
    double t0 = now_ms();
    int fd = ctl_open(path);
    char b[256];
    int ok = fd >= 0 && write(fd, "{\"id\":1,\"cmd\":\"help\"}\n", 23) == 23 &&
             read(fd, b, sizeof b) > 0;
    if (fd >= 0)
        close(fd);
    return ok ? now_ms() - t0 : -1;
}

/* stats.<sec>.<key> as a number, or -1 (absent: a daemon without it). */
static double stat_of(const char *path, const char *sec, const char *key)
{
    int fd = ctl_open(path);
    if (fd < 0)
        return -1;
    static char b[1 << 20];
    size_t n = 0;
    ssize_t r = write(fd, "{\"id\":1,\"cmd\":\"stats\"}\n", 24);
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

static long long shmem_kib(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[128];
    long long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "Shmem: %lld kB", &v) == 1)
            break;
    if (f)
        fclose(f);
    return v;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
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
    for (uint32_t i = 0; i < l->n_pools; i++) {
        int fd = memfd_create("kvf-exit-bench", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, (off_t)l->pools[i].bytes) < 0)
            _exit(2);
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
        uint8_t *m = mmap(NULL, l->pools[i].bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            _exit(2);
        memset(m, 1, l->pools[i].bytes); /* the worker's KV cache exists */
        munmap(m, l->pools[i].bytes);
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_HOST, .device = -1,
                                     .bytes = l->pools[i].bytes, .fd = fd};
    }
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
        double ms = ctl_rtt(p->csock);
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
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char dir[] = "/tmp/kvf-bench-XXXXXX", cfg[96], wsock[96], csock[96], bin[256];
    if (!mkdtemp(dir))
        return 1;
    snprintf(cfg, sizeof cfg, "%s/kvferry.yaml", dir);
    snprintf(wsock, sizeof wsock, "%s/run/worker.sock", dir);
    snprintf(csock, sizeof csock, "%s/run/control.sock", dir);
    snprintf(bin, sizeof bin, "%s", getenv("KVFERRYD") ? getenv("KVFERRYD") : "");
    if (!bin[0])
        snprintf(bin, sizeof bin, "%s/kvferryd", build);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "sockets:\n  dir: %s/run\nworkers:\n  max_blocks: 16777216\n", dir);
    fclose(f);

    /* a generation rank of "tiny" with enough blocks for the size asked */
    struct preset_spec ps;
    struct layout l;
    char err[256], spec[64];
    uint64_t per512 = 0, total = 0;
    if (preset_parse("tiny:blocks=512", &ps, err, sizeof err) ||
        preset_build(&ps, "big", ROLE_GENERATION, -1, &l, err, sizeof err))
        return fprintf(stderr, "%s\n", err), 1;
    for (uint32_t i = 0; i < l.n_pools; i++)
        per512 += l.pools[i].bytes;
    snprintf(spec, sizeof spec, "tiny:blocks=%llu",
             (unsigned long long)(gib * (double)(1ull << 30) / (double)per512 * 512));
    if (preset_parse(spec, &ps, err, sizeof err) ||
        preset_build(&ps, "big", ROLE_GENERATION, -1, &l, err, sizeof err))
        return fprintf(stderr, "%s: %s\n", spec, err), 1;
    for (uint32_t i = 0; i < l.n_pools; i++)
        total += l.pools[i].bytes;
    char *json = layout_to_json(&l);

    pid_t d = fork();
    if (d == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(bin, bin, "--config", cfg, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500 && ctl_rtt(csock) < 0; i++)
        usleep(10000);
    double idle[200];
    for (int i = 0; i < 200; i++)
        idle[i] = ctl_rtt(csock);
    qsort(idle, 200, sizeof idle[0], cmp_d);
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
        double t_reg = now_ms();
        while (stat_of(csock, "workers", "prefaults_done") < round + 1 && now_ms() - t_reg < 120000)
            usleep(10000); /* the daemon maps the pages in, as in production */
        long long shmem0 = shmem_kib(), want = shmem0 - (long long)(total * 9 / 10 / 1024);
        struct pinger q = {.csock = csock}, p = {.csock = csock};
        pthread_t t;
        pthread_create(&t, NULL, pinger_main, &q); /* the same probes, no exit: the noise floor */
        usleep(1000000);
        atomic_store(&q.stop, true);
        pthread_join(t, NULL);
        pthread_create(&t, NULL, pinger_main, &p);
        usleep(20000); /* the pinger runs before the exit */
        double t0 = now_ms();
        close(go[1]); /* the worker exits */
        waitpid(w, NULL, 0);
        while (shmem_kib() > want && now_ms() - t0 < 60000)
            usleep(1000);
        double mem_ms = now_ms() - t0;
        int probes = p.probes;
        while (p.probes < probes + 20) /* and a little after */
            usleep(1000);
        atomic_store(&p.stop, true);
        pthread_join(t, NULL);
        close(ready[0]);
        for (double t1 = now_ms(); stat_of(csock, "copy", "unmaps_pending") > 0 &&
                                   now_ms() - t1 < 60000;)
            usleep(1000); /* where the daemon has an unmapper: its stats are complete */
        double step = stat_of(csock, "copy", "unmap_step_max_seconds"),
               whole = stat_of(csock, "copy", "unmap_max_seconds");
        printf("{\"bench\":\"exit_stall\",\"daemon\":\"%s\",\"round\":%d,\"pool_bytes\":%llu,"
               "\"pools\":%u,\"memory_back_ms\":%.1f,\"control_rtt_idle_median_ms\":%.3f,"
               "\"control_rtt_worst_ms\":%.1f,\"probes\":%d,\"stall_over_idle\":%.0f,"
               "\"no_exit_1s_worst_ms\":%.1f,\"no_exit_probes\":%d,\"unmap_max_ms\":%.1f,"
               "\"unmap_step_max_ms\":%.1f}\n",
               bin, round, (unsigned long long)total, l.n_pools, mem_ms, idle[100], p.worst,
               p.probes, p.worst / (idle[100] > 0 ? idle[100] : 1e-3), q.worst, q.probes,
               whole < 0 ? -1 : whole * 1e3, step < 0 ? -1 : step * 1e3);
        fflush(stdout);
        if (mem_ms >= 60000) {
            fprintf(stderr, "round %d: the pool's memory did not come back\n", round);
            rc = 1;
        }
    }
    kill(d, SIGTERM);
    waitpid(d, NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    (void)!system(cmd);
    free(json);
    return rc;
}
