/* testutil.h: small helpers shared by the Check suites (bodies in tests/support/testutil.c). */
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
__attribute__((format(printf, 5, 6))) char *tu_fmt_at(const char *file, int line, char *buf,
                                                      size_t len, const char *fmt, ...);

/* tu_fmt for a unix socket path: it must also fit sun_path, else the test fails naming the
 * path and the limit (the daemon and the library refuse such a path; a fixture must not make
 * one by accident). */
#define tu_sock_path(buf, len, ...)                                                                \
    tu_sock_check(__FILE__, __LINE__, tu_fmt_at(__FILE__, __LINE__, buf, len, __VA_ARGS__))
char *tu_sock_check(const char *file, int line, char *path);

/* A sockaddr_un for path; a path over the limit fails the test (never truncated). */
struct sockaddr_un tu_sun(const char *path);

/* Directory holding the built binaries (make passes BUILD in the environment). */
const char *tu_build_dir(void);

/* Path of a built binary, e.g. tu_bin("kvferryd"); static buffer per call site is not needed:
 * the caller passes one. */
const char *tu_bin(const char *name, char *buf, size_t len);

/* A fresh private temp directory under /tmp (mode 0700). Caller removes it. */
void tu_tmpdir(char *buf, size_t len);

/* Runs `sh -c cmd`; its stdout (stderr too when cmd says 2>&1) in out, NUL-terminated and cut
 * at len - 1 bytes. Returns its exit status, -1 when it did not exit. */
int tu_sh(const char *cmd, char *out, size_t len);

/* A wait of ms milliseconds scaled by $KVF_TEST_SLOW (a whole number, default 1): sanitizer and
 * valgrind runs are 5-20x slower (`make tsan` sets 4). Every helper that waits with a deadline
 * scales its timeout with it, and so must a test's own deadline loop. */
unsigned tu_ms(unsigned ms);

/* The keepalive interval for a test whose healthy peers must stay up while another is frozen:
 * base_ms, scaled by KVF_TEST_SLOW, by the load average per CPU and by 10x the longest stall of
 * a few short sleeps measured at the first call (a loaded machine's loop may stand still for
 * over a second, and a peer silent keepalive_misses intervals is lost), whichever is largest,
 * at most 10x.
 * The same for every call of one process. Detection times the test asserts scale with it. */
unsigned tu_keepalive_ms(unsigned base_ms);

/* A time limit in seconds for work bound by this machine's CPU (a child under valgrind):
 * base_s scaled by KVF_TEST_SLOW and by the load average per CPU now (at most 10x): at load
 * 15-18 on 2 cores a 50 s limit that fits an idle machine 5 times ran out (issue 26). */
unsigned tu_cpu_s(unsigned base_s);

/* Run a suite, return the process exit code. */
int tu_run(Suite *s);

#endif
