/* check_install.c: `make install` lays kvferry out as a Debian package would, into a DESTDIR:
 * an edited config survives a second install (the shipped one lands beside it as .dist), the
 * library sits in the multiarch libdir with a kvferry.pc that pkg-config reads and a program
 * compiles and links against, kvferry-sim is under lib/kvferry (not on PATH), and the three man
 * pages render with man -l. Runs make from the repository root with the variables of the
 * build under test (KVF_MAKEVARS, set by `make check`). */
#include <sys/stat.h>

#include "daemon_harness.h"

static char dest[64];

/* A sanitizer build installs a library that needs the sanitizer runtime: link the program the
 * same way (make asan runs this suite too). */
#ifdef __SANITIZE_ADDRESS__
#define LINK_SAN "-fsanitize=address,undefined "
#else
#define LINK_SAN ""
#endif

static void sh_ok(const char *cmd, char *out, size_t len)
{
    int rc = dh_sh(cmd, out, len);
    ck_assert_msg(rc == 0, "%s: exit %d: %s", cmd, rc, out);
}

static void make_install(char *out, size_t len)
{
    const char *vars = getenv("KVF_MAKEVARS");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory install %s "
             "BUILD=%s PREFIX=/usr DESTDIR=%s 2>&1",
             vars ? vars : "", tu_build_dir(), dest);
    sh_ok(cmd, out, len);
}

static char multiarch_libdir[300];

/* make install or uninstall at a prefix, into dest */
static void make_at(const char *target, const char *prefix, char *out, size_t len)
{
    const char *vars = getenv("KVF_MAKEVARS");
    char cmd[1024];
    snprintf(cmd, sizeof(cmd),
             "env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL make -s --no-print-directory %s %s "
             "BUILD=%s PREFIX=%s DESTDIR=%s 2>&1",
             target, vars ? vars : "", tu_build_dir(), prefix, dest);
    sh_ok(cmd, out, len);
}

static void setup(void)
{
    char out[256];
    tu_tmpdir(dest, sizeof(dest));
    sh_ok("dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || cc -print-multiarch", out,
          sizeof(out));
    out[strcspn(out, "\n")] = '\0';
    tu_fmt(multiarch_libdir, sizeof(multiarch_libdir), "/usr/lib/%s", out);
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dest);
    (void)!system(cmd);
}

static bool exists(const char *rel)
{
    char p[1024];
    struct stat st;
    snprintf(p, sizeof(p), "%s%s", dest, rel);
    return lstat(p, &st) == 0;
}

START_TEST(install_twice_keeps_an_edited_config_and_puts_the_shipped_one_beside_it)
{
    static char out[16384];
    char cmd[512], conf[128];
    make_install(out, sizeof(out));
    tu_fmt(conf, sizeof(conf), "%s/etc/kvferry/kvferry.yaml", dest);
    tu_fmt(cmd, sizeof(cmd), "cmp config/kvferry.yaml %s", conf);
    sh_ok(cmd, out, sizeof(out)); /* a first install: the shipped file */
    ck_assert(!exists("/etc/kvferry/kvferry.yaml.dist"));

    snprintf(cmd, sizeof(cmd), "printf 'log:\\n  level: debug\\n' > %s", conf);
    sh_ok(cmd, out, sizeof(out));
    make_install(out, sizeof(out));
    ck_assert_msg(strstr(out, "kept your") && strstr(out, "kvferry.yaml.dist"), "%s", out);
    snprintf(cmd, sizeof(cmd), "cat %s", conf);
    sh_ok(cmd, out, sizeof(out));
    ck_assert_str_eq(out, "log:\n  level: debug\n");
    tu_fmt(cmd, sizeof(cmd), "cmp config/kvferry.yaml %s.dist", conf);
    sh_ok(cmd, out, sizeof(out));
}
END_TEST

START_TEST(install_uses_the_multiarch_libdir_a_tools_prefix_and_a_working_pkg_config)
{
    static char out[16384];
    char cmd[4096], rel[512];
    make_install(out, sizeof(out));
    const char *want[] = {"/usr/bin/kvferryd",
                          "/usr/bin/kvferryctl",
                          "/usr/bin/kvferry-topo",
                          "/usr/lib/kvferry/kvferry-sim",
                          "/usr/include/kvferry.h",
                          "/usr/lib/systemd/system/kvferry.service",
                          "/usr/lib/sysusers.d/kvferry.conf",
                          "/usr/share/doc/kvferry/gpu-host.conf"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        ck_assert_msg(exists(want[i]), "%s not installed", want[i]);
    ck_assert_msg(!exists("/usr/bin/kvferry-sim"), "the test tool must not be on PATH");
    ck_assert(!exists("/usr/lib/libkvferry.so.0"));
    const char *libs[] = {"libkvferry.so.0", "libkvferry.so", "libkvferry.a",
                          "pkgconfig/kvferry.pc"};
    for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
        tu_fmt(rel, sizeof(rel), "%s/%s", multiarch_libdir, libs[i]);
        ck_assert_msg(exists(rel), "%s not installed", rel);
    }

    /* pkg-config against the DESTDIR copy, then a program built and run with its flags */
    char pc[1024];
    tu_fmt(pc, sizeof(pc), "PKG_CONFIG_SYSROOT_DIR=%s PKG_CONFIG_PATH=%s%s/pkgconfig", dest, dest,
             multiarch_libdir);
    snprintf(cmd, sizeof(cmd),
             "%s pkg-config --modversion kvferry && %s pkg-config --cflags --libs kvferry", pc, pc);
    sh_ok(cmd, out, sizeof(out));
    char inc[192];
    tu_fmt(inc, sizeof(inc), "-I%s/usr/include", dest);
    ck_assert_msg(strstr(out, inc) && strstr(out, "-lkvferry"), "%s", out);
    char src[128];
    tu_fmt(src, sizeof(src), "%s/t.c", dest);
    dh_write_file(src, "#include <kvferry.h>\n#include <stdio.h>\n"
                       "int main(void) { puts(kvf_error_to_string(KVF_E_TIMEOUT)); return 0; }\n");
    snprintf(cmd, sizeof(cmd),
             "cc " LINK_SAN "-o %s/t %s $(%s pkg-config --cflags --libs kvferry) 2>&1 && "
             "LD_LIBRARY_PATH=%s%s %s/t",
             dest, src, pc, dest, multiarch_libdir, dest);
    sh_ok(cmd, out, sizeof(out));
    ck_assert_str_eq(out, "TIMEOUT\n");
}
END_TEST

START_TEST(installed_man_pages_render)
{
    static char out[65536];
    char cmd[512];
    if (system("command -v man >/dev/null 2>&1 && command -v col >/dev/null 2>&1") != 0) {
        printf(
            "SKIP installed_man_pages_render: man or col not installed (man-db, bsdextrautils)\n");
        return;
    }
    make_install(out, sizeof(out));
    const struct {
        const char *page, *needle;
    } pages[] = {{"man8/kvferryd.8", "CAP_IPC_LOCK"},
                 {"man8/kvferryctl.8", "--json"},
                 {"man5/kvferry.yaml.5", "deadlines.send_wait"}};
    for (size_t i = 0; i < sizeof(pages) / sizeof(pages[0]); i++) {
        tu_fmt(cmd, sizeof(cmd), "MANWIDTH=100 man -l %s/usr/share/man/%s 2>&1 | col -b", dest,
                 pages[i].page);
        sh_ok(cmd, out, sizeof(out));
        ck_assert_msg(strstr(out, pages[i].needle), "%s lacks %s:\n%s", pages[i].page,
                      pages[i].needle, out);
        ck_assert_msg(!strstr(out, "warning"), "%s: %s", pages[i].page, out);
    }
}
END_TEST

/* /usr/local: the config under /usr/local/etc (the unit names it), the Python package where
 * Debian's python3 looks for /usr/local (python3.X/dist-packages), the schema under share/kvferry;
 * uninstall then removes every file but the edited config. */
START_TEST(install_at_usr_local_follows_the_prefix_and_uninstall_removes_it)
{
    static char out[16384];
    char cmd[1024];
    make_at("install", "/usr/local", out, sizeof(out));
    const char *want[] = {"/usr/local/etc/kvferry/kvferry.yaml",
                          "/usr/local/share/kvferry/kvferry-layout.schema.json",
                          "/usr/local/lib/kvferry/kvferry-sim"};
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        ck_assert_msg(exists(want[i]), "%s not installed", want[i]);
    ck_assert(!exists("/etc"));
    ck_assert(!exists("/usr/local/include/kvferry-layout.schema.json"));
    sh_ok("/usr/bin/python3 -c 'import sys; print(\"%d.%d\" % sys.version_info[:2])'", out,
          sizeof(out));
    out[strcspn(out, "\n")] = '\0';
    char py[128];
    tu_fmt(py, sizeof(py), "/usr/local/lib/python%s/dist-packages/kvferry/_lib.py", out);
    ck_assert_msg(exists(py), "%s not installed", py);
    tu_fmt(cmd, sizeof(cmd),
           "grep -c /usr/local/etc/kvferry/kvferry.yaml %s/usr/local/lib/systemd/system/kvferry.service",
           dest);
    sh_ok(cmd, out, sizeof(out));
    ck_assert_str_eq(out, "2\n"); /* ExecStartPre and ExecStart */

    tu_fmt(cmd, sizeof(cmd), "echo '# mine' >> %s/usr/local/etc/kvferry/kvferry.yaml", dest);
    sh_ok(cmd, out, sizeof(out));
    make_at("uninstall", "/usr/local", out, sizeof(out));
    ck_assert_msg(strstr(out, "kept your edited"), "%s", out);
    tu_fmt(cmd, sizeof(cmd), "cd %s && find . -type f -o -type l", dest);
    sh_ok(cmd, out, sizeof(out));
    ck_assert_str_eq(out, "./usr/local/etc/kvferry/kvferry.yaml\n");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("install");
    TCase *t = tcase_create("install");
    tcase_set_timeout(t, 240);
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_add_test(t, install_twice_keeps_an_edited_config_and_puts_the_shipped_one_beside_it);
    tcase_add_test(t, install_uses_the_multiarch_libdir_a_tools_prefix_and_a_working_pkg_config);
    tcase_add_test(t, installed_man_pages_render);
    tcase_add_test(t, install_at_usr_local_follows_the_prefix_and_uninstall_removes_it);
    suite_add_tcase(s, t);
    return tu_run(s);
}
