/* client_why.h: why a connect to one of kvferryd's unix sockets failed, in words: the path that
 * is wrong (a missing directory, a directory or regular file where the socket should be, a
 * directory or socket whose mode and group keep this process out, a socket nobody listens on).
 * Used by kvf_connect (its err buffer) and kvferryctl (which adds the fix). */
#ifndef KVF_CLIENT_WHY_H
#define KVF_CLIENT_WHY_H

#include <stddef.h>
#include <sys/stat.h>

/* "mode 0660, owner root:kvferry; you are uid 1000, not in its group" for st. */
void client_why_whom(const struct stat *st, char *buf, size_t len);
/* The first directory on the way to path that this process cannot search: 0 with its name and
 * stat, or -1. */
int client_why_blocked_dir(const char *path, char *dir, size_t len, struct stat *st);
/* One clause saying what is wrong with path after connect failed with err (errno), e.g.
 * "it is a directory, not a socket"; "" when nothing more is known. Returns buf. */
const char *client_why(const char *path, int err, char *buf, size_t len);

#endif
