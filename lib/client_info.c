/* client_info.c: what a binding asks the library before it talks to a daemon: its ABI version
 * (kvferry.h KVF_ABI_VERSION), its version string, and the daemon's own layout check. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kvferry.h"
#include "layout.h"

uint32_t kvf_abi_version(void) { return KVF_ABI_VERSION; }

const char *kvf_version(void) { return KVF_VERSION; }

int kvf_layout_check(const char *layout_json, char *err, size_t errlen)
{
    char dummy[1];
    if (!err || errlen == 0) {
        err = dummy;
        errlen = sizeof dummy;
    }
    err[0] = '\0';
    if (!layout_json) {
        snprintf(err, errlen, "layout: NULL");
        return -EINVAL;
    }
    struct layout *l = malloc(sizeof *l); /* large, and growing with the layout's limits */
    if (!l) {
        snprintf(err, errlen, "out of memory");
        return -ENOMEM;
    }
    int rc = layout_from_json(layout_json, strlen(layout_json), l, err, errlen);
    free(l);
    return rc;
}
