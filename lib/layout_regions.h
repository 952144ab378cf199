/* layout_regions.h: internal to the layout module. The geometric half of layout_validate: every
 * region of every (layer, item) of every view lies inside its pool, and no two regions of
 * different (layer, item, view) overlap within a pool. Pure. */
#ifndef KVF_LAYOUT_REGIONS_H
#define KVF_LAYOUT_REGIONS_H

#include <stddef.h>

#include "layout.h"

/* Largest 64-bit quantity a layout may carry: 2^53, exact in JSON and in doubles. */
#define LAYOUT_U64_MAX_JSON (1ULL << 53)

/* Expects the scalar checks of layout_validate done (counts, pools, strides <= 2^53).
 * Returns 0, or -EINVAL with a message naming the view and field in err. */
int layout_regions_check(const struct layout *l, char *err, size_t errlen);

#endif
