/* memroom.h: memory asked for is memory checked. Before a large allocation of shared memory
 * (the arena: UCX allocates it as SysV shm, or as a file in /dev/shm where SysV cannot hold it),
 * what the host can give is read: MemAvailable (/proc/meminfo), the room the daemon's cgroup
 * leaves (memory.max less memory.current, cgroup v2), the commit limit under strict overcommit,
 * and /dev/shm's free space when the segment would land there (SysV's shmmax / shmall too
 * small). A size past any of them is refused with the numbers, before anything is allocated: an
 * arena larger than the machine once had the OOM killer take other processes and left a 24.9 GB
 * file in /dev/shm. Start only (loop thread); reads /proc and /sys, allocates nothing. */
#ifndef KVF_MEMROOM_H
#define KVF_MEMROOM_H

#include <stddef.h>
#include <stdint.h>

/* 0 when `bytes` of shared memory fit, else -ENOMEM with "<what> N (bytes) does not fit:
 * MemAvailable is M ..." in err. Limits that cannot be read are not held against it. */
int memroom_check(uint64_t bytes, const char *what, char *err, size_t errlen);

#endif
