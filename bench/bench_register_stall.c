/* bench_register_stall.c: how long one REGISTER of a large host pool stalls kvferryd's loop.
 * Starts the real kvferryd ($BUILD/kvferryd), makes a worker rank whose sealed memfd pools hold
 * --gib GiB in all (touched first, as a worker's KV cache is), registers it through libkvferry
 * in a thread while the main thread sends `help` on the control socket back to back; prints the
 * registration time and the longest control round trip during it (the loop's stall), against
 * the median round trip measured before (the ceiling: what an idle loop answers in).
 * Usage: bench_register_stall [GiB, default 2.7]   (needs that much free memory) */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
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

static int ctl_rtt(const char *path, double *ms)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
    double t0 = now_ms();
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char b[256];
    int ok = connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0 &&
             write(fd, "{\"id\":1,\"cmd\":\"help\"}\n", 23) == 23 && read(fd, b, sizeof b) > 0;
    close(fd);
    *ms = now_ms() - t0;
    return ok ? 0 : -1;
}

struct reg {
    const char *wsock, *json;
    struct kvf_pool *pools;
    uint32_t n;
    double ms;
    int rc;
    volatile int done;
    char err[512];
};

static void *reg_thread(void *arg)
{
    struct reg *r = arg;
    struct kvf_client *c;
    struct kvf_options o = {.connect_timeout_ms = 120000, .no_reconnect = 1};
    r->rc = kvf_connect(r->wsock, &o, &c);
    double t0 = now_ms();
    if (r->rc == 0)
        r->rc = kvf_register(c, r->json, r->pools, r->n, r->err, sizeof r->err);
    r->ms = now_ms() - t0;
    r->done = 1;
    if (r->rc == 0)
        kvf_close(c);
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    double gib = argc > 1 ? atof(argv[1]) : 2.7;
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char dir[] = "/tmp/kvf-bench-XXXXXX", cfg[96], wsock[96], csock[96], bin[256];
    if (!mkdtemp(dir))
        return 1;
    snprintf(cfg, sizeof cfg, "%s/kvferry.yaml", dir);
    snprintf(wsock, sizeof wsock, "%s/run/worker.sock", dir);
    snprintf(csock, sizeof csock, "%s/run/control.sock", dir);
    snprintf(bin, sizeof bin, "%s/kvferryd", build);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "sockets:\n  dir: %s/run\nworkers:\n  max_blocks: 16777216\n", dir);
    fclose(f);

    /* a generation rank of "tiny" with enough blocks for the size asked */
    struct preset_spec ps;
    struct layout l;
    char err[256], spec[64];
    snprintf(spec, sizeof spec, "tiny:blocks=512");
    if (preset_parse(spec, &ps, err, sizeof err) || preset_build(&ps, "big", ROLE_GENERATION, -1,
                                                                 &l, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    uint64_t per512 = 0;
    for (uint32_t i = 0; i < l.n_pools; i++)
        per512 += l.pools[i].bytes;
    uint64_t blocks = (uint64_t)(gib * (double)(1ull << 30) / (double)per512 * 512);
    snprintf(spec, sizeof spec, "tiny:blocks=%llu", (unsigned long long)blocks);
    if (preset_parse(spec, &ps, err, sizeof err) || preset_build(&ps, "big", ROLE_GENERATION, -1,
                                                                 &l, err, sizeof err)) {
        fprintf(stderr, "%s: %s\n", spec, err);
        return 1;
    }
    struct kvf_pool pools[LAYOUT_MAX_POOLS];
    uint64_t total = 0;
    for (uint32_t i = 0; i < l.n_pools; i++) {
        int fd = memfd_create("pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, (off_t)l.pools[i].bytes) < 0)
            return 1;
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
        uint8_t *m = mmap(NULL, l.pools[i].bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            return 1;
        memset(m, 1, l.pools[i].bytes); /* the worker's KV cache exists */
        munmap(m, l.pools[i].bytes);
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_HOST, .device = -1,
                                     .bytes = l.pools[i].bytes, .fd = fd};
        total += l.pools[i].bytes;
    }
    char *json = layout_to_json(&l);

    pid_t d = fork();
    if (d == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(bin, bin, "--config", cfg, (char *)NULL);
        _exit(127);
    }
    double ms;
    for (int i = 0; i < 500 && ctl_rtt(csock, &ms) < 0; i++)
        usleep(10000);
    double idle[200];
    for (int i = 0; i < 200; i++)
        ctl_rtt(csock, &idle[i]);
    qsort(idle, 200, sizeof idle[0], cmp_d);

    struct reg r = {.wsock = wsock, .json = json, .pools = pools, .n = l.n_pools};
    pthread_t t;
    pthread_create(&t, NULL, reg_thread, &r);
    double worst = 0;
    int n = 0;
    while (!r.done) {
        if (ctl_rtt(csock, &ms) == 0) {
            worst = ms > worst ? ms : worst;
            n++;
        }
    }
    pthread_join(t, NULL);
    kill(d, SIGTERM);
    waitpid(d, NULL, 0);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    (void)!system(cmd);
    if (r.rc) {
        fprintf(stderr, "register: %d %s\n", r.rc, r.err);
        return 1;
    }
    printf("{\"bench\":\"register_stall\",\"daemon\":\"%s\",\"pool_bytes\":%llu,\"pools\":%u,"
           "\"register_ms\":%.1f,\"control_rtt_idle_median_ms\":%.3f,\"control_rtt_worst_ms\":%.1f,"
           "\"probes\":%d,\"stall_over_idle\":%.0f}\n",
           bin, (unsigned long long)total, l.n_pools, r.ms, idle[100], worst, n,
           worst / (idle[100] > 0 ? idle[100] : 1e-3));
    return 0;
}
