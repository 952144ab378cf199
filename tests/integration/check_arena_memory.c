/* check_arena_memory.c: memory asked for is memory checked (issue 25 item 7), against real
 * kvferryd daemons. An arena.size larger than the machine's MemAvailable is refused at start with
 * the numbers, before UCX allocates anything (before: UCX fell back from SysV to a file in
 * /dev/shm, wrote it until tmpfs or the OOM killer stopped it, and the file stayed). The daemon
 * runs under prlimit --fsize, so a regression dies of SIGXFSZ after 64 MiB instead of filling
 * the host. And the shared-memory files UCX leaves when its process is killed (here: a daemon
 * with UCX_POSIX_USE_PROC_LINK=n and SysV off, kill -9) are removed by the next daemon's start,
 * while the files of a live one stay. UCX_POSIX_DIR is the test's own directory, so daemons of
 * other tests never see these files. */
#include <check.h>
#include <dirent.h>

#include "integration/daemon_harness.h"

static uint64_t meminfo_bytes(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "r");
    ck_assert_ptr_nonnull(f);
    char line[256];
    unsigned long long kb = 0;
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, strlen(key)) == 0)
            sscanf(line + strlen(key), ": %llu", &kb);
    fclose(f);
    ck_assert_uint_gt(kb, 0);
    return (uint64_t)kb * 1024;
}

static void secret_file(const char *dir, char *path, size_t len)
{
    tu_fmt(path, len, "%s/secret", dir);
    dh_write_file(path, "0123456789abcdef0123456789abcdef");
    ck_assert_int_eq(chmod(path, 0600), 0);
}

START_TEST(arena_larger_than_available_memory_is_refused_before_any_allocation)
{
    uint64_t gib = 1ull << 30, tib = 1ull << 40;
    uint64_t want = (meminfo_bytes("MemTotal") * 2 + gib - 1) / gib * gib;
    if (want > 4 * tib) { /* arena.size's own bound refuses it first */
        fprintf(stderr, "skipped: this host has more than 2 TiB of memory\n");
        return;
    }
    char dir[64], sec[100], cfg[100], text[512], cmd[1024], out[8192], bin[256];
    tu_tmpdir(dir, sizeof dir);
    secret_file(dir, sec, sizeof sec);
    tu_fmt(cfg, sizeof cfg, "%s/kvferry.yaml", dir);
    tu_fmt(text, sizeof text,
           "sockets.dir: \"%s/run\"\ncluster.secret_file: \"%s\"\narena.size: %lluGiB\n"
           "arena.chunk: 1MiB\narena.prefault: off\n",
           dir, sec, (unsigned long long)(want / gib));
    dh_write_file(cfg, text);
    /* at most 64 MiB of any file (a tmpfs segment included): a regression dies of SIGXFSZ */
    tu_fmt(cmd, sizeof cmd,
           "UCX_POSIX_DIR='%s' timeout 60 prlimit --fsize=67108864 -- %s --config %s 2>&1", dir,
           tu_bin("kvferryd", bin, sizeof bin), cfg);
    int64_t t0 = dh_now_ms();
    int rc = dh_sh(cmd, out, sizeof out);
    int64_t took = dh_now_ms() - t0;
    char ls[256], left[64];
    tu_fmt(ls, sizeof ls, "ls '%s' | grep -c ucx_shm_posix_", dir);
    dh_sh(ls, left, sizeof left);
    tu_fmt(ls, sizeof ls, "rm -rf '%s'", dir); /* before any assert: a regression's segment */
    (void)!system(ls);
    ck_assert_msg(rc == 1, "exit %d (1: refused at start):\n%s", rc, out);
    char bytes[64];
    tu_fmt(bytes, sizeof bytes, "(%llu bytes) does not fit", (unsigned long long)want);
    ck_assert_msg(strstr(out, "arena.size") && strstr(out, bytes) && strstr(out, "MemAvailable is"),
                  "%s", out);
    ck_assert_msg(took < tu_ms(20000), "refused after %lld ms", (long long)took);
    ck_assert_msg(atoi(left) == 0, "UCX segments were made: %s", left);
}
END_TEST

/* The ucx_shm_posix_* files a daemon maps (from its /proc maps), as "name|name|". */
static int mapped_segments(pid_t pid, char *names, size_t len)
{
    char path[64], line[512];
    tu_fmt(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    ck_assert_ptr_nonnull(f);
    int n = 0;
    names[0] = '\0';
    while (fgets(line, sizeof line, f)) {
        char *s = strstr(line, "ucx_shm_posix_");
        if (!s)
            continue;
        s[strcspn(s, "\n ")] = '\0';
        if (strstr(names, s))
            continue;
        size_t used = strlen(names);
        snprintf(names + used, len - used, "%s|", s);
        n++;
    }
    fclose(f);
    return n;
}

/* How many of the names ("a|b|") exist in dir. */
static int existing(const char *dir, const char *names)
{
    int n = 0;
    char copy[2048], path[256];
    snprintf(copy, sizeof copy, "%s", names);
    for (char *sv, *t = strtok_r(copy, "|", &sv); t; t = strtok_r(NULL, "|", &sv)) {
        tu_fmt(path, sizeof path, "%s/%s", dir, t);
        n += access(path, F_OK) == 0;
    }
    return n;
}

static const char *extra_for(char *buf, size_t len, const char *sec)
{
    tu_fmt(buf, len, "cluster.secret_file: \"%s\"\narena.size: 8MiB\narena.chunk: 1MiB\n", sec);
    return buf;
}

START_TEST(segments_of_a_killed_daemon_are_removed_at_the_next_start_a_live_ones_kept)
{
    char top[64], shm[100], sec[100], extra[512], env[160], cmd[200];
    tu_tmpdir(top, sizeof top);
    tu_fmt(shm, sizeof shm, "%s/shm", top);
    ck_assert_int_eq(mkdir(shm, 0700), 0);
    secret_file(top, sec, sizeof sec);
    tu_fmt(env, sizeof env, "UCX_POSIX_DIR=%s", shm);
    /* a: its segments are files that stay until removed (no SysV, no /proc link) */
    const char *const keep[] = {"env", env, "UCX_TLS=^sysv", "UCX_POSIX_USE_PROC_LINK=n", NULL};
    const char *const plain[] = {"env", env, NULL};
    struct dh a, b, c;
    dh_start_full(&a, extra_for(extra, sizeof extra, sec), NULL, keep, tu_ms(20000));
    char names[2048];
    int n = mapped_segments(a.pid, names, sizeof names);
    ck_assert_msg(n >= 1, "daemon a maps no ucx_shm_posix_ file");
    /* b starts while a lives: a's files are held, b leaves them */
    dh_start_full(&b, extra_for(extra, sizeof extra, sec), NULL, plain, tu_ms(20000));
    ck_assert_int_eq(existing(shm, names), n);
    kill(a.pid, SIGKILL);
    ck_assert_int_eq(dh_wait_exit(&a, 10000), 128 + SIGKILL);
    ck_assert_msg(existing(shm, names) == n, "kill -9 left none of %s: nothing to test", names);
    /* c: they are stale now, removed before c makes its arena */
    dh_start_full(&c, extra_for(extra, sizeof extra, sec), NULL, plain, tu_ms(20000));
    ck_assert_msg(existing(shm, names) == 0, "left after the next start: %s", names);
    char out[4096];
    tu_fmt(cmd, sizeof cmd, "grep -c 'shm: removed' %s", c.log);
    dh_sh(cmd, out, sizeof out);
    ck_assert_int_eq(atoi(out), n);
    ck_assert_int_eq(dh_stop(&b), 0);
    ck_assert_int_eq(dh_stop(&c), 0);
    dh_cleanup(&a);
    dh_cleanup(&b);
    dh_cleanup(&c);
    tu_fmt(cmd, sizeof cmd, "rm -rf '%s'", top);
    (void)!system(cmd);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("arena_memory");
    TCase *t = tcase_create("arena_memory");
    tcase_set_timeout(t, 120);
    tcase_add_test(t, arena_larger_than_available_memory_is_refused_before_any_allocation);
    tcase_add_test(t, segments_of_a_killed_daemon_are_removed_at_the_next_start_a_live_ones_kept);
    suite_add_tcase(s, t);
    return tu_run(s);
}
