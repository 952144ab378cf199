/* xfer_items.c: a RECV's or SEND's item ids checked against the rank's own registered layout
 * before anything is planned (transfers.c). Loop thread only; pure. */
#include <errno.h>
#include <stdio.h>

#include "layout.h"
#include "proto.h"
#include "transfers.h"

/* Item ids against the rank's own layout: group count, one slot per state group, ids in range. */
int xfer_check_items(const struct layout *l, const struct proto_items *it, char *msg, size_t len)
{
    if (it->n_groups != l->n_groups) {
        snprintf(msg, len, "%u item groups, the registered layout has %u", it->n_groups, l->n_groups);
        return -EINVAL;
    }
    const uint32_t *ids = it->ids;
    for (uint32_t g = 0; g < l->n_groups; g++) {
        const struct layout_group *gr = &l->groups[g];
        if (gr->kind == GROUP_STATE && it->counts[g] != 1) {
            snprintf(msg, len, "group %s: %u slot ids, a state group takes one", gr->name, it->counts[g]);
            return -EINVAL;
        }
        for (uint32_t k = 0; k < it->counts[g]; k++)
            if (ids[k] >= gr->n_items) {
                snprintf(msg, len, "group %s: id %u at %u out of range (%u items)", gr->name, ids[k],
                         k, gr->n_items);
                return -EINVAL;
            }
        ids += it->counts[g];
    }
    return 0;
}
