/* engine_drive.h: how the parts below the protocol drivers report back to them. The drivers
 * (engine_gen.c, engine_recv.c: a RECV's flows; engine_ctx.c: a SEND's) run the paths, the bounce
 * stages, the fragment puts, the GPU bounce, quarantine, NACKs and tables; those report a
 * flow's end, a landed chunk, a table's verdict through this table, given once by engine.c
 * (engine_drivers), so that they never call a driver by name and the engine's files call only
 * downward (scripts/check-layers, issue 24). The drive_* wrappers are what call sites use. */
#ifndef KVF_ENGINE_DRIVE_H
#define KVF_ENGINE_DRIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "engine_int.h"
#include "kvferry.h"

struct rx;
struct rxw;
struct tx;
struct itable;
struct wire_grant;
enum rxw_state;

struct engine_drive {
    /* generation side (engine_gen.c, engine_recv.c) */
    void (*rx_fail)(struct rx *rx, kvf_error_t code, const char *msg);
    void (*rx_check_done)(struct rx *rx);       /* a writer's bytes all landed */
    void (*rx_ask)(struct rxw *w);              /* w may take more landing slots */
    void (*rx_sweep)(struct engine *e);         /* ended RECVs' parts leave */
    void (*rx_writes_ended)(struct rx *rx);     /* nothing writes rx's pools any more */
    int (*rx_send_req)(struct rxw *w, const struct wire_grant *g, uint32_t n);
    void (*rx_table_ready)(struct engine *e, struct itable *tab, int err, const char *msg);
    bool (*rxw_set_state)(struct rxw *w, enum rxw_state to);
    /* context side (engine_ctx.c) */
    void (*tx_fail)(struct tx *tx, kvf_error_t code, bool nack, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
    void (*tx_done)(struct tx *tx);             /* every chunk of tx was acknowledged */
    void (*tx_sweep)(struct engine *e);         /* ended SENDs' flows leave */
    void (*tx_table_ready)(struct engine *e, struct itable *tab, int err, const char *msg);
    void (*tx_put_failed)(struct tx *tx, int err); /* a chunk's put failed (engine_nack.c) */
};

/* The one table (engine.c); engine_new points e->drive at it. */
extern const struct engine_drive engine_drivers;

/* A flow of the context side fails (msg formatted here: the table's op takes it whole). */
void drive_tx_fail(struct tx *tx, kvf_error_t code, bool nack, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
