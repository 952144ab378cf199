/* shmstale.h: UCX's shared-memory files that outlived their process. UCX places a segment it
 * cannot make as SysV shm (marked for removal at once, freed by the kernel at any exit) in a file
 * /dev/shm/ucx_shm_posix_<id>; with UCX_POSIX_USE_PROC_LINK=n, or when the process dies while
 * UCX still writes it (an oversized arena killed by the OOM killer), the file stays and holds
 * its memory until someone removes it. At start, before the arena is made, such files owned by
 * the daemon's user that no process has open or mapped are removed (under systemd, RemoveIPC=
 * does the same when the unit stops). A file some process holds is never touched: it is found
 * through /proc/<pid>/fd and /proc/<pid>/maps of every process the daemon can see, and a file
 * of the daemon's user can be held only by processes of that user (mode 0600) or root. Start
 * only (loop thread). */
#ifndef KVF_SHMSTALE_H
#define KVF_SHMSTALE_H

#include <stdint.h>

/* Removes the stale files of dir (NULL: $UCX_POSIX_DIR or /dev/shm); returns how many, and
 * their bytes in *ret_bytes (may be NULL). Logs what it removed. */
int shmstale_clean(const char *dir, uint64_t *ret_bytes);

#endif
