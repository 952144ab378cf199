/* sockpath.c: see sockpath.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "sockpath.h"

int sockpath_addr(struct sockaddr_un *sa, const char *path, const char *what, char *err,
                  size_t errlen)
{
    size_t n = strlen(path);
    memset(sa, 0, sizeof(*sa));
    sa->sun_family = AF_UNIX;
    if (n >= sizeof(sa->sun_path)) {
        snprintf(err, errlen,
                 "%s socket path %s is %zu bytes: a unix socket path holds at most %zu "
                 "(shorten sockets.dir or sockets.%s)",
                 what, path, n, sizeof(sa->sun_path) - 1, what);
        return -ENAMETOOLONG;
    }
    memcpy(sa->sun_path, path, n + 1);
    return 0;
}

int sockpath_mkdir_parents(const char *path, mode_t mode)
{
    char buf[sizeof(((struct sockaddr_un *)0)->sun_path)];
    snprintf(buf, sizeof(buf), "%s", path);
    char *slash = strrchr(buf, '/');
    if (!slash || slash == buf)
        return 0;
    *slash = '\0';
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, mode) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int sockpath_clear_stale(const struct sockaddr_un *sa)
{
    struct stat st;
    if (lstat(sa->sun_path, &st) < 0)
        return errno == ENOENT ? 0 : -errno;
    if (!S_ISSOCK(st.st_mode))
        return -EEXIST;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa));
    close(fd);
    if (r == 0)
        return -EADDRINUSE;
    if (unlink(sa->sun_path) < 0 && errno != ENOENT)
        return -errno;
    return 0;
}
