/* check_log.c: log lines on stderr start with an ISO 8601 local time (milliseconds and the UTC
 * offset); when stderr is the journal's stream (JOURNAL_STREAM names it), entries go to the
 * journal's native socket instead (here a socket the test binds) with MESSAGE=, PRIORITY=,
 * SYSLOG_IDENTIFIER= and the request's REQ_ID=, PEER=, INSTANCE= fields, a multi-line message
 * in the protocol's binary form. */
#include <fcntl.h>
#include <regex.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

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
    log_set_journal_socket("/nonexistent/journal"); /* re-reads JOURNAL_STREAM */
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

/* The value of field `key` in one native-protocol datagram (text or binary form), or NULL. */
static const char *field(const char *d, size_t n, const char *key, char *buf, size_t len)
{
    size_t kl = strlen(key);
    for (size_t i = 0; i < n;) {
        const char *nl = memchr(d + i, '\n', n - i);
        if (!nl)
            return NULL;
        const char *eq = memchr(d + i, '=', (size_t)(nl - d - i));
        if (eq) { /* KEY=value\n */
            if ((size_t)(eq - d - i) == kl && !memcmp(d + i, key, kl)) {
                snprintf(buf, len, "%.*s", (int)(nl - eq - 1), eq + 1);
                return buf;
            }
            i = (size_t)(nl - d) + 1;
            continue;
        }
        /* KEY\n<le64 length>value\n */
        uint64_t vl = 0;
        const unsigned char *l = (const unsigned char *)nl + 1;
        for (int b = 7; b >= 0; b--)
            vl = vl << 8 | l[b];
        const char *v = nl + 9;
        if ((size_t)(nl - d - i) == kl && !memcmp(d + i, key, kl)) {
            snprintf(buf, len, "%.*s", (int)vl, v);
            return buf;
        }
        i = (size_t)(v - d) + vl + 1;
    }
    return NULL;
}

START_TEST(under_systemd_entries_go_to_the_journal_with_the_request_fields)
{
    int saved = stderr_to_file();
    struct stat st;
    ck_assert_int_eq(fstat(2, &st), 0);
    char js[64], path[100];
    snprintf(js, sizeof(js), "%lu:%lu", (unsigned long)st.st_dev, (unsigned long)st.st_ino);
    setenv("JOURNAL_STREAM", js, 1);
    tu_sock_path(path, sizeof(path), "%s/journal", dir);
    int j = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = tu_sun(path);
    ck_assert_int_eq(bind(j, (struct sockaddr *)&sa, sizeof(sa)), 0);
    log_set_journal_socket(path);
    log_set_tag("kvftest");
    log_set_level(LOG_LVL_DEBUG);

    log_req(LOG_LVL_INFO, 42, "10.0.0.2:40123", "ctx0", "engine: request %d failed", 42);
    log_error("config: two errors\nline two");
    char d[4096], v[256];
    ssize_t n = recv(j, d, sizeof(d), MSG_DONTWAIT);
    ck_assert_int_gt(n, 0);
    ck_assert_str_eq(field(d, (size_t)n, "MESSAGE", v, sizeof(v)), "engine: request 42 failed");
    ck_assert_str_eq(field(d, (size_t)n, "PRIORITY", v, sizeof(v)), "6");
    ck_assert_str_eq(field(d, (size_t)n, "SYSLOG_IDENTIFIER", v, sizeof(v)), "kvftest");
    ck_assert_str_eq(field(d, (size_t)n, "REQ_ID", v, sizeof(v)), "42");
    ck_assert_str_eq(field(d, (size_t)n, "PEER", v, sizeof(v)), "10.0.0.2:40123");
    ck_assert_str_eq(field(d, (size_t)n, "INSTANCE", v, sizeof(v)), "ctx0");
    n = recv(j, d, sizeof(d), MSG_DONTWAIT);
    ck_assert_int_gt(n, 0);
    ck_assert_str_eq(field(d, (size_t)n, "MESSAGE", v, sizeof(v)), "config: two errors\nline two");
    ck_assert_str_eq(field(d, (size_t)n, "PRIORITY", v, sizeof(v)), "3");
    ck_assert_ptr_null(field(d, (size_t)n, "REQ_ID", v, sizeof(v)));

    /* the journal gone: the line still reaches the stream, with its priority prefix */
    close(j);
    unlink(path);
    log_warn("after");
    char out[512];
    stderr_back(saved, out, sizeof(out));
    ck_assert_str_eq(out, "<4>after\n");
    unsetenv("JOURNAL_STREAM");
    log_set_journal_socket("/run/systemd/journal/socket");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("log");
    TCase *t = tcase_create("log");
    tcase_add_test(t, stderr_lines_start_with_an_iso_8601_local_time);
    tcase_add_test(t, under_systemd_entries_go_to_the_journal_with_the_request_fields);
    suite_add_tcase(s, t);
    return tu_run(s);
}
