/* check_access_live.c: access.* is decided per command, not per connection (issue 25 item 3):
 * a reload that takes away an admin or a uid applies to connections already open, on the
 * control socket (the next mutating command is refused, the next command of a uid no longer
 * allowed is refused and its connection closed) and on the worker socket (the connection of a
 * uid no longer allowed is closed at the reload, told why), while root's keep working. The
 * peer is uid 65534: a forked child connects as it and hands the socket back (SO_PEERCRED is
 * the connecting process's). */
#include <grp.h>
#include <sys/stat.h>

#include "wtest.h"
#include "wraw.h"

#define NOBODY 65534

/* Lets uid 65534 reach the sockets: the test dirs searchable (the sockets' mode is config). */
static void open_dirs(struct wenv *e)
{
    char run[128];
    tu_fmt(run, sizeof run, "%s/run", e->dir);
    ck_assert_int_eq(chmod(e->dir, 0755), 0);
    ck_assert_int_eq(chmod(run, 0755), 0);
}

/* A connection to path made by uid 65534 (a child connects and passes it back). */
static int connect_as_nobody(const char *path)
{
    int sp[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sp), 0);
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        close(sp[0]);
        if (setgroups(0, NULL) < 0 || setgid(NOBODY) < 0 || setuid(NOBODY) < 0)
            _exit(3);
        struct sockaddr_un sa = tu_sun(path);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0)
            _exit(4);
        _exit(fdpass_send(sp[1], "f", 1, &fd, 1, 5000) == 0 ? 0 : 5);
    }
    close(sp[1]);
    char b;
    int fd = -1;
    unsigned n = 0;
    ck_assert_int_eq(fdpass_recv(sp[0], &b, 1, &fd, 1, &n, 0, NULL), 1);
    ck_assert_uint_eq(n, 1);
    close(sp[0]);
    ck_assert_int_eq(wt_wait(p, 5000), 0);
    return fd;
}

/* Writes the config again with `access` and reloads it (as root: always an admin). */
static void reload_with(struct wenv *e, const char *access)
{
    FILE *f = fopen(e->cfg, "w");
    ck_assert_ptr_nonnull(f);
    fprintf(f, "sockets:\n  dir: %s/run\n  mode: 0666\n%s", e->dir, access);
    ck_assert_int_eq(fclose(f), 0);
    json_decref(wt_ctl(e, "reload"));
}

/* One request line and its reply line on fd: the reply's first len - 1 bytes ("" at EOF). */
static void ctl_say(int fd, const char *line, char *reply, size_t len)
{
    (void)!send(fd, line, strlen(line), MSG_NOSIGNAL); /* closed: the EOF is the answer */
    size_t n = 0;
    for (char ch = 0; ch != '\n';) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        ck_assert_msg(poll(&p, 1, (int)tu_ms(5000)) == 1, "no reply to %s", line);
        if (read(fd, &ch, 1) != 1)
            break;
        if (n + 1 < len)
            reply[n++] = ch;
    }
    reply[n] = '\0';
}

static json_int_t stat_of(struct wenv *e, const char *section, const char *key)
{
    json_t *st = wt_ctl(e, "stats");
    json_int_t v = json_integer_value(json_object_get(json_object_get(st, section), key));
    json_decref(st);
    return v;
}

START_TEST(a_reload_revoking_an_admin_or_a_uid_applies_to_an_open_control_connection)
{
    if (geteuid() != 0) {
        printf("SKIP a_reload_revoking_an_admin_or_a_uid_applies_to_an_open_control_connection: "
               "needs root to be uid 65534\n");
        return;
    }
    struct wenv e;
    wt_start(&e, "sockets.mode: 0666\naccess:\n  allow_uids: [65534]\n  admin_uids: [65534]\n");
    open_dirs(&e);
    int fd = connect_as_nobody(e.csock);
    char r[1024];
    ctl_say(fd, "{\"id\":1,\"cmd\":\"log-level\",\"args\":{\"level\":\"info\"}}\n", r, sizeof r);
    ck_assert_msg(strstr(r, "\"ok\":true"), "an admin's setter: %s", r);
    reload_with(&e, "access:\n  allow_uids: [65534]\n  admin_uids: []\n");
    ctl_say(fd, "{\"id\":2,\"cmd\":\"drain\"}\n", r, sizeof r);
    ck_assert_msg(strstr(r, "EPERM") && strstr(r, "not an admin"), "drain after the admin was "
                  "revoked: %s", r);
    ctl_say(fd, "{\"id\":3,\"cmd\":\"status\"}\n", r, sizeof r);
    ck_assert_msg(strstr(r, "\"ok\":true"), "still allowed to read: %.200s", r);
    reload_with(&e, "access:\n  allow_uids: []\n");
    ctl_say(fd, "{\"id\":4,\"cmd\":\"status\"}\n", r, sizeof r);
    ck_assert_msg(strstr(r, "EACCES") && strstr(r, "may no longer use the control socket"),
                  "status after the uid was revoked: %s", r);
    ctl_say(fd, "{\"id\":5,\"cmd\":\"status\"}\n", r, sizeof r); /* closed after that reply */
    ck_assert_str_eq(r, "");
    close(fd);
    json_t *st = wt_ctl(&e, "status");
    ck_assert_str_eq(json_string_value(json_object_get(st, "state")), "running");
    json_decref(st);
    ck_assert_int_eq(stat_of(&e, "control", "refused_not_admin"), 1);
    ck_assert_int_eq(stat_of(&e, "control", "access_revoked"), 1);
    wt_stop(&e);
}
END_TEST

START_TEST(a_reload_revoking_a_uid_closes_its_open_worker_connections)
{
    if (geteuid() != 0) {
        printf("SKIP a_reload_revoking_a_uid_closes_its_open_worker_connections: needs root to "
               "be uid 65534\n");
        return;
    }
    struct wenv e;
    wt_start(&e, "sockets.mode: 0666\naccess:\n  allow_uids: [65534]\n");
    open_dirs(&e);
    int idle = connect_as_nobody(e.wsock); /* no HELLO yet */
    int hello = raw_hello_on(connect_as_nobody(e.wsock));
    int mine = raw_hello(&e); /* root's */
    reload_with(&e, "access:\n  allow_uids: [65534]\n  admin_uids: []\n"); /* no change of theirs */
    struct proto_msg ping = {.type = PROTO_PING};
    raw_send_msg(hello, &ping, NULL, 0);
    ck_assert_uint_eq(raw_next(hello, NULL, 0), PROTO_PONG);
    reload_with(&e, "access:\n  allow_uids: []\n");
    expect_error_close(hello, "may no longer use the worker socket");
    expect_error_close(idle, "may no longer use the worker socket");
    raw_send_msg(mine, &ping, NULL, 0);
    ck_assert_uint_eq(raw_next(mine, NULL, 0), PROTO_PONG);
    close(mine);
    ck_assert_int_eq(stat_of(&e, "workers", "access_revoked"), 2);
    wt_stop(&e);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("access_live");
    TCase *tc = tcase_create("reload");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_reload_revoking_an_admin_or_a_uid_applies_to_an_open_control_connection);
    tcase_add_test(tc, a_reload_revoking_a_uid_closes_its_open_worker_connections);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
