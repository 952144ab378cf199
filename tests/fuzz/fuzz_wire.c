/* fuzz_wire.c: libFuzzer over the daemon-to-daemon decoder. Any input either is refused or
 * decodes to a message that validates and re-encodes to exactly the input bytes (the encoding
 * is canonical), and wire_peek agrees with wire_decode on the header. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct wire_msg m;
    int rc = wire_decode(data, size, &m);
    wire_type_t t;
    size_t total;
    int prc = wire_peek(data, size, &t, &total);
    if (rc == 0) {
        if (prc != 0 || t != m.type || total != size)
            abort();
        if (wire_validate(&m) != 0)
            abort();
        void *buf = NULL;
        size_t len = 0;
        if (wire_encode(&m, &buf, &len) != 0 || len != size || memcmp(buf, data, size) != 0)
            abort();
        free(buf);
        wire_msg_done(&m);
    } else if (prc != 0 && rc != prc && size <= WIRE_MSG_MAX) {
        abort(); /* a header refusal is the same refusal in both */
    }
    return 0;
}
