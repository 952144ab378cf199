/* secret_file.h: reading the cluster secret file without ever blocking: opened O_NONBLOCK and
 * O_NOFOLLOW, then fstat: a regular file only (a FIFO is refused at once), no group/other bits
 * (0600 or 0400), LINK_SECRET_MIN..LINK_SECRET_MAX bytes. Used at start (link.c) and by
 * --check-config, so both refuse the same files. Any thread; no state. */
#ifndef KVF_SECRET_FILE_H
#define KVF_SECRET_FILE_H

#include <stddef.h>
#include <stdint.h>

/* Reads the secret into buf (cap >= LINK_SECRET_MAX); 0 and *ret_len, or -errno with "path:
 * why (fix)" in err: -EPERM (mode), -EINVAL (not a regular file, size), -EIO, or open's. */
int secret_file_read(const char *path, uint8_t *buf, size_t cap, size_t *ret_len, char *err,
                     size_t errlen);

#endif
