/* fuzz_layout_json.c: libFuzzer target over layout_from_json. It must never crash, leak or hit
 * UB; when it accepts, the canonical re-encoding must decode to the same struct and re-encode to
 * the same text. Seeds cover v1 layouts and v2 (per_layer views, aliases: examples/layouts). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "layout.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct layout a, b;
    char err[256];
    memset(&a, 0, sizeof(a));
    if (layout_from_json((const char *)data, size, &a, err, sizeof(err)) != 0)
        return 0;
    char *ta = layout_to_json(&a);
    if (!ta)
        abort();
    memset(&b, 0, sizeof(b));
    if (layout_from_json(ta, strlen(ta), &b, err, sizeof(err)) != 0)
        abort(); /* an accepted layout must re-encode to something accepted */
    if (memcmp(&a, &b, sizeof(a)) != 0)
        abort();
    char *tb = layout_to_json(&b);
    if (!tb || strcmp(ta, tb) != 0)
        abort();
    free(ta);
    free(tb);
    return 0;
}
