/* sockpath.h: preparing the path of a unix socket the daemon listens on (control, worker):
 * its directory made (mkdir -p), a stale socket file left by a dead daemon removed, a live one
 * refused. Loop thread only (blocking but local and short). */
#ifndef KVF_SOCKPATH_H
#define KVF_SOCKPATH_H

#include <stddef.h>
#include <sys/stat.h>
#include <sys/un.h>

/* Room for a socket path before it is checked against sun_path (a too-long one is reported
 * whole, never truncated). */
#define SOCKPATH_BUF 4096

/* sa = AF_UNIX address of path. A path longer than sun_path holds (107 bytes) is refused:
 * -ENAMETOOLONG and err "<what> socket path <path> is N bytes: a unix socket path holds at
 * most 107 ...". */
int sockpath_addr(struct sockaddr_un *sa, const char *path, const char *what, char *err,
                  size_t errlen);
/* mkdir -p of the directory holding the socket file `path`, with `mode`. 0 or -errno. */
int sockpath_mkdir_parents(const char *path, mode_t mode);
/* Removes a socket file nobody accepts on: 0; -EADDRINUSE when a daemon is live there, -EEXIST
 * when the path is not a socket, else -errno. */
int sockpath_clear_stale(const struct sockaddr_un *sa);

#endif
