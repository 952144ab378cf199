/* check_sockgroup.c: sockets.group hands both sockets (mode 0660) and the socket directory the
 * daemon made to a group, so that a non-root user whose group it is connects and is allowed
 * (the group counts as listed in access.allow_gids), while a user outside it is refused by the
 * file system. Needs root (to chgrp to any gid and to drop to uid 65534 in a child). */
#include "daemon_harness.h"

#define GROUP 54321
#define NOBODY 65534

#define NO_GROUP ((gid_t)-1)

/* A child as uid 65534 with primary group gid and the one supplementary group supp (or none:
 * NO_GROUP) connects to `sock` and asks for status: 0 when the daemon answers ok, 4 when connect
 * fails with EACCES. */
static int status_as(const struct dh *h, const char *sock, gid_t gid, gid_t supp)
{
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        gid_t g[1] = {supp};
        if (setgroups(supp == NO_GROUP ? 0 : 1, g) < 0 || setgid(gid) < 0 || setuid(NOBODY) < 0)
            _exit(3);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
            _exit(errno == EACCES ? 4 : 5);
        if (strcmp(sock, h->sock) != 0)
            _exit(0); /* the worker socket: reaching it is the point */
        const char *line = "{\"id\":1,\"cmd\":\"status\"}\n";
        char buf[1024];
        if (send(fd, line, strlen(line), MSG_NOSIGNAL) < 0)
            _exit(6);
        int n = dh_read_line(fd, buf, sizeof(buf), 5000);
        _exit(n > 0 && strstr(buf, "\"ok\":true") ? 0 : 1);
    }
    int st;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

START_TEST(sockets_group_owns_sockets_and_its_members_connect_others_do_not)
{
    if (geteuid() != 0) {
        printf("SKIP sockets_group_owns_sockets_and_its_members_connect_others_do_not: needs "
               "root\n");
        return;
    }
    struct dh h;
    char extra[64], run[128], worker[128];
    snprintf(extra, sizeof(extra), "sockets.group: \"%d\"\n", GROUP);
    dh_start(&h, extra);
    ck_assert_int_eq(chmod(h.dir, 0711), 0); /* the test's own directory: let others through */
    tu_fmt(run, sizeof(run), "%s/run", h.dir);
    tu_fmt(worker, sizeof(worker), "%s/run/worker.sock", h.dir);

    struct stat st;
    ck_assert_int_eq(stat(h.sock, &st), 0);
    ck_assert_uint_eq(st.st_gid, GROUP);
    ck_assert_uint_eq(st.st_mode & 0777, 0660);
    ck_assert_int_eq(stat(worker, &st), 0);
    ck_assert_uint_eq(st.st_gid, GROUP);
    ck_assert_uint_eq(st.st_mode & 0777, 0660);
    ck_assert_int_eq(stat(run, &st), 0);
    ck_assert_uint_eq(st.st_gid, GROUP);
    ck_assert_uint_eq(st.st_mode & 0070, 0050); /* 0750: the group may enter, not write */

    ck_assert_int_eq(status_as(&h, h.sock, GROUP, NO_GROUP),
                     0); /* a member: connects and is allowed */
    ck_assert_int_eq(status_as(&h, worker, GROUP, NO_GROUP), 0);
    ck_assert_int_eq(status_as(&h, h.sock, NOBODY, NO_GROUP), 4); /* not a member: EACCES */
    ck_assert_int_eq(status_as(&h, worker, NOBODY, NO_GROUP), 4);
    /* a member by a supplementary group the process runs with (a unit's SupplementaryGroups=),
     * which the group database does not list: the file system and access.* both let it in */
    ck_assert_int_eq(status_as(&h, h.sock, NOBODY, GROUP), 0);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

/* Without sockets.group the sockets keep the daemon's own group (root's here), and its members
 * are allowed too: what the mode lets in, access.* does not turn away. */
START_TEST(without_sockets_group_the_daemons_own_group_is_allowed)
{
    if (geteuid() != 0) {
        printf("SKIP without_sockets_group_the_daemons_own_group_is_allowed: needs root\n");
        return;
    }
    struct dh h;
    dh_start(&h, NULL);
    char run[128];
    tu_fmt(run, sizeof(run), "%s/run", h.dir);
    ck_assert_int_eq(chmod(h.dir, 0711), 0);
    ck_assert_int_eq(chmod(run, 0750), 0);
    struct stat st;
    ck_assert_int_eq(stat(h.sock, &st), 0);
    ck_assert_uint_eq(st.st_gid, getegid());
    ck_assert_int_eq(status_as(&h, h.sock, getegid(), NO_GROUP), 0);
    ck_assert_int_eq(status_as(&h, h.sock, NOBODY, NO_GROUP), 4);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(sockets_group_unknown_name_fails_check_config_with_the_key)
{
    char dir[64], path[128], cmd[512], out[4096], bin[256];
    tu_tmpdir(dir, sizeof(dir));
    tu_fmt(path, sizeof(path), "%s/k.yaml", dir);
    tu_bin("kvferryd", bin, sizeof(bin));
    dh_write_file(path, "sockets:\n  group: no-such-group-kvf\n");
    tu_fmt(cmd, sizeof(cmd), "%s --check-config %s 2>&1", bin, path);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 1);
    ck_assert_msg(strstr(out, "sockets.group: unknown group 'no-such-group-kvf'"), "%s", out);
    tu_fmt(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    (void)!system(cmd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("sockgroup");
    TCase *t = tcase_create("sockgroup");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, sockets_group_owns_sockets_and_its_members_connect_others_do_not);
    tcase_add_test(t, without_sockets_group_the_daemons_own_group_is_allowed);
    tcase_add_test(t, sockets_group_unknown_name_fails_check_config_with_the_key);
    suite_add_tcase(s, t);
    return tu_run(s);
}
