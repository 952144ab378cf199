/* kvferryctl_why.c: why a connect to the control socket failed, said for people: the path that
 * is wrong (a missing directory, a directory or regular file where the socket should be, a
 * directory or socket whose mode and group keep us out, a socket nobody listens on) and the fix. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client_why.h"
#include "kvferryctl.h"

void ctl_explain_connect(FILE *f, const char *path, int err)
{
    struct stat st;
    char who[200], dir[PATH_MAX];
    fprintf(f, "kvferryctl: connect %s: %s\n", path, strerror(err));
    if (err == EACCES && client_why_blocked_dir(path, dir, sizeof dir, &st) == 0) {
        client_why_whom(&st, who, sizeof who);
        fprintf(f, "  the directory %s cannot be searched by you (%s).\n  Fix: run as root, or "
                "join the group the daemon's sockets belong to (sockets.group), or loosen the "
                "directory's mode.\n", dir, who);
        return;
    }
    if (lstat(path, &st) < 0) {
        char parent[PATH_MAX];
        snprintf(parent, sizeof parent, "%s", path);
        char *slash = strrchr(parent, '/');
        if (slash && slash != parent)
            *slash = '\0';
        struct stat pst;
        if (slash && stat(parent, &pst) < 0)
            fprintf(f, "  the directory %s does not exist: kvferryd is not running, or it uses "
                    "another sockets.dir.\n  Fix: start kvferryd, or point kvferryctl at its "
                    "config (--config FILE) or socket (--socket PATH).\n", parent);
        else
            fprintf(f, "  nothing is at %s: kvferryd is not running, or its control socket is "
                    "elsewhere.\n  Fix: start kvferryd, or use --config FILE / --socket PATH.\n",
                    path);
        return;
    }
    if (S_ISDIR(st.st_mode)) {
        fprintf(f, "  %s is a directory, not a socket.\n  Fix: give the socket inside it, e.g. "
                "--socket %s/control.sock.\n", path, path);
        return;
    }
    if (!S_ISSOCK(st.st_mode)) {
        fprintf(f, "  %s is %s, not a socket.\n  Fix: give the control socket's path "
                "(sockets.control, by default <sockets.dir>/control.sock).\n", path,
                S_ISREG(st.st_mode) ? "a regular file" : "not a socket file");
        return;
    }
    if (err == EACCES || err == EPERM) {
        client_why_whom(&st, who, sizeof who);
        fprintf(f, "  the socket does not let you in (%s).\n  Fix: run as root, or join its "
                "group (sockets.group) with write permission for the group (sockets.mode "
                "0660).\n", who);
        return;
    }
    if (err == ECONNREFUSED) {
        fprintf(f, "  nobody listens on %s: a stale socket of a kvferryd that is gone.\n  Fix: "
                "start kvferryd (it replaces the stale socket).\n", path);
        return;
    }
    fprintf(f, "  is kvferryd running?\n");
}
