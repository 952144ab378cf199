/* bench_ctl_floor.c: the floor under one small remote request (scripts/bench-ctl, issue 12
 * "Control overhead"), measured between two processes of this host in the same run:
 *   unix_rtt   a one-byte round trip over a unix stream socket, both ends blocked in read (a
 *              worker's frame to its daemon and the event back);
 *   link_rtt   a message each way over the link layer (link.h: UCX active messages, both ends
 *              on a libuv loop woken by the UCX event fd, as the daemons run);
 *   cma_write  one process_vm_writev of the request's bytes into the other process;
 *   memcpy     the same bytes copied in this process.
 * A remote request needs at least unix_rtt + link_rtt + cma_write (the generation worker's RECV
 * and DONE, RECV_REQ and WRITER_DONE, the context daemon's write), a local one unix_rtt + memcpy.
 * Prints one JSON object: p50 and p99 in us and CPU per round trip (both processes) for each.
 *   build/bench/bench_ctl_floor [bytes=259584] [round_trips=5000] */
#include "link.h"
#include "log.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { M_PING = 1, M_QUIT = 2 };

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

/* CPU of this process and its waited-for children, us */
static double cpu_us(void)
{
    struct rusage a, b;
    getrusage(RUSAGE_SELF, &a);
    getrusage(RUSAGE_CHILDREN, &b);
    return (a.ru_utime.tv_sec + a.ru_stime.tv_sec + b.ru_utime.tv_sec + b.ru_stime.tv_sec) * 1e6 +
           a.ru_utime.tv_usec + a.ru_stime.tv_usec + b.ru_utime.tv_usec + b.ru_stime.tv_usec;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void print_row(const char *name, double *t, int n, double cpu, int first)
{
    qsort(t, (size_t)n, sizeof *t, cmp_d);
    printf("%s\"%s\":{\"p50_us\":%.1f,\"p99_us\":%.1f,\"cpu_us\":%.1f}", first ? "" : ",", name,
           t[(n - 1) / 2], t[(int)((n - 1) * 0.99)], cpu);
}

/* ---- unix socket round trips, and cma writes into the child blocked in read ---- */

static int unix_and_cma(uint8_t *buf, size_t bytes, int n, double *t, int first)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) { /* echo every byte; its own copy of buf (written below) */
        close(sv[0]);
        memset(buf, 0, bytes);
        char c;
        while (read(sv[1], &c, 1) == 1 && c != 'q')
            if (write(sv[1], &c, 1) != 1)
                break;
        _exit(0);
    }
    close(sv[1]);
    char c = 'p';
    int ok = 1;
    for (int i = 0; i < 100 && ok; i++) /* warm-up: the child has touched buf */
        ok = write(sv[0], &c, 1) == 1 && read(sv[0], &c, 1) == 1;
    double c0 = cpu_us();
    for (int i = 0; i < n && ok; i++) {
        double t0 = now_us();
        ok = write(sv[0], &c, 1) == 1 && read(sv[0], &c, 1) == 1;
        t[i] = now_us() - t0;
    }
    double cpu_unix = cpu_us() - c0; /* this side only: the child's CPU comes after wait */
    uint8_t *src = malloc(bytes);
    double *tw = malloc(sizeof(double) * (size_t)n);
    memset(src, 7, bytes);
    for (int i = 0; i < n && ok; i++) {
        struct iovec l = {.iov_base = src, .iov_len = bytes};
        struct iovec r = {.iov_base = buf, .iov_len = bytes};
        double t0 = now_us();
        ok = process_vm_writev(pid, &l, 1, &r, 1, 0) == (ssize_t)bytes;
        tw[i] = now_us() - t0;
    }
    double cw = cpu_us();
    c = 'q';
    (void)!write(sv[0], &c, 1);
    close(sv[0]);
    int st;
    waitpid(pid, &st, 0);
    double child = cpu_us() - cw; /* the child's whole life: its echoes */
    if (!ok) {
        fprintf(stderr, "bench_ctl_floor: unix or cma round: %s\n", strerror(errno));
        free(src);
        free(tw);
        return -1;
    }
    print_row("unix_rtt", t, n, (cpu_unix + child) / n, first);
    double cw0 = 0;
    for (int i = 0; i < n; i++)
        cw0 += tw[i];
    print_row("cma_write", tw, n, cw0 / n, 0);
    for (int i = 0; i < n; i++) {
        double t0 = now_us();
        memcpy(buf, src, bytes);
        __asm__ volatile("" ::"r"(buf) : "memory");
        tw[i] = now_us() - t0;
    }
    cw0 = 0;
    for (int i = 0; i < n; i++)
        cw0 += tw[i];
    print_row("memcpy", tw, n, cw0 / n, 0);
    free(src);
    free(tw);
    return 0;
}

/* ---- link round trips ---- */

struct side {
    uv_loop_t loop;
    struct link *link;
    struct link_peer *peer;
    int ups, downs, msgs, server, quit;
};

static void on_up(void *arg, struct link_peer *p)
{
    struct side *s = arg;
    s->ups++;
    s->peer = p;
    uv_stop(&s->loop);
}

static void on_down(void *arg, struct link_peer *p, int err)
{
    (void)p, (void)err;
    struct side *s = arg;
    s->downs++;
    uv_stop(&s->loop);
}

static void on_msg(void *arg, struct link_peer *p, uint16_t type, const void *hdr, size_t hdr_len,
                   const void *data, size_t len)
{
    (void)data, (void)len;
    struct side *s = arg;
    s->msgs++;
    if (type == M_QUIT) {
        s->quit = 1;
        uv_stop(&s->loop);
        return;
    }
    if (s->server) /* the answer, as a daemon answers a control message */
        link_send(p, M_PING, hdr, hdr_len, NULL, 0, NULL, NULL);
    else
        uv_stop(&s->loop);
}

static int side_open(struct side *s, struct link_config *cfg)
{
    memset(s, 0, sizeof(*s));
    uv_loop_init(&s->loop);
    struct link_ops ops = {
        .on_peer_up = on_up, .on_peer_down = on_down, .on_msg = on_msg, .arg = s};
    return link_new(&s->loop, cfg, &ops, &s->link);
}

static void side_close(struct side *s)
{
    s->link = link_free(s->link);
    uv_run(&s->loop, UV_RUN_DEFAULT);
    uv_loop_close(&s->loop);
}

static void tick_cb(uv_timer_t *t)
{
    uv_stop(t->loop);
}

/* Runs the loop until *v reaches want or timeout_ms passed (event-driven: no spinning). */
static void run_until(struct side *s, const int *v, int want, unsigned timeout_ms)
{
    uv_timer_t t;
    uv_timer_init(&s->loop, &t);
    uv_timer_start(&t, tick_cb, timeout_ms, 0);
    while (*v < want && uv_is_active((uv_handle_t *)&t))
        uv_run(&s->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&t, NULL);
    uv_run(&s->loop, UV_RUN_NOWAIT);
}

static int link_rtt(const char *secret, int n, double *t)
{
    struct link_config cfg = {.secret_path = secret};
    int pp[2];
    if (pipe(pp) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        struct side s;
        struct link_config sc = cfg;
        sc.listen_host = "127.0.0.1";
        uint16_t port = 0;
        if (side_open(&s, &sc) == 0)
            port = link_listen_port(s.link);
        s.server = 1;
        if (write(pp[1], &port, sizeof port) != sizeof port || !port)
            _exit(2);
        while (!s.downs && !s.quit) /* ends at M_QUIT or the peer's loss */
            uv_run(&s.loop, UV_RUN_DEFAULT);
        side_close(&s);
        _exit(0);
    }
    close(pp[1]);
    uint16_t port = 0;
    if (read(pp[0], &port, sizeof port) != sizeof port || !port)
        return -1;
    close(pp[0]);
    struct side c;
    if (side_open(&c, &cfg) < 0)
        return -1;
    char hp[64];
    snprintf(hp, sizeof hp, "127.0.0.1:%u", port);
    struct link_peer *p;
    if (link_connect(c.link, hp, &p) < 0)
        return -1;
    run_until(&c, &c.ups, 1, 5000);
    int ok = c.peer != NULL;
    uint64_t v = 0;
    for (int i = 0; i < 100 && ok; i++) { /* warm-up: lanes settle */
        int want = c.msgs + 1;
        ok = link_send(c.peer, M_PING, &v, sizeof v, NULL, 0, NULL, NULL) == 0;
        run_until(&c, &c.msgs, want, 2000);
        ok = ok && c.msgs == want;
    }
    double c0 = cpu_us();
    for (int i = 0; i < n && ok; i++) {
        int want = c.msgs + 1;
        double t0 = now_us();
        ok = link_send(c.peer, M_PING, &v, sizeof v, NULL, 0, NULL, NULL) == 0;
        run_until(&c, &c.msgs, want, 2000);
        t[i] = now_us() - t0;
        ok = ok && c.msgs == want;
    }
    double mine = cpu_us() - c0;
    if (c.peer)
        link_send(c.peer, M_QUIT, NULL, 0, NULL, 0, NULL, NULL);
    run_until(&c, &c.downs, 1, 500);
    side_close(&c);
    double cw = cpu_us();
    int st;
    waitpid(pid, &st, 0);
    double child = cpu_us() - cw; /* includes its start (UCX init): an upper bound */
    if (!ok) {
        fprintf(stderr, "bench_ctl_floor: link round trips failed\n");
        return -1;
    }
    print_row("link_rtt", t, n, (mine + child) / n, 0);
    return 0;
}

int main(int argc, char **argv)
{
    size_t bytes = argc > 1 ? strtoul(argv[1], NULL, 10) : 259584;
    int n = argc > 2 ? atoi(argv[2]) : 5000;
    if (!bytes || bytes > (1u << 30) || n < 10 || n > 1000000) {
        fprintf(stderr, "usage: bench_ctl_floor [bytes 1..1GiB] [round_trips 10..1000000]\n");
        return 2;
    }
    log_set_level(LOG_LVL_WARN);
    signal(SIGPIPE, SIG_IGN);
    char secret[] = "/tmp/kvf-floor-secret-XXXXXX";
    int fd = mkstemp(secret);
    if (fd < 0 || write(fd, "bench secret, not a real one", 28) != 28)
        return 1;
    close(fd);
    double *t = malloc(sizeof(double) * (size_t)n);
    uint8_t *buf = malloc(bytes);
    if (!t || !buf)
        return 1;
    memset(buf, 1, bytes);
    printf("{\"bytes\":%zu,\"round_trips\":%d,", bytes, n);
    int rc = unix_and_cma(buf, bytes, n, t, 1) < 0 || link_rtt(secret, n, t) < 0;
    printf("}\n");
    unlink(secret);
    free(t);
    free(buf);
    return rc;
}
