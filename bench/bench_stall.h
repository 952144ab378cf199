/* bench_stall.h: what the loop-stall benches share (bench_register_stall, bench_exit_stall): the
 * real kvferryd in a temp dir ($KVFERRYD, else $BUILD/kvferryd), a control round trip on a fresh
 * connection (what a client pays; the probe of the loop), the idle median of 200 of them (the
 * ceiling), and a generation rank of the "tiny" preset of a given size with its sealed memfd
 * pools touched, as a worker's KV cache is. Header only: each bench is one program. */
#ifndef KVF_BENCH_STALL_H
#define KVF_BENCH_STALL_H

#include <fcntl.h>
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

struct stall_env {
    char dir[32], cfg[96], wsock[96], csock[96], bin[256];
    pid_t daemon;
};

static inline double stall_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static inline int stall_ctl_open(const char *path)
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

/* One `help` round trip on a fresh connection, in ms; -1 on failure. */
static inline double stall_ctl_rtt(const char *path)
{
    double t0 = stall_now_ms();
    int fd = stall_ctl_open(path);
    char b[256];
    int ok = fd >= 0 && write(fd, "{\"id\":1,\"cmd\":\"help\"}\n", 23) == 23 &&
             read(fd, b, sizeof b) > 0;
    if (fd >= 0)
        close(fd);
    return ok ? stall_now_ms() - t0 : -1;
}

static inline int stall_cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of 200 round trips of the idle loop. */
static inline double stall_idle_median(const char *csock)
{
    double idle[200];
    for (int i = 0; i < 200; i++)
        idle[i] = stall_ctl_rtt(csock);
    qsort(idle, 200, sizeof idle[0], stall_cmp_d);
    return idle[100];
}

/* Starts kvferryd (stderr to /dev/null) with room for large ranks; waits until it answers. */
static inline int stall_start(struct stall_env *e)
{
    snprintf(e->dir, sizeof e->dir, "/tmp/kvf-bench-XXXXXX");
    if (!mkdtemp(e->dir))
        return -1;
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    snprintf(e->cfg, sizeof e->cfg, "%s/kvferry.yaml", e->dir);
    snprintf(e->wsock, sizeof e->wsock, "%s/run/worker.sock", e->dir);
    snprintf(e->csock, sizeof e->csock, "%s/run/control.sock", e->dir);
    if (getenv("KVFERRYD"))
        snprintf(e->bin, sizeof e->bin, "%s", getenv("KVFERRYD"));
    else
        snprintf(e->bin, sizeof e->bin, "%s/kvferryd", build);
    FILE *f = fopen(e->cfg, "w");
    if (!f)
        return -1;
    fprintf(f, "sockets:\n  dir: %s/run\nworkers:\n  max_blocks: 16777216\n", e->dir);
    fclose(f);
    if ((e->daemon = fork()) == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        execl(e->bin, e->bin, "--config", e->cfg, (char *)NULL);
        _exit(127);
    }
    for (int i = 0; i < 500; i++) {
        if (stall_ctl_rtt(e->csock) >= 0)
            return 0;
        usleep(10000);
    }
    return -1;
}

static inline void stall_stop(struct stall_env *e)
{
    kill(e->daemon, SIGTERM);
    waitpid(e->daemon, NULL, 0);
    char cmd[64];
    snprintf(cmd, sizeof cmd, "rm -rf %s", e->dir);
    (void)!system(cmd);
}

/* A generation rank "big" of "tiny" with enough blocks for gib GiB in all. 0, or -1 (printed). */
static inline int stall_layout(double gib, struct layout *l)
{
    struct preset_spec ps;
    char err[256], spec[64];
    uint64_t per512 = 0;
    if (preset_parse("tiny:blocks=512", &ps, err, sizeof err) ||
        preset_build(&ps, "big", ROLE_GENERATION, -1, l, err, sizeof err))
        return fprintf(stderr, "%s\n", err), -1;
    for (uint32_t i = 0; i < l->n_pools; i++)
        per512 += l->pools[i].bytes;
    snprintf(spec, sizeof spec, "tiny:blocks=%llu",
             (unsigned long long)(gib * (double)(1ull << 30) / (double)per512 * 512));
    if (preset_parse(spec, &ps, err, sizeof err) ||
        preset_build(&ps, "big", ROLE_GENERATION, -1, l, err, sizeof err))
        return fprintf(stderr, "%s: %s\n", spec, err), -1;
    return 0;
}

/* l's pools as sealed memfds named `name`, every page written. Returns their bytes, 0 on error. */
static inline uint64_t stall_fill_pools(const struct layout *l, const char *name,
                                        struct kvf_pool *pools)
{
    uint64_t total = 0;
    for (uint32_t i = 0; i < l->n_pools; i++) {
        int fd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
        if (fd < 0 || ftruncate(fd, (off_t)l->pools[i].bytes) < 0)
            return 0;
        fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK);
        uint8_t *m = mmap(NULL, l->pools[i].bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (m == MAP_FAILED)
            return 0;
        memset(m, 1, l->pools[i].bytes); /* the worker's KV cache exists */
        munmap(m, l->pools[i].bytes);
        pools[i] = (struct kvf_pool){.kind = KVF_POOL_HOST, .device = -1,
                                     .bytes = l->pools[i].bytes, .fd = fd};
        total += l->pools[i].bytes;
    }
    return total;
}

#endif
