/* check_control.c: the control protocol (framing + command table) over a socketpair, with a real
 * struct daemon on built-in defaults and a real loop. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <sys/socket.h>

#include "control.h"
#include "ctl_cmds.h"
#include "ctl_help.h"
#include "daemon_life.h"
#include "testutil.h"

struct fx {
    struct daemon d;
    int cli; /* our end */
};

static struct fx *fx_new(size_t max_line, bool admin)
{
    static struct fx f;
    char err[CFG_ERR_MAX];
    ck_assert_int_eq(daemon_init(&f.d), 0);
    ck_assert_int_eq(daemon_load_config(&f.d, NULL, err, sizeof(err)), 0);
    if (max_line)
        f.d.cfg.control_max_line = max_line;
    ck_assert_int_eq(control_new(&f.d, &daemon_control_ops, &f.d.control), 0);
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    struct peer_cred peer = {.pid = getpid(), .uid = getuid(), .gid = getgid(), .admin = admin,
                             .allowed = true}; /* as the listener's check leaves it */
    ck_assert_int_eq(control_adopt(f.d.control, sv[0], &peer), 0);
    f.cli = sv[1];
    fcntl(f.cli, F_SETFL, O_NONBLOCK);
    return &f;
}

static void fx_free(struct fx *f)
{
    close(f->cli);
    control_stop(f->d.control);
    daemon_stop(&f->d);
    uv_run(&f->d.loop, UV_RUN_DEFAULT);
    f->d.control = control_free(f->d.control);
    ck_assert_int_eq(daemon_done(&f->d), 0);
}

static void send_str(struct fx *f, const char *s, size_t n)
{
    size_t off = 0;
    for (int spins = 0; off < n && spins < 100000; spins++) {
        ssize_t w = send(f->cli, s + off, n - off, MSG_NOSIGNAL);
        if (w > 0)
            off += (size_t)w;
        else if (w < 0 && errno != EAGAIN)
            break; /* the daemon side closed */
        uv_run(&f->d.loop, UV_RUN_NOWAIT);
    }
}

/* Pumps the loop until a whole line arrived (returned, malloc'd) or EOF (NULL, *eof set). */
static char *recv_line(struct fx *f, bool *eof)
{
    static char buf[1 << 16];
    size_t len = 0;
    *eof = false;
    for (int i = 0; i < 2000; i++) {
        uv_run(&f->d.loop, UV_RUN_NOWAIT);
        ssize_t n = recv(f->cli, buf + len, 1, 0); /* byte by byte: never eat the next line */
        if (n == 1) {
            if (buf[len] == '\n') {
                buf[len] = '\0';
                return strdup(buf);
            }
            if (++len >= sizeof(buf) - 1)
                return NULL;
            i = 0;
            continue;
        }
        if (n == 0 || (n < 0 && errno != EAGAIN)) {
            *eof = true;
            return NULL;
        }
        struct pollfd p = {f->cli, POLLIN, 0};
        poll(&p, 1, 1);
    }
    return NULL;
}

static json_t *call(struct fx *f, const char *line)
{
    bool eof;
    send_str(f, line, strlen(line));
    send_str(f, "\n", 1);
    char *r = recv_line(f, &eof);
    ck_assert_msg(r != NULL, "no reply to %s", line);
    json_t *j = json_loads(r, 0, NULL);
    ck_assert_msg(json_is_object(j), "reply is not a JSON object: %s", r);
    free(r);
    return j;
}

static void assert_error(json_t *j, const char *err)
{
    ck_assert(json_is_false(json_object_get(j, "ok")));
    ck_assert_str_eq(json_string_value(json_object_get(j, "error")), err);
    ck_assert(json_is_string(json_object_get(j, "message")));
}

START_TEST(control_status_answers_ok_with_version_pid_and_control_section)
{
    struct fx *f = fx_new(0, true);
    json_t *j = call(f, "{\"id\":1,\"cmd\":\"status\"}");
    ck_assert(json_is_true(json_object_get(j, "ok")));
    json_t *res = json_object_get(j, "result");
    ck_assert_str_eq(json_string_value(json_object_get(res, "version")), KVF_VERSION);
    ck_assert_int_eq(json_integer_value(json_object_get(res, "pid")), getpid());
    ck_assert(json_is_integer(json_object_get(res, "uptime_s")));
    ck_assert_int_eq(
        json_integer_value(json_object_get(json_object_get(res, "control"), "connections")), 1);
    json_decref(j);
    fx_free(f);
}
END_TEST

START_TEST(control_unknown_command_gets_enoent_and_echoes_id)
{
    struct fx *f = fx_new(0, true);
    json_t *j = call(f, "{\"id\":\"abc\",\"cmd\":\"no-such-command\"}");
    assert_error(j, "ENOENT");
    ck_assert_str_eq(json_string_value(json_object_get(j, "id")), "abc");
    json_decref(j);
    fx_free(f);
}
END_TEST

START_TEST(control_id_of_any_type_is_echoed_unchanged)
{
    struct fx *f = fx_new(0, true);
    const char *ids[] = {"7", "-3", "\"x y\"", "{\"a\":[1,2]}", "null", "1.5"};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        char line[128];
        snprintf(line, sizeof(line), "{\"id\":%s,\"cmd\":\"log-level\"}", ids[i]);
        json_t *j = call(f, line);
        json_t *want = json_loads(ids[i], JSON_DECODE_ANY, NULL);
        ck_assert_msg(json_equal(json_object_get(j, "id"), want), "id %s not echoed", ids[i]);
        ck_assert(json_is_true(json_object_get(j, "ok")));
        json_decref(want);
        json_decref(j);
    }
    /* no id at all: the reply carries id null */
    json_t *j = call(f, "{\"cmd\":\"log-level\"}");
    ck_assert(json_is_null(json_object_get(j, "id")));
    json_decref(j);
    fx_free(f);
}
END_TEST

START_TEST(control_malformed_json_gets_einval_and_connection_stays_usable)
{
    struct fx *f = fx_new(0, true);
    json_t *j = call(f, "{\"id\":1,\"cmd\":\"status\"");
    assert_error(j, "EINVAL");
    json_decref(j);
    j = call(f, "not json at all");
    assert_error(j, "EINVAL");
    json_decref(j);
    j = call(f, "{\"id\":2,\"cmd\":\"status\"}");
    ck_assert(json_is_true(json_object_get(j, "ok")));
    ck_assert_int_eq(json_integer_value(json_object_get(j, "id")), 2);
    json_decref(j);
    ck_assert_uint_eq(control_counters(f->d.control)->conn.malformed, 2);
    fx_free(f);
}
END_TEST

START_TEST(control_non_object_input_is_refused_and_connection_stays_usable)
{
    struct fx *f = fx_new(0, true);
    const char *bad[] = {"[1,2]",
                         "\"status\"",
                         "42",
                         "true",
                         "{\"id\":1}",
                         "{\"id\":1,\"cmd\":7}",
                         "{\"id\":1,\"cmd\":\"status\",\"args\":[1]}"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        json_t *j = call(f, bad[i]);
        assert_error(j, "EINVAL");
        json_decref(j);
    }
    json_t *j = call(f, "{\"id\":9,\"cmd\":\"stats\"}");
    ck_assert(json_is_true(json_object_get(j, "ok")));
    json_decref(j);
    fx_free(f);
}
END_TEST

START_TEST(control_overlong_line_gets_e2big_then_close)
{
    struct fx *f = fx_new(1024, true);
    char big[3000];
    memset(big, 'x', sizeof(big));
    send_str(f, big, sizeof(big)); /* no newline: the limit bites before the line ends */
    bool eof;
    char *r = recv_line(f, &eof);
    ck_assert_ptr_nonnull(r);
    json_t *j = json_loads(r, 0, NULL);
    free(r);
    assert_error(j, "E2BIG");
    json_decref(j);
    r = recv_line(f, &eof);
    ck_assert_ptr_null(r);
    ck_assert(eof);
    ck_assert_uint_eq(control_counters(f->d.control)->conn.lines_too_long, 1);
    ck_assert_uint_eq(control_connections(f->d.control), 0);
    fx_free(f);
}
END_TEST

START_TEST(control_line_of_exactly_max_line_bytes_is_served)
{
    struct fx *f = fx_new(1024, true);
    char line[1025];
    int n = snprintf(line, sizeof(line), "{\"id\":1,\"cmd\":\"status\",\"pad\":\"");
    memset(line + n, 'p', 1024 - (size_t)n - 2);
    memcpy(line + 1022, "\"}", 3);
    ck_assert_uint_eq(strlen(line), 1024);
    json_t *j = call(f, line);
    ck_assert(json_is_true(json_object_get(j, "ok")));
    json_decref(j);
    fx_free(f);
}
END_TEST

START_TEST(control_line_split_across_writes_and_pipelined_lines_answer_in_order)
{
    struct fx *f = fx_new(0, true);
    const char *part1 = "{\"id\":1,\"cm",
               *part2 = "d\":\"status\"}\n{\"id\":2,\"cmd\":\"stats\"}\n";
    send_str(f, part1, strlen(part1));
    send_str(f, part2, strlen(part2));
    for (int want = 1; want <= 2; want++) {
        bool eof;
        char *r = recv_line(f, &eof);
        ck_assert_ptr_nonnull(r);
        json_t *j = json_loads(r, 0, NULL);
        free(r);
        ck_assert_int_eq(json_integer_value(json_object_get(j, "id")), want);
        ck_assert(json_is_true(json_object_get(j, "ok")));
        json_decref(j);
    }
    fx_free(f);
}
END_TEST

START_TEST(control_non_admin_may_read_but_not_mutate)
{
    struct fx *f = fx_new(0, false);
    json_t *j = call(f, "{\"id\":1,\"cmd\":\"log-level\"}");
    ck_assert(json_is_true(json_object_get(j, "ok")));
    json_decref(j);
    const char *mut[] = {"{\"id\":2,\"cmd\":\"log-level\",\"args\":{\"level\":\"debug\"}}",
                         "{\"id\":3,\"cmd\":\"reload\"}", "{\"id\":4,\"cmd\":\"drain\"}"};
    for (size_t i = 0; i < 3; i++) {
        j = call(f, mut[i]);
        assert_error(j, "EPERM");
        json_decref(j);
    }
    ck_assert_int_eq(log_get_level(), LOG_LVL_INFO);
    ck_assert_int_eq(f->d.state, DAEMON_STARTING);
    fx_free(f);
}
END_TEST

START_TEST(control_admin_sets_log_level_and_bad_level_is_einval)
{
    struct fx *f = fx_new(0, true);
    json_t *j = call(f, "{\"id\":1,\"cmd\":\"log-level\",\"args\":{\"level\":\"debug\"}}");
    ck_assert(json_is_true(json_object_get(j, "ok")));
    ck_assert_int_eq(log_get_level(), LOG_LVL_DEBUG);
    json_decref(j);
    j = call(f, "{\"id\":2,\"cmd\":\"log-level\",\"args\":{\"level\":\"loud\"}}");
    assert_error(j, "EINVAL");
    json_decref(j);
    ck_assert_int_eq(log_get_level(), LOG_LVL_DEBUG);
    log_set_level(LOG_LVL_INFO);
    fx_free(f);
}
END_TEST

/* The help text lives once (lib/ctl_help.c): every command has its row, every row a command. */
START_TEST(control_every_command_has_one_help_row_and_every_row_a_command)
{
    for (size_t i = 0; i < ctl_cmds_len; i++) {
        const struct ctl_help *h = ctl_help_find(ctl_cmds[i].name);
        ck_assert_msg(h && h->doc[0], "command %s has no row in lib/ctl_help.c", ctl_cmds[i].name);
    }
    for (size_t i = 0; i < ctl_help_len; i++) {
        bool found = false;
        for (size_t j = 0; j < ctl_cmds_len; j++)
            found |= strcmp(ctl_cmds[j].name, ctl_help[i].name) == 0;
        ck_assert_msg(found, "lib/ctl_help.c documents %s, which the daemon lacks", ctl_help[i].name);
    }
    ck_assert_uint_eq(ctl_cmds_len, ctl_help_len);
}
END_TEST

START_TEST(control_config_returns_effective_config)
{
    struct fx *f = fx_new(0, true);
    json_t *j = call(f, "{\"id\":1,\"cmd\":\"config\"}");
    ck_assert(json_is_true(json_object_get(j, "ok")));
    char *s = json_dumps(json_object_get(j, "result"), JSON_COMPACT);
    ck_assert_ptr_nonnull(strstr(s, "max_conns_per_uid"));
    free(s);
    json_decref(j);
    fx_free(f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("control");
    TCase *t = tcase_create("protocol");
    tcase_add_test(t, control_status_answers_ok_with_version_pid_and_control_section);
    tcase_add_test(t, control_unknown_command_gets_enoent_and_echoes_id);
    tcase_add_test(t, control_id_of_any_type_is_echoed_unchanged);
    tcase_add_test(t, control_malformed_json_gets_einval_and_connection_stays_usable);
    tcase_add_test(t, control_non_object_input_is_refused_and_connection_stays_usable);
    tcase_add_test(t, control_overlong_line_gets_e2big_then_close);
    tcase_add_test(t, control_line_of_exactly_max_line_bytes_is_served);
    tcase_add_test(t, control_line_split_across_writes_and_pipelined_lines_answer_in_order);
    suite_add_tcase(s, t);
    TCase *c = tcase_create("commands");
    tcase_add_test(c, control_non_admin_may_read_but_not_mutate);
    tcase_add_test(c, control_admin_sets_log_level_and_bad_level_is_einval);
    tcase_add_test(c, control_config_returns_effective_config);
    tcase_add_test(c, control_every_command_has_one_help_row_and_every_row_a_command);
    suite_add_tcase(s, c);
    return tu_run(s);
}
