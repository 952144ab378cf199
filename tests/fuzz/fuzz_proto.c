/* fuzz_proto.c: libFuzzer over the worker frame decoder. Any input must decode or be refused
 * without a crash, leak or out-of-bounds read; what decodes must re-encode to the same bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct proto_limits lim;
    proto_limits_init(&lim, 1 << 20, 4096);
    struct proto_msg m;
    char err[256];
    if (proto_decode(data, size, &lim, &m, err, sizeof err) != 0)
        return 0;
    uint8_t *buf;
    size_t len;
    if (proto_encode(&m, &lim, &buf, &len) != 0)
        abort(); /* what the decoder accepts the encoder must accept */
    if (len != size || memcmp(buf, data, size) != 0)
        abort(); /* the encoding is canonical */
    free(buf);
    proto_msg_done(&m);
    return 0;
}
