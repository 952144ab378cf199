/* sockowner.c: see sockowner.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sockowner.h"

int sockowner_apply(const char *path, const struct access *a, char *err, size_t errlen)
{
    if (!a->has_socket_gid)
        return 0;
    gid_t gid = a->socket_gid;
    if (chown(path, (uid_t)-1, gid) < 0) {
        int e = errno;
        snprintf(err, errlen, "sockets.group: cannot give %s to gid %u: %s%s", path, (unsigned)gid,
                 strerror(e),
                 e == EPERM ? " (the daemon's user must be a member of that group)" : "");
        return -e;
    }
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else
        *(slash == dir ? slash + 1 : slash) = '\0';
    struct stat st;
    if (stat(dir, &st) < 0 || st.st_uid != geteuid())
        return 0; /* not ours to change (a shared directory, /run/kvferry made by systemd) */
    if ((st.st_gid != gid && chown(dir, (uid_t)-1, gid) < 0) ||
        ((st.st_mode & S_IXGRP) == 0 && chmod(dir, (st.st_mode & 07777) | S_IXGRP) < 0)) {
        int e = errno;
        snprintf(err, errlen, "sockets.group: cannot open the socket directory %s to gid %u: %s",
                 dir, (unsigned)gid, strerror(e));
        return -e;
    }
    return 0;
}
