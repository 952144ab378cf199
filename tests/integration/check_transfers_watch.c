/* check_transfers_watch.c: live transfers as an operator sees them. Two real daemons (a kimi-k3
 * request, an 8 MiB arena cut into 64 KiB chunks over UCX tcp, so the request moves in many
 * chunks), a real `kvferryctl transfers --watch` reading the generation daemon while the request
 * moves: a frame must show the request's row in phase "moving" with some bytes of its plan done
 * (not all), and a later one the finished row with outcome DONE and every byte done (it stays
 * listed for transfers.keep_finished). Then `kvferryctl top` shows the peer's and the
 * instance's completed request. Everything waits on the watcher's output (poll), never a sleep. */
#include <check.h>
#include <poll.h>
#include <sys/prctl.h>

#include "remoteutil.h"

struct watcher {
    pid_t pid;
    int fd;            /* its stdout */
    char buf[1 << 20]; /* what it printed so far */
    size_t len;
};

static void watcher_start(struct watcher *w, const char *control, char *const extra[])
{
    char bin[256];
    tu_bin("kvferryctl", bin, sizeof bin);
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    w->len = 0;
    w->pid = fork();
    ck_assert_int_ge(w->pid, 0);
    if (w->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        dup2(p[1], 1);
        close(p[0]);
        close(p[1]);
        char *argv[16] = {bin, (char *)"--socket", (char *)control};
        int n = 3;
        for (int i = 0; extra[i] && n < 15; i++)
            argv[n++] = extra[i];
        argv[n] = NULL;
        execv(bin, argv);
        _exit(127);
    }
    close(p[1]);
    w->fd = p[0];
}

/* Reads what the watcher printed until pred(line) holds for a line (returns that line, in a
 * static buffer) or timeout_ms passes (NULL). `from` is where in w->buf to start looking. */
static const char *watcher_wait(struct watcher *w, size_t *from, bool (*pred)(const char *, void *),
                                void *arg, int timeout_ms)
{
    static char line[1024];
    uint64_t end = ru_now_ms() + (uint64_t)timeout_ms;
    for (;;) {
        char *nl;
        while ((nl = memchr(w->buf + *from, '\n', w->len - *from)) != NULL) {
            size_t n = (size_t)(nl - (w->buf + *from));
            snprintf(line, sizeof line, "%.*s", (int)(n < sizeof line ? n : sizeof line - 1),
                     w->buf + *from);
            *from += n + 1;
            if (pred(line, arg))
                return line;
        }
        uint64_t now = ru_now_ms();
        if (now >= end || w->len >= sizeof w->buf - 1)
            return NULL;
        /* room in [1, sizeof buf - 1]: stated so that a fortified read() sees the bound (gcc 13
         * with _FORTIFY_SOURCE=3 on the GPU host refused the unfolded expression) */
        size_t room = sizeof w->buf - 1 - w->len;
        struct pollfd pf = {w->fd, POLLIN, 0};
        if (poll(&pf, 1, (int)(end - now)) <= 0)
            return NULL;
        ssize_t r = read(w->fd, &w->buf[w->len], room);
        if (r <= 0)
            return NULL;
        w->len += (size_t)r;
    }
}

static void watcher_stop(struct watcher *w)
{
    if (w->pid > 0) {
        kill(w->pid, SIGTERM);
        waitpid(w->pid, NULL, 0);
        w->pid = 0;
    }
    close(w->fd);
}

static bool is_header(const char *line, void *arg)
{
    (void)arg;
    return strncmp(line, "kvferry transfers ", 18) == 0;
}

/* Columns of a transfers row: REQ SIDE INSTANCE PEER PHASE DONE/PLANNED % RATE AGE OUTCOME */
struct row {
    long long req;
    char side[16], inst[64], peer[64], phase[16], dp[64], pct[8], rate[32], age[32], out[32];
};

static bool parse_row(const char *line, struct row *r)
{
    return sscanf(line, "%lld %15s %63s %63s %15s %63s %7s %31s %31s %31s", &r->req, r->side,
                  r->inst, r->peer, r->phase, r->dp, r->pct, r->rate, r->age, r->out) == 10 &&
           strlen(line) <= 100;
}

/* One frame of `kvferryctl top` against control, read whole into tp. */
static void top_once(struct watcher *tp, const char *control)
{
    char *targs[] = {(char *)"top", (char *)"--interval", (char *)"0.05", (char *)"--count",
                     (char *)"1", NULL};
    tp->len = 0;
    watcher_start(tp, control, targs);
    int st = 0;
    waitpid(tp->pid, &st, 0);
    tp->pid = 0;
    ssize_t n = 1;
    while (tp->len < sizeof tp->buf - 1 && n > 0) {
        size_t room = sizeof tp->buf - 1 - tp->len; /* the bound, stated (gcc 13 fortify) */
        if ((n = read(tp->fd, &tp->buf[tp->len], room)) > 0)
            tp->len += (size_t)n;
    }
    tp->buf[tp->len] = '\0';
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "kvferryctl top: %s", tp->buf);
}

static const char *ctl_str(json_t *v)
{
    return json_is_string(v) ? json_string_value(v) : "";
}

struct want {
    long long req;
    const char *phase;
    bool partial; /* some bytes done, not all */
    struct row got;
};

static bool row_matches(const char *line, void *arg)
{
    struct want *w = arg;
    struct row r;
    if (!parse_row(line, &r) || r.req != w->req || strcmp(r.side, "recv") != 0 ||
        strcmp(r.phase, w->phase) != 0)
        return false;
    const char *slash = strchr(r.dp, '/');
    if (!slash)
        return false;
    bool none = !strncmp(r.dp, "0B/", 3);
    bool all = !strcmp(slash + 1, "?") ? false : strncmp(r.dp, slash + 1, strlen(slash + 1)) == 0;
    if (w->partial && (none || all || strcmp(r.pct, "100") == 0))
        return false;
    if (!w->partial && (!all || strcmp(r.out, "DONE") != 0))
        return false;
    w->got = r;
    return true;
}

START_TEST(watch_shows_bytes_moving_during_a_large_remote_transfer)
{
    struct two t;
    const char *extra = "arena:\n  size: 8MiB\n  chunk: 64KiB\ngates:\n  min_bytes: 0\n  "
                        "min_blocks: 0\ntransfers:\n  keep_finished: 1m\n";
    two_start(&t, extra, extra, "tcp");
    uint64_t rng = 5;
    struct ru_inst ctx, gen;
    const char *spec = "kimi-k3:blocks=16,slots=1"; /* ~460 MiB per request */
    ru_inst_init(&ctx, spec, "ctx", ROLE_CONTEXT, 16, &rng, 0x5a);
    ru_inst_init(&gen, spec, "gen", ROLE_GENERATION, 16, &rng, RU_POISON);
    ck_assert_uint_eq(ctx.n, 1);
    ru_inst_register(&ctx, &t.a);
    ru_inst_register(&gen, &t.b);

    static struct watcher w;
    char *args[] = {(char *)"transfers", (char *)"--watch", (char *)"--interval", (char *)"0.05",
                    NULL};
    watcher_start(&w, t.b.control, args);
    size_t at = 0;
    ck_assert_msg(watcher_wait(&w, &at, is_header, NULL, 20000), "no first frame: %s", w.buf);

    pattern_fill(&ctx.r[0].l, &ctx.r[0].mem, &ctx.r[0].pids, 0, 77);
    ck_assert_int_eq(kvf_send(ctx.r[0].c, 9, ctx.r[0].l.n_groups, ctx.r[0].counts, ctx.r[0].ids,
                              1),
                     0);
    struct ru_rank *r = &gen.r[0];
    struct kvf_recv_args a = {.req_id = 9,
                              .ctx_instance = "ctx",
                              .ctx_dp_rank = -1,
                              .ctx_home = t.a.addr,
                              .n_groups = r->l.n_groups,
                              .counts = r->counts,
                              .ids = r->ids};
    ck_assert_int_eq(kvf_recv(r->c, &a), 0);
    struct want moving = {.req = 9, .phase = "moving", .partial = true};
    const char *l = watcher_wait(&w, &at, row_matches, &moving, 60000);
    ck_assert_msg(l != NULL, "no frame showed request 9 moving with part of its bytes done:\n%s",
                  w.buf + (w.len > 4000 ? w.len - 4000 : 0));
    fprintf(stderr, "moving: %s\n", l);
    /* the peer: daemon A by its link id (as `peers` and the metrics name it), cut to the column */
    json_t *pb = ru_ctl(&t.b, "peers");
    char ctx_id[256];
    snprintf(ctx_id, sizeof ctx_id, "%s",
             ctl_str(json_object_get(json_array_get(json_object_get(pb, "peers"), 0), "peer")));
    ck_assert_msg(strlen(moving.got.peer) >= 8 &&
                      strncmp(ctx_id, moving.got.peer, strlen(moving.got.peer)) == 0,
                  "peer %s is not daemon A (%s)", moving.got.peer, ctx_id);
    json_decref(pb);
    ck_assert_str_ne(moving.got.rate, "-");
    struct kvf_event ev;
    int ok = ru_wait_event(r, 9, &ev, 60000) == KVF_EV_DONE;
    ck_assert_msg(ok, "request 9: %s", ev.message);
    struct want ended = {.req = 9, .phase = "ended", .partial = false};
    l = watcher_wait(&w, &at, row_matches, &ended, 20000);
    ck_assert_msg(l != NULL, "no frame showed request 9 ended DONE with every byte:\n%s",
                  w.buf + (w.len > 4000 ? w.len - 4000 : 0));
    fprintf(stderr, "ended: %s (%llu bytes)\n", l, (unsigned long long)ev.bytes);
    watcher_stop(&w);
    ru_assert_parity(r, 0, 77, "watched");
    ru_wait_event(&ctx.r[0], 9, &ev, 10000);

    /* top: the completed request under its peer and its instance */
    static struct watcher tp;
    top_once(&tp, t.b.control);
    ck_assert_msg(strstr(tp.buf, "PEER") && strstr(tp.buf, ctx_id), "top: %s", tp.buf);
    ck_assert_msg(strstr(tp.buf, "INSTANCE") && strstr(tp.buf, "\ngen "), "top: %s", tp.buf);
    ck_assert_msg(!strstr(tp.buf, "SERVED TO PEER"), "the generation side served nothing: %s",
                  tp.buf);
    watcher_stop(&tp);
    /* and on the context side: the flow it served, under the generation daemon's link id */
    json_t *pa = ru_ctl(&t.a, "peers");
    const char *gen_id =
        json_string_value(json_object_get(json_array_get(json_object_get(pa, "peers"), 0), "peer"));
    ck_assert_msg(gen_id && *gen_id, "daemon A lists no peer");
    top_once(&tp, t.a.control);
    const char *sv = strstr(tp.buf, "SERVED TO PEER");
    ck_assert_msg(sv && strstr(sv, gen_id), "top on the context side lacks %s: %s", gen_id, tp.buf);
    /* the SEND's row names its remote reader's daemon, not "local" */
    const char *send_row = strstr(tp.buf, "\n9      send ");
    ck_assert_msg(send_row, "no row of SEND 9 on the context side: %s", tp.buf);
    struct row sr;
    ck_assert(parse_row(send_row + 1, &sr));
    ck_assert_msg(strncmp(gen_id, sr.peer, strlen(sr.peer)) == 0 && strlen(sr.peer) >= 8,
                  "SEND 9's peer %s is not the generation daemon %s", sr.peer, gen_id);
    json_decref(pa);
    watcher_stop(&tp);
    ru_inst_free(&ctx);
    ru_inst_free(&gen);
    two_stop(&t, ok);
}
END_TEST

START_TEST(bad_watch_options_are_usage_errors)
{
    char bin[256], cmd[512], out[2048];
    tu_bin("kvferryctl", bin, sizeof bin);
    static const char *const bad[] = {"transfers --watch --interval 0", "transfers --watch --count x",
                                      "top --nonsense", "transfers --interval"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = tu_sh(tu_fmt(cmd, sizeof cmd, "%s --socket /nonexistent.sock %s 2>&1", bin,
                              bad[i]),
                       out, sizeof out);
        ck_assert_msg(rc == 2, "%s: exit %d: %s", bad[i], rc, out);
        ck_assert_msg(strstr(out, "kvferryctl:"), "%s: %s", bad[i], out);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("transfers_watch");
    TCase *tc = tcase_create("watch");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, watch_shows_bytes_moving_during_a_large_remote_transfer);
    tcase_add_test(tc, bad_watch_options_are_usage_errors);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
