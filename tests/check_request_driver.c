/* check_request_driver.c: the generation side's driver (engine_gen.c) over a mover defined here:
 * a path row (path.h) that starts every writer's copy asynchronously, completes it later on the
 * loop, and fails it on demand. Everything else is real: a RECV comes from a worker connection
 * over a socketpair (transfers.c admits it, its events are decoded off the other end), the
 * context instance's table arrives through gen_table_ready with the writers at this daemon (so
 * their row is the local one, which the test puts its mover in place of), the driver plans,
 * starts the writers through the row and ends the request. Checked: the worker hears DONE only
 * after the mover completed, never inside the call that started it; a failure on demand is
 * FAILED with the mover's reason; a cancel while the mover writes is held until the writes
 * ended (the first held failure wins), and the request and its engine part are freed only then
 * (one owner: transfers_reap). */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "daemon.h"
#include "engine_drive.h"
#include "engine_gen.h"
#include "engine_tab.h"
#include "path.h"
#include "preset.h"
#include "proto.h"
#include "registry.h"
#include "require.h"
#include "testutil.h"
#include "transfers.h"
#include "workers.h"

#define HOME "10.0.0.9:7000"
#define SELF "127.0.0.1:7000"
#define REQ 42u

/* ---- the fake mover: one copy per writer, completed by a 0 ms timer on the loop ---- */

struct fake_op {
    uv_timer_t timer;
    struct rxw *w;
    struct rx *rx;
};

static struct {
    bool fail;        /* fail the next completions on demand */
    bool illegal;     /* the mover tries an edge its writer's machine does not have */
    uint32_t started; /* copies started, completed */
    uint32_t completed;
} fake;

static void op_closed(uv_handle_t *h) { free(h->data); }

static void op_done(uv_timer_t *t)
{
    struct fake_op *op = t->data;
    struct rx *rx = op->rx;
    fake.completed++;
    rx->scatters_running--; /* its write into the pools ended (as an executor counts it) */
    if (rx->state == RX_MOVING) {
        if (fake.fail) {
            gen_rx_fail(rx, KVF_E_INTERNAL, "fake mover: failed on demand");
        } else {
            op->w->scattered = op->w->extent;
            if (rx->x)
                rx->x->bytes_done += op->w->extent;
            gen_check_done(rx);
        }
    }
    engine_recv_writes_ended(rx); /* a failure held meanwhile reaches the worker now */
    engine_recv_sweep(rx->e);
    uv_close((uv_handle_t *)t, op_closed);
}

static void fake_start(struct rxw *w)
{
    ck_assert(engine_recv_rxw_set_state(w, RXW_MOVING));
    if (fake.illegal) { /* moving -> credit is no edge: refused, the request fails */
        ck_assert(!engine_recv_rxw_set_state(w, RXW_CREDIT));
        ck_assert_int_eq(w->state, RXW_CLOSED); /* released by the failure, not moved */
        return;
    }
    struct fake_op *op = calloc(1, sizeof *op);
    ck_assert_ptr_nonnull(op);
    op->w = w;
    op->rx = w->rx;
    op->timer.data = op;
    ck_assert_int_eq(uv_timer_init(&w->rx->e->d->loop, &op->timer), 0);
    ck_assert_int_eq(uv_timer_start(&op->timer, op_done, 0, 0), 0);
    w->rx->scatters_running++; /* the request holds a failure until this write ended */
    fake.started++;
}

static const struct path_row fake_row = {.name = "fake", .kind = PATH_LOCAL, .start = fake_start};

/* ---- fixture ---- */

static struct daemon d;
static struct workers w;
static struct engine *e;
static struct wconn *conn;
static struct reg_rank gen;
static struct layout ctx_l[8];
static uint32_t n_ctx;
static struct itable *tab;
static int sv[2];
static const struct path_row *saved_local;
static int dummy_link;

static void setup(void)
{
    memset(&d, 0, sizeof d);
    memset(&w, 0, sizeof w);
    memset(&gen, 0, sizeof gen);
    memset(&fake, 0, sizeof fake);
    ck_assert_int_eq(cfg_defaults(&d.cfg), 0);
    ck_assert_int_eq(uv_loop_init(&d.loop), 0);
    w.d = &d;
    registry_init(&w.reg, NULL);
    ck_assert_int_eq(transfers_init(&w.xt, &d, &w.reg, &workers_xt_ops, &w), 0);
    d.workers = &w;
    e = calloc(1, sizeof *e);
    ck_assert_ptr_nonnull(e);
    e->d = &d;
    e->drive = &engine_drivers;
    e->req = (struct engine_req){&transfers_engine_ops, &w.xt, &w.reg, &w.xt.phases, 0};
    e->link = (struct link *)&dummy_link; /* never used: every writer is at this daemon */
    snprintf(e->self_addr, sizeof e->self_addr, "%s", SELF);
    d.engine = e;

    struct preset_spec s;
    char err[256];
    ck_assert_msg(preset_parse("tiny", &s, err, sizeof err) == 0, "%s", err);
    n_ctx = preset_n_ranks(&s);
    ck_assert_uint_le(n_ctx, 8);
    ck_assert_msg(preset_build(&s, "ctx", ROLE_CONTEXT, -1, ctx_l, err, sizeof err) == 0, "%s", err);
    struct layout gl[8];
    ck_assert_msg(preset_build(&s, "gen", ROLE_GENERATION, -1, gl, err, sizeof err) == 0, "%s", err);
    gen.layout = gl[0];
    gen.worker_id = 7;
    gen.mem.n = gen.layout.n_pools;
    for (uint32_t p = 0; p < gen.layout.n_pools; p++) {
        gen.mem.size[p] = gen.layout.pools[p].bytes;
        gen.mem.base[p] = calloc(1, gen.mem.size[p]);
        ck_assert_ptr_nonnull(gen.mem.base[p]);
    }

    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
    conn = calloc(1, sizeof *conn);
    ck_assert_ptr_nonnull(conn);
    conn->w = &w;
    conn->fd = sv[0];
    conn->xc.rank = &gen;
    conn->xc.id = 1;

    tab = calloc(1, sizeof *tab); /* being fetched from the home: the RECV waits for it */
    ck_assert_ptr_nonnull(tab);
    snprintf(tab->instance, sizeof tab->instance, "ctx");
    snprintf(tab->home, sizeof tab->home, "%s", HOME);
    tab->state = TAB_FETCHING;
    e->tables = tab;

    saved_local = path_rows[PATH_LOCAL];
    path_rows[PATH_LOCAL] = &fake_row;
}

static void teardown(void)
{
    path_rows[PATH_LOCAL] = saved_local;
    transfers_stop(&w.xt);
    engine_recv_sweep(e);
    ck_assert_ptr_null(w.xt.draining);
    ck_assert_ptr_null(e->rxs);
    free(tab->ranks);
    free(tab->addrs);
    free(tab);
    engine_ix_free(&e->ix);
    dheap_free(&e->rx_due);
    dheap_free(&e->tx_due);
    free(e);
    while (uv_run(&d.loop, UV_RUN_NOWAIT))
        ;
    ck_assert_int_eq(uv_loop_close(&d.loop), 0);
    registry_done(&w.reg);
    for (uint32_t p = 0; p < gen.mem.n; p++)
        free(gen.mem.base[p]);
    free(conn);
    close(sv[0]);
    close(sv[1]);
}

/* The RECV of every item of each group (a state group's one slot), from the connection. */
static void recv_req(void)
{
    struct proto_recv m = {.req_id = REQ, .ctx_dp_rank = -1};
    snprintf(m.ctx_instance, sizeof m.ctx_instance, "ctx");
    snprintf(m.ctx_home, sizeof m.ctx_home, "%s", HOME);
    m.items.n_groups = gen.layout.n_groups;
    uint32_t total = 0;
    for (uint32_t g = 0; g < gen.layout.n_groups; g++)
        total += m.items.counts[g] = gen.layout.groups[g].kind == GROUP_STATE ? 1 : 2;
    m.items.ids = calloc(total, sizeof *m.items.ids);
    ck_assert_ptr_nonnull(m.items.ids);
    uint32_t k = 0;
    for (uint32_t g = 0; g < gen.layout.n_groups; g++)
        for (uint32_t i = 0; i < m.items.counts[g]; i++)
            m.items.ids[k++] = i;
    transfers_recv(&w.xt, &conn->xc, &m);
    free(m.items.ids); /* NULL: taken */
    ck_assert_ptr_nonnull(e->rxs);
    ck_assert_int_eq(e->rxs->state, RX_LOOKUP);
}

/* The table comes: every writer at this daemon, so each takes the local row (the fake). */
static void table_arrives(void)
{
    tab->n = n_ctx;
    tab->ranks = calloc(n_ctx, sizeof *tab->ranks);
    tab->addrs = calloc(n_ctx, sizeof *tab->addrs);
    ck_assert(tab->ranks && tab->addrs);
    for (uint32_t i = 0; i < n_ctx; i++) {
        tab->ranks[i] = ctx_l[i];
        snprintf(tab->addrs[i], sizeof tab->addrs[i], "%s", SELF);
    }
    tab->epoch = 1;
    tab->state = TAB_READY;
    gen_table_ready(e, tab, 0, "");
    engine_recv_sweep(e);
}

/* The next frame the worker got, or false when none came within ms (the loop runs meanwhile;
 * ms < 0: a look at the socket alone, the loop does not run). */
static bool next_event(struct proto_event *ev, int ms)
{
    uint8_t buf[4096];
    for (int waited = 0; waited <= (ms < 0 ? 0 : ms); waited++) {
        ssize_t n = recv(sv[1], buf, sizeof buf, MSG_DONTWAIT);
        if (n > 0) {
            struct proto_msg m;
            struct proto_limits lim;
            char err[256];
            proto_limits_init(&lim, 0, 0);
            ck_assert_msg(proto_decode(buf, (size_t)n, &lim, &m, err, sizeof err) == 0, "%s", err);
            ck_assert_int_eq(m.type, PROTO_EVENT);
            *ev = m.u.event;
            proto_msg_done(&m);
            return true;
        }
        ck_assert(n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
        if (ms < 0)
            return false;
        uv_run(&d.loop, UV_RUN_NOWAIT);
        struct pollfd p = {sv[1], POLLIN, 0};
        poll(&p, 1, 1);
    }
    return false;
}

START_TEST(the_mover_completes_later_and_the_worker_hears_done_then)
{
    recv_req();
    table_arrives();
    ck_assert_uint_gt(fake.started, 0);
    ck_assert_uint_eq(fake.completed, 0);
    struct proto_event ev;
    ck_assert_msg(!next_event(&ev, -1), "an event came before the mover completed");
    ck_assert(next_event(&ev, 2000));
    ck_assert_uint_eq(fake.completed, fake.started);
    ck_assert_uint_eq(ev.req_id, REQ);
    ck_assert_uint_eq(ev.kind, PROTO_EV_DONE);
    ck_assert_int_eq(ev.error, KVF_OK);
    ck_assert_uint_gt(ev.bytes, 0);
    ck_assert_uint_eq(w.xt.counters.bytes_remote, ev.bytes);
    engine_recv_sweep(e);
    ck_assert_ptr_null(e->rxs); /* freed with its request */
    ck_assert_ptr_null(w.xt.draining);
}
END_TEST

START_TEST(a_failure_on_demand_is_failed_with_the_movers_reason)
{
    fake.fail = true;
    recv_req();
    table_arrives();
    struct proto_event ev;
    ck_assert(next_event(&ev, 2000));
    ck_assert_uint_eq(ev.kind, PROTO_EV_FAILED);
    ck_assert_int_eq(ev.error, KVF_E_INTERNAL);
    ck_assert_msg(strstr(ev.message, "failed on demand"), "%s", ev.message);
    ck_assert_uint_eq(w.xt.counters.failed[KVF_E_INTERNAL], 1);
}
END_TEST

START_TEST(a_cancel_while_the_mover_writes_is_held_until_the_writes_ended)
{
    recv_req();
    table_arrives();
    ck_assert_uint_gt(fake.started, 0);
    struct rx *rx = e->rxs;
    transfers_cancel(&w.xt, &conn->xc, REQ);
    /* held: the worker must not reuse its blocks while the mover writes into them */
    struct proto_event ev;
    ck_assert_msg(!next_event(&ev, -1), "the cancel reached the worker under the mover's writes");
    ck_assert_ptr_eq(e->rxs, rx);
    ck_assert_int_eq(rx->state, RX_ENDED);
    ck_assert(engine_recv_writing(rx));
    fake.fail = true; /* a later failure does not replace the held one */
    ck_assert(next_event(&ev, 2000));
    ck_assert_uint_eq(fake.completed, fake.started);
    ck_assert_uint_eq(ev.kind, PROTO_EV_FAILED);
    ck_assert_int_eq(ev.error, KVF_E_CANCELLED);
    ck_assert_msg(strstr(ev.message, "cancelled by the worker"), "%s", ev.message);
    engine_recv_sweep(e);
    ck_assert_ptr_null(e->rxs);
    ck_assert_ptr_null(w.xt.draining);
}
END_TEST

START_TEST(an_illegal_edge_fails_the_request_internal_where_invariants_are_not_fatal)
{
    unsetenv("KVF_FATAL_INVARIANTS");
    if (kvf_require_fatal())
        return; /* a KVF_DEBUG build: every failure is fatal (the next test covers it) */
    fake.illegal = true;
    recv_req();
    table_arrives();
    struct proto_event ev;
    ck_assert(next_event(&ev, 2000));
    ck_assert_uint_eq(ev.kind, PROTO_EV_FAILED);
    ck_assert_int_eq(ev.error, KVF_E_INTERNAL);
    ck_assert_msg(strstr(ev.message, "state moving cannot go to credit"), "%s", ev.message);
    engine_recv_sweep(e);
    ck_assert_ptr_null(e->rxs);
}
END_TEST

START_TEST(an_illegal_edge_aborts_where_invariants_are_fatal)
{
    setenv("KVF_FATAL_INVARIANTS", "1", 1);
    fake.illegal = true;
    recv_req();
    table_arrives(); /* aborts in fake_start */
}
END_TEST

START_TEST(the_held_failure_keeps_the_first_one)
{
    struct xfer x;
    memset(&x, 0, sizeof x);
    xfer_hold(&x, KVF_E_TIMEOUT, "first");
    xfer_hold(&x, KVF_E_CANCELLED, "second");
    ck_assert_int_eq(x.held.code, KVF_E_TIMEOUT);
    ck_assert_str_eq(x.held.msg, "first");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("request_driver");
    TCase *tc = tcase_create("fake_mover");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, the_mover_completes_later_and_the_worker_hears_done_then);
    tcase_add_test(tc, a_failure_on_demand_is_failed_with_the_movers_reason);
    tcase_add_test(tc, a_cancel_while_the_mover_writes_is_held_until_the_writes_ended);
    tcase_add_test(tc, the_held_failure_keeps_the_first_one);
    tcase_add_test(tc, an_illegal_edge_fails_the_request_internal_where_invariants_are_not_fatal);
    tcase_add_test_raise_signal(tc, an_illegal_edge_aborts_where_invariants_are_fatal, SIGABRT);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
