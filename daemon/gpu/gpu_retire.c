/* gpu_retire.c: see gpu_retire.h. */
#include <stddef.h>

#include "gpu.h"
#include "gpu_retire.h"

void gpu_retire_flush(struct gpu_retire_list *l)
{
    l->n = 0;
    while (l->head) {
        struct gpu_retired *r = l->head;
        l->head = r->next;
        r->free_fn(r);
    }
}

bool gpu_retire(struct gpu_retire_list *l, const struct gpu *g, struct gpu_retired *r)
{
    r->next = l->head;
    l->head = r;
    if (gpu_notify_outstanding(g) > 0 && ++l->n < GPU_RETIRE_MAX)
        return true;
    gpu_retire_flush(l);
    return false;
}

void gpu_retire_idle(struct gpu_retire_list *l, const struct gpu *g)
{
    if (l->head && gpu_notify_outstanding(g) == 0)
        gpu_retire_flush(l);
}
