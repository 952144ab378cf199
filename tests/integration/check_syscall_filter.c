/* check_syscall_filter.c: scripts/syscall-check, the unit's filters applied to what kvferryd
 * really does (for the GPU node, which has no systemd): its saved @system-service list is what
 * this machine's systemd-analyze says; its report flags a syscall outside the filter, a device
 * node no DeviceAllow= admits and a write outside the writable paths, and passes a clean trace;
 * and two real daemons moving requests (same-daemon and bounce path, host pools) under strace
 * call nothing the unit would refuse. */
#include "testutil.h"

START_TEST(saved_filter_list_is_what_systemd_analyze_expands)
{
    if (system("command -v systemd-analyze >/dev/null 2>&1") != 0) {
        printf("SKIP saved_filter_list_is_what_systemd_analyze_expands: no systemd-analyze\n");
        return;
    }
    static char out[65536];
    /* popen runs sh: the process substitution needs bash */
    int rc = tu_sh("bash -c \"diff <(scripts/syscall-check --print-filter | grep -v '^#') "
               "<(grep -v '^#' systemd/filter/system-service.txt)\" 2>&1",
               out, sizeof out);
    ck_assert_msg(rc == 0, "systemd/filter/system-service.txt is stale (scripts/syscall-check "
                           "--refresh):\n%s", out);
    ck_assert(tu_sh("grep -cx ioctl systemd/filter/system-service.txt", out, sizeof out) == 0);
    ck_assert(tu_sh("grep -cx ptrace systemd/filter/system-service.txt", out, sizeof out) == 1);
}
END_TEST

/* A trace in strace -f form: the daemon (pid 100) and one thread (101). */
static int analyze(const char *trace, char *out, size_t len)
{
    char dir[64], path[128], cmd[512];
    tu_tmpdir(dir, sizeof dir);
    tu_fmt(path, sizeof path, "%s/t.strace", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(trace, f);
    fclose(f);
    int rc = tu_sh(tu_fmt(cmd, sizeof cmd, "scripts/syscall-check --analyze %s 2>&1", path), out,
                   len);
    tu_sh(tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", dir), path, sizeof path);
    return rc;
}

START_TEST(report_names_each_thing_the_unit_would_refuse_and_passes_a_clean_trace)
{
    static char out[16384];
    const char *clean = "100 openat(AT_FDCWD, \"/dev/null\", O_RDWR) = 3\n"
                        "100 clone3({flags=CLONE_VM, ...} => {parent_tid=[101]}, 88) = 101\n"
                        "101 ioctl(3, TCGETS <unfinished ...>\n"
                        "100 epoll_wait(4, [], 64, 10) = 0\n"
                        "101 <... ioctl resumed>, 0x7ffd) = -1 ENOTTY (Inappropriate ioctl)\n"
                        "100 openat(AT_FDCWD, \"/tmp/x/worker.sock\", O_RDWR|O_CREAT, 0600) = 5\n"
                        "100 openat(AT_FDCWD, \"/proc/100/stat\", O_RDONLY) = 6\n"
                        "101 +++ exited with 0 +++\n";
    int rc = analyze(clean, out, sizeof out);
    ck_assert_msg(rc == 0 && strstr(out, "syscalls: 4 distinct in 2 daemon"), "rc %d: %s", rc, out);
    ck_assert_msg(strstr(out, "device /dev/null (char 1 mem): allowed by DevicePolicy=closed"),
                  "%s", out);

    char bad[1024];
    tu_fmt(bad, sizeof bad, "%s%s", clean,
           "100 ptrace(PTRACE_ATTACH, 7) = -1 EPERM (Operation not permitted)\n"
           "100 openat(AT_FDCWD, \"/dev/kmsg\", O_RDONLY) = 7\n"
           "100 openat(AT_FDCWD, \"/etc/kvferry/state\", O_WRONLY|O_CREAT, 0644) = 8\n"
           "100 openat(AT_FDCWD, \"/proc/4242/maps\", O_RDONLY) = 9\n"
           "100 mprotect(0x7f00, 4096, PROT_READ|PROT_WRITE|PROT_EXEC) = 0\n");
    rc = analyze(bad, out, sizeof out);
    ck_assert_int_eq(rc, 1);
    ck_assert_msg(strstr(out, "OUTSIDE @system-service: ptrace (1 calls)"), "%s", out);
    ck_assert_msg(strstr(out, "DEVICE NOT ALLOWED: /dev/kmsg (char 1 mem)"), "%s", out);
    ck_assert_msg(strstr(out, "WRITE outside the writable paths: /etc/kvferry/state"), "%s", out);
    ck_assert_msg(strstr(out, "OTHER PROCESS /proc: /proc/4242/maps"), "%s", out);
    ck_assert_msg(strstr(out, "MemoryDenyWriteExecute=yes would refuse 1 mapping"), "%s", out);
}
END_TEST

START_TEST(two_daemons_moving_requests_call_nothing_the_unit_refuses)
{
    static char out[65536];
    char cmd[512];
    int rc = tu_sh(tu_fmt(cmd, sizeof cmd, "BUILD=%s scripts/syscall-check 2>&1", tu_build_dir()),
                   out, sizeof out);
    if (rc == 77) {
        printf("%s", out); /* SKIP with its reason: no strace, or no ptrace here */
        return;
    }
    printf("%s", out);
    ck_assert_msg(rc == 0, "syscall-check: exit %d:\n%s", rc, out);
    ck_assert(strstr(out, "same-daemon (host pools) pass: 2 requests, parity OK"));
    ck_assert(strstr(out, "two-daemon bounce (A -> B over UCX) pass: 2 requests, parity OK"));
    ck_assert(strstr(out, "syscall-check: ok: nothing the unit refuses"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("syscall_filter");
    TCase *t = tcase_create("unit filters");
    tcase_set_timeout(t, 180);
    tcase_add_test(t, saved_filter_list_is_what_systemd_analyze_expands);
    tcase_add_test(t, report_names_each_thing_the_unit_would_refuse_and_passes_a_clean_trace);
    tcase_add_test(t, two_daemons_moving_requests_call_nothing_the_unit_refuses);
    suite_add_tcase(s, t);
    return tu_run(s);
}
