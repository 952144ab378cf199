/* move_metrics.c: the copy section's stats keys, declared (type, HELP, unit). */
#include "move_metrics.h"

#define C PROM_COUNTER
#define G PROM_GAUGE

const struct prom_doc copy_metrics[] = {
    {"threads", G, NULL, "Copy threads running.", "threads"},
    {"nodes", G, NULL, "NUMA nodes the copy threads are spread over.", "nodes"},
    {"jobs_total", C, NULL, "Copy jobs submitted.", "jobs"},
    {"pieces_total", C, NULL, "Pieces the copy jobs were cut into.", "pieces"},
    {"bytes_total", C, NULL, "Bytes copied by the copy threads.", "bytes"},
    {"busy_seconds_total", C, NULL, "Time the copy threads spent copying, all threads together.",
     "seconds"},
    {"cancelled_total", C, NULL, "Copy jobs cancelled by their owner.", "jobs"},
    {"stolen_total", C, NULL, "Pieces a copy thread took from another's queue.", "pieces"},
    {"queued_pieces", G, NULL, "Pieces queued and not started now.", "pieces"},
    {"running_jobs", G, NULL, "Copy jobs running now.", "jobs"},
    {"pinned_mappings", G, NULL, "Pool mappings pinned by copy jobs in flight now.", "mappings"},
    {"deferred_unmaps", G, NULL, "Pool unmaps deferred until their copy jobs end, now.",
     "mappings"},
    {"unmaps_pending", G, NULL, "Pool mappings handed to the unmapper thread, not unmapped yet.",
     "mappings"},
    {"unmaps_pending_bytes", G, NULL, "Bytes of the pool mappings waiting to be unmapped.",
     "bytes"},
    {"unmaps_total", C, NULL, "Pool mappings unmapped by the unmapper thread.", "mappings"},
    {"unmapped_bytes_total", C, NULL, "Bytes of the pool mappings unmapped.", "bytes"},
    {"unmap_seconds_total", C, NULL, "Time the unmapper thread spent unmapping (page tables "
     "and, for a memory's last mapping, freeing its pages).", "seconds"},
    {"unmap_max_seconds", G, NULL, "The longest unmap of one pool mapping.", "seconds"},
    {"unmap_step_max_seconds", G, NULL, "The longest unmap step but a mapping's last (how long "
     "an mmap elsewhere in the daemon could wait on it).", "seconds"},
};
const size_t copy_metrics_len = sizeof(copy_metrics) / sizeof(copy_metrics[0]);
