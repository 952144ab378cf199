/* check_workers_faults.c: a real kvferryd against hostile and unlucky clients: a daemon restart
 * under a libkvferry client (requests in flight fail with PEER_LOST, the client reconnects and
 * re-registers by itself), and raw clients sending garbage, truncated frames, wrong fds and
 * oversized counts, after which well-behaved workers still complete their transfers. */
#include <pthread.h>
#include <sys/mman.h>

#include "fdpass.h"
#include "kvferry.h"
#include "pattern.h"
#include "preset.h"
#include "proto.h"
#include "wtest.h"
#include "wraw.h"

START_TEST(workers_daemon_restart_fails_in_flight_and_the_client_reconnects)
{
    struct wenv e;
    wt_start(&e, "deadlines:\n  send_wait: 5s\n  transfer: 5s\n");
    struct rank r;
    rank_make(&r, "tiny", "ctx", ROLE_CONTEXT, F_SEAL_SHRINK | F_SEAL_GROW);
    struct kvf_options o = {.reconnect_min_ms = 20, .reconnect_max_ms = 200, .name = "restart-test"};
    struct kvf_client *c;
    ck_assert_int_eq(kvf_connect(e.wsock, &o, &c), 0);
    char err[512];
    ck_assert_msg(kvf_register(c, r.json, r.pools, r.l.n_pools, err, sizeof err) == 0, "%s", err);
    /* 300 tokens: 5 blocks per paged group, slot 0 per state group */
    uint32_t counts[LAYOUT_MAX_GROUPS], ids[64], k = 0;
    struct plan_ids pids;
    memset(&pids, 0, sizeof pids);
    for (uint32_t g = 0; g < r.l.n_groups; g++) {
        uint32_t n = r.l.groups[g].kind == GROUP_STATE ? 1 : 5;
        pids.ids[g] = ids + k;
        for (uint32_t b = 0; b < n; b++)
            ids[k++] = b;
        counts[g] = pids.n[g] = n;
    }
    ck_assert_int_eq(kvf_send(c, 1, r.l.n_groups, counts, ids, 1), 0);
    ck_assert_uint_eq(kvf_inflight(c), 1);
    int fd = kvf_fd(c);

    kill(e.daemon, SIGKILL);
    wt_wait(e.daemon, 5000);
    struct kvf_event ev = wait_event(c, 1, KVF_EV_FAILED, 3000);
    ck_assert_int_eq(ev.error, KVF_E_PEER_LOST);
    wait_event(c, 0, KVF_EV_DISCONNECTED, 1000);
    ck_assert_uint_eq(kvf_inflight(c), 0);
    ck_assert_int_eq(kvf_send(c, 2, r.l.n_groups, counts, ids, 1), -ENOTCONN);

    wt_daemon_start(&e); /* same socket path */
    wait_event(c, 0, KVF_EV_RECONNECTED, 5000);
    ck_assert_int_eq(kvf_fd(c), fd); /* the fd in the worker's loop stays valid */
    ck_assert_uint_eq(wt_ctl_count(&e, "workers", "workers"), 1);

    /* re-registered: a generation worker can fetch from it again */
    pattern_fill(&r.l, &r.mem, &pids, 0, 1 + 2);
    ck_assert_int_eq(kvf_send(c, 2, r.l.n_groups, counts, ids, 1), 0);
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec", "tiny",
                     "--rank", "0", "--requests", "1", "--first-req", "2", "--prompt-tokens", "300",
                     "--ctx-instance", "ctx", (char *)NULL);
    int rq = wt_wait(q, 20000);
    char *l = wt_log(&e, "gen.log");
    ck_assert_msg(rq == 0 && strstr(l, "parity OK"), "generation exit %d:\n%s", rq, l);
    free(l);
    wait_event(c, 2, KVF_EV_SENT, 3000);
    c = kvf_close(c);
    ck_assert_ptr_null(c);
    rank_free(&r);
    wt_stop(&e);
}
END_TEST

/* ---- raw hostile clients ---- */

/* Sends a REGISTER with the given fds; returns the REGISTERED message (connection kept). */
static void expect_refused(struct wenv *e, const struct rank *r, const int *fds, const char *words)
{
    int fd = raw_hello(e);
    struct proto_msg m;
    register_msg(&m, r);
    raw_send_msg(fd, &m, fds, r->l.n_pools);
    char msg[600] = "";
    ck_assert_uint_eq(raw_next(fd, msg, sizeof msg), PROTO_REGISTERED);
    ck_assert_msg(strstr(msg, "BAD_REQUEST") && strstr(msg, words), "'%s' lacks '%s'", msg, words);
    struct proto_msg ping = {.type = PROTO_PING};
    raw_send_msg(fd, &ping, NULL, 0);
    ck_assert_uint_eq(raw_next(fd, NULL, 0), PROTO_PONG); /* still served */
    close(fd);
}

START_TEST(workers_hostile_frames_close_only_their_connection)
{
    struct wenv e;
    wt_start(&e, NULL);
    /* garbage */
    int fd = raw_connect(&e);
    const char junk[] = "GET / HTTP/1.1\r\nHost: kvferry\r\n\r\n";
    ck_assert_int_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    expect_error_close(fd, "magic");
    /* a frame before HELLO */
    fd = raw_connect(&e);
    struct proto_msg cancel = {.type = PROTO_CANCEL, .u.cancel.req_id = 1};
    raw_send_msg(fd, &cancel, NULL, 0);
    expect_error_close(fd, "before HELLO");
    /* a frame header claiming 1 GiB */
    fd = raw_hello(&e);
    uint8_t hdr[PROTO_HDR_SIZE] = {'K', 'V', 'F', 'W', PROTO_VERSION, 0, PROTO_SEND};
    uint32_t big = 1u << 30;
    memcpy(hdr + 12, &big, 4);
    ck_assert_int_eq(write(fd, hdr, sizeof hdr), (ssize_t)sizeof hdr);
    expect_error_close(fd, "workers.max_frame");
    /* oversized counts: two groups whose counts wrap */
    fd = raw_hello(&e);
    uint8_t send[PROTO_HDR_SIZE + 24] = {'K', 'V', 'F', 'W', PROTO_VERSION, 0, PROTO_SEND};
    uint32_t pl = 24, ng = 2, c0 = 0xffffffffu, c1 = 5;
    memcpy(send + 12, &pl, 4);
    memcpy(send + PROTO_HDR_SIZE + 12, &ng, 4);
    memcpy(send + PROTO_HDR_SIZE + 16, &c0, 4);
    memcpy(send + PROTO_HDR_SIZE + 20, &c1, 4);
    ck_assert_int_eq(write(fd, send, sizeof send), (ssize_t)sizeof send);
    expect_error_close(fd, "max_blocks");
    /* a truncated frame, then the worker hangs up: nothing to report, nothing breaks */
    fd = raw_hello(&e);
    ck_assert_int_eq(write(fd, send, 10), 10);
    close(fd);

    struct rank r;
    rank_make(&r, "tiny", "hostile", ROLE_CONTEXT, F_SEAL_SHRINK);
    /* REGISTER without its fds */
    fd = raw_hello(&e);
    struct proto_msg m;
    register_msg(&m, &r);
    raw_send_msg(fd, &m, NULL, 0);
    expect_error_close(fd, "fds for");
    /* fds on a frame that takes none */
    fd = raw_hello(&e);
    struct proto_msg ping = {.type = PROTO_PING};
    raw_send_msg(fd, &ping, r.fds, 1);
    expect_error_close(fd, "came with");
    /* fds of the wrong kind, unsealed or too small: registration refused, connection kept */
    int pipes[2][2], bad[LAYOUT_MAX_POOLS];
    ck_assert_int_eq(pipe(pipes[0]), 0);
    for (uint32_t i = 0; i < r.l.n_pools; i++)
        bad[i] = pipes[0][0];
    expect_refused(&e, &r, bad, "not a memfd");
    struct rank unsealed;
    rank_make(&unsealed, "tiny", "hostile", ROLE_CONTEXT, 0);
    expect_refused(&e, &unsealed, unsealed.fds, "F_SEAL_SHRINK");
    struct rank smaller;
    rank_make(&smaller, "tiny:blocks=16", "hostile", ROLE_CONTEXT, F_SEAL_SHRINK);
    expect_refused(&e, &r, smaller.fds, "the layout needs");
    close(pipes[0][0]);
    close(pipes[0][1]);
    (void)pipes[1];

    /* pipelined HELLO + REGISTER (fds on the second frame) is a good worker, not a hostile one */
    fd = raw_connect(&e);
    struct proto_msg hello = {.type = PROTO_HELLO};
    hello.u.hello.version_min = hello.u.hello.version_max = PROTO_VERSION;
    raw_send_msg(fd, &hello, NULL, 0);
    register_msg(&m, &r);
    raw_send_msg(fd, &m, r.fds, r.l.n_pools);
    char okmsg[600] = "";
    ck_assert_uint_eq(raw_next(fd, NULL, 0), PROTO_WELCOME);
    ck_assert_uint_eq(raw_next(fd, okmsg, sizeof okmsg), PROTO_REGISTERED);
    ck_assert_msg(strstr(okmsg, "OK: registered"), "%s", okmsg);
    close(fd);

    /* the daemon counted them and still serves well-behaved workers */
    json_t *st = wt_ctl(&e, "stats");
    json_t *w = json_object_get(st, "workers");
    ck_assert_int_ge(json_integer_value(json_object_get(w, "bad_frames")), 6);
    ck_assert_int_ge(json_integer_value(json_object_get(w, "register_refused")), 3);
    json_decref(st);
    pid_t c = wt_sim(&e, "ctx.log", "--role", "context", "--instance", "ctx", "--spec", "tiny:tp=2",
                     "--all-ranks", "--requests", "3", "--readers", "2", (char *)NULL);
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec",
                     "tiny:tp=2", "--all-ranks", "--requests", "3", "--ctx-instance", "ctx",
                     (char *)NULL);
    int rq = wt_wait(q, 30000), rc = wt_wait(c, 30000);
    char *l = wt_log(&e, "gen.log");
    ck_assert_msg(rq == 0 && rc == 0 && strstr(l, "parity OK"), "gen %d ctx %d:\n%s", rq, rc, l);
    free(l);
    rank_free(&r);
    rank_free(&unsealed);
    rank_free(&smaller);
    wt_stop(&e);
}
END_TEST

/* FDS frames (fds sent ahead of a REGISTER with more than 16 host pools, proto.h): the count
 * must match what came attached, nothing else may follow them but REGISTER, the daemon holds
 * at most LAYOUT_MAX_POOLS ahead; split correctly, the REGISTER is accepted. */
START_TEST(workers_fds_sent_ahead_are_bounded_and_belong_to_the_register)
{
    struct wenv e;
    wt_start(&e, NULL);
    struct rank r;
    rank_make(&r, "tiny", "ahead", ROLE_CONTEXT, F_SEAL_SHRINK);
    int many[PROTO_FDS_MAX];
    for (int i = 0; i < PROTO_FDS_MAX; i++)
        many[i] = r.fds[0];
    /* says 2, brings 1 */
    int fd = raw_hello(&e);
    struct proto_msg f = {.type = PROTO_FDS, .u.fds.n = 2};
    raw_send_msg(fd, &f, r.fds, 1);
    expect_error_close(fd, "FDS frame with 1 fds (it says 2");
    /* anything but REGISTER after FDS */
    fd = raw_hello(&e);
    f.u.fds.n = 1;
    raw_send_msg(fd, &f, r.fds, 1);
    struct proto_msg ping = {.type = PROTO_PING};
    raw_send_msg(fd, &ping, NULL, 0);
    expect_error_close(fd, "PING frame after FDS frames");
    /* LAYOUT_MAX_POOLS held ahead is the most */
    fd = raw_hello(&e);
    f.u.fds.n = PROTO_FDS_MAX;
    for (int k = 0; k < LAYOUT_MAX_POOLS / PROTO_FDS_MAX; k++)
        raw_send_msg(fd, &f, many, PROTO_FDS_MAX);
    f.u.fds.n = 1;
    raw_send_msg(fd, &f, many, 1);
    expect_error_close(fd, "1024 held ahead, limit 1024");
    /* the first pool's fd ahead, the rest on the REGISTER: registered */
    fd = raw_hello(&e);
    raw_send_msg(fd, &f, r.fds, 1);
    struct proto_msg m;
    register_msg(&m, &r);
    raw_send_msg(fd, &m, r.fds + 1, r.l.n_pools - 1);
    char msg[600] = "";
    ck_assert_uint_eq(raw_next(fd, msg, sizeof msg), PROTO_REGISTERED);
    ck_assert_msg(strstr(msg, "OK: registered"), "%s", msg);
    close(fd);
    rank_free(&r);
    wt_stop(&e);
}
END_TEST

START_TEST(workers_gpu_pool_registration_is_refused_with_a_reason)
{
    struct wenv e;
    wt_start(&e, NULL);
    struct rank r;
    rank_make(&r, "tiny", "gpu", ROLE_CONTEXT, F_SEAL_SHRINK);
    /* the same layout with pool 0 declared as CUDA memory on device 0 */
    struct layout l = r.l;
    l.pools[0].kind = POOL_CUDA;
    l.pools[0].device = 0;
    l.device = 0;
    char *json = layout_to_json(&l);
    ck_assert_ptr_nonnull(json);
    int fd = raw_hello(&e);
    struct proto_msg m;
    register_msg(&m, &r);
    m.u.reg.json = json;
    m.u.reg.json_len = (uint32_t)strlen(json);
    m.u.reg.pools[0].kind = POOL_CUDA;
    m.u.reg.pools[0].device = 0;
    m.u.reg.pools[0].ipc_handle[0] = 1;
    raw_send_msg(fd, &m, r.fds + 1, r.l.n_pools - 1);
    char msg[600] = "";
    ck_assert_uint_eq(raw_next(fd, msg, sizeof msg), PROTO_REGISTERED);
    ck_assert_msg(strstr(msg, "GPU memory"), "%s", msg);
    close(fd);
    free(json);
    rank_free(&r);
    wt_stop(&e);
}
END_TEST

START_TEST(workers_limits_on_connections_and_requests_in_flight_hold)
{
    struct wenv e;
    wt_start(&e, "workers:\n  max_conns: 2\n  max_inflight: 2\n"
                 "deadlines:\n  send_wait: 5s\n  transfer: 5s\n");
    /* connections: the third is refused with a reason */
    int a = raw_hello(&e), b = raw_hello(&e);
    int x = raw_connect(&e);
    expect_error_close(x, "workers.max_conns");
    close(a);
    close(b);
    json_int_t conns = -1;
    for (int i = 0; i < 200 && conns != 0; i++) {
        json_t *st = wt_ctl(&e, "status");
        conns = json_integer_value(json_object_get(json_object_get(st, "workers"), "connections"));
        json_decref(st);
        if (conns)
            usleep(10000);
    }
    ck_assert_int_eq(conns, 0);

    struct rank r;
    rank_make(&r, "tiny", "ctx", ROLE_CONTEXT, F_SEAL_SHRINK);
    struct kvf_client *c;
    ck_assert_int_eq(kvf_connect("/nonexistent/kvferry.sock", NULL, &c), -ENOENT);
    ck_assert_int_eq(kvf_connect(e.wsock, NULL, &c), 0);
    uint32_t counts[LAYOUT_MAX_GROUPS + 1] = {0}, ids[8] = {0};
    for (uint32_t g = 0; g < r.l.n_groups; g++)
        counts[g] = r.l.groups[g].kind == GROUP_STATE ? 1 : 1;
    /* the library refuses what it can see is wrong, before the daemon is asked */
    ck_assert_int_eq(kvf_send(c, 1, r.l.n_groups, counts, ids, 1), -ENOTCONN); /* unregistered */
    char err[512];
    struct kvf_pool bad = r.pools[0];
    bad.fd = -1;
    ck_assert_int_eq(kvf_register(c, r.json, &bad, 1, err, sizeof err), -EINVAL);
    ck_assert_int_eq(kvf_register(c, "{\"instance\":1}", r.pools, r.l.n_pools, err, sizeof err), -EINVAL);
    ck_assert_msg(strstr(err, "BAD_REQUEST: layout"), "%s", err); /* the daemon's refusal */
    ck_assert_int_eq(kvf_register(c, r.json, r.pools, r.l.n_pools, err, sizeof err), 0);
    ck_assert_int_eq(kvf_register(c, r.json, r.pools, r.l.n_pools, err, sizeof err), -EALREADY);
    ck_assert_int_eq(kvf_send(c, 0, r.l.n_groups, counts, ids, 1), -EINVAL);
    ck_assert_int_eq(kvf_send(c, 1, LAYOUT_MAX_GROUPS + 1, counts, ids, 1), -EINVAL);
    struct kvf_recv_args ra = {.req_id = 9, .ctx_instance = "", .n_groups = 0};
    ck_assert_int_eq(kvf_recv(c, &ra), -EINVAL);
    ck_assert_int_eq(kvf_cancel(c, 12345), -ENOENT);
    /* in flight: two SENDs fit, the third is refused by the library (-EBUSY) */
    ck_assert_int_eq(kvf_send(c, 1, r.l.n_groups, counts, ids, 1), 0);
    ck_assert_int_eq(kvf_send(c, 1, r.l.n_groups, counts, ids, 1), -EEXIST);
    ck_assert_int_eq(kvf_send(c, 2, r.l.n_groups, counts, ids, 1), 0);
    ck_assert_int_eq(kvf_send(c, 3, r.l.n_groups, counts, ids, 1), -EBUSY);
    ck_assert_uint_eq(wt_ctl_count(&e, "transfers", "transfers"), 2);
    /* cancel ends one with CANCELLED and frees its room */
    ck_assert_int_eq(kvf_cancel(c, 1), 0);
    struct kvf_event ev = wait_event(c, 1, KVF_EV_FAILED, 2000);
    ck_assert_int_eq(ev.error, KVF_E_CANCELLED);
    ck_assert_int_eq(kvf_send(c, 3, r.l.n_groups, counts, ids, 1), 0);
    /* ... and the daemon enforces the limit itself on a client that ignores it */
    int fd = raw_hello(&e);
    struct rank r2;
    rank_make(&r2, "tiny", "ctx2", ROLE_CONTEXT, F_SEAL_SHRINK);
    struct proto_msg m;
    register_msg(&m, &r2);
    raw_send_msg(fd, &m, r2.fds, r2.l.n_pools);
    char msg[600];
    ck_assert_uint_eq(raw_next(fd, msg, sizeof msg), PROTO_REGISTERED);
    ck_assert_msg(strstr(msg, "OK"), "%s", msg);
    for (uint64_t q = 1; q <= 3; q++) {
        struct proto_msg s = {.type = PROTO_SEND};
        s.u.send.req_id = q;
        s.u.send.n_readers = 1;
        s.u.send.items.n_groups = r2.l.n_groups;
        memcpy(s.u.send.items.counts, counts, sizeof s.u.send.items.counts);
        s.u.send.items.ids = ids;
        raw_send_msg(fd, &s, NULL, 0);
    }
    ck_assert_uint_eq(raw_next(fd, NULL, 0), PROTO_EVENT); /* the third: FAILED */
    close(fd);
    c = kvf_close(c);
    rank_free(&r);
    rank_free(&r2);
    wt_stop(&e);
}
END_TEST

struct poller {
    struct kvf_client *c;
    struct kvf_event ev;
    int rc;
    pid_t tid; /* the thread's id, set (atomically) before it polls */
};

static void *poll_thread(void *arg)
{
    struct poller *p = arg;
    __atomic_store_n(&p->tid, gettid(), __ATOMIC_RELEASE);
    int rc = kvf_poll(p->c, &p->ev, -1); /* blocks without holding the client's lock */
    __atomic_store_n(&p->rc, rc, __ATOMIC_RELEASE); /* the main thread polls it (TSan) */
    return NULL;
}

/* Waits until the poller sleeps in the kernel (state S in /proc: parked in kvf_poll). */
static void wait_parked(struct poller *p)
{
    int64_t end = wt_now_ms() + tu_ms(10000);
    for (;;) {
        pid_t tid = __atomic_load_n(&p->tid, __ATOMIC_ACQUIRE);
        char path[64], st[512] = "";
        FILE *f =
            tid ? fopen(tu_fmt(path, sizeof path, "/proc/self/task/%d/stat", (int)tid), "r") : NULL;
        if (f) {
            if (!fgets(st, sizeof st, f))
                st[0] = '\0';
            fclose(f);
        }
        const char *paren = strrchr(st, ')'); /* "tid (comm) S ..." */
        if (paren && paren[1] == ' ' && paren[2] == 'S')
            return;
        ck_assert_msg(wt_now_ms() < end, "the poller thread never blocked: %s", st);
        usleep(1000);
    }
}

START_TEST(workers_client_is_usable_from_two_threads)
{
    struct wenv e;
    wt_start(&e, NULL);
    struct rank r;
    rank_make(&r, "tiny", "ctx", ROLE_CONTEXT, F_SEAL_SHRINK);
    struct kvf_client *c;
    char err[512];
    ck_assert_int_eq(kvf_connect(e.wsock, NULL, &c), 0);
    ck_assert_int_eq(kvf_register(c, r.json, r.pools, r.l.n_pools, err, sizeof err), 0);
    struct poller p = {.c = c, .rc = -99};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, poll_thread, &p), 0);
    wait_parked(&p); /* in kvf_poll(-1) */
    uint32_t counts[LAYOUT_MAX_GROUPS], ids[64], k = 0;
    struct plan_ids pids;
    memset(&pids, 0, sizeof pids);
    for (uint32_t g = 0; g < r.l.n_groups; g++) {
        uint32_t n = r.l.groups[g].kind == GROUP_STATE ? 1 : 5;
        pids.ids[g] = ids + k;
        for (uint32_t b = 0; b < n; b++)
            ids[k++] = b;
        counts[g] = pids.n[g] = n;
    }
    pattern_fill(&r.l, &r.mem, &pids, 0, 1 + 7);
    ck_assert_int_eq(kvf_send(c, 7, r.l.n_groups, counts, ids, 1), 0); /* meanwhile, this thread */
    pid_t q = wt_sim(&e, "gen.log", "--role", "generation", "--instance", "gen", "--spec", "tiny",
                     "--rank", "0", "--requests", "1", "--first-req", "7", "--prompt-tokens", "300",
                     "--ctx-instance", "ctx", (char *)NULL);
    ck_assert_int_eq(wt_wait(q, 20000), 0);
    int64_t end = wt_now_ms() + tu_ms(5000);
    while (__atomic_load_n(&p.rc, __ATOMIC_ACQUIRE) == -99 && wt_now_ms() < end)
        usleep(5000);
    ck_assert_int_eq(p.rc, 1);
    pthread_join(th, NULL);
    ck_assert_uint_eq(p.ev.req_id, 7);
    ck_assert_int_eq(p.ev.kind, KVF_EV_SENT);
    ck_assert_uint_gt(p.ev.bytes, 0);
    kvf_close(c);
    rank_free(&r);
    wt_stop(&e);
}
END_TEST

START_TEST(workers_library_binds_from_python_ctypes)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("SKIP workers_library_binds_from_python_ctypes: a sanitized libkvferry.so cannot be "
           "loaded into python3 without LD_PRELOAD of the runtime\n");
    return;
#endif
    if (system("python3 -c 'import ctypes' >/dev/null 2>&1") != 0) {
        printf("SKIP workers_library_binds_from_python_ctypes: no python3 with ctypes\n");
        return;
    }
    struct wenv e;
    wt_start(&e, NULL);
    char cmd[512], so[256];
    tu_bin("libkvferry.so", so, sizeof so);
    tu_fmt(cmd, sizeof cmd, "python3 tests/integration/kvf_ctypes.py %s %s > %s/py.log 2>&1", so,
           e.wsock, e.dir);
    int rc = system(cmd);
    char *l = wt_log(&e, "py.log");
    ck_assert_msg(rc == 0 && strstr(l, "ctypes binding OK"), "exit %d:\n%s", rc, l);
    free(l);
    wt_stop(&e);
}
END_TEST

static Suite *faults_suite(void)
{
    Suite *s = suite_create("workers_faults");
    TCase *t = tcase_create("restart");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, workers_daemon_restart_fails_in_flight_and_the_client_reconnects);
    tcase_add_test(t, workers_client_is_usable_from_two_threads);
    suite_add_tcase(s, t);
    TCase *h = tcase_create("hostile");
    tcase_set_timeout(h, 60);
    tcase_add_test(h, workers_hostile_frames_close_only_their_connection);
    tcase_add_test(h, workers_gpu_pool_registration_is_refused_with_a_reason);
    tcase_add_test(h, workers_fds_sent_ahead_are_bounded_and_belong_to_the_register);
    tcase_add_test(h, workers_limits_on_connections_and_requests_in_flight_hold);
    tcase_add_test(h, workers_library_binds_from_python_ctypes);
    suite_add_tcase(s, h);
    return s;
}

int main(void) { return tu_run(faults_suite()); }
