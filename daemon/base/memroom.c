/* memroom.c: what the host can give before a large shared allocation (memroom.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "memroom.h"

/* A "Key:   N kB" line of /proc/meminfo, in bytes; false when absent. */
static bool meminfo(const char *key, uint64_t *ret)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return false;
    char line[256];
    size_t kl = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        unsigned long long kb;
        if (strncmp(line, key, kl) == 0 && line[kl] == ':' &&
            sscanf(line + kl + 1, "%llu", &kb) == 1) {
            *ret = (uint64_t)kb * 1024;
            found = true;
        }
    }
    fclose(f);
    return found;
}

/* One number from a file ("max" and unreadable: false). */
static bool read_u64(const char *path, uint64_t *ret)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    unsigned long long v;
    bool ok = fscanf(f, "%llu", &v) == 1;
    fclose(f);
    if (ok)
        *ret = v;
    return ok;
}

/* Room the daemon's cgroup (v2) leaves: memory.max - memory.current; false when unlimited. */
static bool cgroup_room(uint64_t *ret)
{
    FILE *f = fopen("/proc/self/cgroup", "r");
    if (!f)
        return false;
    char line[512], path[600];
    bool have = false;
    while (!have && fgets(line, sizeof line, f))
        if (strncmp(line, "0::", 3) == 0) {
            line[strcspn(line, "\n")] = '\0';
            have = true;
        }
    fclose(f);
    uint64_t max, cur;
    if (!have)
        return false;
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.max", line + 3);
    if (!read_u64(path, &max))
        return false;
    snprintf(path, sizeof path, "/sys/fs/cgroup%s/memory.current", line + 3);
    if (!read_u64(path, &cur))
        cur = 0;
    *ret = max > cur ? max - cur : 0;
    return true;
}

/* Whether SysV shm can hold one segment of `bytes` (else UCX falls back to /dev/shm). */
static bool sysv_fits(uint64_t bytes)
{
    uint64_t shmmax, shmall;
    long page = sysconf(_SC_PAGESIZE);
    if (read_u64("/proc/sys/kernel/shmmax", &shmmax) && bytes > shmmax)
        return false;
    if (read_u64("/proc/sys/kernel/shmall", &shmall) && page > 0 &&
        bytes / (uint64_t)page > shmall)
        return false;
    return true;
}

static const char *size_str(uint64_t v, char *buf, size_t len)
{
    snprintf(buf, len, "%.1f GiB (%" PRIu64 " bytes)", (double)v / (1u << 30), v);
    return buf;
}

int memroom_check(uint64_t bytes, const char *what, char *err, size_t errlen)
{
    uint64_t have;
    const char *why = NULL, *hint = "";
    bool posix = !sysv_fits(bytes);
    uint64_t mode, limit, used;
    if (meminfo("MemAvailable", &have) && bytes > have) {
        why = "MemAvailable is";
    } else if (cgroup_room(&have) && bytes > have) {
        why = "the daemon's cgroup (memory.max less memory.current) leaves";
    } else if (read_u64("/proc/sys/vm/overcommit_memory", &mode) && mode == 2 &&
               meminfo("CommitLimit", &limit) && meminfo("Committed_AS", &used) &&
               bytes > (have = limit > used ? limit - used : 0)) {
        why = "strict overcommit (vm.overcommit_memory 2) leaves CommitLimit less Committed_AS";
        posix = true; /* SysV's segment would be refused: UCX tries /dev/shm next */
    }
    if (!why && posix) {
        const char *dir = getenv("UCX_POSIX_DIR") ? getenv("UCX_POSIX_DIR") : "/dev/shm";
        struct statvfs sv;
        if (statvfs(dir, &sv) == 0 && bytes > (have = (uint64_t)sv.f_bavail * sv.f_frsize)) {
            why = "SysV shm (kernel.shmmax, shmall) cannot hold it, and /dev/shm has free";
            hint = " (or raise kernel.shmmax and kernel.shmall)";
        }
    }
    if (!why)
        return 0;
    char a[64], b[64];
    snprintf(err, errlen, "%s %s does not fit: %s %s; lower %s%s", what,
             size_str(bytes, a, sizeof a), why, size_str(have, b, sizeof b), what, hint);
    return -ENOMEM;
}
