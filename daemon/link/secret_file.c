/* secret_file.c: the cluster secret file, read without blocking (see secret_file.h). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "link.h"
#include "secret_file.h"

int secret_file_read(const char *path, uint8_t *buf, size_t cap, size_t *ret_len, char *err,
                     size_t errlen)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    if (fd < 0) {
        int e = errno;
        snprintf(err, errlen, "secret file %s: %s", path,
                 e == ELOOP ? "a symbolic link (refused: give the file itself)" : strerror(e));
        return -e;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) < 0) {
        rc = -errno;
        snprintf(err, errlen, "secret file %s: %s", path, strerror(errno));
    } else if (!S_ISREG(st.st_mode)) {
        rc = -EINVAL;
        snprintf(err, errlen, "secret file %s: not a regular file", path);
    } else if (st.st_mode & 077) {
        rc = -EPERM;
        snprintf(err, errlen, "secret file %s: mode %04o lets group/others read it; chmod 600 it",
                 path, (unsigned)(st.st_mode & 07777));
    } else if (st.st_size < LINK_SECRET_MIN || st.st_size > LINK_SECRET_MAX ||
               (size_t)st.st_size > cap) {
        rc = -EINVAL;
        snprintf(err, errlen, "secret file %s: %lld bytes, must hold %d..%d", path,
                 (long long)st.st_size, LINK_SECRET_MIN, LINK_SECRET_MAX);
    } else {
        ssize_t n = read(fd, buf, (size_t)st.st_size);
        if (n != st.st_size) {
            rc = -EIO;
            snprintf(err, errlen, "secret file %s: short read", path);
        } else {
            *ret_len = (size_t)n;
        }
    }
    close(fd);
    return rc;
}
