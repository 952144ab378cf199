/* mempin.h: pins on host pool mappings, so a mapping is never unmapped while a copy reads or
 * writes it. A copy job pins every pool it names (copyeng.h) before it is queued and unpins
 * it when it has ended; whoever owns a mapping (the registry for a rank's pools) lets it go
 * through mempin_unmap, which hands it to the owner's unmapper (unmapper.h: munmap on its
 * thread, off the loop) at once when the range is unpinned and otherwise at the last unpin.
 * So a worker that disconnects mid-copy loses its pools only after the copies on them ended:
 * nothing a copy thread touches is freed under it, and nothing touches a range once handed.
 *
 * A mapping is keyed by its base address. The table is process-wide because the address
 * space is: two daemons in one test process share it, and a base is unique while mapped.
 * Thread-safe (one mutex); in the daemon only the loop thread calls it (copy threads never
 * pin or unpin). Never logs. */
#ifndef KVF_MEMPIN_H
#define KVF_MEMPIN_H

#include <stdint.h>

struct unmapper;

/* One more pin on the mapping at base (len bytes). 0 or -ENOMEM. */
int mempin_ref(void *base, uint64_t len);
/* Drops one pin; at the last one a deferred unmap is handed to its unmapper. */
void mempin_unref(void *base);
/* The owner lets the mapping go: handed to um (unmapper_unmap; NULL: munmap in the caller) now
 * if nothing pins base, else when its last pin drops; um must outlive that. Returns 1 when
 * deferred, 0 when handed over now. */
int mempin_unmap(void *base, uint64_t len, struct unmapper *um);
/* Mappings pinned now, and of those how many wait to be unmapped (tests, status). */
void mempin_counts(uint32_t *pinned, uint32_t *deferred);

#endif
