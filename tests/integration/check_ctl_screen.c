/* check_ctl_screen.c: `kvferryctl top` in a real terminal. tmux gives it a 100x30 window; a
 * real daemon moves 40 requests between two kvferry-sim ranks while top watches, so its frame
 * (the rate tables and 80 finished rows) is longer than the window: the screen must show the
 * frame's first 30 lines, header first, no line past column 100 (clipped, not wrapped or
 * scrolled); the rates must still show the burst a few frames after it ended (the sliding
 * window); after the window shrinks to 60x12 the frame is drawn again within it; q quits.
 * To a pipe the frame is 100 columns wide. Skipped, saying why, when tmux is missing. */
#include <stdbool.h>

#include "wtest.h"

static struct wenv env;
static char tmux_sock[128];

/* tmux with args on this test's own server; output in out (may be NULL). Returns the status. */
static int tmux(char *out, size_t len, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int tmux(char *out, size_t len, const char *fmt, ...)
{
    char args[1024], cmd[1400], junk[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    tu_fmt(cmd, sizeof cmd, "tmux -S %s -f /dev/null %s 2>&1", tmux_sock, args);
    return tu_sh(cmd, out ? out : junk, out ? len : sizeof junk);
}

struct screen {
    char text[1 << 14];
    char line[64][256];
    size_t n, widest;
};

/* The pane as it is now, line by line (tmux drops trailing blanks). */
static void capture(struct screen *s)
{
    ck_assert_int_eq(tmux(s->text, sizeof s->text, "capture-pane -p -t kvf"), 0);
    s->n = s->widest = 0;
    for (char *p = s->text, *nl; *p && s->n < 64; p = nl + 1) {
        nl = strchr(p, '\n');
        if (!nl)
            nl = p + strlen(p);
        size_t w = (size_t)(nl - p);
        snprintf(s->line[s->n++], sizeof s->line[0], "%.*s", (int)w, p);
        if (w > s->widest)
            s->widest = w;
        if (!*nl)
            break;
    }
    while (s->n > 0 && !s->line[s->n - 1][0]) /* the blank rows under a short frame */
        s->n--;
}

/* The row of the PEER table for `peer`: its RATE and REQUESTS columns. */
static bool peer_row(const struct screen *s, const char *peer, char *rate, size_t rlen,
                     long long *requests)
{
    for (size_t i = 1; i < s->n; i++) {
        char name[64], r[32], reqs[32], total[32];
        double rps;
        long long n;
        if (sscanf(s->line[i], "%63s %31s %lf %31s %lld", name, r, &rps, total, &n) == 5 &&
            !strcmp(name, peer)) {
            snprintf(rate, rlen, "%s", r);
            *requests = n;
            (void)reqs;
            return true;
        }
        if (!strncmp(s->line[i], "INSTANCE", 8))
            break;
    }
    return false;
}

typedef bool (*screen_pred)(const struct screen *s, void *arg);

/* Captures the pane until pred holds (true) or timeout_ms pass (false; s: the last capture).
 * Each capture waits for tmux's answer: the test polls the terminal, it does not sleep. */
static bool screen_until(struct screen *s, int timeout_ms, screen_pred pred, void *arg)
{
    int64_t end = wt_now_ms() + tu_ms((unsigned)timeout_ms);
    do {
        capture(s);
        if (pred(s, arg))
            return true;
        poll(NULL, 0, 20); /* between captures of a refreshing view */
    } while (wt_now_ms() < end);
    return false;
}

static bool framed(const struct screen *s, void *arg)
{
    (void)arg;
    return s->n > 0 && !strncmp(s->line[0], "kvferry top ", 12);
}

struct burst {
    long long want;  /* completed RECVs under "local" */
    char header[64]; /* the frame the burst first showed in */
    int frames;      /* later frames seen since */
};

static bool burst_counted(const struct screen *s, void *arg)
{
    struct burst *b = arg;
    char rate[32];
    long long n = 0;
    if (!framed(s, NULL) || !peer_row(s, "local", rate, sizeof rate, &n) || n != b->want)
        return false;
    snprintf(b->header, sizeof b->header, "%.63s", s->line[0]);
    return true;
}

/* Two frames after the burst's: its header (the time, "rates over") changed twice. */
static bool frames_later(const struct screen *s, void *arg)
{
    struct burst *b = arg;
    if (!framed(s, NULL) || !strcmp(s->line[0], b->header))
        return false;
    snprintf(b->header, sizeof b->header, "%.63s", s->line[0]);
    return ++b->frames >= 2;
}

static bool fits_small(const struct screen *s, void *arg)
{
    (void)arg;
    return framed(s, NULL) && s->widest <= 60 && s->n == 12;
}

static bool session_gone(void)
{
    int64_t end = wt_now_ms() + tu_ms(10000);
    while (wt_now_ms() < end) {
        if (tmux(NULL, 0, "has-session -t kvf") != 0)
            return true;
        poll(NULL, 0, 20);
    }
    return false;
}

START_TEST(top_fits_clips_and_follows_a_resize_in_a_real_terminal)
{
    char out[4096];
    if (tu_sh("command -v tmux", out, sizeof out) != 0) {
        fprintf(stderr, "check_ctl_screen: SKIP: tmux is not installed (scripts/install-deps "
                        "installs it)\n");
        return;
    }
    wt_start(&env, "transfers:\n  keep_finished: 10m\n");
    tu_fmt(tmux_sock, sizeof tmux_sock, "%s/tmux.sock", env.dir);
    char bin[256];
    tu_bin("kvferryctl", bin, sizeof bin);
    ck_assert_int_eq(tmux(out, sizeof out,
                          "new-session -d -s kvf -x 100 -y 30 '%s --socket %s top --interval "
                          "0.2 --window 600'",
                          bin, env.csock),
                     0);
    struct screen s;
    ck_assert_msg(screen_until(&s, 20000, framed, NULL), "no frame of top: %s", s.text);

    /* a burst of 40 requests; top watches it end */
    pid_t ctx = wt_sim(&env, "ctx.log", "--role", "context", "--instance", "ctx", "--spec", "tiny",
                       "--rank", "0", "--requests", "40", "--readers", "1", (char *)NULL);
    pid_t gen = wt_sim(&env, "gen.log", "--role", "generation", "--instance", "gen", "--spec",
                       "tiny", "--rank", "0", "--requests", "40", "--ctx-instance", "ctx",
                       (char *)NULL);
    ck_assert_int_eq(wt_wait(gen, 60000), 0);
    ck_assert_int_eq(wt_wait(ctx, 60000), 0);
    struct burst b = {.want = 40};
    ck_assert_msg(screen_until(&s, 20000, burst_counted, &b), "top never counted 40: %s", s.text);

    fprintf(stderr, "top at 100x30:\n%s\n", s.text);
    /* 100x30: the frame's first 30 lines, header first, none past column 100 */
    ck_assert_uint_eq(s.n, 30);
    ck_assert_uint_le(s.widest, 100);
    ck_assert_msg(strstr(s.text, "REQUESTS"), "the rate table's last column is cut: %s", s.text);

    /* the sliding window: frames after the burst still show its rate */
    ck_assert_msg(screen_until(&s, 20000, frames_later, &b), "top stopped refreshing: %s", s.text);
    char rate[32];
    long long n = 0;
    ck_assert(peer_row(&s, "local", rate, sizeof rate, &n));
    ck_assert_msg(strcmp(rate, "-") != 0 && strcmp(rate, "0B/s") != 0,
                  "the burst's rate vanished a frame after it: %s", s.text);

    /* a smaller window: the frame is drawn again within it */
    ck_assert_int_eq(tmux(out, sizeof out, "resize-window -t kvf -x 60 -y 12"), 0);
    ck_assert_msg(screen_until(&s, 20000, fits_small, NULL), "not redrawn at 60x12 (%zu lines, "
                  "%zu columns): %s", s.n, s.widest, s.text);
    fprintf(stderr, "top at 60x12:\n%s\n", s.text);
    ck_assert_msg(!strstr(s.text, "REQUESTS"), "a line past column 60: %s", s.text);

    ck_assert_int_eq(tmux(out, sizeof out, "send-keys -t kvf q"), 0);
    ck_assert_msg(session_gone(), "q did not quit top");

    /* to a pipe: the whole frame, 100 columns wide */
    char cmd[1024];
    static char pipe_out[1 << 16];
    tu_fmt(cmd, sizeof cmd, "%s --socket %s top --interval 0.05 --count 1", bin, env.csock);
    ck_assert_int_eq(tu_sh(cmd, pipe_out, sizeof pipe_out), 0);
    size_t lines = 0, widest = 0;
    for (char *p = pipe_out, *nl; (nl = strchr(p, '\n')); p = nl + 1, lines++)
        if ((size_t)(nl - p) > widest)
            widest = (size_t)(nl - p);
    ck_assert_msg(lines > 30 && widest <= 100, "%zu lines, %zu columns:\n%s", lines, widest,
                  pipe_out);
    tmux(NULL, 0, "kill-server");
    wt_stop(&env);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctl_screen");
    TCase *tc = tcase_create("top");
    tcase_set_timeout(tc, 180);
    tcase_add_test(tc, top_fits_clips_and_follows_a_resize_in_a_real_terminal);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
