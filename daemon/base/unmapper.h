/* unmapper.h: one thread that unmaps the host pool mappings the loop has let go of (docs/DESIGN.md
 * §2 "Threads and ownership"). Once a worker exited, the daemon's mapping is often the last
 * reference to its memfd, so the munmap zaps every page table entry and then truncates the file,
 * freeing every page: about half a second for a 4 GiB rank on the 2-core machine
 * (bench_exit_stall). On the loop that stalled every other worker's frames and UCX progress; here
 * it runs on a thread that owns nothing else, so it delays no copy either.
 *
 * Ownership. unmapper_unmap hands a range over: from then on the unmapper owns it and nothing else
 * in the process may touch it. A pool mapping is handed over by its owner only when nothing pins
 * it (mempin_unmap at once, or at its last unpin), so no copy, prefault or put runs on it. The
 * unmapper unmaps a range in steps of UNMAPPER_STEP, so each munmap holds the address space's mmap
 * lock for one step's page tables only (an mmap on the loop, a REGISTER's, waits that long at
 * most); the truncation runs after the last step, with no lock the loop takes. unmapper_free
 * finishes every range handed over, then joins: nothing is left mapped at stop.
 *
 * Threads. unmapper_unmap and unmapper_get_stats may be called from any thread (one mutex); in the
 * daemon the loop calls them. The unmapper thread touches only its queue and the ranges handed
 * over. Never logs. */
#ifndef KVF_UNMAPPER_H
#define KVF_UNMAPPER_H

#include <stdint.h>

#define UNMAPPER_STEP (16ull << 20)

struct unmapper;

struct unmapper_stats {
    uint32_t pending;       /* ranges handed over and not yet unmapped */
    uint64_t pending_bytes;
    uint64_t unmaps;        /* ranges unmapped */
    uint64_t bytes;         /* their bytes */
    uint64_t busy_ns;       /* the unmapper's time in munmap, all ranges */
    uint64_t max_ns;        /* the longest range's (its last step truncates the file) */
    uint64_t max_step_ns;   /* the longest step but a range's last: the longest the mmap lock
                             * was held for page tables */
};

/* Starts the unmapper thread. 0 and *ret, or -ENOMEM / -errno (the thread could not start). */
int unmapper_new(struct unmapper **ret);
/* Unmaps every range handed over and not yet unmapped, joins the thread, frees. Accepts NULL;
 * returns NULL. */
struct unmapper *unmapper_free(struct unmapper *r);

/* Hands [base, base + len) over to be unmapped on the unmapper's thread (see Ownership). With r
 * NULL (unit tests, tools without a daemon), or when no queue entry can be allocated, it is
 * unmapped here and now. */
void unmapper_unmap(struct unmapper *r, void *base, uint64_t len);

/* NULL r: all zero. */
void unmapper_get_stats(struct unmapper *r, struct unmapper_stats *ret);

#endif
