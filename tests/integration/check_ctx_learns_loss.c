/* check_ctx_learns_loss.c: the context side learns a lost reader daemon at once (issue 13 item
 * 4). Context daemon A SENDs to generation daemon G over the bounce path (tcp, 1 MiB chunks)
 * and the fault comes while the flows move: G killed with SIGKILL, or A frozen with SIGSTOP
 * until G has declared it lost (keepalive 200 ms x 5) and then SIGCONTed. A's SENDs must end
 * FAILED PEER_LOST, with the reason, within about a second of A learning of the loss (its link
 * seeing the reset), not at deadlines.send_wait (60 s here). A flow whose put failed on the
 * broken link ended before the loss was declared: its reader counts too (nack_put_failed). */
#include <check.h>
#include <signal.h>

#include "remoteutil.h"

#define SPEC "kimi-linear-48b:blocks=256,slots=8"
#define N_REQ 4
#define BLOCKS 32
/* about a second, on a loaded 2-core machine (scaled as the keepalive is for its stalls) */
#define WITHIN_MS (1500u * (tu_keepalive_ms(200) / 200))
#define CFG                                                                                        \
    "arena:\n  size: 16MiB\n  chunk: 1MiB\n  reserve_timeout: %ums\n"                               \
    "deadlines:\n  send_wait: 60s\n  transfer: 60s\n"                                              \
    "peers:\n  keepalive_interval: %ums\n  keepalive_misses: 5\n"

struct pair {
    struct two t;
    struct ru_inst c, g[N_REQ];
};

static void pair_start(struct pair *p)
{
    char cfg[256]; /* G, stalled by a loaded machine, must not be lost while A runs */
    /* the RECVs past A's share wait for their first credit until A is lost */
    tu_fmt(cfg, sizeof cfg, CFG, 5000 + 10 * tu_keepalive_ms(200), tu_keepalive_ms(200));
    two_start(&p->t, cfg, cfg, "^sysv,posix"); /* docs/UCX.md trap 2: puts cross the link */
    uint64_t rng = 41;
    ru_inst_init(&p->c, SPEC, "ctx", ROLE_CONTEXT, BLOCKS, &rng, 0x5a);
    ru_inst_register(&p->c, &p->t.a);
    for (int i = 0; i < N_REQ; i++) {
        char id[16];
        tu_fmt(id, sizeof id, "gen%d", i);
        ru_inst_init(&p->g[i], SPEC, id, ROLE_GENERATION, BLOCKS, &rng, RU_POISON);
        ru_inst_register(&p->g[i], &p->t.b);
    }
}

static void pair_free(struct pair *p)
{
    ru_inst_free(&p->c);
    for (int i = 0; i < N_REQ; i++)
        ru_inst_free(&p->g[i]);
}

/* The transfers of d still waiting or copying. */
static size_t live(const struct ru_daemon *d)
{
    json_t *r = ru_ctl(d, "transfers"), *x;
    size_t k, n = 0;
    json_array_foreach(json_object_get(r, "transfers"), k, x)
        n += tj_is(json_object_get(x, "state"), "waiting") ||
             tj_is(json_object_get(x, "state"), "copying");
    json_decref(r);
    return n;
}

/* Whether G's transfers list a RECV copying with some but not all of its bytes in; marks in
 * moving[] the requests (base + i) whose RECVs are copying: their flows are at A. */
static bool mid_transfer(const struct ru_daemon *g, uint64_t base, bool *moving)
{
    json_t *r = ru_ctl(g, "transfers"), *x;
    size_t k;
    bool mid = false;
    json_array_foreach(json_object_get(r, "transfers"), k, x)
    {
        json_int_t done = json_integer_value(json_object_get(x, "bytes_done"));
        json_int_t all = json_integer_value(json_object_get(x, "bytes_planned"));
        uint64_t req = (uint64_t)json_integer_value(json_object_get(x, "req_id"));
        bool copying = tj_is(json_object_get(x, "state"), "copying") && done > 0;
        mid |= copying && done < all / 2;
        if (copying && req >= base && req < base + N_REQ)
            moving[req - base] = true;
    }
    json_decref(r);
    return mid;
}

/* The terminal events of requests base..base+N_REQ-1 on rank r (one client: every event is
 * kept), with when they came; until all came or 20 s passed. */
struct ends {
    struct kvf_event ev[N_REQ];
    uint64_t at[N_REQ];
};

static void collect(struct ru_rank *r, uint64_t base, struct ends *e)
{
    memset(e, 0, sizeof *e);
    int n = 0;
    uint64_t until = ru_now_ms() + tu_ms(20000);
    while (n < N_REQ && ru_now_ms() < until) {
        struct kvf_event ev;
        if (kvf_poll(r->c, &ev, 20) != 1 || ev.req_id < base || ev.req_id >= base + N_REQ)
            continue;
        if (ev.kind != KVF_EV_DONE && ev.kind != KVF_EV_SENT && ev.kind != KVF_EV_FAILED)
            continue;
        uint64_t i = ev.req_id - base;
        if (!e->at[i]) {
            e->ev[i] = ev;
            e->at[i] = ru_now_ms();
            n++;
        }
    }
}

/* N_REQ requests (base + i) A -> G, returned once one of them is caught mid-transfer; false
 * when they all ended first (the caller tries again with other ids). */
static bool start_moving(struct pair *p, uint64_t base, bool *moving)
{
    struct ru_rank *c = &p->c.r[0];
    for (int i = 0; i < N_REQ; i++) {
        ck_assert_int_eq(kvf_send(c->c, base + i, c->l.n_groups, c->counts, c->ids, 1), 0);
        struct kvf_recv_args a;
        ru_recv_args(&p->g[i].r[0], base + i, "ctx", p->t.a.addr, &a);
        ck_assert_int_eq(kvf_recv(p->g[i].r[0].c, &a), 0);
    }
    uint64_t until = ru_now_ms() + 20000;
    while (ru_now_ms() < until) {
        memset(moving, 0, N_REQ * sizeof *moving);
        if (mid_transfer(&p->t.b, base, moving))
            return true;
        if (live(&p->t.b) == 0)
            break;
    }
    struct ends e; /* too fast: let them end */
    for (int i = 0; i < N_REQ; i++)
        ru_wait_event(&p->g[i].r[0], base + i, &e.ev[0], 20000);
    collect(c, base, &e);
    return false;
}

/* Every SEND of base.. at A that a flow of G was reading (moving[]) and that was not served
 * before the fault ends FAILED PEER_LOST, with the reason, within WITHIN_MS of t0; returns how
 * many failed. The others are cancelled: G never asked A for them, so A cannot know that their
 * reader is gone (a SEND does not name its readers' daemons): they wait for send_wait. */
static int sends_fail_fast(struct pair *p, uint64_t base, const bool *moving, uint64_t t0,
                           const char *what)
{
    for (int i = 0; i < N_REQ; i++)
        if (!moving[i])
            kvf_cancel(p->c.r[0].c, base + i);
    struct ends e;
    collect(&p->c.r[0], base, &e);
    int failed = 0;
    for (int i = 0; i < N_REQ; i++) {
        const struct kvf_event *ev = &e.ev[i];
        uint64_t ms = e.at[i] - t0;
        if (!moving[i] || (e.at[i] && ev->kind == KVF_EV_SENT))
            continue; /* not asked for, or served before the fault */
        if (!e.at[i] || ev->kind != KVF_EV_FAILED || ms > WITHIN_MS) {
            ru_dump_log(&p->t.a, "context daemon A");
            json_t *x = ru_ctl(&p->t.a, "transfers");
            char *txt = json_dumps(x, JSON_COMPACT);
            fprintf(stderr, "A's transfers: %s\n", txt);
            free(txt);
            json_decref(x);
        }
        ck_assert_msg(e.at[i], "%s: A's SEND %llu did not end within 20 s", what,
                      (unsigned long long)(base + i));
        ck_assert_msg(ev->kind == KVF_EV_FAILED && ev->error == KVF_E_PEER_LOST,
                      "%s: A's SEND %llu: event %d %s: %s", what, (unsigned long long)(base + i),
                      ev->kind, kvf_error_to_string(ev->error), ev->message);
        ck_assert_msg(strstr(ev->message, "PEER_LOST"), "%s: no reason: %s", what, ev->message);
        ck_assert_msg(ms <= WITHIN_MS, "%s: A's SEND %llu ended after %llu ms", what,
                      (unsigned long long)(base + i), (unsigned long long)ms);
        fprintf(stderr, "%s: A's SEND %llu FAILED after %llu ms: %s\n", what,
                (unsigned long long)(base + i), (unsigned long long)ms, ev->message);
        failed++;
    }
    return failed;
}

/* The pair started, and N_REQ requests from base0 on (later ids: tries) caught moving. */
static uint64_t pair_moving(struct pair *p, uint64_t base0, bool *moving)
{
    pair_start(p);
    uint64_t base = base0;
    while (!start_moving(p, base, moving)) {
        base += N_REQ;
        ck_assert_msg(base < base0 + 10 * N_REQ, "never caught a transfer in flight");
    }
    return base;
}

START_TEST(a_killed_generation_daemon_ends_the_context_sends_within_a_second)
{
    struct pair p;
    bool moving[N_REQ];
    uint64_t base = pair_moving(&p, 100, moving);
    uint64_t t0 = ru_now_ms();
    ru_daemon_kill9(&p.t.b);
    int n = sends_fail_fast(&p, base, moving, t0, "kill -9 G");
    ck_assert_int_gt(n, 0);
    pair_free(&p);
    ck_assert_int_eq(ru_daemon_stop(&p.t.a), 0);
    char cmd[128];
    tu_fmt(cmd, sizeof cmd, "rm -rf %s", p.t.top);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(a_context_daemon_frozen_past_its_loss_ends_its_sends_within_a_second_of_sigcont)
{
    struct pair p;
    bool moving[N_REQ];
    uint64_t base = pair_moving(&p, 200, moving);
    ck_assert_int_eq(kill(p.t.a.pid, SIGSTOP), 0);
    int lost = 0;
    for (int i = 0; i < N_REQ; i++) { /* G declares A lost: its RECVs end */
        struct kvf_event ev;
        int k = ru_wait_event(&p.g[i].r[0], base + i, &ev, 20000);
        ck_assert_msg(k == KVF_EV_DONE || (k == KVF_EV_FAILED && ev.error == KVF_E_PEER_LOST),
                      "G's RECV %llu: %d %s: %s", (unsigned long long)(base + i), k,
                      kvf_error_to_string(ev.error), ev.message);
        lost += k == KVF_EV_FAILED;
    }
    ck_assert_int_gt(lost, 0);
    uint64_t t0 = ru_now_ms();
    ck_assert_int_eq(kill(p.t.a.pid, SIGCONT), 0);
    int n = sends_fail_fast(&p, base, moving, t0, "SIGSTOP A, SIGCONT");
    ck_assert_int_gt(n, 0);
    pair_free(&p);
    two_stop(&p.t, 1);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctx_learns_loss");
    TCase *tc = tcase_create("loss");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_killed_generation_daemon_ends_the_context_sends_within_a_second);
    tcase_add_test(tc, a_context_daemon_frozen_past_its_loss_ends_its_sends_within_a_second_of_sigcont);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
