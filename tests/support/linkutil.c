/* linkutil.c: the two-process harness of the link tests (declared, with what each does, in
 * tests/linkutil.h). Built once into libkvferry-testsupport.a, linked into every test. */
#include "linkutil.h"
#include "monotonic.h"

int lt_is_server;
int lt_greet;
static uint8_t lt_greeting[1 << 20];

uint64_t lt_now_ns(void) { return mono_now_ns(); }

void lt_fill(void *buf, size_t len, uint64_t seed)
{
    uint64_t *w = buf;
    for (size_t i = 0; i < len / 8; i++)
        w[i] = (i * 0x9E3779B97F4A7C15ull) ^ seed;
    for (size_t i = len & ~(size_t)7; i < len; i++)
        ((uint8_t *)buf)[i] = (uint8_t)(i ^ seed);
}

int lt_verify(const void *buf, size_t len, uint64_t seed)
{
    const uint64_t *w = buf;
    for (size_t i = 0; i < len / 8; i++)
        if (w[i] != ((i * 0x9E3779B97F4A7C15ull) ^ seed))
            return 0;
    for (size_t i = len & ~(size_t)7; i < len; i++)
        if (((const uint8_t *)buf)[i] != (uint8_t)(i ^ seed))
            return 0;
    return 1;
}

void lt_secret(const char *dir, const char *name, const char *content, mode_t mode, char *buf,
               size_t len)
{
    tu_fmt(buf, len, "%s/%s", dir, name);
    int fd = open(buf, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    ck_assert_int_eq(fchmod(fd, mode), 0);
    close(fd);
}

/* On the client, every callback stops the loop: UV_RUN_ONCE in lt_run_until would otherwise go
 * on to block for I/O after a timer-driven callback already met the condition. */
static void lt_wake(struct lt *t)
{
    if (!lt_is_server)
        uv_stop(&t->loop);
}

void lt_send_done(void *arg, int status)
{
    struct lt *t = arg;
    lt_wake(t);
    if (status == 0)
        t->sends_done++;
    else
        t->sends_failed++;
}

static void lt_free_done(void *arg, int status)
{
    (void)status;
    free(arg);
}

static void lt_on_up(void *arg, struct link_peer *p)
{
    struct lt *t = arg;
    lt_wake(t);
    t->ups++;
    t->peer = p;
    if (lt_is_server && lt_greet) {
        lt_fill(lt_greeting, sizeof(lt_greeting), 7);
        link_send(p, LT_PONG, "g1", 2, lt_greeting, 64 << 10, NULL, NULL);
        link_send(p, LT_PONG, "g2", 2, lt_greeting, sizeof(lt_greeting), NULL, NULL);
        link_send(p, LT_PONG, "g3", 2, NULL, 0, NULL, NULL);
    }
}

static void lt_on_down(void *arg, struct link_peer *p, int err)
{
    struct lt *t = arg;
    lt_wake(t);
    t->downs++;
    t->down_err = err;
    if (t->peer == p)
        t->peer = NULL;
}

static int lt_on_rndv(void *arg, struct link_peer *p, uint16_t type, const void *hdr,
                      size_t hdr_len, size_t len, void **dest_ret)
{
    (void)p, (void)type, (void)hdr, (void)hdr_len;
    struct lt *t = arg;
    /* a buffer per message: receives may overlap, a buffer is never reused under one */
    if (t->n_rndv == (int)(sizeof(t->rndv_bufs) / sizeof(t->rndv_bufs[0])))
        return -ENOBUFS;
    void *b = malloc(len ? len : 1);
    if (!b)
        return -ENOMEM;
    t->rndv_lens[t->n_rndv] = len;
    t->rndv_bufs[t->n_rndv++] = b;
    *dest_ret = b;
    return 0;
}

static void lt_result(struct lt *t, struct link_peer *p, uint32_t ok)
{
    link_send(p, LT_RESULT, &ok, sizeof(ok), NULL, 0, lt_send_done, t);
}

/* The server's answers; the client only records. */
static void lt_server_msg(struct lt *t, struct link_peer *p, uint16_t type, const void *hdr,
                          size_t hdr_len, const void *data, size_t len)
{
    struct lt_check c = {0};
    memcpy(&c, hdr, hdr_len < sizeof(c) ? hdr_len : sizeof(c));
    size_t alen;
    uint8_t *arena = link_arena(t->link, &alen);
    switch (type) {
    case LT_PING: {
        void *copy = len ? malloc(len) : NULL;
        if (len)
            memcpy(copy, data, len);
        if (link_send(p, LT_PONG, hdr, hdr_len, copy, len, lt_free_done, copy) < 0)
            free(copy);
        break;
    }
    case LT_BIG: {
        int mine = 0; /* it landed in a buffer on_rndv chose */
        for (int i = 0; i < t->n_rndv; i++)
            mine |= data == t->rndv_bufs[i];
        lt_result(t, p, mine && lt_verify(data, len, c.off));
        break;
    }
    case LT_CHECK_ARENA:
        lt_result(t, p, c.off + c.len <= alen && lt_verify(arena + c.off, c.len, c.seed));
        break;
    case LT_GIVE_MREG:
        if (!t->mreg) {
            t->mreg_len = c.off;
            t->mreg_buf = calloc(1, t->mreg_len);
            ck_assert_int_eq(link_mem_register(t->link, t->mreg_buf, t->mreg_len, &t->mreg), 0);
        }
        {
            size_t rl;
            const void *rk = link_mreg_rkey(t->mreg, &rl);
            uint64_t addr = (uint64_t)(uintptr_t)t->mreg_buf;
            link_send(p, LT_MREG, &addr, sizeof(addr), rk, rl, lt_send_done, t);
        }
        break;
    case LT_CHECK_MREG:
        lt_result(t, p, t->mreg && c.len <= t->mreg_len && lt_verify(t->mreg_buf, c.len, c.seed));
        break;
    case LT_QUIT:
        t->quit = 1;
        uv_stop(&t->loop);
        break;
    }
}

static void lt_on_msg(void *arg, struct link_peer *p, uint16_t type, const void *hdr,
                      size_t hdr_len, const void *data, size_t len)
{
    struct lt *t = arg;
    lt_wake(t);
    t->msgs++;
    t->last_type = type;
    if (t->n_order < (int)(sizeof(t->order) / sizeof(t->order[0])))
        t->order[t->n_order++] = type;
    t->last_hdr_len = hdr_len;
    memcpy(t->last_hdr, hdr, hdr_len);
    t->last_len = len;
    for (int i = 0; i < t->n_rndv; i++)
        if (data == t->rndv_bufs[i])
            t->rndv_buf = t->rndv_bufs[i];
    if (len <= sizeof(t->last_data))
        memcpy(t->last_data, data, len);
    if (type == LT_RESULT) {
        uint32_t ok = 0;
        memcpy(&ok, hdr, hdr_len < 4 ? hdr_len : 4);
        if (ok)
            t->results_ok++;
        else
            t->results_bad++;
    }
    if (lt_is_server)
        lt_server_msg(t, p, type, hdr, hdr_len, data, len);
}

int lt_open(struct lt *t, const struct link_config *cfg)
{
    memset(t, 0, sizeof(*t));
    if (getenv("KVF_TEST_DEBUG"))
        log_set_level(LOG_LVL_DEBUG);
    ck_assert_int_eq(uv_loop_init(&t->loop), 0);
    struct link_ops ops = {.on_peer_up = lt_on_up,
                           .on_peer_down = lt_on_down,
                           .on_msg = lt_on_msg,
                           .on_rndv = lt_on_rndv,
                           .arg = t};
    return link_new(&t->loop, cfg, &ops, &t->link);
}

int lt_close(struct lt *t)
{
    t->mreg = link_mreg_free(t->link, t->mreg);
    t->link = link_free(t->link);
    uv_run(&t->loop, UV_RUN_DEFAULT);
    for (int i = 0; i < t->n_rndv; i++)
        free(t->rndv_bufs[i]);
    free(t->mreg_buf);
    return uv_loop_close(&t->loop);
}

static void lt_timeout_cb(uv_timer_t *h)
{
    *(int *)h->data = 1;
}

int lt_run_until(struct lt *t, const int *flag, int want, unsigned timeout_ms)
{
    int timed_out = 0;
    uv_timer_t tm;
    uv_timer_init(&t->loop, &tm);
    tm.data = &timed_out;
    uv_timer_start(&tm, lt_timeout_cb, tu_ms(timeout_ms), 0);
    while (*flag < want && !timed_out)
        uv_run(&t->loop, UV_RUN_ONCE);
    uv_close((uv_handle_t *)&tm, NULL);
    uv_run(&t->loop, UV_RUN_NOWAIT);
    return *flag >= want;
}

int lt_wait_put_fast(struct lt *t, unsigned timeout_ms)
{
    timeout_ms = tu_ms(timeout_ms);
    for (unsigned waited = 0; t->peer && !link_peer_put_fast(t->peer) && waited < timeout_ms;
         waited += 10) {
        int never = 0;
        lt_run_until(t, &never, 1, 10);
    }
    return t->peer && link_peer_put_fast(t->peer);
}

static void lt_lifetime_cb(uv_timer_t *h)
{
    uv_stop(h->loop);
}

pid_t lt_server_fork(const struct link_config *cfg, unsigned lifetime_ms, int gate_fd, int *port_fd,
                     int *stats_fd)
{
    int pp[2], sp[2];
    ck_assert_int_eq(pipe(pp), 0);
    ck_assert_int_eq(pipe(sp), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(pp[0]);
        close(sp[0]);
        lt_is_server = 1;
        struct link_config c = *cfg;
        if (gate_fd >= 0 &&
            read(gate_fd, &c.listen_port, sizeof(c.listen_port)) != sizeof(c.listen_port))
            _exit(2);
        struct lt t;
        uint16_t port = 0;
        if (lt_open(&t, &c) == 0)
            port = link_listen_port(t.link);
        if (write(pp[1], &port, sizeof(port)) != sizeof(port) || !port)
            _exit(2);
        close(pp[1]);
        uv_timer_t life;
        uv_timer_init(&t.loop, &life);
        uv_timer_start(&life, lt_lifetime_cb, tu_ms(lifetime_ms), 0);
        uv_run(&t.loop, UV_RUN_DEFAULT);
        uv_close((uv_handle_t *)&life, NULL);
        struct link_stats st;
        link_get_stats(t.link, &st);
        int rc = lt_close(&t);
        if (write(sp[1], &st, sizeof(st)) != sizeof(st))
            _exit(4);
        _exit(rc == 0 ? 0 : 3);
    }
    close(pp[1]);
    close(sp[1]);
    *port_fd = pp[0];
    *stats_fd = sp[0];
    return pid;
}

uint16_t lt_read_port(int port_fd)
{
    uint16_t port = 0;
    ck_assert_int_eq(read(port_fd, &port, sizeof(port)), sizeof(port));
    close(port_fd);
    ck_assert_uint_ne(port, 0);
    return port;
}

pid_t lt_server_start(const struct link_config *cfg, unsigned lifetime_ms, uint16_t *port_ret,
                      int *stats_fd)
{
    int port_fd;
    pid_t pid = lt_server_fork(cfg, lifetime_ms, -1, &port_fd, stats_fd);
    *port_ret = lt_read_port(port_fd);
    return pid;
}

int lt_server_wait(pid_t pid, int stats_fd, struct link_stats *st)
{
    memset(st, 0, sizeof(*st));
    if (read(stats_fd, st, sizeof(*st)) != sizeof(*st))
        memset(st, 0, sizeof(*st));
    close(stats_fd);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void lt_connect(struct lt *t, uint16_t port)
{
    char hp[64];
    snprintf(hp, sizeof(hp), "127.0.0.1:%u", port);
    struct link_peer *p;
    ck_assert_int_eq(link_connect(t->link, hp, &p), 0);
    ck_assert_ptr_nonnull(p);
}
