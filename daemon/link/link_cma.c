/* link_cma.c: the peer's memory written from this process over cma. Across network namespaces
 * of one host no transport maps the peer's arena here (sysv/posix are left out, trap 2), but its
 * process is reachable as UCX's cma reaches it for rendezvous: so the copy threads write its
 * landing slots with process_vm_writev, in parallel, instead of its loop reading each chunk
 * serially (link_peer_arena_cma, docs/UCX.md "Copies into the peer's arena over cma"). On any
 * lanes of one host that include cma, the fragment path writes the generation pools the peer
 * named the same way (link_peer_cma, link_cma_write): UCX would emulate those puts with active
 * messages that the peer's loop copies out and acknowledges. Loop thread only. */
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

/* Whether the peer's pid runs our own kvferryd binary and ptrace's access check (the same for
 * reads and writes, PTRACE_MODE_ATTACH) lets us at probe_addr there: "" or why not. */
static const char *cma_probe(const struct link_peer *p, uint64_t probe_addr)
{
    char b, exe[48];
    snprintf(exe, sizeof exe, "/proc/%u/exe", p->remote_pid);
    struct stat ours, theirs;
    if (stat("/proc/self/exe", &ours) != 0 || stat(exe, &theirs) != 0 ||
        ours.st_dev != theirs.st_dev || ours.st_ino != theirs.st_ino)
        return "its pid does not run this kvferryd binary";
    struct iovec l = {.iov_base = &b, .iov_len = 1};
    struct iovec r = {.iov_base = (void *)(uintptr_t)probe_addr, .iov_len = 1};
    return process_vm_readv((pid_t)p->remote_pid, &l, 1, &r, 1, 0) == 1 ? "" : strerror(errno);
}

int link_peer_arena_cma(struct link_peer *p, uint32_t *pid_ret, uint64_t *base_ret)
{
    if (p->state != LINK_PEER_READY || !p->arena_rkey || !p->arena_len)
        return -ENOTCONN;
    if (p->cma_write == 0) {
        link_peer_put_fast(p); /* the lanes, looked at again while they may still change */
        if (p->put_fast || !p->remote_pid || !has_lane(p->tl_all, "cma"))
            return -ENOTSUP; /* not decided: cma may join once the wireup settles */
        const char *why = cma_probe(p, p->arena_addr);
        p->cma_write = why[0] ? -1 : 1;
        log_info("link peer %llu (%s): its arena (pid %u) is %swritten by the copy threads over "
                 "cma%s%s", (unsigned long long)p->serial, p->remote_id, p->remote_pid,
                 why[0] ? "not " : "", why[0] ? ": " : "", why);
    }
    if (p->cma_write < 0)
        return -ENOTSUP;
    *pid_ret = p->remote_pid;
    *base_ret = p->arena_addr;
    return 0;
}

int link_peer_cma(struct link_peer *p, uint64_t probe_addr, uint32_t *pid_ret)
{
    if (p->state != LINK_PEER_READY)
        return -ENOTCONN;
    if (p->cma_proc == 0) {
        link_peer_put_fast(p);
        if (!p->remote_pid || !has_lane(p->tl_all, "cma"))
            return -ENOTSUP; /* not decided: cma may join once the wireup settles */
        const char *why = cma_probe(p, probe_addr);
        p->cma_proc = why[0] ? -1 : 1;
        log_info("link peer %llu (%s): its memory (pid %u) is %swritten over cma%s%s",
                 (unsigned long long)p->serial, p->remote_id, p->remote_pid, why[0] ? "not " : "",
                 why[0] ? ": " : "", why);
    }
    if (p->cma_proc <= 0)
        return -ENOTSUP;
    if (pid_ret)
        *pid_ret = p->remote_pid;
    return 0;
}

int link_cma_write(struct link_peer *p, const struct iovec *local, const struct iovec *remote,
                   unsigned n, link_done_cb cb, void *arg)
{
    if (p->state != LINK_PEER_READY || p->cma_proc <= 0)
        return -ENOTCONN;
    if (n == 0 || n > LINK_CMA_IOV_MAX)
        return -EINVAL;
    size_t len = 0;
    for (unsigned i = 0; i < n; i++) {
        if (local[i].iov_len != remote[i].iov_len || len + local[i].iov_len < len)
            return -EINVAL;
        len += local[i].iov_len;
    }
    ssize_t w = process_vm_writev((pid_t)p->remote_pid, local, n, remote, n, 0);
    int status = w >= 0 && (size_t)w == len ? 0 : w < 0 ? -errno : -EFAULT; /* short: unmapped */
    uint64_t done = w > 0 ? (uint64_t)w : 0;
    p->bytes_put += done;
    p->link->st.cma_writes++;
    p->link->st.bytes_put += done;
    return link_defer_status(p->link, cb, arg, status);
}
