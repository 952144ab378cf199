/* remoteutil.c: the two-daemon harness (declared, with what each does, in
 * tests/integration/remoteutil.h). Built once into libkvferry-testsupport.a, linked into every
 * test. */
#include "integration/remoteutil.h"
#include "monotonic.h"

uint64_t ru_now_ms(void) { return (uint64_t)mono_now_ms(); }

pid_t ru_run_sim(char *const argv[])
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0 && !getenv("KVF_TEST_VERBOSE"))
            dup2(fd, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    return pid;
}

void ru_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

void ru_secret(const char *dir, const char *name, unsigned seed, char *path, size_t len)
{
    tu_fmt(path, len, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    char buf[64];
    int n = snprintf(buf, sizeof buf, "kvferry-test-secret-%08x-%08x\n", seed, seed * 2654435761u);
    ck_assert_int_eq(write(fd, buf, (size_t)n), n);
    close(fd);
}

const char *ru_listen_host = "127.0.0.1";
const char *ru_netns;
int ru_held_events;

/* Forks and execs kvferryd with d's config, waits for its READY=1: 1 up, 0 exited before it,
 * -1 none in time (still running). */
int ru_daemon_launch(struct ru_daemon *d, const char *tls)
{
    char bin[256];
    tu_bin("kvferryd", bin, sizeof bin);
    unlink(d->worker);
    tr_open(&d->ready, d->dir);
    d->pid = fork();
    ck_assert_int_ge(d->pid, 0);
    if (d->pid == 0) {
        int fd = open(d->log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        /* KVF_TEST_UCX_TLS: the same-host default of a run that needs more transports
         * (cuda_copy,cuda_ipc for the device arena: scripts/bench-gpu-direct) */
        const char *same = getenv("KVF_TEST_UCX_TLS");
        setenv("UCX_TLS", tls ? tls : same && *same ? same : RU_TLS_SAME_HOST, 1);
        tr_child_env(&d->ready);
        if (ru_netns) /* ip execs the daemon: the pid stays the daemon's */
            execlp("ip", "ip", "netns", "exec", ru_netns, bin, "--config", d->cfg, (char *)NULL);
        else
            execl(bin, bin, "--config", d->cfg, (char *)NULL);
        _exit(127);
    }
    return tr_wait_ready(&d->ready, d->pid, 30000, NULL);
}

int ru_daemon_restart(struct ru_daemon *d)
{
    int up = ru_daemon_launch(d, NULL);
    if (up == 1)
        return 0;
    if (up < 0)
        kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    tr_close(&d->ready);
    return -1;
}

int ru_daemon_start_tls(struct ru_daemon *d, const char *top, const char *name, int listen,
                        const char *secret, const char *extra, const char *tls)
{
    static unsigned salt;
    memset(d, 0, sizeof *d);
    tu_fmt(d->dir, sizeof d->dir, "%s/%s", top, name);
    mkdir(d->dir, 0700);
    tu_fmt(d->cfg, sizeof d->cfg, "%s/kvferry.yaml", d->dir);
    tu_fmt(d->log, sizeof d->log, "%s/log", d->dir);
    tu_sock_path(d->worker, sizeof d->worker, "%s/worker.sock", d->dir);
    tu_sock_path(d->control, sizeof d->control, "%s/control.sock", d->dir);
    for (int attempt = 0; attempt < 8; attempt++) {
        srand((unsigned)getpid() * 7919u + (unsigned)time(NULL) + ++salt * 104729u);
        d->port = listen ? (uint16_t)(32768 + rand() % 28000) : 0;
        tu_fmt(d->addr, sizeof d->addr, "%s:%u", ru_listen_host, d->port);
        FILE *f = fopen(d->cfg, "w");
        ck_assert_ptr_nonnull(f);
        fprintf(f,
                "sockets:\n  dir: \"%s\"\nlog:\n  level: debug\nlisten:\n  address: \"%s\"\n"
                "  port: %u\ncluster:\n  secret_file: \"%s\"\n%s",
                d->dir, ru_listen_host, d->port, secret ? secret : "", extra ? extra : "");
        /* Slow runs (KVF_TEST_SLOW: TSan) scale the waits a daemon counts on its peer for,
         * where the test leaves them at their defaults (2 s lookup, 1 s keepalive): a REGISTER
         * can hold a loop for seconds there, which is no lost peer. */
        if (tu_ms(1) > 1 && !(extra && strstr(extra, "lookup")))
            fprintf(f, "deadlines.lookup: %ums\n", tu_ms(2000));
        if (tu_ms(1) > 1 && !(extra && strstr(extra, "keepalive_interval")))
            fprintf(f, "peers.keepalive_interval: %ums\n", tu_ms(1000));
        fclose(f);
        int up = ru_daemon_launch(d, tls);
        if (up == 1)
            return 0;
        if (up < 0) { /* no READY=1 in time: not a taken port */
            kill(d->pid, SIGKILL);
            waitpid(d->pid, NULL, 0);
        }
        d->pid = 0; /* exited before READY: maybe the port was taken */
        tr_close(&d->ready);
        if (!listen || up < 0)
            break;
    }
    return -1;
}

int ru_daemon_start(struct ru_daemon *d, const char *top, const char *name, int listen,
                    const char *secret, const char *extra)
{
    return ru_daemon_start_tls(d, top, name, listen, secret, extra, NULL);
}

int ru_daemon_stop(struct ru_daemon *d)
{
    if (d->pid <= 0)
        return 0;
    kill(d->pid, SIGTERM);
    int st = -1;
    uint64_t until = ru_now_ms() + tu_ms(15000);
    while (ru_now_ms() < until) {
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            d->pid = 0;
            tr_close(&d->ready);
            return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        }
        ru_sleep_ms(10);
    }
    kill(d->pid, SIGKILL);
    waitpid(d->pid, NULL, 0);
    d->pid = 0;
    tr_close(&d->ready);
    return -1;
}

void ru_daemon_kill9(struct ru_daemon *d)
{
    if (d->pid > 0) {
        kill(d->pid, SIGKILL);
        waitpid(d->pid, NULL, 0);
        d->pid = 0;
    }
    tr_close(&d->ready);
}

void ru_dump_log(const struct ru_daemon *d, const char *what)
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return;
    fprintf(stderr, "---- %s log (%s) ----\n", what, d->log);
    char line[1024];
    int n = 0;
    while (fgets(line, sizeof line, f) && n++ < 400)
        fputs(line, stderr);
    fclose(f);
}

json_t *ru_ctl(const struct ru_daemon *d, const char *cmd)
{
    struct sockaddr_un sa = tu_sun(d->control);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        if (fd >= 0)
            close(fd);
        return NULL;
    }
    char req[128];
    int n = (int)strlen(tu_fmt(req, sizeof req, "{\"id\":1,\"cmd\":\"%s\"}\n", cmd));
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return NULL;
    }
    size_t cap = 1 << 20, len = 0;
    char *buf = malloc(cap);
    while (buf && len < cap - 1) {
        ssize_t r = read(fd, buf + len, cap - 1 - len);
        if (r <= 0)
            break;
        len += (size_t)r;
        if (memchr(buf, '\n', len))
            break;
    }
    close(fd);
    if (!buf)
        return NULL;
    buf[len] = 0;
    json_t *o = json_loads(buf, 0, NULL);
    free(buf);
    json_t *res = o ? json_object_get(o, "result") : NULL;
    if (res)
        json_incref(res);
    json_decref(o);
    return res;
}

long long ru_ctl_int(const struct ru_daemon *d, const char *cmd, const char *key)
{
    json_t *r = ru_ctl(d, cmd), *v = r;
    char buf[128];
    tu_fmt(buf, sizeof buf, "%s", key);
    for (char *save, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = json_object_get(v, k);
    long long x = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(r);
    return x;
}

long long ru_peers_stat(const struct ru_daemon *d, const char *key)
{
    json_t *r = ru_ctl(d, "stats");
    json_t *v = json_object_get(json_object_get(r, "peers"), key);
    long long x = json_is_integer(v) ? json_integer_value(v) : -1;
    json_decref(r);
    return x;
}

/* What d's arenas hold now: landing and staging slots in use or quarantined, staging held. */
static long long arenas_held(const struct ru_daemon *d)
{
    static const char *const keys[] = {"slots_in_use", "quarantined_slots",
                                       "staging.slots_in_use", "staging.quarantined_slots",
                                       "staging.held.slots"};
    long long n = 0;
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        long long x = ru_ctl_int(d, "arena", keys[i]);
        n += x > 0 ? x : 0;
    }
    return n;
}

void ru_wait_arenas_idle(const struct ru_daemon *d, const char *what, unsigned ms)
{
    uint64_t end = ru_now_ms() + tu_ms(ms);
    while (arenas_held(d) != 0 && ru_now_ms() < end)
        ru_sleep_ms(20);
    long long n = arenas_held(d);
    if (n)
        ru_dump_log(d, what);
    ck_assert_msg(n == 0, "%s: %lld arena slot(s) still in use, quarantined or held (arena: "
                  "landing %lld in use, %lld quarantined; staging %lld in use, %lld quarantined, "
                  "%lld held)", what, n, ru_ctl_int(d, "arena", "slots_in_use"),
                  ru_ctl_int(d, "arena", "quarantined_slots"),
                  ru_ctl_int(d, "arena", "staging.slots_in_use"),
                  ru_ctl_int(d, "arena", "staging.quarantined_slots"),
                  ru_ctl_int(d, "arena", "staging.held.slots"));
}

void ru_wait_peers_stat(const struct ru_daemon *d, const char *key, long long want, unsigned ms)
{
    uint64_t end = ru_now_ms() + tu_ms(ms);
    long long x;
    while ((x = ru_peers_stat(d, key)) < want) {
        ck_assert_msg(ru_now_ms() < end, "stats.peers.%s is %lld after %u ms, not %lld", key, x, ms,
                      want);
        ru_sleep_ms(10);
    }
}

void ru_wait_listed(const struct ru_daemon *d, const char *cmd, const char *key, const char *f1,
                    const char *v1, const char *f2, const char *v2, unsigned ms)
{
    uint64_t end = ru_now_ms() + tu_ms(ms);
    for (;;) {
        json_t *r = ru_ctl(d, cmd);
        int seen = tj_lists(json_object_get(r, key), f1, v1, f2, v2);
        json_decref(r);
        if (seen)
            return;
        ck_assert_msg(ru_now_ms() < end, "`%s` listed no %s with %s=%s within %u ms", cmd, key, f1,
                      v1, ms);
        ru_sleep_ms(10);
    }
}

uint64_t ru_rand(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 0x2545f4914f6cdd1dull;
}

void ru_inst_init_layouts(struct ru_inst *in, const struct layout *ls, uint32_t n_ranks,
                          uint32_t n_blocks, uint64_t *rng, int fill)
{
    in->n = n_ranks;
    in->r = calloc(in->n, sizeof *in->r);
    ck_assert_ptr_nonnull(in->r);
    for (uint32_t i = 0; i < in->n; i++) {
        struct ru_rank *r = &in->r[i];
        r->l = ls[i];
        r->mem.n = r->l.n_pools;
        for (uint32_t p = 0; p < r->l.n_pools; p++) {
            uint64_t b = r->l.pools[p].bytes;
            r->fds[p] = memfd_create("kvf-test-pool", MFD_CLOEXEC | MFD_ALLOW_SEALING);
            ck_assert_int_ge(r->fds[p], 0);
            ck_assert_int_eq(ftruncate(r->fds[p], (off_t)b), 0);
            ck_assert_int_eq(fcntl(r->fds[p], F_ADD_SEALS, F_SEAL_SHRINK), 0);
            r->mem.base[p] = mmap(NULL, b, PROT_READ | PROT_WRITE, MAP_SHARED, r->fds[p], 0);
            ck_assert_ptr_ne(r->mem.base[p], MAP_FAILED);
            r->mem.size[p] = b;
            memset(r->mem.base[p], fill, b);
        }
        r->ids = calloc((size_t)LAYOUT_MAX_GROUPS * (n_blocks + 1), sizeof(uint32_t));
        ck_assert_ptr_nonnull(r->ids);
        uint32_t *next = r->ids;
        for (uint32_t g = 0; g < r->l.n_groups; g++) {
            const struct layout_group *gr = &r->l.groups[g];
            uint32_t n = gr->kind == GROUP_STATE ? 1 : n_blocks;
            ck_assert_uint_le(n, gr->n_items);
            for (uint32_t k = 0; k < n; k++) {
                uint32_t v;
                int dup;
                do { /* distinct random ids */
                    v = (uint32_t)(ru_rand(rng) % gr->n_items);
                    dup = 0;
                    for (uint32_t j = 0; j < k; j++)
                        dup |= next[j] == v;
                } while (dup);
                next[k] = v;
            }
            r->counts[g] = n;
            r->pids.n[g] = n;
            r->pids.ids[g] = n ? next : NULL;
            next += n;
            r->n_ids += n;
        }
    }
}

void ru_inst_init(struct ru_inst *in, const char *spec, const char *id, layout_role_t role,
                  uint32_t n_blocks, uint64_t *rng, int fill)
{
    char err[256];
    memset(in, 0, sizeof *in);
    ck_assert_msg(preset_parse(spec, &in->spec, err, sizeof err) == 0, "%s", err);
    uint32_t n = preset_n_ranks(&in->spec);
    struct layout *ls = calloc(n, sizeof *ls);
    ck_assert_ptr_nonnull(ls);
    ck_assert_msg(preset_build(&in->spec, id, role, -1, ls, err, sizeof err) == 0, "%s", err);
    ru_inst_init_layouts(in, ls, n, n_blocks, rng, fill);
    free(ls);
}

void ru_rank_register(struct ru_inst *in, uint32_t i, const struct ru_daemon *d, const char *home)
{
    {
        struct ru_rank *r = &in->r[i];
        struct kvf_options o = {
            .no_reconnect = 1, .connect_timeout_ms = tu_ms(10000), .home = home,
            .held_events = ru_held_events};
        int crc = kvf_connect(d->worker, &o, &r->c);
        if (crc != 0)
            ru_dump_log(d, "daemon");
        ck_assert_msg(crc == 0, "rank %u: kvf_connect(%s) = %d (%s)", i, d->worker, crc,
                      strerror(-crc));
        json_t *j = layout_to_jobj(&r->l);
        char *txt = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        struct kvf_pool pools[LAYOUT_MAX_POOLS];
        memset(pools, 0, sizeof pools);
        for (uint32_t p = 0; p < r->l.n_pools; p++)
            pools[p] = (struct kvf_pool){
                .kind = KVF_POOL_HOST, .device = -1, .bytes = r->l.pools[p].bytes, .fd = r->fds[p]};
        char err[512] = "";
        int rc = kvf_register(r->c, txt, pools, r->l.n_pools, err, sizeof err);
        free(txt);
        ck_assert_msg(rc == 0, "register rank %u: %d %s", i, rc, err);
    }
}

pid_t ru_rank_fork(struct ru_inst *in, uint32_t i, const struct ru_daemon *d,
                   int (*then)(struct ru_rank *r, void *arg), void *arg)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        ru_rank_register(in, i, d, NULL);
        if (then && then(&in->r[i], arg) != 0)
            _exit(3);
        char c = 1;
        if (write(pfd[1], &c, 1) != 1)
            _exit(4);
        for (;;)
            pause();
    }
    close(pfd[1]);
    char c;
    ck_assert_msg(read(pfd[0], &c, 1) == 1, "the forked rank %u did not come up", i);
    close(pfd[0]);
    return pid;
}

void ru_inst_register(struct ru_inst *in, const struct ru_daemon *d)
{
    for (uint32_t i = 0; i < in->n; i++)
        ru_rank_register(in, i, d, NULL);
}

void ru_inst_free(struct ru_inst *in)
{
    for (uint32_t i = 0; in->r && i < in->n; i++) {
        struct ru_rank *r = &in->r[i];
        r->c = kvf_close(r->c);
        for (uint32_t p = 0; p < r->mem.n; p++) {
            munmap(r->mem.base[p], r->mem.size[p]);
            close(r->fds[p]);
        }
        free(r->ids);
    }
    free(in->r);
    memset(in, 0, sizeof *in);
}

void ru_readers(const struct ru_inst *ctx, const struct ru_inst *gen, int32_t dp, uint32_t *readers)
{
    struct layout *cl = calloc(ctx->n, sizeof *cl);
    ck_assert_ptr_nonnull(cl);
    for (uint32_t i = 0; i < ctx->n; i++)
        cl[i] = ctx->r[i].l;
    for (uint32_t g = 0; g < gen->n; g++) {
        struct plan_input pin = {.gen = &gen->r[g].l,
                                 .gen_ids = gen->r[g].pids,
                                 .ctx = cl,
                                 .n_ctx = ctx->n,
                                 .ctx_dp_rank = dp};
        struct plan p;
        struct plan_error pe;
        if (plan_build(&pin, &p, &pe) < 0)
            continue;
        for (uint32_t w = 0; w < p.n_writers; w++)
            readers[p.writers[w].ctx_rank]++;
        plan_done(&p);
    }
    free(cl);
}

void ru_recv_args(struct ru_rank *r, uint64_t req, const char *inst, const char *home,
                  struct kvf_recv_args *a)
{
    *a = (struct kvf_recv_args){.req_id = req,
                                .ctx_instance = inst,
                                .ctx_dp_rank = -1,
                                .ctx_home = home,
                                .n_groups = r->l.n_groups,
                                .counts = r->counts,
                                .ids = r->ids};
}

void ru_ids_with_a_duplicate(const struct ru_rank *r, uint32_t *dup)
{
    memcpy(dup, r->ids, r->n_ids * sizeof *dup);
    uint32_t off = 0, g = 0;
    while (g < r->l.n_groups && r->l.groups[g].kind != GROUP_PAGED)
        off += r->counts[g++];
    ck_assert_msg(g < r->l.n_groups && r->counts[g] >= 2, "no paged group of two blocks");
    dup[off + 1] = dup[off];
}

int ru_wait_event(struct ru_rank *r, uint64_t req, struct kvf_event *ev, unsigned ms)
{
    uint64_t until = ru_now_ms() + tu_ms(ms);
    while (ru_now_ms() < until) {
        int rc = kvf_poll(r->c, ev, 20);
        if (rc == 1 && ev->req_id == req &&
            (ev->kind == KVF_EV_DONE || ev->kind == KVF_EV_SENT || ev->kind == KVF_EV_FAILED))
            return ev->kind;
        if (rc < 0)
            return rc;
    }
    return 0;
}

void ru_fill_and_send(struct ru_inst *ctx, const struct ru_inst *gen, uint64_t req, int32_t dp,
                      uint64_t seed, uint32_t *readers)
{
    ru_readers(ctx, gen, dp, readers);
    for (uint32_t i = 0; i < ctx->n; i++) {
        pattern_fill(&ctx->r[i].l, &ctx->r[i].mem, &ctx->r[i].pids, 0, seed);
        if (readers[i])
            ck_assert_int_eq(kvf_send(ctx->r[i].c, req, ctx->r[i].l.n_groups, ctx->r[i].counts,
                                      ctx->r[i].ids, readers[i]),
                             0);
    }
}

void ru_move_one(const char *home, struct ru_inst *ctx, struct ru_inst *gen, uint64_t req,
                 uint64_t seed, unsigned ms)
{
    uint32_t readers[64] = {0};
    ru_fill_and_send(ctx, gen, req, -1, seed, readers);
    struct ru_rank *r = &gen->r[0];
    struct kvf_recv_args a = {.req_id = req, .ctx_instance = ctx->r[0].l.instance,
                              .ctx_dp_rank = -1, .ctx_home = home, .n_groups = r->l.n_groups,
                              .counts = r->counts, .ids = r->ids};
    ck_assert_int_eq(kvf_recv(r->c, &a), 0);
    struct kvf_event ev;
    int k = ru_wait_event(r, req, &ev, ms);
    ck_assert_msg(k == KVF_EV_DONE, "request %llu of %s: event %d: %s: %s",
                  (unsigned long long)req, r->l.instance, k,
                  kvf_error_to_string((kvf_error_t)ev.error), ev.message);
    ck_assert_int_eq(ru_wait_event(&ctx->r[0], req, &ev, ms), KVF_EV_SENT);
    ru_assert_parity(r, 0, seed, r->l.instance);
}

void ru_assert_parity(const struct ru_rank *r, uint32_t first_block, uint64_t seed,
                      const char *what)
{
    ru_assert_parity_tokens(r, first_block, seed, 0, what);
}

void ru_assert_parity_tokens(const struct ru_rank *r, uint32_t first_block, uint64_t seed,
                             uint64_t tokens, const char *what)
{
    struct copy_mem want;
    want.n = r->mem.n;
    for (uint32_t p = 0; p < r->mem.n; p++) {
        want.size[p] = r->mem.size[p];
        want.base[p] = malloc(r->mem.size[p] ? r->mem.size[p] : 1);
        ck_assert_ptr_nonnull(want.base[p]);
        memset(want.base[p], RU_POISON, r->mem.size[p]);
    }
    pattern_fill_tokens(&r->l, &want, &r->pids, first_block, seed, tokens);
    for (uint32_t p = 0; p < r->mem.n; p++) {
        if (memcmp(want.base[p], r->mem.base[p], r->mem.size[p]) != 0) {
            uint64_t off = 0;
            while (want.base[p][off] == r->mem.base[p][off])
                off++;
            ck_abort_msg("%s: generation rank %u pool %u differs at byte %llu: got 0x%02x want "
                         "0x%02x",
                         what, layout_rank(&r->l), p, (unsigned long long)off, r->mem.base[p][off],
                         want.base[p][off]);
        }
        free(want.base[p]);
    }
}

void two_start2(struct two *t, const char *extra_a, const char *extra_b, const char *tls,
                const char *secret_b)
{
    memset(t, 0, sizeof *t);
    tu_tmpdir(t->top, sizeof t->top);
    ru_secret(t->top, "secret", 7, t->secret, sizeof t->secret);
    ck_assert_int_eq(ru_daemon_start_tls(&t->a, t->top, "a", 1, t->secret, extra_a, tls), 0);
    char other[128];
    const char *sb = t->secret;
    if (secret_b && strcmp(secret_b, "wrong") == 0) {
        ru_secret(t->top, "secret2", 99, other, sizeof other);
        sb = other;
    } else if (secret_b) {
        sb = secret_b;
    }
    ck_assert_int_eq(ru_daemon_start_tls(&t->b, t->top, "b", 0, sb, extra_b, tls), 0);
}

void two_stop(struct two *t, int ok)
{
    if (t->insts) {
        ru_inst_free(&t->ctx);
        ru_inst_free(&t->gen);
        t->insts = false;
    }
    if (!ok) {
        ru_dump_log(&t->a, "context daemon");
        ru_dump_log(&t->b, "generation daemon");
    }
    int ra = ru_daemon_stop(&t->a), rb = ru_daemon_stop(&t->b);
    char cmd[128];
    tu_fmt(cmd, sizeof cmd, "rm -rf %s", t->top);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", t->top);
    ck_assert_int_eq(ra, 0);
    ck_assert_int_eq(rb, 0);
}

void two_start(struct two *t, const char *extra_a, const char *extra_b, const char *tls)
{
    two_start2(t, extra_a, extra_b, tls, NULL);
}

void two_start_insts(struct two *t, const struct two_insts *w)
{
    two_start2(t, w->extra_a, w->extra_b, w->tls, w->secret_b);
    t->rng = w->rng;
    ru_inst_init(&t->ctx, w->spec, "ctx", ROLE_CONTEXT, w->blocks, &t->rng, 0x5a);
    ru_inst_init(&t->gen, w->gen_spec ? w->gen_spec : w->spec, w->gen_id ? w->gen_id : "gen",
                 ROLE_GENERATION, w->gen_blocks ? w->gen_blocks : w->blocks, &t->rng, RU_POISON);
    ru_inst_register(&t->ctx, &t->a);
    if (w->gen_at != TWO_GEN_UNREGISTERED)
        ru_inst_register(&t->gen, w->gen_at == TWO_GEN_AT_A ? &t->a : &t->b);
    t->insts = true;
}

/* ---- network namespaces ---- */

int ru_sh(const char *cmd)
{
    int st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

bool ru_netns_skip(const char *test)
{
    if (ru_sh("scripts/netns-pair check >/dev/null 2>&1") == 0)
        return false;
    printf("SKIP %s: network namespaces cannot be made here (scripts/netns-pair check)\n", test);
    return true;
}

int ru_daemon_start_in(struct ru_daemon *d, const char *top, const char *name, int listen,
                       const char *secret, const char *extra, const char *tls, const char *ns,
                       const char *host)
{
    ru_netns = ns;
    ru_listen_host = host;
    int rc = ru_daemon_start_tls(d, top, name, listen, secret, extra, tls);
    ru_netns = NULL;
    ru_listen_host = "127.0.0.1";
    return rc;
}

void ru_pair_finish(struct ru_pair *p, const char *top)
{
    char cmd[96];
    tu_fmt(cmd, sizeof cmd, "rm -rf %s", top);
    if (ru_sh(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", top);
    ru_pair_down(p);
}

static char pair_made[32]; /* taken down at exit too, when a failed assertion skips the test's */

static void pair_down_at_exit(void)
{
    char cmd[96];
    if (!pair_made[0])
        return;
    snprintf(cmd, sizeof cmd, "scripts/netns-pair down %s >/dev/null 2>&1", pair_made);
    if (system(cmd) != 0)
        fprintf(stderr, "could not take down %s\n", pair_made);
}

static void pair_addr(const struct ru_pair *p, char side, char *out, size_t len)
{
    char cmd[96];
    tu_fmt(cmd, sizeof cmd, "scripts/netns-pair addr %s %c", p->name, side);
    FILE *f = popen(cmd, "r");
    ck_assert_ptr_nonnull(f);
    ck_assert_ptr_nonnull(fgets(out, (int)len, f));
    pclose(f);
    out[strcspn(out, "\n")] = 0;
}

bool ru_pair_up(struct ru_pair *p, const char *prefix)
{
    memset(p, 0, sizeof *p);
    if (ru_netns_skip("this case"))
        return false;
    tu_fmt(p->name, sizeof p->name, "%s%u", prefix, (unsigned)getpid() % 100000);
    tu_fmt(p->ns_a, sizeof p->ns_a, "%s-a", p->name);
    tu_fmt(p->ns_b, sizeof p->ns_b, "%s-b", p->name);
    char cmd[160];
    tu_fmt(cmd, sizeof cmd, "scripts/netns-pair up %s >/dev/null", p->name);
    ck_assert_int_eq(ru_sh(cmd), 0);
    if (!pair_made[0])
        atexit(pair_down_at_exit);
    snprintf(pair_made, sizeof pair_made, "%s", p->name);
    pair_addr(p, 'a', p->addr_a, sizeof p->addr_a);
    pair_addr(p, 'b', p->addr_b, sizeof p->addr_b);
    return true;
}

void ru_pair_down(struct ru_pair *p)
{
    char cmd[96];
    tu_fmt(cmd, sizeof cmd, "scripts/netns-pair down %s >/dev/null", p->name);
    if (ru_sh(cmd) != 0)
        fprintf(stderr, "could not take down %s\n", p->name);
    pair_made[0] = 0;
}

void ru_pair_link(const struct ru_pair *p, char side, bool up)
{
    char cmd[128];
    tu_fmt(cmd, sizeof cmd, "ip -n %s link set veth0 %s", side == 'a' ? p->ns_a : p->ns_b,
           up ? "up" : "down");
    ck_assert_int_eq(ru_sh(cmd), 0);
}

bool ru_log_has(const struct ru_daemon *d, const char *needle)
{
    FILE *f = fopen(d->log, "r");
    if (!f)
        return false;
    char line[1024];
    bool found = false;
    while (!found && fgets(line, sizeof line, f))
        found = strstr(line, needle) != NULL;
    fclose(f);
    return found;
}

bool ru_log_wait(const struct ru_daemon *d, const char *needle, unsigned ms)
{
    uint64_t until = ru_now_ms() + tu_ms(ms);
    while (!ru_log_has(d, needle)) {
        if (ru_now_ms() >= until)
            return false;
        ru_sleep_ms(20);
    }
    return true;
}
