/* check_connect_why.c: kvf_connect's err names what is wrong with the socket path, not only the
 * errno: a directory, a regular file, nothing there, a stale socket nobody listens on, and (as
 * uid 65534, when the test runs as root) a directory it cannot search or a 0660 socket whose
 * group it is not in, with the mode and owner. Real sockets, real kvf_connect. */
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "kvferry.h"
#include "testutil.h"

#define NOBODY 65534

/* kvf_connect(path) once, without reconnecting: its err (the call must fail). */
static void connect_err(const char *path, char *why, size_t len)
{
    struct kvf_options o = {.no_reconnect = 1, .err = why, .errlen = len};
    struct kvf_client *c = NULL;
    snprintf(why, len, "no err");
    ck_assert_int_lt(kvf_connect(path, &o, &c), 0);
    ck_assert_ptr_null(c);
}

/* A unix socket bound at path (listening when listen_too), mode mode. Returns its fd. */
static int bound(const char *path, int listen_too, mode_t mode)
{
    struct sockaddr_un sa = tu_sun(path);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    ck_assert_int_ge(s, 0);
    ck_assert_int_eq(bind(s, (struct sockaddr *)&sa, sizeof sa), 0);
    if (listen_too)
        ck_assert_int_eq(listen(s, 4), 0);
    ck_assert_int_eq(chmod(path, mode), 0);
    return s;
}

START_TEST(kvf_connect_names_a_directory_a_file_nothing_and_a_stale_socket)
{
    char dir[64], p[128], why[KVF_MESSAGE_MAX], cmd[128];
    tu_tmpdir(dir, sizeof dir);
    connect_err(dir, why, sizeof why);
    ck_assert_msg(strstr(why, "is a directory, not a socket"), "%s", why);
    tu_fmt(p, sizeof p, "%s/kvferry.yaml", dir);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fclose(f);
    connect_err(p, why, sizeof why);
    ck_assert_msg(strstr(why, "is a regular file, not a socket"), "%s", why);
    tu_fmt(p, sizeof p, "%s/none/worker.sock", dir);
    connect_err(p, why, sizeof why);
    ck_assert_msg(strstr(why, "nothing is at") && strstr(why, "not running"), "%s", why);
    tu_fmt(p, sizeof p, "%s/stale.sock", dir);
    close(bound(p, 0, 0660)); /* what a dead daemon leaves */
    connect_err(p, why, sizeof why);
    ck_assert_msg(strstr(why, "Connection refused") && strstr(why, "nobody listens"), "%s", why);
    tu_sh(tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", dir), why, sizeof why);
}
END_TEST

/* As uid 65534 in a child: kvf_connect(path)'s err, read back through a pipe. */
static void nobody_err(const char *path, char *why, size_t len)
{
    int pfd[2];
    ck_assert_int_eq(pipe(pfd), 0);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        char e[KVF_MESSAGE_MAX] = "setuid failed";
        struct kvf_options o = {.no_reconnect = 1, .err = e, .errlen = sizeof e};
        struct kvf_client *c = NULL;
        if (setgroups(0, NULL) == 0 && setgid(NOBODY) == 0 && setuid(NOBODY) == 0)
            kvf_connect(path, &o, &c);
        dprintf(pfd[1], "%s", e);
        _exit(0);
    }
    close(pfd[1]);
    ssize_t n = read(pfd[0], why, len - 1);
    why[n > 0 ? n : 0] = '\0';
    close(pfd[0]);
    waitpid(pid, NULL, 0);
}

START_TEST(kvf_connect_names_the_mode_and_group_that_keep_a_user_out)
{
    if (geteuid() != 0) {
        printf("SKIP kvf_connect_names_the_mode_and_group_that_keep_a_user_out: needs root to "
               "become uid 65534\n");
        return;
    }
    char dir[64], p[128], why[KVF_MESSAGE_MAX], cmd[128];
    tu_tmpdir(dir, sizeof dir); /* 0700 root: uid 65534 cannot search it */
    tu_fmt(p, sizeof p, "%s/worker.sock", dir);
    int s = bound(p, 1, 0660);
    nobody_err(p, why, sizeof why);
    ck_assert_msg(strstr(why, "Permission denied") && strstr(why, "cannot be searched") &&
                      strstr(why, dir) && strstr(why, "mode 0700"),
                  "%s", why);
    ck_assert_int_eq(chmod(dir, 0755), 0); /* now the socket's own 0660 root:root is in the way */
    nobody_err(p, why, sizeof why);
    ck_assert_msg(strstr(why, "does not let you in") && strstr(why, "mode 0660") &&
                      strstr(why, "you are uid 65534, not in its group") &&
                      strstr(why, "sockets.group"),
                  "%s", why);
    close(s);
    tu_sh(tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", dir), why, sizeof why);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("connect_why");
    TCase *t = tcase_create("why");
    tcase_add_test(t, kvf_connect_names_a_directory_a_file_nothing_and_a_stale_socket);
    tcase_add_test(t, kvf_connect_names_the_mode_and_group_that_keep_a_user_out);
    suite_add_tcase(s, t);
    return tu_run(s);
}
