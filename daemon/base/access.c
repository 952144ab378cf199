/* access.c: access lists resolved to ids, and the peer checks. */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "access.h"

#define ACCESS_GROUPS_MAX 1024

static int parse_id(const char *s, unsigned *ret)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (!*s || *end || errno || v > 0xfffffffeUL)
        return -EINVAL;
    *ret = (unsigned)v;
    return 0;
}

static int resolve_list(const char *key, const struct cfg_list *l, bool groups, struct id_set *ret,
                        char *err, size_t errlen)
{
    struct id_set s = {0, NULL};
    if (l->n) {
        s.ids = calloc(l->n, sizeof(*s.ids));
        if (!s.ids)
            return -ENOMEM;
    }
    for (uint32_t i = 0; i < l->n; i++) {
        const char *name = l->items[i];
        unsigned id;
        if (parse_id(name, &id) == 0) {
            s.ids[s.n++] = id;
            continue;
        }
        if (groups) {
            struct group *g = getgrnam(name);
            if (g) {
                s.ids[s.n++] = g->gr_gid;
                continue;
            }
        } else {
            struct passwd *p = getpwnam(name);
            if (p) {
                s.ids[s.n++] = p->pw_uid;
                continue;
            }
        }
        snprintf(err, errlen, "%s: unknown %s '%s'", key, groups ? "group" : "user", name);
        free(s.ids);
        return -EINVAL;
    }
    *ret = s;
    return 0;
}

/* The sockets' group, whose members the sockets' mode (0660) lets connect: sockets.group (then
 * the sockets are chowned to it), else the daemon's own group. Its members are allowed like
 * allow_gids', so that file system and access.* agree. */
static int resolve_socket_group(const char *name, struct access *a, char *err, size_t errlen)
{
    unsigned id = (unsigned)getegid();
    bool chown_to = name && *name;
    if (chown_to && parse_id(name, &id) < 0) {
        struct group *g = getgrnam(name);
        if (!g) {
            snprintf(err, errlen, "sockets.group: unknown group '%s'", name);
            return -EINVAL;
        }
        id = g->gr_gid;
    }
    unsigned *ids = realloc(a->allow_gids.ids, (a->allow_gids.n + 1) * sizeof(*ids));
    if (!ids)
        return -ENOMEM;
    ids[a->allow_gids.n++] = id;
    a->allow_gids.ids = ids;
    a->has_socket_gid = chown_to;
    a->socket_gid = (gid_t)id;
    return 0;
}

int access_resolve(const struct kvf_config *c, struct access *ret, char *err, size_t errlen)
{
    struct access a;
    int r;
    memset(&a, 0, sizeof(a));
    if ((r = resolve_list("access.allow_uids", &c->access_allow_uids, false, &a.allow_uids, err,
                          errlen)) < 0 ||
        (r = resolve_list("access.allow_gids", &c->access_allow_gids, true, &a.allow_gids, err,
                          errlen)) < 0 ||
        (r = resolve_list("access.admin_uids", &c->access_admin_uids, false, &a.admin_uids, err,
                          errlen)) < 0 ||
        (r = resolve_list("access.admin_gids", &c->access_admin_gids, true, &a.admin_gids, err,
                          errlen)) < 0) {
        access_done(&a);
        return r;
    }
    if ((r = resolve_socket_group(c->sockets_group, &a, err, errlen)) < 0) {
        access_done(&a);
        return r;
    }
    *ret = a;
    return 0;
}

void access_done(struct access *a)
{
    if (!a)
        return;
    free(a->allow_uids.ids);
    free(a->allow_gids.ids);
    free(a->admin_uids.ids);
    free(a->admin_gids.ids);
    memset(a, 0, sizeof(*a));
}

int access_peer_cred(int fd, struct peer_cred *ret)
{
    struct ucred uc;
    socklen_t len = sizeof(uc);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
        return -errno;
    ret->pid = uc.pid;
    ret->uid = uc.uid;
    ret->gid = uc.gid;
    ret->admin = false;
    ret->n_groups = 0;
    len = sizeof(ret->groups);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, ret->groups, &len) == 0)
        ret->n_groups = (uint16_t)(len / sizeof(gid_t));
    return 0;
}

static bool set_has(const struct id_set *s, unsigned id)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->ids[i] == id)
            return true;
    return false;
}

/* True when one of the peer's groups (primary from the credential and from passwd,
 * supplementary as the process runs with them and from the group database) is in s. */
static bool groups_match(const struct id_set *s, const struct peer_cred *cred)
{
    if (s->n == 0)
        return false;
    if (set_has(s, cred->gid))
        return true;
    for (uint16_t i = 0; i < cred->n_groups && i < ACCESS_PEER_GROUPS; i++)
        if (set_has(s, cred->groups[i]))
            return true;
    struct passwd *p = getpwuid(cred->uid);
    if (!p)
        return false;
    gid_t groups[ACCESS_GROUPS_MAX];
    int n = ACCESS_GROUPS_MAX;
    if (getgrouplist(p->pw_name, p->pw_gid, groups, &n) < 0)
        n = ACCESS_GROUPS_MAX; /* truncated: check what we got */
    for (int i = 0; i < n; i++)
        if (set_has(s, groups[i]))
            return true;
    return false;
}

bool access_check(const struct access *a, struct peer_cred *cred)
{
    bool own = cred->uid == 0 || cred->uid == getuid() || cred->uid == geteuid();
    cred->admin = own || set_has(&a->admin_uids, cred->uid) || groups_match(&a->admin_gids, cred);
    cred->allowed = cred->admin || set_has(&a->allow_uids, cred->uid) ||
                    groups_match(&a->allow_gids, cred);
    cred->generation = a->generation;
    return cred->allowed;
}

bool access_current(const struct access *a, struct peer_cred *cred)
{
    return cred->generation == a->generation ? cred->allowed : access_check(a, cred);
}
