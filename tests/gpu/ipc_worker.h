/* ipc_worker.h: the worker side of tests/gpu/check_gpu_ipc.c (header-only, static functions).
 * A worker is the test binary re-executed with `--worker DEVICE BYTES SEED` (fork + exec, so no
 * process inherits CUDA state across fork): it allocates a pool with lib/cuda_pool.c, fills it
 * with a pattern, sends a `struct hello` (its IPC handle, PCI bus id) on stdout, then answers
 * `struct cmd` requests on stdin (verify a range against a pattern; quit) until told to quit or
 * stdin closes. The test side drives it with worker_start / worker_verify / worker_stop. */
#ifndef KVF_TEST_IPC_WORKER_H
#define KVF_TEST_IPC_WORKER_H

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda_pool.h"

static inline uint8_t pattern_byte(uint64_t seed, uint64_t i)
{
    uint64_t x = (i + 1) * 0x9E3779B97F4A7C15ull ^ seed;
    x ^= x >> 29;
    return (uint8_t)(x * 0xBF58476D1CE4E5B9ull >> 56);
}

static inline void pattern_fill(uint8_t *buf, uint64_t seed, uint64_t off, uint64_t len)
{
    for (uint64_t i = 0; i < len; i++)
        buf[i] = pattern_byte(seed, off + i);
}

/* -1 when equal, else the first differing index */
static inline int64_t pattern_diff(const uint8_t *buf, uint64_t seed, uint64_t off, uint64_t len)
{
    for (uint64_t i = 0; i < len; i++)
        if (buf[i] != pattern_byte(seed, off + i))
            return (int64_t)i;
    return -1;
}

static inline int read_full(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}

static inline int write_full(int fd, const void *buf, size_t len)
{
    for (size_t put = 0; put < len;) {
        ssize_t n = write(fd, (const char *)buf + put, len - put);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        put += (size_t)n;
    }
    return 0;
}

/* ---- the worker process ---- */

struct hello {
    int32_t rc;
    char err[256];
    uint64_t bytes;
    uint8_t handle[CUDA_POOL_HANDLE_BYTES];
    char pci_bus_id[CUDA_POOL_PCI_ID_MAX];
};

struct cmd {
    char op; /* 'v': verify [off, off+len) against seed; 'q': quit */
    uint64_t off, len, seed;
};

static inline int worker_main(int device, uint64_t bytes, uint64_t seed)
{
    struct hello h = {0};
    struct cuda_pool *p = NULL;
    uint8_t *buf = malloc(bytes);
    if (!buf)
        return 2;
    h.rc = cuda_pool_new(device, bytes, &p, h.err, sizeof(h.err));
    if (h.rc == 0) {
        pattern_fill(buf, seed, 0, bytes);
        h.rc = cuda_pool_write(p, 0, buf, bytes, h.err, sizeof(h.err));
    }
    if (h.rc == 0) {
        h.bytes = p->bytes;
        memcpy(h.handle, p->handle, sizeof(h.handle));
        memcpy(h.pci_bus_id, p->pci_bus_id, sizeof(h.pci_bus_id));
    }
    if (write_full(1, &h, sizeof(h)) < 0 || h.rc < 0)
        goto out;
    struct cmd c;
    while (read_full(0, &c, sizeof(c)) == 0 && c.op == 'v') {
        char err[256];
        int64_t res = cuda_pool_read(p, c.off, buf, c.len, err, sizeof(err));
        if (res == 0)
            res = pattern_diff(buf, c.seed, c.off, c.len);
        else
            res = -2 - (int64_t)(-res); /* a read error: below -1 */
        if (write_full(1, &res, sizeof(res)) < 0)
            break;
    }
out:
    p = cuda_pool_free(p);
    free(buf);
    return h.rc == 0 ? 0 : 1;
}

/* ---- the daemon side ---- */

struct worker {
    pid_t pid;
    int to, from;
    struct hello h;
};

/* Starts a worker and reads its hello. 0, or the worker's error (its message in w->h.err), or
 * -EIO when it could not be started or died. No Check asserts: usable outside a test. */
static inline int worker_spawn(struct worker *w, int device, uint64_t bytes, uint64_t seed)
{
    int in[2], out[2];
    memset(w, 0, sizeof(*w));
    if (pipe2(in, O_CLOEXEC) < 0)
        return -errno;
    if (pipe2(out, O_CLOEXEC) < 0) {
        close(in[0]);
        close(in[1]);
        return -errno;
    }
    w->pid = fork();
    if (w->pid == 0) {
        char d[16], b[32], s[32];
        snprintf(d, sizeof(d), "%d", device);
        snprintf(b, sizeof(b), "%llu", (unsigned long long)bytes);
        snprintf(s, sizeof(s), "%llu", (unsigned long long)seed);
        dup2(in[0], 0);
        dup2(out[1], 1);
        execl("/proc/self/exe", "check_gpu_ipc", "--worker", d, b, s, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    w->to = in[1];
    w->from = out[0];
    if (w->pid < 0 || read_full(w->from, &w->h, sizeof(w->h)) < 0) {
        snprintf(w->h.err, sizeof(w->h.err), "worker did not start or died");
        return -EIO;
    }
    return w->h.rc;
}

static inline void worker_start(struct worker *w, int device, uint64_t bytes, uint64_t seed)
{
    int rc = worker_spawn(w, device, bytes, seed);
    ck_assert_msg(rc == 0, "worker: %s (%d)", w->h.err, rc);
    ck_assert_uint_eq(w->h.bytes, bytes);
}

static inline int64_t worker_verify(struct worker *w, uint64_t off, uint64_t len, uint64_t seed)
{
    struct cmd c = {.op = 'v', .off = off, .len = len, .seed = seed};
    int64_t res;
    ck_assert_int_eq(write_full(w->to, &c, sizeof(c)), 0);
    ck_assert_int_eq(read_full(w->from, &res, sizeof(res)), 0);
    return res;
}

/* Tells the worker to quit and reaps it; returns its wait status. */
static inline int worker_reap(struct worker *w)
{
    struct cmd c = {.op = 'q'};
    int st = -1;
    if (write_full(w->to, &c, sizeof(c)) < 0)
        kill(w->pid, SIGKILL);
    close(w->to);
    close(w->from);
    if (w->pid > 0 && waitpid(w->pid, &st, 0) != w->pid)
        st = -1;
    return st;
}

static inline int worker_stop(struct worker *w)
{
    int st = worker_reap(w);
    ck_assert_int_ne(st, -1);
    return st;
}

#endif
