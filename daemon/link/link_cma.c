/* link_cma.c: the peer's arena written from this process over cma (link_peer_arena_cma,
 * docs/UCX.md "Copies into the peer's arena over cma"). Across network namespaces of one host
 * no transport maps the peer's arena here (sysv/posix are left out, trap 2), but its process is
 * reachable as UCX's cma reaches it for rendezvous: so the copy threads write its landing slots
 * with process_vm_writev, in parallel, instead of its loop reading each chunk serially. Loop
 * thread only. */
#include "link_int.h"

#include "log.h"

#include <errno.h>
#include <string.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/uio.h>

/* Whether transport tl carries one of the endpoint's lanes (the comma list of link_peer.c). */
static int has_lane(const char *all, const char *tl)
{
    size_t n = strlen(tl);
    for (const char *s = all; (s = strstr(s, tl)); s += n)
        if ((s == all || s[-1] == ',') && (s[n] == ',' || s[n] == '\0'))
            return 1;
    return 0;
}

int link_peer_arena_cma(struct link_peer *p, uint32_t *pid_ret, uint64_t *base_ret)
{
    if (p->state != LINK_PEER_READY || !p->arena_rkey || !p->arena_len)
        return -ENOTCONN;
    if (p->cma_write == 0) {
        link_peer_put_fast(p); /* the lanes, looked at again while they may still change */
        if (p->put_fast || !p->remote_pid || !has_lane(p->tl_all, "cma"))
            return -ENOTSUP; /* not decided: cma may join once the wireup settles */
        /* the pid names a kvferryd (the binary we run), and ptrace's access check, the same for
         * reads and writes (PTRACE_MODE_ATTACH), lets us at its arena */
        char b, exe[48];
        snprintf(exe, sizeof exe, "/proc/%u/exe", p->remote_pid);
        struct stat ours, theirs;
        ssize_t n = -1;
        const char *why = "its pid does not run this kvferryd binary";
        if (stat("/proc/self/exe", &ours) == 0 && stat(exe, &theirs) == 0 &&
            ours.st_dev == theirs.st_dev && ours.st_ino == theirs.st_ino) {
            struct iovec l = {.iov_base = &b, .iov_len = 1};
            struct iovec r = {.iov_base = (void *)(uintptr_t)p->arena_addr, .iov_len = 1};
            n = process_vm_readv((pid_t)p->remote_pid, &l, 1, &r, 1, 0);
            why = n == 1 ? "" : strerror(errno);
        }
        p->cma_write = n == 1 ? 1 : -1;
        log_info("link peer %llu (%s): its arena (pid %u) is %swritten by the copy threads over "
                 "cma%s%s", (unsigned long long)p->serial, p->remote_id, p->remote_pid,
                 n == 1 ? "" : "not ", n == 1 ? "" : ": ", why);
    }
    if (p->cma_write < 0)
        return -ENOTSUP;
    *pid_ret = p->remote_pid;
    *base_ret = p->arena_addr;
    return 0;
}
