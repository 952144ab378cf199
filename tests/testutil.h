/* testutil.h: small helpers shared by the Check suites (header-only, static functions). */
#ifndef KVF_TESTUTIL_H
#define KVF_TESTUTIL_H

#include <check.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

/* Longest unix socket path: sun_path is 108 bytes with its NUL. */
#define TU_SUN_PATH_MAX (sizeof(((struct sockaddr_un *)0)->sun_path) - 1)

/* snprintf that never truncates: a result that does not fit buf fails the test, naming the
 * text and the room it had (a truncated path or command would fail later, far from its cause).
 * Returns buf. Use tu_fmt for paths and commands built from directories. */
#define tu_fmt(buf, len, ...) tu_fmt_at(__FILE__, __LINE__, buf, len, __VA_ARGS__)
static inline __attribute__((format(printf, 5, 6))) char *
tu_fmt_at(const char *file, int line, char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= len)
        ck_abort_msg("%s:%d: %d bytes do not fit a %zu-byte buffer: \"%s...\"", file, line, n, len,
                     buf);
    return buf;
}

/* tu_fmt for a unix socket path: it must also fit sun_path, else the test fails naming the
 * path and the limit (the daemon and the library refuse such a path; a fixture must not make
 * one by accident). */
#define tu_sock_path(buf, len, ...)                                                                \
    tu_sock_check(__FILE__, __LINE__, tu_fmt_at(__FILE__, __LINE__, buf, len, __VA_ARGS__))
static inline char *tu_sock_check(const char *file, int line, char *path)
{
    if (strlen(path) > TU_SUN_PATH_MAX)
        ck_abort_msg("%s:%d: unix socket path %s is %zu bytes: the limit is %zu", file, line, path,
                     strlen(path), TU_SUN_PATH_MAX);
    return path;
}

/* A sockaddr_un for path; a path over the limit fails the test (never truncated). */
static inline struct sockaddr_un tu_sun(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    tu_sock_check(__FILE__, __LINE__, (char *)path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    return sa;
}

/* Directory holding the built binaries (make passes BUILD in the environment). */
static inline const char *tu_build_dir(void)
{
    const char *b = getenv("BUILD");
    return (b && *b) ? b : "build";
}

/* Path of a built binary, e.g. tu_bin("kvferryd"); static buffer per call site is not needed:
 * the caller passes one. */
static inline const char *tu_bin(const char *name, char *buf, size_t len)
{
    return tu_fmt(buf, len, "%s/%s", tu_build_dir(), name);
}

/* A fresh private temp directory under /tmp (mode 0700). Caller removes it. */
static inline void tu_tmpdir(char *buf, size_t len)
{
    tu_fmt(buf, len, "/tmp/kvf-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

/* Runs `sh -c cmd`; its stdout (stderr too when cmd says 2>&1) in out, NUL-terminated and cut
 * at len - 1 bytes. Returns its exit status, -1 when it did not exit. */
static inline int tu_sh(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Run a suite, return the process exit code. */
static inline int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}

#endif
