/* testutil.h: small helpers shared by the Check suites (header-only, static functions). */
#ifndef KVF_TESTUTIL_H
#define KVF_TESTUTIL_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
    snprintf(buf, len, "%s/%s", tu_build_dir(), name);
    return buf;
}

/* A fresh private temp directory under /tmp (mode 0700). Caller removes it. */
static inline void tu_tmpdir(char *buf, size_t len)
{
    snprintf(buf, len, "/tmp/kvf-test-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(buf));
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
