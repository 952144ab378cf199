/* link_proc.c: which process the peer daemon is, so that a peer lost while frozen can be known
 * dead (see link.h, link_peer_take_pidfd).
 *
 * A peer that puts over shared memory writes our landing memory from its own process: once that
 * process has exited, no put of it can still land. The handshake's PROOF and ACCEPT carry, when
 * both sides offered it (HS_CAP_PROC in HELLO and CHALLENGE; an older daemon offers nothing and
 * gets the old messages), the sender's pid, pid namespace and boot id, MACed with the cluster
 * secret over both nonces. A pid means something to us only in our own pid namespace of the same
 * boot; then a pidfd is opened when the link becomes READY, while the peer's process is known to
 * run (it just answered), so a pid reused later cannot be mistaken for it. Without pidfd_open
 * (kernels before 5.3, a seccomp filter refusing it) the process start time is read from
 * /proc/<pid>/stat at that moment instead: a pid reused later has another start time, so
 * polling kill(pid, 0) and the start time (link_proc_alive) tells the same exit, later by the
 * polling interval. */
#include "link_int.h"

#include "log.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define PROC_LABEL "kvferry-link-proc"
#define PID_LIMIT 4194304u /* the kernel's PID_MAX_LIMIT */

static int read_boot_id(uint8_t out[LINK_BOOT_ID_BYTES])
{
    char s[64] = {0}, hex[2 * LINK_BOOT_ID_BYTES + 1];
    int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, s, sizeof s - 1);
    close(fd);
    size_t k = 0;
    for (ssize_t i = 0; i < n && k < sizeof hex - 1; i++)
        if (s[i] != '-' && s[i] != '\n')
            hex[k++] = s[i];
    hex[k] = 0;
    size_t got = 0;
    if (k != sizeof hex - 1 ||
        sodium_hex2bin(out, LINK_BOOT_ID_BYTES, hex, k, NULL, &got, NULL) != 0 ||
        got != LINK_BOOT_ID_BYTES)
        return -EINVAL;
    return 0;
}

void link_proc_init(struct link *l)
{
    struct stat st;
    memset(&l->proc, 0, sizeof l->proc);
    if (stat("/proc/self/ns/pid", &st) < 0 || read_boot_id(l->proc.boot_id) < 0) {
        log_warn("link: cannot read this daemon's pid namespace or boot id: a peer lost while "
                 "frozen keeps its landing slots until it is heard again");
        return;
    }
    l->proc.pid = htole32((uint32_t)getpid());
    l->proc.pidns_dev = htole64((uint64_t)st.st_dev);
    l->proc.pidns_ino = htole64((uint64_t)st.st_ino);
}

static void proc_mac(const struct link_peer *p, char dir, const struct link_proc_id *id,
                     uint8_t *out)
{
    const struct link *l = p->link;
    const uint8_t *nc = p->outbound ? p->nonce_local : p->nonce_remote;
    const uint8_t *ns = p->outbound ? p->nonce_remote : p->nonce_local;
    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, l->secret, l->secret_len);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)PROC_LABEL, sizeof(PROC_LABEL));
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)&dir, 1);
    crypto_auth_hmacsha256_update(&st, nc, LINK_NONCE_BYTES);
    crypto_auth_hmacsha256_update(&st, ns, LINK_NONCE_BYTES);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)id, offsetof(struct link_proc_id, mac));
    crypto_auth_hmacsha256_final(&st, out);
    sodium_memzero(&st, sizeof(st));
}

void link_proc_fill(const struct link_peer *p, struct link_proc_id *out)
{
    int test = p->link->cfg.proc_test;
    *out = p->link->proc;
    if (test == LINK_PROC_TEST_PID)
        out->pid = htole32(PID_LIMIT + 1);
    if (test == LINK_PROC_TEST_FLAGS)
        out->flags = htole32(1);
    proc_mac(p, p->outbound ? 'C' : 'S', out, out->mac);
    if (test == LINK_PROC_TEST_MAC)
        out->mac[0] ^= 1;
}

int link_proc_check(struct link_peer *p, const struct link_proc_id *in)
{
    const struct link *l = p->link;
    uint8_t mac[crypto_auth_hmacsha256_BYTES];
    proc_mac(p, p->outbound ? 'S' : 'C', in, mac);
    if (crypto_verify_32(mac, in->mac) != 0) {
        log_warn("link peer %llu (%s %s): its process identity has a bad MAC",
                 (unsigned long long)p->serial, p->addr, p->remote_id);
        return -EPROTO;
    }
    uint32_t pid = le32toh(in->pid);
    if (pid > PID_LIMIT || le32toh(in->flags) != 0) {
        log_warn("link peer %llu (%s %s): process identity out of bounds (pid %u, flags %#x)",
                 (unsigned long long)p->serial, p->addr, p->remote_id, pid, le32toh(in->flags));
        return -EPROTO;
    }
    static const uint8_t zero[LINK_BOOT_ID_BYTES];
    if (!pid || !l->proc.pid || !memcmp(in->boot_id, zero, sizeof zero))
        p->proc_why = "the peer could not tell its process";
    else if (memcmp(in->boot_id, l->proc.boot_id, sizeof zero) != 0)
        p->proc_why = "the peer runs under another boot id";
    else if (in->pidns_dev != l->proc.pidns_dev || in->pidns_ino != l->proc.pidns_ino)
        p->proc_why = "the peer runs in another pid namespace";
    else
        p->remote_pid = pid;
    return 0;
}

/* Field 22 (starttime) and field 3 (state) of /proc/<pid>/stat; the name in field 2 may hold
 * spaces and parentheses, so fields are counted from its last ')'. 0 or -errno. */
static int proc_stat(uint32_t pid, uint64_t *start, char *state)
{
    char path[48], buf[1024];
    snprintf(path, sizeof path, "/proc/%u/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    int err = errno;
    close(fd);
    if (n < 0)
        return -err;
    buf[n] = 0;
    char *q = strrchr(buf, ')');
    if (!q || q[1] != ' ' || !q[2])
        return -EINVAL;
    *state = q[2];
    q += 2;
    for (int f = 3; f < 22; f++) { /* to field 22 */
        q = strchr(q, ' ');
        if (!q)
            return -EINVAL;
        q++;
    }
    char *end;
    errno = 0;
    unsigned long long v = strtoull(q, &end, 10);
    if (errno || end == q || !v)
        return -EINVAL;
    *start = v;
    return 0;
}

int link_proc_alive(uint32_t pid, uint64_t start)
{
    uint64_t now = 0;
    char state = 0;
    int rc = proc_stat(pid, &now, &state);
    if (rc == 0)
        return now != start || state == 'Z' || state == 'X' ? 0 : 1;
    if (kill((pid_t)pid, 0) < 0 && errno == ESRCH)
        return 0;
    return rc == -ENOENT || rc == -ESRCH ? 1 : rc; /* the pid exists, its entry hidden: held */
}

static bool no_pidfd(void)
{
    const char *v = getenv("KVF_TEST_NO_PIDFD"); /* tests force the fallback with it */
    return v && strcmp(v, "1") == 0;
}

void link_proc_ready(struct link_peer *p)
{
    if (!p->remote_pid)
        return;
    int fd = no_pidfd() ? (errno = ENOSYS, -1)
                        : (int)syscall(SYS_pidfd_open, (pid_t)p->remote_pid, 0);
    if (fd >= 0) {
        p->pidfd = fd;
        return;
    }
    int err = errno;
    char state = 0;
    if (err != ESRCH && proc_stat(p->remote_pid, &p->remote_start, &state) == 0 &&
        state != 'Z' && state != 'X') {
        log_info("link peer %llu (%s %s): pidfd_open(%u): %s: its process is watched by its pid "
                 "and start time instead", (unsigned long long)p->serial, p->addr, p->remote_id,
                 p->remote_pid, strerror(err));
        return;
    }
    p->remote_start = 0;
    p->proc_why = err == ESRCH ? "the peer's pid names no process"
                               : "pidfd_open failed and its /proc entry cannot be read";
    log_warn("link peer %llu (%s %s): pidfd_open(%u): %s: a loss while frozen holds its "
             "slots until it is heard again", (unsigned long long)p->serial, p->addr,
             p->remote_id, p->remote_pid, strerror(err));
}

bool link_peer_proc_start(const struct link_peer *p, uint32_t *pid, uint64_t *start)
{
    if (!p->remote_pid || !p->remote_start)
        return false;
    *pid = p->remote_pid;
    *start = p->remote_start;
    return true;
}

int link_peer_take_pidfd(struct link_peer *p, const char **why)
{
    int fd = p->pidfd;
    p->pidfd = -1;
    *why = fd >= 0          ? NULL
           : p->proc_why    ? p->proc_why
           : !p->proc_cap   ? "the peer daemon does not tell its process (older version)"
                            : "the peer's process is not known";
    return fd;
}

uint32_t link_peer_pid(const struct link_peer *p)
{
    return p->pidfd >= 0 || p->remote_start ? p->remote_pid : 0;
}

void link_proc_close(struct link_peer *p)
{
    if (p->pidfd >= 0)
        close(p->pidfd);
    p->pidfd = -1;
}
