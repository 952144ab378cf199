/* check_ctl_human.c: kvferryctl's tables for people against a real daemon: human units (bytes,
 * durations, ISO 8601 local times, the socket mode in octal) while --json keeps the raw numbers;
 * `status` and `workers` within 100 columns (with registered workers), every field with -l;
 * `kvferryctl help` works without a daemon and knows every command the daemon's help lists. */
#include <regex.h>
#include <stdbool.h>

#include "wtest.h"

#define ISO_TIME                                                                                   \
    "[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9][+-][0-9]{2}:[0-9]{2}"

static struct wenv env;
static char out[1 << 16];

/* kvferryctl with args against env's daemon; stdout+stderr in out; returns the exit status. */
static int ctl(const char *args)
{
    char bin[256], cmd[1024];
    tu_bin("kvferryctl", bin, sizeof bin);
    tu_fmt(cmd, sizeof cmd, "%s --socket %s %s 2>&1", bin, env.csock, args);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, sizeof out - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static bool matches(const char *text, const char *pattern)
{
    regex_t re;
    ck_assert_int_eq(regcomp(&re, pattern, REG_EXTENDED | REG_NEWLINE), 0);
    bool m = regexec(&re, text, 0, NULL, 0) == 0;
    regfree(&re);
    return m;
}

static size_t widest_line(const char *text)
{
    size_t w = 0, cur = 0;
    for (const char *p = text; *p; p++)
        cur = *p == '\n' ? (w = cur > w ? cur : w, 0) : cur + 1;
    return cur > w ? cur : w;
}

START_TEST(status_is_short_and_human_json_stays_raw)
{
    wt_start(&env, NULL);
    ck_assert_int_eq(ctl("status"), 0);
    ck_assert_msg(widest_line(out) <= 100, "status is %zu wide:\n%s", widest_line(out), out);
    ck_assert_msg(matches(out, "^kvferryd .* running .* up [0-9.]+(ms|s) \\(since " ISO_TIME "\\)"),
                  "%s", out);
    ck_assert_msg(strstr(out, "control   ") && strstr(out, "workers   "), "%s", out);
    ck_assert_int_eq(ctl("-l status"), 0);
    ck_assert_msg(matches(out, "^started_at_s +" ISO_TIME "$"), "%s", out);
    ck_assert_int_eq(ctl("--json status"), 0);
    ck_assert_msg(matches(out, "\"started_at_s\": [0-9]+,$"), "%s", out);
    ck_assert_msg(matches(out, "\"uptime_s\": [0-9]+,$"), "%s", out);
    ck_assert_int_eq(ctl("transfers"), 0);
    ck_assert_str_eq(out, "no requests in flight\n");
    wt_stop(&env);
}
END_TEST

START_TEST(config_and_stats_print_sizes_durations_and_the_mode_as_people_write_them)
{
    wt_start(&env, "deadlines:\n  lookup: 1500ms\n");
    ck_assert_int_eq(ctl("config"), 0);
    ck_assert_msg(matches(out, "^  mode +0660$"), "%s", out);
    ck_assert_msg(matches(out, "^  idle_timeout +5m$"), "%s", out);
    ck_assert_msg(matches(out, "^  lookup +1500ms$"), "%s", out);
    ck_assert_msg(matches(out, "^  size +512MiB$"), "%s", out);
    ck_assert_int_eq(ctl("--json config"), 0);
    ck_assert_msg(matches(out, "\"mode\": 432"), "%s", out);
    ck_assert_msg(matches(out, "\"idle_timeout\": 300000"), "%s", out);
    ck_assert_int_eq(ctl("stats"), 0);
    ck_assert_msg(matches(out, "^  uptime_s +[0-9.]+(ms|s)$"), "%s", out);
    ck_assert_msg(matches(out, "^ +bytes_local +0B$"), "%s", out);
    wt_stop(&env);
}
END_TEST

START_TEST(workers_fit_100_columns_and_l_shows_every_column)
{
    wt_start(&env, NULL);
    pid_t sim =
        wt_sim(&env, "ctx.log", "--role", "context", "--instance", "a-rather-long-instance-name-0",
               "--spec", "kimi-linear-48b:tp=2,blocks=40,slots=2", "--all-ranks", "--requests", "1",
               "--prompt-tokens", "2048", "--readers", "2", (char *)NULL);
    int64_t end = wt_now_ms() + 10000;
    while (wt_ctl_count(&env, "workers", "workers") < 2 && wt_now_ms() < end)
        usleep(10000);
    ck_assert_int_eq(ctl("workers"), 0);
    ck_assert_msg(widest_line(out) <= 100, "workers is %zu wide:\n%s", widest_line(out), out);
    ck_assert_msg(
        matches(out, "^CONN +PID +UID +NAME +INSTANCE +ROLE +RANK +POOLS +MEM +REQS +AGE$"), "%s",
        out);
    ck_assert_msg(matches(out, " [0-9.]+MiB +host +"), "%s", out); /* pool bytes in MiB */
    ck_assert_int_eq(ctl("-l workers"), 0);
    ck_assert_msg(strstr(out, "tp_size") && strstr(out, "attention_dp") &&
                      strstr(out, "a-rather-long-instance-name-0"),
                  "%s", out);
    kill(sim, SIGKILL);
    wt_wait(sim, 5000);
    wt_stop(&env);
}
END_TEST

START_TEST(help_works_offline_and_knows_every_daemon_command)
{
    char bin[256], cmd[512];
    tu_bin("kvferryctl", bin, sizeof bin);
    tu_fmt(cmd, sizeof cmd, "%s --socket /nonexistent/control.sock help 2>&1", bin);
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    static char offline[16384];
    size_t n = fread(offline, 1, sizeof offline - 1, p);
    offline[n] = '\0';
    ck_assert_int_eq(pclose(p), 0);
    ck_assert_msg(strstr(offline, "offline commands:"), "%s", offline);

    wt_start(&env, NULL);
    json_t *h = wt_ctl(&env, "help");
    const char *name;
    json_t *v;
    ck_assert_int_gt(json_object_size(h), 5);
    json_object_foreach(h, name, v)
    {
        char want[64];
        snprintf(want, sizeof want, "\n  %s ", name);
        ck_assert_msg(strstr(offline, want), "offline help lacks the daemon's '%s'", name);
    }
    json_decref(h);
    wt_stop(&env);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("ctl_human");
    TCase *t = tcase_create("ctl_human");
    tcase_set_timeout(t, 60);
    tcase_add_test(t, status_is_short_and_human_json_stays_raw);
    tcase_add_test(t, config_and_stats_print_sizes_durations_and_the_mode_as_people_write_them);
    tcase_add_test(t, workers_fit_100_columns_and_l_shows_every_column);
    tcase_add_test(t, help_works_offline_and_knows_every_daemon_command);
    suite_add_tcase(s, t);
    return tu_run(s);
}
