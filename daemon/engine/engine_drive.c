/* engine_drive.c: the formatting wrapper of engine_drive.h (the others call the table inline at
 * their call sites: e->drive->...). */
#include <stdarg.h>
#include <stdio.h>

#include "engine_ctx.h"
#include "engine_drive.h"
#include "wire.h"

void drive_tx_fail(struct tx *tx, kvf_error_t code, bool nack, const char *fmt, ...)
{
    char msg[WIRE_TEXT_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tx->e->drive->tx_fail(tx, code, nack, "%s", msg);
}
