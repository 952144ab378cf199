/* sockpath.h: preparing the path of a unix socket the daemon listens on (control, worker):
 * its directory made (mkdir -p), a stale socket file left by a dead daemon removed, a live one
 * refused. Loop thread only (blocking but local and short). */
#ifndef KVF_SOCKPATH_H
#define KVF_SOCKPATH_H

#include <sys/stat.h>
#include <sys/un.h>

/* mkdir -p of the directory holding the socket file `path`, with `mode`. 0 or -errno. */
int sockpath_mkdir_parents(const char *path, mode_t mode);
/* Removes a socket file nobody accepts on: 0; -EADDRINUSE when a daemon is live there, -EEXIST
 * when the path is not a socket, else -errno. */
int sockpath_clear_stale(const struct sockaddr_un *sa);

#endif
