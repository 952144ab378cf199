/* access.h: who may use the daemon's sockets. access.* lists (user/group names or numbers) are
 * resolved once, at load and at reload, into numeric sets; a peer (from SO_PEERCRED) is then
 * matched against them: by uid, or by gid against the peer's primary and supplementary groups.
 * Access is decided per command, not per connection: each reload gives the sets a new
 * generation, and access_current re-decides a connected peer whose decision is older, so a
 * reload that revokes a uid or an admin applies to open connections at their next command.
 * The daemon's own uid and root are always allowed and always admins; admins are allowed. So are
 * the members of the sockets' group (sockets.group, else the daemon's own group): the sockets'
 * mode lets them in, and access.* agrees.
 * struct access owns its arrays. Loop thread only (NSS lookups happen here). */
#ifndef KVF_ACCESS_H
#define KVF_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cfg.h"

struct id_set {
    size_t n;
    unsigned *ids; /* owned */
};

struct access {
    struct id_set allow_uids, allow_gids, admin_uids, admin_gids;
    bool has_socket_gid; /* sockets.group set: the sockets are chowned to socket_gid */
    gid_t socket_gid;
    uint64_t generation; /* the daemon's: one more at every reload that resolved these */
};

#define ACCESS_PEER_GROUPS 64 /* supplementary groups of a peer kept from SO_PEERGROUPS */

struct peer_cred {
    pid_t pid;
    uid_t uid;
    gid_t gid;
    bool admin;
    bool allowed;        /* the decision of access_check, as of the sets' `generation` */
    uint64_t generation;
    /* The peer process's own supplementary groups (SO_PEERGROUPS): those it runs with, which
     * the file system used to let it connect (a unit's SupplementaryGroups=, newgrp), whether
     * or not the group database lists them. n_groups 0: unknown (more than fit, or none). */
    uint16_t n_groups;
    gid_t groups[ACCESS_PEER_GROUPS];
};

/* Resolves the four access.* lists and sockets.group (whose gid joins allow_gids). On an unknown
 * name writes "access.allow_uids: unknown user 'x'" into err and returns -EINVAL; *ret
 * untouched. */
int access_resolve(const struct kvf_config *c, struct access *ret, char *err, size_t errlen);
void access_done(struct access *a);

/* Reads SO_PEERCRED (and SO_PEERGROUPS) of a connected unix socket. 0 or -errno. */
int access_peer_cred(int fd, struct peer_cred *ret);
/* Sets cred->admin and cred->allowed (as of a->generation). Returns cred->allowed: whether the
 * peer may use the socket at all. */
bool access_check(const struct access *a, struct peer_cred *cred);
/* access_check again when the sets changed since cred's decision (a reload), else the decision
 * as it stands: a connection asks before each command. */
bool access_current(const struct access *a, struct peer_cred *cred);

#endif
