/* check_link_procs.c: the link layer under process-level faults and topologies: a peer SIGKILLed
 * mid-transfer, a peer restarted on the same port, an unauthenticated UCX client sending before
 * any handshake, two network namespaces joined by veth (root), and one suite run under valgrind. */
#include "link_int.h"
#include "linkutil.h"

#include <sched.h>
#include <sys/mount.h>

static char dir[64];
static char secret[128];

static void setup(void)
{
    tu_tmpdir(dir, sizeof(dir));
    lt_secret(dir, "s", "integration secret for the link 42", 0600, secret, sizeof(secret));
}

static char ns_a[32], ns_b[32];

/* Unchecked teardown (runs in the runner): removes what a failed netns test left behind. */
static void ns_cleanup(void)
{
    unsigned tag = (unsigned)getpid() % 100000;
    char cmd[256];
    snprintf(cmd, sizeof(cmd),
             "command -v ip >/dev/null || exit 0; "
             "ip netns del kvfa%u 2>/dev/null; ip netns del kvfb%u 2>/dev/null; true",
             tag, tag);
    if (system(cmd) < 0)
        perror("system");
}

static void teardown(void)
{
    unlink(secret);
    rmdir(dir);
}

/* ---- a peer SIGKILLed mid-transfer ---- */

struct stream {
    struct lt *t;
    void *buf;
    size_t len;
    int stop, issued, completed, failed;
};

static void stream_next(struct stream *s);

static void stream_done(void *arg, int status)
{
    struct stream *s = arg;
    s->completed++;
    if (status < 0)
        s->failed++;
    else
        stream_next(s);
}

static void stream_next(struct stream *s)
{
    if (s->stop || !s->t->peer)
        return;
    struct lt_check c = {.off = 1};
    int rc = (s->issued & 1)
                 ? link_put(s->t->peer, s->buf, 8 << 20, 0, stream_done, s)
                 : link_send(s->t->peer, LT_PING + 100, &c, sizeof(c), s->buf, s->len,
                             stream_done, s);
    if (rc == 0)
        s->issued++;
}

struct ticker {
    uv_timer_t h;
    int ticks;
};

static void tick_cb(uv_timer_t *h)
{
    ((struct ticker *)h->data)->ticks++;
}

START_TEST(link_sigkilled_peer_is_reported_within_2s_and_the_loop_keeps_running)
{
    struct link_config sc = {.listen_host = "127.0.0.1", .secret_path = secret,
                             .arena_bytes = 16 << 20};
    struct link_config cc = {.secret_path = secret, .arena_bytes = 16 << 20};
    uint16_t port;
    int sfd;
    pid_t pid = lt_server_start(&sc, 30000, &port, &sfd);
    struct lt t;
    ck_assert_int_eq(lt_open(&t, &cc), 0);
    lt_connect(&t, port);
    ck_assert(lt_run_until(&t, &t.ups, 1, 5000));
    int fast = lt_wait_put_fast(&t, 1000);
    /* the ceiling: how often a 10 ms timer runs on the idle loop, measured in this run under
     * this machine's load (at most 10 per 100 ms); after the kill the loop keeps half of it */
    int never = 0;
    struct ticker tk = {.ticks = 0};
    uv_timer_init(&t.loop, &tk.h);
    tk.h.data = &tk;
    uv_timer_start(&tk.h, tick_cb, 10, 10);
    uint64_t t_base = lt_now_ns();
    lt_run_until(&t, &never, 1, 200);
    double base_rate = tk.ticks / ((lt_now_ns() - t_base) / 1e6); /* ticks per ms */
    struct stream s = {.t = &t, .len = 16 << 20};
    s.buf = link_arena(t.link, NULL);
    for (int i = 0; i < 4; i++)
        stream_next(&s);
    lt_run_until(&t, &never, 1, 300);
    int before = s.completed;
    tk.ticks = 0;
    uint64_t t_kill = lt_now_ns();
    ck_assert_int_eq(kill(pid, SIGKILL), 0);
    ck_assert(lt_run_until(&t, &t.downs, 1, 5000));
    double down_ms = (lt_now_ns() - t_kill) / 1e6;
    int ticks_at_down = tk.ticks;
    lt_run_until(&t, &never, 1, 300);
    double total_ms = (lt_now_ns() - t_kill) / 1e6;
    int ticks = tk.ticks;
    s.stop = 1;
    ck_assert(lt_run_until(&t, &s.completed, s.issued, 3000));
    uv_close((uv_handle_t *)&tk.h, NULL);
    struct link_stats st;
    link_get_stats(t.link, &st);
    printf("link: SIGKILL (put fast %d, %d ops done before, %d in flight failed): "
           "on_peer_down after %.1f ms; 10 ms timer ran %d times in %.0f ms (%d by the down; "
           "%.1f per 100 ms idle before); busy fallbacks %llu\n",
           fast, before, s.failed, down_ms, ticks, total_ms, ticks_at_down, base_rate * 100,
           (unsigned long long)st.progress_busy_fallbacks);
    ck_assert_int_gt(before, 0);
    ck_assert_double_lt(down_ms, 2000);
    ck_assert_int_eq(t.down_err, -ECONNRESET);
    ck_assert_int_ge(ticks, (int)(total_ms * base_rate / 2));
    struct link_stats ss;
    ck_assert_int_eq(lt_server_wait(pid, sfd, &ss), 128 + SIGKILL);
    ck_assert_int_eq(lt_close(&t), 0);
}
END_TEST

/* ---- restart on the same port ---- */

START_TEST(link_reconnects_to_a_peer_restarted_on_the_same_port)
{
    struct link_config sc = {.listen_host = "127.0.0.1", .secret_path = secret,
                             .arena_bytes = 1 << 20};
    struct link_config cc = {.secret_path = secret, .arena_bytes = 1 << 20};
    uint16_t port, port2;
    int sfd, sfd2, pfd2, gate[2];
    ck_assert_int_eq(pipe(gate), 0);
    /* the restarted server is forked now, before this process starts UCX, and waits at a gate */
    pid_t pid2 = lt_server_fork(&sc, 20000, gate[0], &pfd2, &sfd2);
    close(gate[0]);
    pid_t pid = lt_server_start(&sc, 20000, &port, &sfd);
    struct lt t;
    ck_assert_int_eq(lt_open(&t, &cc), 0);
    lt_connect(&t, port);
    ck_assert(lt_run_until(&t, &t.ups, 1, 5000));
    ck_assert_int_eq(link_send(t.peer, LT_PING, "a", 1, NULL, 0, NULL, NULL), 0);
    ck_assert(lt_run_until(&t, &t.msgs, 1, 3000));
    kill(pid, SIGKILL);
    ck_assert(lt_run_until(&t, &t.downs, 1, 5000));
    struct link_stats ss;
    lt_server_wait(pid, sfd, &ss);
    /* same port: connections to the old one may sit in TIME_WAIT (trap 4) */
    ck_assert_int_eq(write(gate[1], &port, sizeof(port)), sizeof(port));
    close(gate[1]);
    port2 = lt_read_port(pfd2);
    ck_assert_uint_eq(port2, port);
    pid = pid2;
    sfd = sfd2;
    lt_connect(&t, port);
    ck_assert(lt_run_until(&t, &t.ups, 2, 8000));
    ck_assert_int_eq(link_send(t.peer, LT_PING, "b", 1, NULL, 0, NULL, NULL), 0);
    ck_assert(lt_run_until(&t, &t.msgs, 2, 3000));
    ck_assert_int_eq(t.last_type, LT_PONG);
    ck_assert_int_eq(t.last_hdr[0], 'b');
    ck_assert_int_eq(link_send(t.peer, LT_QUIT, NULL, 0, NULL, 0, NULL, NULL), 0);
    ck_assert(lt_run_until(&t, &t.downs, 2, 3000));
    ck_assert_int_eq(lt_server_wait(pid, sfd, &ss), 0);
    ck_assert_uint_eq(ss.msgs_recv, 2);
    ck_assert_int_eq(lt_close(&t), 0);
}
END_TEST

/* ---- a raw UCX client that skips the handshake ---- */

static int rogue_wait(ucp_worker_h w, ucs_status_ptr_t r)
{
    if (r == NULL)
        return 0;
    if (UCS_PTR_IS_ERR(r))
        return -1;
    for (uint64_t end = lt_now_ns() + 2000000000ull;
         ucp_request_check_status(r) == UCS_INPROGRESS && lt_now_ns() < end;)
        if (!ucp_worker_progress(w))
            usleep(100);
    ucs_status_t s = ucp_request_check_status(r);
    ucp_request_free(r);
    return s == UCS_OK ? 0 : -1;
}

static ucs_status_t rogue_ignore(void *arg, const void *header, size_t header_length, void *data,
                                 size_t length, const ucp_am_recv_param_t *param)
{
    (void)arg, (void)header, (void)header_length, (void)data, (void)length, (void)param;
    return UCS_OK;
}

/* Connects with plain UCP and sends n user messages (and, with junk, one bogus handshake)
 * before any handshake, then stays connected for hold_ms. Returns how many sends completed. */
static int rogue_send(uint16_t port, int n, int junk_hs, unsigned hold_ms)
{
    ucp_config_t *uc;
    ucp_context_h ctx;
    ucp_worker_h w;
    ucp_ep_h ep;
    ck_assert_int_eq(ucp_config_read(NULL, NULL, &uc), UCS_OK);
    ucp_params_t pp = {.field_mask = UCP_PARAM_FIELD_FEATURES, .features = UCP_FEATURE_AM};
    ck_assert_int_eq(ucp_init(&pp, uc, &ctx), UCS_OK);
    ucp_config_release(uc);
    ucp_worker_params_t wp = {.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE,
                              .thread_mode = UCS_THREAD_MODE_SINGLE};
    ck_assert_int_eq(ucp_worker_create(ctx, &wp, &w), UCS_OK);
    ucp_am_handler_param_t hp = {.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                                               UCP_AM_HANDLER_PARAM_FIELD_CB,
                                 .id = LINK_AM_HS, .cb = rogue_ignore};
    ck_assert_int_eq(ucp_worker_set_am_recv_handler(w, &hp), UCS_OK);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port),
                             .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    ucp_ep_params_t ep_p = {
        .field_mask = UCP_EP_PARAM_FIELD_FLAGS | UCP_EP_PARAM_FIELD_SOCK_ADDR |
                      UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE,
        .flags = UCP_EP_PARAMS_FLAGS_CLIENT_SERVER,
        .sockaddr = {.addr = (struct sockaddr *)&sa, .addrlen = sizeof(sa)},
        .err_mode = UCP_ERR_HANDLING_MODE_PEER,
    };
    ck_assert_int_eq(ucp_ep_create(w, &ep_p, &ep), UCS_OK);
    ucp_request_param_t rp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = UCP_AM_SEND_FLAG_REPLY};
    uint16_t hdr[4] = {LT_PING, 0, 0, 0}; /* struct msg_wire: type, hdr_len, reserved */
    char payload[16] = "not authorized!";
    int ok = 0;
    for (int i = 0; i < n; i++)
        ok += rogue_wait(w, ucp_am_send_nbx(ep, LINK_AM_USER, hdr, sizeof(hdr), payload,
                                            sizeof(payload), &rp)) == 0;
    char junk[40] = "junk handshake";
    if (junk_hs)
        rogue_wait(w, ucp_am_send_nbx(ep, LINK_AM_HS, junk, sizeof(junk), NULL, 0, &rp));
    for (uint64_t end = lt_now_ns() + hold_ms * 1000000ull; lt_now_ns() < end;)
        if (!ucp_worker_progress(w))
            usleep(1000);
    ucp_request_param_t cp = {.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS,
                              .flags = UCP_EP_CLOSE_FLAG_FORCE};
    rogue_wait(w, ucp_ep_close_nbx(ep, &cp));
    ucp_worker_destroy(w);
    ucp_cleanup(ctx);
    return ok;
}

START_TEST(link_messages_before_the_handshake_are_dropped_and_counted)
{
    struct link_config sc = {.listen_host = "127.0.0.1", .secret_path = secret,
                             .handshake_timeout_ms = 1000};
    uint16_t port;
    int sfd;
    pid_t pid = lt_server_start(&sc, 1500, &port, &sfd);
    int sent = rogue_send(port, 5, 1, 200);
    ck_assert_int_eq(sent, 5);
    struct link_stats ss;
    ck_assert_int_eq(lt_server_wait(pid, sfd, &ss), 0);
    printf("link: rogue client: server dropped %llu, refused %llu, delivered %llu\n",
           (unsigned long long)ss.dropped, (unsigned long long)ss.refused,
           (unsigned long long)ss.msgs_recv);
    ck_assert_uint_ge(ss.dropped, 5);
    ck_assert_uint_eq(ss.msgs_recv, 0);
    ck_assert_uint_ge(ss.refused, 1);
}
END_TEST

START_TEST(link_silent_endpoint_fails_at_the_handshake_deadline)
{
    struct link_config sc = {.listen_host = "127.0.0.1", .secret_path = secret,
                             .handshake_timeout_ms = 300};
    uint16_t port;
    int sfd;
    pid_t pid = lt_server_start(&sc, 1500, &port, &sfd);
    ck_assert_int_eq(rogue_send(port, 0, 0, 1000), 0);
    struct link_stats ss;
    ck_assert_int_eq(lt_server_wait(pid, sfd, &ss), 0);
    ck_assert_uint_eq(ss.peers_failed, 1); /* by the deadline, while the rogue still held on */
    ck_assert_uint_eq(ss.refused, 0);
    ck_assert_uint_eq(ss.msgs_recv, 0);
}
END_TEST

/* ---- two network namespaces ---- */

static int sh(const char *cmd)
{
    int rc = system(cmd);
    return WIFEXITED(rc) ? WEXITSTATUS(rc) : -1;
}

static int enter_netns(const char *name)
{
    char path[96];
    tu_fmt(path, sizeof(path), "/var/run/netns/%s", name);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = setns(fd, CLONE_NEWNET) == 0 ? 0 : -errno;
    close(fd);
    /* as `ip netns exec` does: /sys/class/net shows the namespace of whoever mounted sysfs, and
     * UCX lists its tcp devices there */
    if (rc == 0 && (unshare(CLONE_NEWNS) < 0 || mount("", "/", NULL, MS_SLAVE | MS_REC, NULL) < 0 ||
                    umount2("/sys", MNT_DETACH) < 0 || mount(name, "/sys", "sysfs", 0, NULL) < 0))
        rc = -errno;
    return rc;
}

START_TEST(link_across_network_namespaces_moves_messages_without_shm)
{
    if (geteuid() != 0 || sh("command -v ip >/dev/null 2>&1") != 0) {
        printf("SKIP link_across_network_namespaces: %s\n",
               geteuid() != 0 ? "not root (network namespaces need CAP_SYS_ADMIN)"
                              : "no 'ip' command (package iproute2)");
        return;
    }
    unsigned tag = (unsigned)getppid() % 100000; /* the runner's pid: see ns_cleanup */
    unsigned net = 16 + tag % 200;
    snprintf(ns_a, sizeof(ns_a), "kvfa%u", tag);
    snprintf(ns_b, sizeof(ns_b), "kvfb%u", tag);
    char cmd[1024];
    tu_fmt(
        cmd, sizeof(cmd),
        "ip netns add %s && ip netns add %s && "
        "ip link add va%u type veth peer name vb%u && "
        "ip link set va%u netns %s && ip link set vb%u netns %s && "
        "ip -n %s addr add 10.231.%u.1/24 dev va%u && ip -n %s addr add 10.231.%u.2/24 dev vb%u && "
        "ip -n %s link set va%u up && ip -n %s link set vb%u up && "
        "ip -n %s link set lo up && ip -n %s link set lo up && "
        "for i in $(seq 100); do ip -n %s link show vb%u | grep -q LOWER_UP && break; "
        "sleep 0.02; done",
        ns_a, ns_b, tag, tag, tag, ns_a, tag, ns_b, ns_a, net, tag, ns_b, net, tag, ns_a, tag, ns_b,
        tag, ns_a, ns_b, ns_b, tag);
    if (sh(cmd) != 0) {
        printf("SKIP link_across_network_namespaces: cannot make namespaces and veth here\n");
        tu_fmt(cmd, sizeof(cmd), "ip netns del %s 2>/dev/null; ip netns del %s 2>/dev/null", ns_a,
               ns_b);
        sh(cmd);
        return;
    }
    char host[32];
    snprintf(host, sizeof(host), "10.231.%u.1", net);
    struct link_config sc = {.listen_host = host, .secret_path = secret, .no_shm = 1,
                             .arena_bytes = 1 << 20};
    struct link_config cc = {.secret_path = secret, .no_shm = 1, .arena_bytes = 1 << 20};
    /* the server enters ns_a in its child: fork here, enter, then start it */
    int pp[2];
    ck_assert_int_eq(pipe(pp), 0);
    pid_t outer = fork();
    ck_assert_int_ge(outer, 0);
    if (outer == 0) {
        if (enter_netns(ns_a) < 0)
            _exit(5);
        uint16_t port;
        int sfd;
        pid_t pid = lt_server_start(&sc, 20000, &port, &sfd);
        if (write(pp[1], &port, sizeof(port)) != sizeof(port))
            _exit(6);
        struct link_stats ss;
        _exit(lt_server_wait(pid, sfd, &ss));
    }
    close(pp[1]);
    uint16_t port = 0;
    ck_assert_int_eq(read(pp[0], &port, sizeof(port)), sizeof(port));
    close(pp[0]);
    ck_assert_int_eq(enter_netns(ns_b), 0);
    struct lt t;
    ck_assert_int_eq(lt_open(&t, &cc), 0);
    char hp[64];
    snprintf(hp, sizeof(hp), "%s:%u", host, port);
    struct link_peer *p;
    ck_assert_int_eq(link_connect(t.link, hp, &p), 0);
    ck_assert(lt_run_until(&t, &t.ups, 1, 5000));
    ck_assert_int_eq(link_peer_put_fast(t.peer), 0); /* no shm: the engine must use messages */
    ck_assert_int_eq(link_send(t.peer, LT_PING, "n", 1, "payload", 7, NULL, NULL), 0);
    ck_assert(lt_run_until(&t, &t.msgs, 1, 3000));
    ck_assert_int_eq(t.last_type, LT_PONG);
    ck_assert_mem_eq(t.last_data, "payload", 7);
    size_t len = 32u << 20;
    void *buf = malloc(len);
    lt_fill(buf, len, 5);
    struct lt_check c = {.off = 5};
    uint64_t t0 = lt_now_ns();
    ck_assert_int_eq(link_send(t.peer, LT_BIG, &c, sizeof(c), buf, len, NULL, NULL), 0);
    ck_assert(lt_run_until(&t, &t.msgs, 2, 20000));
    double s = (lt_now_ns() - t0) / 1e9;
    ck_assert_int_eq(t.results_ok, 1);
    json_t *st = json_object();
    link_status(t.link, st);
    json_t *pj = json_array_get(json_object_get(json_object_get(st, "link"), "peers"), 0);
    printf("link: across namespaces (put lanes %s): 32 MiB rendezvous + verify in %.3f s "
           "(%.2f GB/s incl. verify)\n",
           json_string_value(json_object_get(pj, "put_lanes")), s, len / s / 1e9);
    json_decref(st);
    free(buf);
    ck_assert_int_eq(link_send(t.peer, LT_QUIT, NULL, 0, NULL, 0, NULL, NULL), 0);
    lt_run_until(&t, &t.downs, 1, 3000);
    int status;
    ck_assert_int_eq(waitpid(outer, &status, 0), outer);
    ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    ck_assert_int_eq(lt_close(&t), 0);
    tu_fmt(cmd, sizeof(cmd), "ip netns del %s; ip netns del %s", ns_a, ns_b);
    ck_assert_int_eq(sh(cmd), 0);
}
END_TEST

/* ---- valgrind ---- */

START_TEST(link_handshake_suite_is_clean_under_valgrind)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    printf("SKIP valgrind: this build uses a sanitizer, which valgrind cannot run\n");
    return;
#endif
    if (sh("command -v valgrind >/dev/null") != 0) {
        printf("SKIP valgrind: not installed\n");
        return;
    }
    char bin[256], cmd[768];
    tu_bin("tests/check_link", bin, sizeof(bin));
    tu_fmt(cmd, sizeof(cmd),
           "CK_FORK=no CK_RUN_CASE=handshake KVF_TEST_SLOW=10 valgrind -q --leak-check=full "
           "--errors-for-leak-kinds=definite --error-exitcode=9 %s >%s/vg.log 2>&1",
           bin, dir);
    int rc = sh(cmd);
    if (rc != 0) {
        tu_fmt(cmd, sizeof(cmd), "grep -v 'kvferry\\[' %s/vg.log | head -40", dir);
        sh(cmd);
    }
    tu_fmt(cmd, sizeof(cmd), "%s/vg.log", dir);
    unlink(cmd);
    ck_assert_int_eq(rc, 0);
}
END_TEST

static Suite *procs_suite(void)
{
    Suite *s = suite_create("link_procs");
    TCase *tc = tcase_create("faults");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, link_sigkilled_peer_is_reported_within_2s_and_the_loop_keeps_running);
    tcase_add_test(tc, link_reconnects_to_a_peer_restarted_on_the_same_port);
    tcase_add_test(tc, link_messages_before_the_handshake_are_dropped_and_counted);
    tcase_add_test(tc, link_silent_endpoint_fails_at_the_handshake_deadline);
    suite_add_tcase(s, tc);
    tc = tcase_create("netns");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_unchecked_fixture(tc, NULL, ns_cleanup);
    tcase_set_timeout(tc, 30);
    tcase_add_test(tc, link_across_network_namespaces_moves_messages_without_shm);
    suite_add_tcase(s, tc);
    tc = tcase_create("valgrind");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, tu_cpu_s(50));
    tcase_add_test(tc, link_handshake_suite_is_clean_under_valgrind);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(procs_suite());
}
