/* bench_link.c: bandwidth of the link layer between two processes on this host, per transport
 * setting: link_put + link_flush into the peer's arena, and active-message rendezvous received
 * straight into the receiver's buffer. Prints one JSON object. Compare with scripts/ucx-ceiling
 * (ucx_perftest) run right after it: figures are noisy, only same-run ratios mean much.
 *   build/bench/bench_link [size_MiB=32] [iterations=20] */
#include "link.h"
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { M_DATA = 1, M_QUIT = 2 };

struct side {
    uv_loop_t loop;
    struct link *link;
    struct link_peer *peer;
    void *buf;
    size_t len;
    int ups, downs, msgs, done, failed;
    int client; /* callbacks uv_stop the loop so UV_RUN_ONCE in run_until returns at once */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void on_up(void *arg, struct link_peer *p)
{
    struct side *s = arg;
    s->ups++;
    s->peer = p;
    if (s->client)
        uv_stop(&s->loop);
}

static void on_down(void *arg, struct link_peer *p, int err)
{
    (void)p, (void)err;
    struct side *s = arg;
    s->downs++;
    if (s->client)
        uv_stop(&s->loop);
}

static void on_msg(void *arg, struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                   const void *data, size_t len)
{
    (void)p, (void)hdr, (void)hdr_len, (void)data, (void)len;
    struct side *s = arg;
    s->msgs++;
    if (type == M_QUIT)
        uv_stop(&s->loop);
}

static int on_rndv(void *arg, struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                   size_t len, void **dest_ret)
{
    (void)p, (void)type, (void)hdr, (void)hdr_len;
    struct side *s = arg;
    if (len > s->len)
        return -EMSGSIZE;
    *dest_ret = s->buf;
    return 0;
}

static void done_cb(void *arg, int status)
{
    struct side *s = arg;
    s->done++;
    if (status < 0)
        s->failed++;
    if (s->client)
        uv_stop(&s->loop);
}

static int side_open(struct side *s, const struct link_config *cfg, size_t len)
{
    memset(s, 0, sizeof(*s));
    uv_loop_init(&s->loop);
    s->len = len;
    s->buf = malloc(len);
    memset(s->buf, 1, len);
    struct link_ops ops = {.on_peer_up = on_up, .on_peer_down = on_down, .on_msg = on_msg,
                           .on_rndv = on_rndv, .arg = s};
    return link_new(&s->loop, cfg, &ops, &s->link);
}

static void side_close(struct side *s)
{
    s->link = link_free(s->link);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
    free(s->buf);
}

static void timeout_cb(uv_timer_t *t)
{
    *(int *)t->data = 1;
}

/* Event-driven wait (no spinning: the other process needs the second core). */
static void run_until(struct side *s, const int *v, int want, double timeout_s)
{
    int timed_out = 0;
    uv_timer_t t;
    uv_timer_init(&s->loop, &t);
    t.data = &timed_out;
    uv_timer_start(&t, timeout_cb, (uint64_t)(timeout_s * 1000), 0);
    while (*v < want && !timed_out)
        uv_run(&s->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&s->loop, UV_RUN_NOWAIT);
}

static pid_t server(struct link_config cfg, size_t len, uint16_t *port)
{
    int pp[2];
    if (pipe(pp) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        struct side s;
        cfg.listen_host = "127.0.0.1";
        uint16_t p = 0;
        if (side_open(&s, &cfg, len) == 0)
            p = link_listen_port(s.link);
        if (write(pp[1], &p, sizeof(p)) != sizeof(p) || !p)
            _exit(2);
        uv_run(&s.loop, UV_RUN_DEFAULT);
        side_close(&s);
        _exit(0);
    }
    close(pp[1]);
    if (read(pp[0], port, sizeof(*port)) != sizeof(*port) || !*port)
        return -1;
    close(pp[0]);
    return pid;
}

/* One transport setting: returns GB/s for put (or -1) and AM rendezvous into *put, *am. */
static int measure(const char *tls, const char *secret, size_t len, int iters, double *put,
                   double *am, int *put_fast)
{
    struct link_config cfg = {.secret_path = secret, .tls = tls, .arena_bytes = 2 * len,
                              .max_payload = len};
    uint16_t port;
    pid_t pid = server(cfg, len, &port);
    if (pid < 0)
        return -1;
    struct side c;
    if (side_open(&c, &cfg, len) < 0)
        return -1;
    c.client = 1;
    char hp[64];
    snprintf(hp, sizeof(hp), "127.0.0.1:%u", port);
    struct link_peer *p;
    if (link_connect(c.link, hp, &p) < 0)
        return -1;
    run_until(&c, &c.ups, 1, 5);
    if (!c.peer)
        return -1;
    for (int i = 0; i < 100 && !link_peer_put_fast(c.peer); i++) {
        int never = 0;
        run_until(&c, &never, 1, 0.01);
    }
    *put_fast = link_peer_put_fast(c.peer);
    void *arena = link_arena(c.link, NULL);
    memset(arena, 2, 2 * len);
    *put = -1;
    if (*put_fast) { /* put over tcp is emulated: 0.03 GB/s, not worth the wait */
        link_put(c.peer, arena, len, 0, done_cb, &c); /* warm-up */
        link_flush(c.peer, done_cb, &c);
        run_until(&c, &c.done, 2, 10);
        c.done = 0;
        double t0 = now_s();
        for (int i = 0; i < iters; i++) {
            link_put(c.peer, (char *)arena + (size_t)(i & 1) * len, len, (size_t)(i & 1) * len,
                     done_cb, &c);
            link_flush(c.peer, done_cb, &c);
            run_until(&c, &c.done, 2 * (i + 1), 10);
        }
        *put = (double)len * iters / (now_s() - t0) / 1e9;
    }
    c.done = 0;
    link_send(c.peer, M_DATA, NULL, 0, arena, len, done_cb, &c); /* warm-up */
    run_until(&c, &c.done, 1, 10);
    c.done = 0;
    double t0 = now_s();
    for (int i = 0; i < iters; i++) { /* two in flight */
        link_send(c.peer, M_DATA, NULL, 0, (char *)arena + (size_t)(i & 1) * len, len, done_cb,
                  &c);
        run_until(&c, &c.done, i, 10);
    }
    run_until(&c, &c.done, iters, 10);
    *am = (double)len * iters / (now_s() - t0) / 1e9;
    int failed = c.failed;
    link_send(c.peer, M_QUIT, NULL, 0, NULL, 0, NULL, NULL);
    run_until(&c, &c.downs, 1, 5);
    side_close(&c);
    int st;
    waitpid(pid, &st, 0);
    return failed ? -1 : 0;
}

int main(int argc, char **argv)
{
    size_t mib = argc > 1 ? strtoul(argv[1], NULL, 10) : 32;
    int iters = argc > 2 ? atoi(argv[2]) : 20;
    if (!mib || mib > 1024 || iters < 1 || iters > 10000) {
        fprintf(stderr, "usage: bench_link [size_MiB 1..1024] [iterations 1..10000]\n");
        return 2;
    }
    log_set_level(LOG_LVL_WARN);
    char secret[] = "/tmp/kvf-bench-secret-XXXXXX";
    int fd = mkstemp(secret);
    if (fd < 0 || write(fd, "bench secret, not a real one", 28) != 28)
        return 1;
    close(fd);
    size_t len = mib << 20;
    const char *names[] = {"default", "tcp"};
    const char *tls[] = {NULL, "tcp"};
    printf("{\"size_bytes\":%zu,\"iterations\":%d", len, iters);
    int rc = 0;
    for (int i = 0; i < 2; i++) {
        double put, am;
        int fast = 0;
        if (measure(tls[i], secret, len, iters, &put, &am, &fast) < 0) {
            rc = 1;
            printf(",\"%s\":null", names[i]);
            continue;
        }
        printf(",\"%s\":{\"put_fast\":%s,\"put_flush_GBps\":", names[i], fast ? "true" : "false");
        if (put < 0)
            printf("null");
        else
            printf("%.2f", put);
        printf(",\"am_rndv_GBps\":%.2f}", am);
    }
    printf("}\n");
    unlink(secret);
    return rc;
}
