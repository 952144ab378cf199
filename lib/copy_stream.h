/* copy_stream.h: the run copy of the CPU copy executor (copy.c) for runs that take streaming
 * stores: the bytes go to memory without being read for ownership first, from up to four 4 KiB
 * stretches of the run at once. One kernel serves the process; it is picked on first use
 * (the widest vectors the CPU has: avx512, avx2, sse2; memcpy elsewhere) or set by name for
 * benches and tests. Any thread. */
#ifndef KVF_COPY_STREAM_H
#define KVF_COPY_STREAM_H

#include <stdbool.h>
#include <stdint.h>

/* Copies n bytes from s to d (no overlap) with the current kernel. Stores may stay weakly
 * ordered until copy_stream_fence. */
void copy_stream_run(uint8_t *d, const uint8_t *s, uint64_t n);
/* Makes the streaming stores of this thread visible to others (sfence; nothing for memcpy). */
void copy_stream_fence(void);

/* Kernel i's name (0 = the widest), NULL past the last; whether this CPU can run it. */
const char *copy_stream_kernel_at(uint32_t i, bool *ret_supported);
/* The current kernel's name. */
const char *copy_stream_kernel(void);
/* Sets the kernel for the whole process: 0, -EINVAL (unknown name) or -ENOTSUP (the CPU lacks
 * it). For benches and tests, before copies start. */
int copy_stream_kernel_set(const char *name);

#endif
