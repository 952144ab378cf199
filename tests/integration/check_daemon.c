/* check_daemon.c: the real build/kvferryd and build/kvferryctl: systemd notify protocol, reload,
 * drain, peer checks and limits of the control socket, --check-config, valgrind. */
#include <grp.h>
#include <jansson.h>

#include "daemon_harness.h"

static json_t *result_of(json_t *reply)
{
    ck_assert_ptr_nonnull(reply);
    ck_assert_msg(json_is_true(json_object_get(reply, "ok")), "reply not ok: %s",
                  json_string_value(json_object_get(reply, "message")));
    return json_object_get(reply, "result");
}

START_TEST(daemon_sends_ready_with_status_and_kvferryctl_status_answers)
{
    struct dh h;
    dh_start(&h, NULL);
    ck_assert_ptr_nonnull(strstr(h.notes, "STATUS="));
    char cmd[512], out[65536], bin[256]; /* stats grow: a short read would SIGPIPE kvferryctl */
    tu_fmt(cmd, sizeof(cmd), "%s --socket %s status 2>&1", tu_bin("kvferryctl", bin, sizeof(bin)),
           h.sock);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 0);
    /* the short form's first line: "kvferryd  <version>  <state> ..." (not the word "version":
     * CPU mode's reason line can hold it, a GPU host's does not) */
    ck_assert_msg(strstr(out, "kvferryd") && strstr(out, KVF_VERSION), "status: %s", out);
    ck_assert_ptr_nonnull(strstr(out, " up ")); /* the short form; -l has uptime_s */
    /* --json is parseable and carries the pid of the daemon we started */
    tu_fmt(cmd, sizeof(cmd), "%s --socket %s --json status", bin, h.sock);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 0);
    json_t *j = json_loads(out, 0, NULL);
    ck_assert_ptr_nonnull(j);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "pid")), h.pid);
    json_decref(j);
    /* --config finds the same socket through cfg_control_path */
    tu_fmt(cmd, sizeof(cmd), "%s --config %s stats", bin, h.cfg);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 0);
    ck_assert_ptr_nonnull(strstr(out, "connections_accepted"));
    /* a daemon error: exit 1 and the daemon's message on stderr */
    tu_fmt(cmd, sizeof(cmd), "%s --socket %s log-level loud 2>&1 >/dev/null", bin, h.sock);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 1);
    ck_assert_ptr_nonnull(strstr(out, "unknown log level"));
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(kvferryctl_times_out_on_a_silent_socket_and_fails_without_daemon)
{
    char dir[64], path[100], cmd[512], out[2048], bin[256];
    tu_tmpdir(dir, sizeof(dir));
    tu_fmt(path, sizeof(path), "%s/silent.sock", dir);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = tu_sun(path);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(listen(fd, 4), 0); /* connects succeed, nobody ever answers */
    tu_bin("kvferryctl", bin, sizeof(bin));
    tu_fmt(cmd, sizeof(cmd), "%s --socket %s --timeout 0.3 status 2>&1", bin, path);
    int64_t t0 = dh_now_ms();
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 3);
    ck_assert_int_lt(dh_now_ms() - t0, 3000);
    ck_assert_ptr_nonnull(strstr(out, "timeout"));
    close(fd);
    tu_fmt(cmd, sizeof(cmd), "%s --socket %s/none.sock status 2>&1", bin, dir);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 3);
    tu_fmt(cmd, sizeof(cmd), "%s 2>&1", bin);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 2);
    tu_fmt(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    (void)!system(cmd);
}
END_TEST

static bool log_has(const struct dh *h, const char *needle)
{
    char cmd[256], out[16384];
    tu_fmt(cmd, sizeof(cmd), "cat %s", h->log);
    dh_sh(cmd, out, sizeof(out));
    return strstr(out, needle) != NULL;
}

START_TEST(daemon_log_level_set_at_run_time_changes_what_is_logged)
{
    struct dh h;
    dh_start(&h, NULL);
    json_t *r = dh_call(&h, "{\"id\":1,\"cmd\":\"status\"}");
    result_of(r);
    json_decref(r);
    ck_assert(!log_has(&h, "debug: control: pid"));
    char cmd[512], out[1024], bin[256];
    tu_fmt(cmd, sizeof(cmd), "%s --socket %s log-level debug",
           tu_bin("kvferryctl", bin, sizeof(bin)), h.sock);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 0);
    r = dh_call(&h, "{\"id\":2,\"cmd\":\"status\"}");
    ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "log_level")), "debug");
    json_decref(r);
    for (int64_t end = dh_now_ms() + 5000; !log_has(&h, "debug: control: pid");) {
        ck_assert_msg(dh_now_ms() < end, "no debug line in %s", h.log);
        usleep(10000);
    }
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

/* _i == 0: SIGTERM, 1: SIGINT (both drain and exit 0) */
START_TEST(daemon_sigterm_sends_stopping_exits_zero_and_removes_socket)
{
    struct dh h;
    dh_start(&h, NULL);
    kill(h.pid, _i ? SIGINT : SIGTERM);
    ck_assert(dh_wait_notify(&h, "STOPPING=1", 5000));
    ck_assert_int_eq(dh_wait_exit(&h, 10000), 0);
    ck_assert_int_ne(access(h.sock, F_OK), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_drain_command_stops_it_with_exit_zero)
{
    struct dh h;
    dh_start(&h, NULL);
    json_t *r = dh_call(&h, "{\"id\":1,\"cmd\":\"drain\"}");
    ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "state")), "draining");
    json_decref(r);
    ck_assert(dh_wait_notify(&h, "STOPPING=1", 5000));
    ck_assert_int_eq(dh_wait_exit(&h, 10000), 0);
    dh_cleanup(&h);
}
END_TEST

static json_t *wait_reload(struct dh *h, int64_t after_s)
{
    for (int i = 0; i < 500; i++) {
        json_t *r = dh_call(h, "{\"id\":1,\"cmd\":\"status\"}");
        json_t *lr = json_object_get(result_of(r), "last_reload");
        if (json_is_true(json_object_get(lr, "attempted")) &&
            json_integer_value(json_object_get(lr, "time_s")) >= after_s) {
            json_incref(lr);
            json_decref(r);
            return lr;
        }
        json_decref(r);
        usleep(10000);
    }
    ck_abort_msg("reload never reported in status");
    return NULL;
}

START_TEST(daemon_sighup_with_broken_config_keeps_old_and_status_shows_file_line_col)
{
    struct dh h;
    dh_start(&h, "control.max_conns: 20\n");
    dh_config(&h, "control.max_conns: 30\ncontrol.no_such_key: 1\n");
    int64_t t0 = (int64_t)time(NULL);
    kill(h.pid, SIGHUP);
    ck_assert(dh_wait_notify(&h, "RELOADING=1", 5000));
    ck_assert_ptr_nonnull(strstr(h.notes, "MONOTONIC_USEC="));
    json_t *lr = wait_reload(&h, t0);
    ck_assert(json_is_false(json_object_get(lr, "ok")));
    const char *err = json_string_value(json_object_get(lr, "error"));
    ck_assert_ptr_nonnull(err);
    char want[200];
    tu_fmt(want, sizeof(want), "%s:3:1:", h.cfg); /* file:line:col of the unknown key */
    ck_assert_msg(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
    json_decref(lr);
    /* the old value is still in force */
    json_t *r = dh_call(&h, "{\"id\":2,\"cmd\":\"status\"}");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(result_of(r), "control"), "max_conns")),
        20);
    json_decref(r);
    r = dh_call(&h, "{\"id\":3,\"cmd\":\"stats\"}");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(result_of(r), "daemon"),
                                                        "reloads_failed")),
                     1);
    json_decref(r);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_reload_with_unknown_access_user_keeps_old_config)
{
    struct dh h;
    dh_start(&h, NULL);
    dh_config(&h, "control.max_conns: 30\naccess.allow_uids: [no-such-user-kvf]\n");
    json_t *r = dh_call(&h, "{\"id\":1,\"cmd\":\"reload\"}");
    ck_assert_ptr_nonnull(r);
    ck_assert(json_is_false(json_object_get(r, "ok")));
    ck_assert_ptr_nonnull(
        strstr(json_string_value(json_object_get(r, "message")), "no-such-user-kvf"));
    json_decref(r);
    r = dh_call(&h, "{\"id\":2,\"cmd\":\"status\"}");
    json_t *res = result_of(r);
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(res, "control"), "max_conns")), 64);
    ck_assert(json_is_false(json_object_get(json_object_get(res, "last_reload"), "ok")));
    json_decref(r);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_good_reload_changes_live_key_and_reports_restart_keys)
{
    struct dh h;
    dh_start(&h, "control.max_conns: 20\n");
    dh_config(&h, "control.max_conns: 30\nworkers.max_conns: 100\n");
    int64_t t0 = (int64_t)time(NULL);
    kill(h.pid, SIGHUP);
    json_t *lr = wait_reload(&h, t0);
    ck_assert(json_is_true(json_object_get(lr, "ok")));
    char *s = json_dumps(lr, JSON_COMPACT);
    ck_assert_msg(strstr(s, "\"applied\":[\"control.max_conns\"]") != NULL, "%s", s);
    ck_assert_msg(strstr(s, "\"restart_needed\":[\"workers.max_conns\"]") != NULL, "%s", s);
    free(s);
    json_decref(lr);
    json_t *r = dh_call(&h, "{\"id\":2,\"cmd\":\"status\"}");
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(result_of(r), "control"), "max_conns")),
        30);
    json_decref(r);
    /* the reload command does the same and answers the report */
    dh_config(&h, "control.max_conns: 40\nlog.level: debug\n");
    r = dh_call(&h, "{\"id\":3,\"cmd\":\"reload\"}");
    s = json_dumps(result_of(r), JSON_COMPACT);
    ck_assert_msg(strstr(s, "control.max_conns") && strstr(s, "log.level"), "%s", s);
    free(s);
    json_decref(r);
    r = dh_call(&h, "{\"id\":4,\"cmd\":\"log-level\"}");
    ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "level")), "debug");
    json_decref(r);
    ck_assert(dh_wait_notify(&h, "READY=1", 100));
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_watchdog_sends_watchdog_when_watchdog_usec_is_set)
{
    struct dh h;
    dh_start_full(&h, NULL, "200000", NULL, 10000);
    int64_t t0 = dh_now_ms();
    ck_assert(dh_wait_notify(&h, "WATCHDOG=1", 2000));
    ck_assert_int_lt(dh_now_ms() - t0, 2000);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_no_watchdog_without_watchdog_usec)
{
    struct dh h;
    dh_start(&h, NULL);
    ck_assert(!dh_wait_notify(&h, "WATCHDOG=1", 500));
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

/* Opens connections until refused; returns how many were served. */
static int open_until_refused(struct dh *h, int *fds, int max, char *refusal, size_t len)
{
    for (int i = 0; i < max; i++) {
        int fd = dh_connect(h);
        ck_assert_int_ge(fd, 0);
        json_t *r = dh_call_fd(fd, "{\"id\":1,\"cmd\":\"status\"}");
        ck_assert_ptr_nonnull(r);
        if (json_is_true(json_object_get(r, "ok"))) {
            fds[i] = fd;
            json_decref(r);
            continue;
        }
        snprintf(refusal, len, "%s", json_string_value(json_object_get(r, "error")));
        json_decref(r);
        char buf[64];
        int rc = dh_read_line(fd, buf, sizeof(buf), 2000); /* then closed (reset: unread input) */
        ck_assert_msg(rc == 0 || rc == -ECONNRESET, "not closed: %d", rc);
        close(fd);
        return i;
    }
    return max;
}

/* Root (the tests' uid) is the operator: exempt from the per-uid cap, so a user cannot lock it
 * out (an ordinary uid's refusal: check_worker_sockets, control_ordinary_user_cannot_lock_root_out). */
START_TEST(daemon_exempts_root_from_max_conns_per_uid)
{
    struct dh h;
    int fds[8];
    char err[32] = "";
    dh_start(&h, "control.max_conns_per_uid: 2\n");
    ck_assert_int_eq(open_until_refused(&h, fds, 8, err, sizeof(err)), 8);
    ck_assert_str_eq(err, "");
    int fd = dh_connect(&h);
    json_t *r = dh_call_fd(fd, "{\"id\":1,\"cmd\":\"stats\"}");
    json_t *c = json_object_get(result_of(r), "control");
    ck_assert_int_eq(json_integer_value(json_object_get(c, "connections_refused_limit")), 0);
    json_decref(r);
    close(fd);
    for (int i = 0; i < 8; i++)
        close(fds[i]);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_refuses_connections_over_max_conns_total)
{
    struct dh h;
    int fds[16];
    char err[32] = "";
    dh_start(&h, "control.max_conns: 3\ncontrol.max_conns_per_uid: 3\n");
    int n = open_until_refused(&h, fds, 16, err, sizeof(err));
    ck_assert_int_eq(n, 3 + 8); /* root keeps 8 connections past control.max_conns */
    ck_assert_str_eq(err, "EUSERS");
    for (int i = 0; i < n; i++)
        close(fds[i]);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_closes_idle_connection_after_idle_timeout)
{
    struct dh h;
    dh_start(&h, "control.idle_timeout: 1s\n");
    int fd = dh_connect(&h);
    ck_assert_int_ge(fd, 0);
    int64_t t0 = dh_now_ms();
    char buf[512];
    ck_assert_int_gt(dh_read_line(fd, buf, sizeof(buf), 10000), 0);
    int64_t waited = dh_now_ms() - t0;
    ck_assert_ptr_nonnull(strstr(buf, "ETIMEDOUT"));
    ck_assert_int_ge(waited, 900);
    ck_assert_int_lt(waited, 6000); /* 1 s, with room for a loaded 2-core CI machine */
    ck_assert_int_eq(dh_read_line(fd, buf, sizeof(buf), 2000), 0);
    close(fd);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_ten_mib_line_does_not_hurt_other_clients)
{
    struct dh h;
    dh_start(&h, NULL); /* control.max_line 1MiB */
    int other = dh_connect(&h);
    ck_assert_int_ge(other, 0);
    int started[2];
    ck_assert_int_eq(pipe(started), 0);
    pid_t child = fork();
    ck_assert_int_ge(child, 0);
    if (child == 0) {
        int fd = dh_connect(&h);
        size_t total = 10u << 20, sent = 0;
        char *big = malloc(1 << 20);
        memset(big, 'a', 1 << 20);
        while (sent < total) {
            ssize_t w = send(fd, big, 1 << 20, MSG_NOSIGNAL);
            if (w <= 0)
                break;
            if (sent == 0 && write(started[1], "s", 1) != 1)
                _exit(2);
            sent += (size_t)w;
        }
        char buf[512];
        int n = dh_read_line(fd, buf, sizeof(buf), 5000);
        _exit(n > 0 && strstr(buf, "E2BIG") ? 0 : 1);
    }
    char one;
    close(started[1]);
    ck_assert_int_eq(read(started[0], &one, 1), 1); /* the big line is on its way */
    close(started[0]);
    for (int i = 0; i < 5; i++) {
        int64_t t0 = dh_now_ms();
        json_t *r = dh_call_fd(other, "{\"id\":1,\"cmd\":\"status\"}");
        result_of(r);
        json_decref(r);
        ck_assert_int_lt(dh_now_ms() - t0, 1500); /* ~30 us unloaded; the bound allows CI load */
    }
    int st;
    ck_assert_int_eq(waitpid(child, &st, 0), child);
    ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the big sender got no E2BIG reply");
    json_t *r = dh_call_fd(other, "{\"id\":2,\"cmd\":\"stats\"}");
    json_t *c = json_object_get(result_of(r), "control");
    ck_assert_int_eq(json_integer_value(json_object_get(c, "lines_too_long")), 1);
    json_decref(r);
    close(other);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

/* Forks a child that drops to uid/gid 65534, connects, sends `line` and exits 0 when the reply
 * contains `want`. */
static int as_nobody(struct dh *h, const char *line, const char *want)
{
    pid_t p = fork();
    ck_assert_int_ge(p, 0);
    if (p == 0) {
        if (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0)
            _exit(3);
        int fd = dh_connect(h);
        if (fd < 0)
            _exit(4);
        char buf[1024];
        if (line &&
            (send(fd, line, strlen(line), MSG_NOSIGNAL) < 0 || send(fd, "\n", 1, MSG_NOSIGNAL) < 0))
            _exit(5);
        int n = dh_read_line(fd, buf, sizeof(buf), 5000);
        _exit(n > 0 && strstr(buf, want) ? 0 : 1);
    }
    int st;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The socket must be reachable by uid 65534 at the file system level, so the refusal we see is
 * the daemon's. */
static void open_up(struct dh *h)
{
    char run[128];
    tu_fmt(run, sizeof(run), "%s/run", h->dir);
    ck_assert_int_eq(chmod(h->dir, 0755), 0);
    ck_assert_int_eq(chmod(run, 0755), 0);
}

START_TEST(daemon_refuses_uid_not_allowed)
{
    if (geteuid() != 0) {
        printf("SKIP daemon_refuses_uid_not_allowed: needs root to setuid(65534)\n");
        return;
    }
    struct dh h;
    dh_start(&h, "sockets.mode: 0666\n");
    open_up(&h);
    ck_assert_int_eq(as_nobody(&h, NULL, "EACCES"), 0);
    json_t *r = dh_call(&h, "{\"id\":1,\"cmd\":\"stats\"}");
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(result_of(r), "control"),
                                                        "connections_refused_access")),
                     1);
    json_decref(r);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_allowed_non_admin_reads_but_mutating_command_refused)
{
    if (geteuid() != 0) {
        printf("SKIP daemon_allowed_non_admin_reads_but_mutating_command_refused: needs root\n");
        return;
    }
    struct dh h;
    dh_start(&h, "sockets.mode: 0666\naccess.allow_uids: [65534]\n");
    open_up(&h);
    ck_assert_int_eq(as_nobody(&h, "{\"id\":1,\"cmd\":\"status\"}", "\"ok\":true"), 0);
    ck_assert_int_eq(as_nobody(&h, "{\"id\":2,\"cmd\":\"drain\"}", "EPERM"), 0);
    ck_assert_int_eq(
        as_nobody(&h, "{\"id\":3,\"cmd\":\"log-level\",\"args\":{\"level\":\"debug\"}}", "EPERM"),
        0);
    json_t *r = dh_call(&h, "{\"id\":4,\"cmd\":\"status\"}");
    ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "state")), "running");
    ck_assert_str_eq(json_string_value(json_object_get(result_of(r), "log_level")), "info");
    json_decref(r);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_check_config_exits_0_for_good_and_1_with_position_for_bad)
{
    char dir[64], path[128], cmd[512], out[4096], bin[256];
    tu_tmpdir(dir, sizeof(dir));
    tu_fmt(path, sizeof(path), "%s/k.yaml", dir);
    tu_bin("kvferryd", bin, sizeof(bin));
    dh_write_file(path, "control:\n  max_conns: 20\n");
    tu_fmt(cmd, sizeof(cmd), "%s --check-config %s 2>&1", bin, path);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 0);
    dh_write_file(path, "control:\n  max_conns: many\n");
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 1);
    char want[160];
    tu_fmt(want, sizeof(want), "%s:2:", path);
    ck_assert_msg(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
    dh_write_file(path, "access.allow_uids: [no-such-user-kvf]\n");
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 1);
    ck_assert_ptr_nonnull(strstr(out, "no-such-user-kvf"));
    tu_fmt(cmd, sizeof(cmd), "%s --check-config %s/missing.yaml 2>&1", bin, dir);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 1);
    tu_fmt(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    (void)!system(cmd);
}
END_TEST

START_TEST(daemon_print_config_shows_effective_values_and_round_trips)
{
    char dir[64], path[128], out_path[160], cmd[512], out[16384], bin[256];
    tu_tmpdir(dir, sizeof(dir));
    tu_fmt(path, sizeof(path), "%s/k.yaml", dir);
    tu_fmt(out_path, sizeof(out_path), "%s/printed.yaml", dir);
    tu_bin("kvferryd", bin, sizeof(bin));
    dh_write_file(path, "control.idle_timeout: 42s\n");
    tu_fmt(cmd, sizeof(cmd), "%s --config %s --print-config", bin, path);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 0);
    ck_assert_msg(strstr(out, "idle_timeout: 42s") != NULL, "%s", out);
    ck_assert_ptr_nonnull(strstr(out, "max_conns_per_uid"));
    dh_write_file(out_path, out);
    tu_fmt(cmd, sizeof(cmd), "%s --check-config %s 2>&1", bin, out_path);
    ck_assert_msg(dh_sh(cmd, out, sizeof(out)) == 0, "printed config does not load: %s", out);
    tu_fmt(cmd, sizeof(cmd), "%s --version", bin);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 0);
    ck_assert_ptr_nonnull(strstr(out, KVF_VERSION));
    tu_fmt(cmd, sizeof(cmd), "%s --no-such-option 2>&1", bin);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 2);
    tu_fmt(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    (void)!system(cmd);
}
END_TEST

START_TEST(daemon_startup_failure_is_fatal_before_ready)
{
    struct dh h;
    dh_start(&h, NULL);
    /* a second daemon on the same socket must refuse to start, non-zero, with no READY=1 */
    char cmd[512], out[4096], bin[256];
    tu_fmt(cmd, sizeof(cmd), "env -u NOTIFY_SOCKET %s --config %s 2>&1",
           tu_bin("kvferryd", bin, sizeof(bin)), h.cfg);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 1);
    ck_assert_ptr_nonnull(strstr(out, "another kvferryd"));
    /* the first one still serves */
    json_t *r = dh_call(&h, "{\"id\":1,\"cmd\":\"status\"}");
    result_of(r);
    json_decref(r);
    ck_assert_int_eq(dh_stop(&h), 0);
    dh_cleanup(&h);
}
END_TEST

START_TEST(daemon_under_valgrind_answers_and_exits_clean)
{
    if (system("command -v valgrind >/dev/null 2>&1") != 0) {
        printf("SKIP daemon_under_valgrind_answers_and_exits_clean: valgrind not installed\n");
        return;
    }
    char probe[512], probe_out[256], pbin[256];
    tu_fmt(probe, sizeof(probe), "ldd %s | grep -cE 'libasan|libtsan'",
           tu_bin("kvferryd", pbin, sizeof(pbin)));
    if (dh_sh(probe, probe_out, sizeof(probe_out)) == 0) {
        printf("SKIP daemon_under_valgrind_answers_and_exits_clean: kvferryd is built with ASan or "
               "TSan, which valgrind cannot run\n");
        return;
    }
    static const char *const vg[] = {"valgrind",
                                     "--leak-check=full",
                                     "--show-leak-kinds=definite,indirect",
                                     "--errors-for-leak-kinds=definite,indirect",
                                     "--error-exitcode=1",
                                     NULL};
    struct dh h;
    dh_start_full(&h, NULL, NULL, vg, 60000);
    char cmd[512], out[8192], bin[256];
    tu_fmt(cmd, sizeof(cmd), "%s --json --timeout 20 --socket %s status 2>&1",
           tu_bin("kvferryctl", bin, sizeof(bin)), h.sock);
    ck_assert_int_eq(dh_sh(cmd, out, sizeof(out)), 0);
    /* the JSON key: the human view names no "version" (a CPU-mode reason text once did) */
    ck_assert_ptr_nonnull(strstr(out, "\"version\""));
    /* exercise reload and a refused long line too, so their paths are checked for leaks */
    kill(h.pid, SIGHUP);
    ck_assert(dh_wait_notify(&h, "RELOADING=1", 20000));
    /* error paths too: malformed JSON, an unknown command, a non-object */
    int fd = dh_connect(&h);
    ck_assert_int_ge(fd, 0);
    const char *bad[] = {"garbage", "{\"id\":1,\"cmd\":\"nope\"}", "[1]"};
    for (size_t i = 0; i < 3; i++) {
        json_t *r = dh_call_fd(fd, bad[i]);
        ck_assert_ptr_nonnull(r);
        ck_assert(json_is_false(json_object_get(r, "ok")));
        json_decref(r);
    }
    close(fd);
    fd = dh_connect(&h);
    ck_assert_int_ge(fd, 0);
    static char big[2 << 20];
    memset(big, 'x', sizeof(big));
    (void)!send(fd, big, sizeof(big), MSG_NOSIGNAL);
    char line[512];
    ck_assert_int_gt(dh_read_line(fd, line, sizeof(line), 20000), 0);
    ck_assert_ptr_nonnull(strstr(line, "E2BIG"));
    close(fd);
    int rc = dh_stop(&h);
    tu_fmt(cmd, sizeof(cmd), "cat %s", h.log);
    dh_sh(cmd, out, sizeof(out));
    if (rc != 0)
        printf("%s\n", out);
    ck_assert_int_eq(rc, 0);
    ck_assert_msg(strstr(out, "ERROR SUMMARY: 0 errors") != NULL, "valgrind did not report");
    dh_cleanup(&h);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("daemon");
    TCase *life = tcase_create("lifecycle");
    tcase_set_timeout(life, 60);
    tcase_add_test(life, daemon_sends_ready_with_status_and_kvferryctl_status_answers);
    tcase_add_loop_test(life, daemon_sigterm_sends_stopping_exits_zero_and_removes_socket, 0, 2);
    tcase_add_test(life, daemon_log_level_set_at_run_time_changes_what_is_logged);
    tcase_add_test(life, kvferryctl_times_out_on_a_silent_socket_and_fails_without_daemon);
    tcase_add_test(life, daemon_drain_command_stops_it_with_exit_zero);
    tcase_add_test(life, daemon_watchdog_sends_watchdog_when_watchdog_usec_is_set);
    tcase_add_test(life, daemon_no_watchdog_without_watchdog_usec);
    tcase_add_test(life, daemon_check_config_exits_0_for_good_and_1_with_position_for_bad);
    tcase_add_test(life, daemon_print_config_shows_effective_values_and_round_trips);
    tcase_add_test(life, daemon_startup_failure_is_fatal_before_ready);
    suite_add_tcase(s, life);
    TCase *rel = tcase_create("reload");
    tcase_set_timeout(rel, 60);
    tcase_add_test(rel, daemon_sighup_with_broken_config_keeps_old_and_status_shows_file_line_col);
    tcase_add_test(rel, daemon_good_reload_changes_live_key_and_reports_restart_keys);
    tcase_add_test(rel, daemon_reload_with_unknown_access_user_keeps_old_config);
    suite_add_tcase(s, rel);
    TCase *lim = tcase_create("limits");
    tcase_set_timeout(lim, 60);
    tcase_add_test(lim, daemon_exempts_root_from_max_conns_per_uid);
    tcase_add_test(lim, daemon_refuses_connections_over_max_conns_total);
    tcase_add_test(lim, daemon_closes_idle_connection_after_idle_timeout);
    tcase_add_test(lim, daemon_ten_mib_line_does_not_hurt_other_clients);
    tcase_add_test(lim, daemon_refuses_uid_not_allowed);
    tcase_add_test(lim, daemon_allowed_non_admin_reads_but_mutating_command_refused);
    suite_add_tcase(s, lim);
    TCase *vg = tcase_create("valgrind");
    tcase_set_timeout(vg, tu_cpu_s(120));
    tcase_add_test(vg, daemon_under_valgrind_answers_and_exits_clean);
    suite_add_tcase(s, vg);
    return tu_run(s);
}
