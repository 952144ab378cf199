/* sockowner.h: a listening socket handed to sockets.group, so that the group's members can
 * connect (the socket's mode gives the group rw; the directory must let the group through).
 * Loop thread only. */
#ifndef KVF_SOCKOWNER_H
#define KVF_SOCKOWNER_H

#include <stddef.h>

#include "access.h"

/* When sockets.group is set: chgrp of the socket file `path`, and of its directory when the
 * daemon owns it (which then gets g+x, so members can reach the socket). Without sockets.group
 * nothing changes. 0, or -errno with "sockets.group: ..." in err (the daemon's user must be a
 * member of the group to give it a file). */
int sockowner_apply(const char *path, const struct access *a, char *err, size_t errlen);

#endif
