/* client_why.c: why a connect to a kvferryd socket failed (client_why.h). */
#include <errno.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "client_why.h"

static int in_group(gid_t gid)
{
    if (getegid() == gid)
        return 1;
    gid_t groups[NGROUPS_MAX];
    int n = getgroups(NGROUPS_MAX, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid)
            return 1;
    return 0;
}

void client_why_whom(const struct stat *st, char *buf, size_t len)
{
    struct passwd *pw = getpwuid(st->st_uid);
    struct group *gr = getgrgid(st->st_gid);
    char u[32], g[32];
    snprintf(u, sizeof u, "%u", (unsigned)st->st_uid);
    snprintf(g, sizeof g, "%u", (unsigned)st->st_gid);
    snprintf(buf, len, "mode %04o, owner %s:%s; you are uid %u, %s its group",
             (unsigned)(st->st_mode & 07777), pw ? pw->pw_name : u, gr ? gr->gr_name : g,
             (unsigned)geteuid(), in_group(st->st_gid) ? "in" : "not in");
}

int client_why_blocked_dir(const char *path, char *dir, size_t len, struct stat *st)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (stat(p, st) == 0 && S_ISDIR(st->st_mode) && access(p, X_OK) < 0) {
            snprintf(dir, len, "%s", p);
            return 0;
        }
        *s = '/';
    }
    return -1;
}

const char *client_why(const char *path, int err, char *buf, size_t len)
{
    struct stat st;
    char who[200], dir[PATH_MAX];
    buf[0] = '\0';
    if (err == EACCES && client_why_blocked_dir(path, dir, sizeof dir, &st) == 0) {
        client_why_whom(&st, who, sizeof who);
        snprintf(buf, len, "the directory %s cannot be searched (%s)", dir, who);
    } else if (lstat(path, &st) < 0)
        snprintf(buf, len, "nothing is at %s: kvferryd is not running there, or uses another "
                 "socket path", path);
    else if (S_ISDIR(st.st_mode))
        snprintf(buf, len, "%s is a directory, not a socket (give the socket inside it)", path);
    else if (!S_ISSOCK(st.st_mode))
        snprintf(buf, len, "%s is %s, not a socket", path,
                 S_ISREG(st.st_mode) ? "a regular file" : "not a socket file");
    else if (err == EACCES || err == EPERM) {
        client_why_whom(&st, who, sizeof who);
        snprintf(buf, len, "the socket does not let you in (%s): join its group (sockets.group)",
                 who);
    } else if (err == ECONNREFUSED)
        snprintf(buf, len, "nobody listens on %s: a stale socket of a kvferryd that is gone",
                 path);
    return buf;
}
