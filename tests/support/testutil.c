/* testutil.c: small helpers shared by the Check suites (declared, with what each does, in
 * tests/testutil.h). Built once into libkvferry-testsupport.a, linked into every test. */
#include "testutil.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

__attribute__((format(printf, 5, 6))) char *tu_fmt_at(const char *file, int line, char *buf,
                                                      size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len)
        ck_abort_msg("%s:%d: %d bytes do not fit a %zu-byte buffer: \"%s...\"", file, line, n, len,
                     buf);
    return buf;
}

char *tu_sock_check(const char *file, int line, char *path)
{
    if (strlen(path) > TU_SUN_PATH_MAX)
        ck_abort_msg("%s:%d: unix socket path %s is %zu bytes: the limit is %zu", file, line, path,
                     strlen(path), TU_SUN_PATH_MAX);
    return path;
}

struct sockaddr_un tu_sun(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    tu_sock_check(__FILE__, __LINE__, (char *)path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    return sa;
}

const char *tu_build_dir(void)
{
    const char *b = getenv("BUILD");
    return (b && *b) ? b : "build";
}

const char *tu_bin(const char *name, char *buf, size_t len)
{
    return tu_fmt(buf, len, "%s/%s", tu_build_dir(), name);
}

void tu_tmpdir(char *buf, size_t len)
{
    tu_fmt(buf, len, "/tmp/kvf-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

int tu_sh(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

unsigned tu_ms(unsigned ms)
{
    const char *e = getenv("KVF_TEST_SLOW");
    int k = e ? atoi(e) : 1;
    return ms * (unsigned)(k > 1 ? k : 1);
}

/* The longest a short sleep overshot, over n tries of 5 ms, in ms: how long this machine
 * leaves a runnable process waiting now. */
static unsigned stall_now(int n)
{
    unsigned worst = 0;
    for (int i = 0; i < n; i++) {
        struct timespec a, b, d = {0, 5 * 1000 * 1000};
        clock_gettime(CLOCK_MONOTONIC, &a);
        nanosleep(&d, NULL);
        clock_gettime(CLOCK_MONOTONIC, &b);
        int64_t ms = (b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000 - 5;
        if (ms > (int64_t)worst)
            worst = (unsigned)ms;
    }
    return worst;
}

/* Runnable per CPU, rounded up: 1 means no waiting. */
static unsigned load_now(double *avg)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (getloadavg(avg, 1) != 1 || cpus <= 0)
        return 1;
    unsigned load = (unsigned)(avg[0] / (double)cpus + 0.999);
    return load > 1 ? load : 1;
}

unsigned tu_cpu_s(unsigned base_s)
{
    double avg[1] = {0};
    unsigned load = load_now(avg);
    return base_s * tu_ms(1) * (load < 10 ? load : 10);
}

unsigned tu_keepalive_ms(unsigned base_ms)
{
    static unsigned k; /* measured once: every daemon of a test process gets the same */
    if (!k) {
        unsigned slow = tu_ms(1);
        double avg[1] = {0};
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        unsigned load = load_now(avg);
        /* stalls come in bursts far longer than a sample shows (1367 ms seen at load 6-8 on
         * 2 cores): the interval is 10x the worst overshoot seen now */
        unsigned stall = (stall_now(20) * 10 + base_ms - 1) / base_ms;
        k = slow;
        if (load > k)
            k = load;
        if (stall > k)
            k = stall;
        if (k > 10) /* 10 s to lose a peer at 200 ms: far past any stall seen, tests bounded */
            k = 10;
        if (k > 1)
            fprintf(stderr, "keepalive: %u ms x %u (KVF_TEST_SLOW %u, load %.1f on %ld CPUs)\n",
                    base_ms * k, k, slow, avg[0], cpus);
    }
    return base_ms * k;
}

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
