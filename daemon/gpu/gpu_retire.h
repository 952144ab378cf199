/* gpu_retire.h: deferred freeing of what finished GPU work owned (copy programs, references to
 * mapped pools), the one list every GPU user of the daemon retires into. Closing a mapping
 * (cudaIpcCloseMemHandle, cuMemUnmap) or a cudaFree can wait for the whole device (program
 * tables leave with cudaFreeAsync, which does not), and the loop must not wait for another
 * request's kernel: a retired item is freed only while the struct gpu has no completion outstanding
 * (gpu_notify_outstanding), or, under a load that never lets the GPUs idle, when GPU_RETIRE_MAX
 * items wait (then one wait frees them all). The last completion of a burst frees what waited
 * (its owner retires from the completion); an owner that also retires outside completions calls
 * gpu_retire_idle from a timer. The owner embeds the list and flushes it at teardown.
 * Loop thread only. */
#ifndef KVF_GPU_RETIRE_H
#define KVF_GPU_RETIRE_H

#include <stdbool.h>
#include <stdint.h>

struct gpu;

#define GPU_RETIRE_MAX 32u

/* Embedded in the retired item; free_fn frees that item (and what it owns). */
struct gpu_retired {
    struct gpu_retired *next;
    void (*free_fn)(struct gpu_retired *r);
};

struct gpu_retire_list {
    struct gpu_retired *head;
    uint32_t n;
};

/* Retires r: frees the whole list now when g is idle or the list is full. Returns true when
 * items still wait (the caller's timer should call gpu_retire_idle). */
bool gpu_retire(struct gpu_retire_list *l, const struct gpu *g, struct gpu_retired *r);
/* Frees the list when g has no completion outstanding. */
void gpu_retire_idle(struct gpu_retire_list *l, const struct gpu *g);
/* Frees every item now (teardown, after the GPU work ended). */
void gpu_retire_flush(struct gpu_retire_list *l);
/* Items waiting. */
static inline bool gpu_retire_pending(const struct gpu_retire_list *l)
{
    return l->head != NULL;
}

#endif
