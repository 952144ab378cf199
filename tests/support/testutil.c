/* testutil.c: small helpers shared by the Check suites (declared, with what each does, in
 * tests/testutil.h). Built once into libkvferry-testsupport.a, linked into every test. */
#include "testutil.h"

__attribute__((format(printf, 5, 6))) char *tu_fmt_at(const char *file, int line, char *buf,
                                                      size_t len, const char *fmt, ...)
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

char *tu_sock_check(const char *file, int line, char *path)
{
    if (strlen(path) > TU_SUN_PATH_MAX)
        ck_abort_msg("%s:%d: unix socket path %s is %zu bytes: the limit is %zu", file, line, path,
                     strlen(path), TU_SUN_PATH_MAX);
    return path;
}

struct sockaddr_un tu_sun(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    tu_sock_check(__FILE__, __LINE__, (char *)path);
    memcpy(sa.sun_path, path, strlen(path) + 1);
    return sa;
}

const char *tu_build_dir(void)
{
    const char *b = getenv("BUILD");
    return (b && *b) ? b : "build";
}

const char *tu_bin(const char *name, char *buf, size_t len)
{
    return tu_fmt(buf, len, "%s/%s", tu_build_dir(), name);
}

void tu_tmpdir(char *buf, size_t len)
{
    tu_fmt(buf, len, "/tmp/kvf-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(buf));
}

int tu_sh(const char *cmd, char *out, size_t len)
{
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    size_t n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

unsigned tu_ms(unsigned ms)
{
    const char *e = getenv("KVF_TEST_SLOW");
    int k = e ? atoi(e) : 1;
    return ms * (unsigned)(k > 1 ? k : 1);
}

int tu_run(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
