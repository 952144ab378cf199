/* shmstale.c: removal of UCX shared-memory files no process holds (shmstale.h). */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "shmstale.h"

#define SHMSTALE_PREFIX "ucx_shm_posix_"
#define SHMSTALE_MAX 256 /* candidates looked at in one start */

struct cand {
    ino_t ino;
    off_t size;
    bool held;
    char name[64];
};

/* Marks the candidates (of device dev) that one process holds open or mapped. */
static void mark_held(int procfd, const char *pid, dev_t dev, struct cand *c, int n)
{
    char path[300];
    snprintf(path, sizeof path, "%s/fd", pid);
    int dfd = openat(procfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    for (struct dirent *e; d && (e = readdir(d));) {
        struct stat st;
        if (e->d_name[0] == '.' || fstatat(dfd, e->d_name, &st, 0) < 0 || st.st_dev != dev)
            continue;
        for (int i = 0; i < n; i++)
            c[i].held |= c[i].ino == st.st_ino;
    }
    if (d)
        closedir(d);
    else if (dfd >= 0)
        close(dfd);
    snprintf(path, sizeof path, "%s/maps", pid);
    int mfd = openat(procfd, path, O_RDONLY | O_CLOEXEC);
    FILE *f = mfd >= 0 ? fdopen(mfd, "r") : NULL;
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        unsigned maj, min;
        unsigned long long ino;
        /* start-end perms offset maj:min inode path */
        if (!strstr(line, SHMSTALE_PREFIX) ||
            sscanf(line, "%*s %*s %*s %x:%x %llu", &maj, &min, &ino) != 3)
            continue;
        for (int i = 0; i < n; i++)
            c[i].held |= (unsigned long long)c[i].ino == ino;
    }
    if (f)
        fclose(f);
    else if (mfd >= 0)
        close(mfd);
}

int shmstale_clean(const char *dir, uint64_t *ret_bytes)
{
    if (!dir)
        dir = getenv("UCX_POSIX_DIR") ? getenv("UCX_POSIX_DIR") : "/dev/shm";
    struct cand c[SHMSTALE_MAX];
    int n = 0;
    struct stat ds;
    DIR *d = opendir(dir);
    if (!d || fstat(dirfd(d), &ds) < 0) {
        if (d)
            closedir(d);
        return 0;
    }
    for (struct dirent *e; n < SHMSTALE_MAX && (e = readdir(d));) {
        struct stat st;
        if (strncmp(e->d_name, SHMSTALE_PREFIX, strlen(SHMSTALE_PREFIX)) != 0 ||
            strlen(e->d_name) >= sizeof c[0].name ||
            fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid())
            continue;
        c[n] = (struct cand){.ino = st.st_ino, .size = st.st_size};
        memcpy(c[n].name, e->d_name, strlen(e->d_name) + 1); /* fits: checked above */
        n++;
    }
    if (n == 0) {
        closedir(d);
        return 0;
    }
    int procfd = open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *p = procfd >= 0 ? fdopendir(procfd) : NULL;
    if (!p) { /* no /proc: nothing can be known to be stale */
        if (procfd >= 0)
            close(procfd);
        closedir(d);
        return 0;
    }
    for (struct dirent *e; (e = readdir(p));)
        if (isdigit((unsigned char)e->d_name[0]))
            mark_held(procfd, e->d_name, ds.st_dev, c, n);
    closedir(p);
    int removed = 0;
    uint64_t bytes = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].held || unlinkat(dirfd(d), c[i].name, 0) < 0)
            continue;
        removed++;
        bytes += (uint64_t)c[i].size;
        log_info("shm: removed %s/%s (%" PRIu64 " bytes): a UCX segment no process holds, left "
                 "by one that died", dir, c[i].name, (uint64_t)c[i].size);
    }
    closedir(d);
    if (ret_bytes)
        *ret_bytes = bytes;
    return removed;
}
