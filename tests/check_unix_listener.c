/* check_unix_listener.c: the one listener of the worker and the control socket
 * (daemon/base/unix_listener.h): access first, then max_conns_per_uid and max_conns, the
 * operator's exemption and reserve, room made by the owner before a refusal, what a refused
 * peer is told; and a real socket: the peer's credentials reach adopt, a refused peer reads its
 * refusal, stop removes the socket file. The owner here keeps counts only (the real owners,
 * workers and control, are covered by check_worker_sockets and check_daemon). */
#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "access.h"
#include "accessutil.h"
#include "monotonic.h"
#include "testutil.h"
#include "unix_listener.h"

#define OTHER_UID 65534u

struct owner {
    struct unix_listener_limits lim;
    int64_t all, of_uid;
    int rooms_asked;
    bool room, draining;
    char room_key[64];
    int adopted;
    struct peer_cred adopted_peer;
    int refused_err;
    char refused_msg[256];
};

static void o_limits(void *ctx, struct unix_listener_limits *ret)
{
    *ret = ((struct owner *)ctx)->lim;
}

static void o_count(void *ctx, uid_t uid, int64_t *all, int64_t *of_uid)
{
    (void)uid;
    struct owner *o = ctx;
    *all = o->all;
    *of_uid = o->of_uid;
}

static int o_admit(void *ctx, const struct peer_cred *peer, char *msg, size_t len)
{
    (void)peer;
    if (!((struct owner *)ctx)->draining)
        return 0;
    snprintf(msg, len, "draining");
    return -EUSERS;
}

static bool o_make_room(void *ctx, bool only_uid, uid_t uid, const char *limit)
{
    (void)only_uid;
    (void)uid;
    struct owner *o = ctx;
    o->rooms_asked++;
    snprintf(o->room_key, sizeof o->room_key, "%s", limit);
    if (o->room) {
        o->all--;
        o->of_uid--;
    }
    return o->room;
}

static void o_refuse(void *ctx, int fd, int err, const char *msg)
{
    struct owner *o = ctx;
    o->refused_err = err;
    snprintf(o->refused_msg, sizeof o->refused_msg, "%s", msg);
    ck_assert_int_gt(send(fd, msg, strlen(msg), MSG_NOSIGNAL), 0);
}

static int o_adopt(void *ctx, int fd, const struct peer_cred *peer)
{
    struct owner *o = ctx;
    o->adopted++;
    o->adopted_peer = *peer;
    close(fd);
    return 0;
}

static const struct unix_listener_ops ops = {o_limits, o_count, o_admit, o_make_room, o_refuse,
                                             o_adopt};
static const struct unix_listener_ops ops_no_room = {o_limits, o_count, NULL, NULL, o_refuse,
                                                     o_adopt};

static int admit(struct unix_listener *l, uid_t uid, char *msg, size_t len)
{
    struct peer_cred p = {.pid = 1, .uid = uid, .gid = uid};
    msg[0] = '\0';
    return unix_listener_admit(l, &p, msg, len);
}

START_TEST(listener_refuses_a_peer_access_does_not_allow_before_any_limit)
{
    if (getuid() == OTHER_UID)
        return;
    struct access a;
    tu_access_load("log.level: info\n", &a);
    struct owner o = {.lim = {.max_conns = 10, .max_conns_per_uid = 10}};
    struct unix_listener l;
    unix_listener_init(&l, "test", "test", "t", &a, &ops, &o);
    char msg[160];
    ck_assert_int_eq(admit(&l, OTHER_UID, msg, sizeof msg), -EACCES);
    ck_assert_str_eq(msg, "uid 65534 is not allowed on this socket (access.allow_uids/gids)");
    ck_assert_int_eq(l.counters.refused_access, 1);
    ck_assert_int_eq(l.counters.refused_limit, 0);
    o.draining = true; /* the owner's own check runs after access, before the limits */
    ck_assert_int_eq(admit(&l, 0, msg, sizeof msg), -EUSERS);
    ck_assert_str_eq(msg, "draining");
    ck_assert_int_eq(l.counters.refused_limit, 1);
    access_done(&a);
}
END_TEST

START_TEST(listener_per_uid_cap_holds_an_ordinary_uid_and_exempts_the_operator_when_asked)
{
    struct access a;
    tu_access_load("access.allow_uids: [65534]\n", &a);
    struct owner o = {.lim = {.max_conns = 100, .max_conns_per_uid = 2, .operator_exempt = true},
                      .all = 2, .of_uid = 2};
    struct unix_listener l;
    unix_listener_init(&l, "control", "control", "control", &a, &ops_no_room, &o);
    char msg[160];
    ck_assert_int_eq(admit(&l, OTHER_UID, msg, sizeof msg), -EUSERS);
    ck_assert_str_eq(msg, "too many control connections of uid 65534 "
                          "(control.max_conns_per_uid 2)");
    ck_assert_int_eq(admit(&l, 0, msg, sizeof msg), 0); /* root: the operator */
    o.of_uid = 1;
    ck_assert_int_eq(admit(&l, OTHER_UID, msg, sizeof msg), 0); /* under the cap */
    o.of_uid = 2;
    o.lim.operator_exempt = false; /* the worker socket holds root to the cap too */
    ck_assert_int_eq(admit(&l, 0, msg, sizeof msg), -EUSERS);
    ck_assert_int_eq(l.counters.refused_limit, 2);
    access_done(&a);
}
END_TEST

START_TEST(listener_total_cap_keeps_the_operators_reserve)
{
    struct access a;
    tu_access_load("access.allow_uids: [65534]\n", &a);
    struct owner o = {.lim = {.max_conns = 3, .max_conns_per_uid = 100, .operator_reserve = 2,
                              .operator_exempt = true},
                      .all = 3};
    struct unix_listener l;
    unix_listener_init(&l, "control", "control", "control", &a, &ops_no_room, &o);
    char msg[160];
    ck_assert_int_eq(admit(&l, OTHER_UID, msg, sizeof msg), -EUSERS);
    ck_assert_str_eq(msg, "too many control connections (control.max_conns 3)");
    ck_assert_int_eq(admit(&l, 0, msg, sizeof msg), 0);
    o.all = 4;
    ck_assert_int_eq(admit(&l, 0, msg, sizeof msg), 0);
    o.all = 5; /* max_conns + the reserve */
    ck_assert_int_eq(admit(&l, 0, msg, sizeof msg), -EUSERS);
    ck_assert_str_eq(msg, "too many control connections (control.max_conns 3, and the "
                          "operator's reserve is in use too)");
    access_done(&a);
}
END_TEST

START_TEST(listener_asks_the_owner_for_room_before_refusing)
{
    struct access a;
    tu_access_load("access.allow_uids: [65534]\n", &a);
    struct owner o = {.lim = {.max_conns = 4, .max_conns_per_uid = 2, .no_room = ", all busy"},
                      .all = 4, .of_uid = 2, .room = true};
    struct unix_listener l;
    unix_listener_init(&l, "worker", "workers", "workers", &a, &ops, &o);
    char msg[160];
    /* the per-uid evictee also frees a place under max_conns: one room asked */
    ck_assert_int_eq(admit(&l, OTHER_UID, msg, sizeof msg), 0);
    ck_assert_int_eq(o.rooms_asked, 1);
    ck_assert_str_eq(o.room_key, "workers.max_conns_per_uid");
    o.all = 4;
    o.of_uid = 0;
    ck_assert_int_eq(admit(&l, OTHER_UID, msg, sizeof msg), 0);
    ck_assert_int_eq(o.rooms_asked, 2);
    ck_assert_str_eq(o.room_key, "workers.max_conns");
    o.room = false;
    o.all = 4;
    ck_assert_int_eq(admit(&l, OTHER_UID, msg, sizeof msg), -EUSERS);
    ck_assert_str_eq(msg, "too many worker connections (workers.max_conns 4, all busy)");
    o.of_uid = 2;
    ck_assert_int_eq(admit(&l, OTHER_UID, msg, sizeof msg), -EUSERS);
    ck_assert_str_eq(msg, "too many worker connections of uid 65534 "
                          "(workers.max_conns_per_uid 2, all busy)");
    ck_assert_int_eq(l.counters.refused_limit, 2);
    access_done(&a);
}
END_TEST

static void run_until(uv_loop_t *loop, struct owner *o, int adopted, int refused)
{
    int64_t end = mono_now_ms() + 5000;
    while ((o->adopted < adopted || (refused && !o->refused_msg[0])) && mono_now_ms() < end)
        uv_run(loop, UV_RUN_NOWAIT);
    ck_assert_int_eq(o->adopted, adopted);
}

START_TEST(listener_serves_a_real_socket_with_the_peers_credentials)
{
    struct access a;
    tu_access_load("log.level: info\n", &a);
    char dir[256], path[300];
    tu_tmpdir(dir, sizeof dir);
    tu_sock_path(path, sizeof path, "%s/sub/t.sock", dir); /* the directory is made */
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct owner o = {.lim = {.max_conns = 1, .max_conns_per_uid = 1}};
    struct unix_listener l;
    unix_listener_init(&l, "test", "test", "test", &a, &ops_no_room, &o);
    char err[256];
    ck_assert_msg(unix_listener_start(&l, &loop, path, 0660, 8, err, sizeof err) == 0, "%s", err);
    struct stat st;
    ck_assert_int_eq(stat(path, &st), 0);
    ck_assert_int_eq(st.st_mode & 0777, 0660);
    struct sockaddr_un sa = tu_sun(path);
    int c1 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(connect(c1, (struct sockaddr *)&sa, sizeof sa), 0);
    run_until(&loop, &o, 1, 0);
    ck_assert_int_eq(o.adopted_peer.uid, geteuid());
    ck_assert_int_eq(o.adopted_peer.pid, getpid());
    ck_assert(o.adopted_peer.admin);
    o.all = o.of_uid = 1; /* at both caps; root is not exempt here and has no reserve */
    int c2 = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    ck_assert_int_eq(connect(c2, (struct sockaddr *)&sa, sizeof sa), 0);
    run_until(&loop, &o, 1, 1);
    ck_assert_int_eq(o.refused_err, -EUSERS);
    char got[256] = "";
    ssize_t n = recv(c2, got, sizeof got - 1, 0);
    ck_assert_int_gt(n, 0);
    got[n] = '\0';
    ck_assert_msg(strstr(got, "too many test connections of uid") != NULL, "%s", got);
    ck_assert_int_eq(recv(c2, got, sizeof got, 0), 0); /* and closed */
    close(c1);
    close(c2);
    unix_listener_stop(&l);
    unix_listener_stop(&l); /* idempotent */
    ck_assert_int_ne(access(path, F_OK), 0);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    access_done(&a);
    char cmd[400], out[8];
    ck_assert_int_eq(tu_sh(tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", dir), out, sizeof out), 0);
}
END_TEST

START_TEST(listener_refuses_a_live_socket_path)
{
    struct access a;
    tu_access_load("log.level: info\n", &a);
    char dir[256], path[300];
    tu_tmpdir(dir, sizeof dir);
    tu_sock_path(path, sizeof path, "%s/t.sock", dir);
    uv_loop_t loop;
    ck_assert_int_eq(uv_loop_init(&loop), 0);
    struct owner o = {.lim = {.max_conns = 1, .max_conns_per_uid = 1}};
    struct unix_listener l1, l2;
    unix_listener_init(&l1, "test", "test", "test", &a, &ops_no_room, &o);
    unix_listener_init(&l2, "test", "test", "test", &a, &ops_no_room, &o);
    char err[256];
    ck_assert_msg(unix_listener_start(&l1, &loop, path, 0660, 8, err, sizeof err) == 0, "%s", err);
    ck_assert_int_eq(unix_listener_start(&l2, &loop, path, 0660, 8, err, sizeof err), -EADDRINUSE);
    ck_assert_msg(strstr(err, "another kvferryd is serving it") != NULL, "%s", err);
    ck_assert_int_eq(l2.fd, -1);
    unix_listener_stop(&l2); /* stops nothing: the path is l1's */
    ck_assert_int_eq(access(path, F_OK), 0);
    unix_listener_stop(&l1);
    uv_run(&loop, UV_RUN_DEFAULT);
    ck_assert_int_eq(uv_loop_close(&loop), 0);
    access_done(&a);
    char cmd[400], out[8];
    ck_assert_int_eq(tu_sh(tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", dir), out, sizeof out), 0);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("unix_listener");
    TCase *tc = tcase_create("admission");
    tcase_add_test(tc, listener_refuses_a_peer_access_does_not_allow_before_any_limit);
    tcase_add_test(tc, listener_per_uid_cap_holds_an_ordinary_uid_and_exempts_the_operator_when_asked);
    tcase_add_test(tc, listener_total_cap_keeps_the_operators_reserve);
    tcase_add_test(tc, listener_asks_the_owner_for_room_before_refusing);
    suite_add_tcase(s, tc);
    tc = tcase_create("socket");
    tcase_add_test(tc, listener_serves_a_real_socket_with_the_peers_credentials);
    tcase_add_test(tc, listener_refuses_a_live_socket_path);
    suite_add_tcase(s, tc);
    return s;
}

int main(void) { return tu_run(suite()); }
