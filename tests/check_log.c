/* check_log.c: log lines on stderr start with an ISO 8601 local time (milliseconds and the UTC
 * offset); when stderr is the journal's stream (JOURNAL_STREAM names it), a line is the
 * message with its "<prio>" prefix; a sink set with log_set_sink gets every entry at or above the
 * level with its time and request fields. (The journal's native fields are the daemon sink's:
 * check_logsink.) */
#include <fcntl.h>
#include <regex.h>
#include <sys/stat.h>

#include "log.h"
#include "testutil.h"

static char dir[64], errfile[96];

/* stderr into a file of the temp dir; returns the saved stderr. */
static int stderr_to_file(void)
{
    tu_tmpdir(dir, sizeof(dir));
    tu_fmt(errfile, sizeof(errfile), "%s/stderr", dir);
    int saved = dup(2);
    int fd = open(errfile, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ck_assert_int_ge(fd, 0);
    dup2(fd, 2);
    close(fd);
    return saved;
}

static void stderr_back(int saved, char *buf, size_t len)
{
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    FILE *f = fopen(errfile, "r");
    ck_assert_ptr_nonnull(f);
    size_t n = fread(buf, 1, len - 1, f);
    buf[n] = '\0';
    fclose(f);
}

START_TEST(stderr_lines_start_with_an_iso_8601_local_time)
{
    unsetenv("JOURNAL_STREAM");
    log_set_sink(NULL, NULL); /* re-reads JOURNAL_STREAM */
    log_set_tag("kvftest");
    int saved = stderr_to_file();
    log_warn("disk %s", "full");
    char out[512];
    stderr_back(saved, out, sizeof(out));
    regex_t re;
    ck_assert_int_eq(regcomp(&re,
                             "^[0-9]{4}-[01][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\\."
                             "[0-9]{3}[+-][0-9]{2}:[0-9]{2} kvftest\\[[0-9]+\\] warn: disk full\n$",
                             REG_EXTENDED),
                     0);
    ck_assert_msg(regexec(&re, out, 0, NULL, 0) == 0, "line: '%s'", out);
    regfree(&re);
}
END_TEST

START_TEST(under_systemd_lines_reach_the_stream_with_their_priority)
{
    int saved = stderr_to_file();
    struct stat st;
    ck_assert_int_eq(fstat(2, &st), 0);
    char js[64];
    snprintf(js, sizeof(js), "%lu:%lu", (unsigned long)st.st_dev, (unsigned long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    log_set_sink(NULL, NULL); /* looks at stderr again */
    ck_assert(log_stderr_is_journal());
    log_warn("after");
    log_req(LOG_LVL_ERROR, 42, "10.0.0.2:40123", "ctx0", "engine: request %d failed", 42);
    char out[512];
    stderr_back(saved, out, sizeof(out));
    ck_assert_str_eq(out, "<4>after\n<3>engine: request 42 failed\n");
    unsetenv("JOURNAL_STREAM");
    log_set_sink(NULL, NULL);
}
END_TEST

struct seen {
    int n;
    log_level_t lvl;
    uint64_t req_id;
    char msg[64], peer[64], instance[64];
    struct timespec ts;
};

static void sink(const struct log_entry *e, void *arg)
{
    struct seen *s = arg;
    s->n++;
    s->lvl = e->lvl;
    s->ts = e->ts;
    snprintf(s->msg, sizeof s->msg, "%s", e->msg);
    s->req_id = e->ctx ? e->ctx->req_id : 0;
    snprintf(s->peer, sizeof s->peer, "%s", e->ctx && e->ctx->peer ? e->ctx->peer : "");
    snprintf(s->instance, sizeof s->instance, "%s",
             e->ctx && e->ctx->instance ? e->ctx->instance : "");
}

START_TEST(a_sink_gets_each_entry_with_its_time_and_request_fields_and_formats_it_alike)
{
    struct seen s = {0};
    log_set_level(LOG_LVL_INFO);
    log_set_tag("kvftest");
    log_set_sink(sink, &s);
    struct timespec before;
    clock_gettime(CLOCK_REALTIME, &before);
    log_debug("below the level");
    log_req(LOG_LVL_WARN, 7, "peer1", "ctx0", "engine: %s", "slow");
    log_set_sink(NULL, NULL);
    ck_assert_int_eq(s.n, 1);
    ck_assert_int_eq(s.lvl, LOG_LVL_WARN);
    ck_assert_str_eq(s.msg, "engine: slow");
    ck_assert_uint_eq(s.req_id, 7);
    ck_assert_str_eq(s.peer, "peer1");
    ck_assert_str_eq(s.instance, "ctx0");
    ck_assert_int_ge(s.ts.tv_sec, before.tv_sec);
    struct log_entry e = {.lvl = LOG_LVL_WARN, .ts = s.ts, .msg = "engine: slow"};
    char line[256], tiny[8];
    size_t n = log_format_line(&e, false, line, sizeof line);
    ck_assert_uint_eq(n, strlen(line));
    ck_assert_msg(strstr(line, " kvftest[") && strstr(line, "] warn: engine: slow\n"), "%s", line);
    ck_assert_uint_eq(log_format_line(&e, true, line, sizeof line), 16);
    ck_assert_str_eq(line, "<4>engine: slow\n");
    ck_assert_uint_eq(log_format_line(&e, true, tiny, sizeof tiny), 7); /* cut, still a line */
    ck_assert_str_eq(tiny, "<4>eng\n");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *t = tcase_create("log");
    tcase_add_test(t, stderr_lines_start_with_an_iso_8601_local_time);
    tcase_add_test(t, under_systemd_lines_reach_the_stream_with_their_priority);
    tcase_add_test(t, a_sink_gets_each_entry_with_its_time_and_request_fields_and_formats_it_alike);
    suite_add_tcase(s, t);
    return tu_run(s);
}
