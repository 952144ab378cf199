/* frag_ctx.h: the fragment path's context side (frag_ctx.c): a flow's puts straight into the
 * generation pools. Loop thread only. */
#ifndef KVF_FRAG_CTX_H
#define KVF_FRAG_CTX_H

#include "engine_int.h"

/* Context side: the puts of one fragment flow. */
struct fragjob {
    struct engine *e;
    struct tx *tx;    /* NULL once the flow ended */
    uint32_t pending; /* puts + the flush not yet completed */
    uint64_t puts, cma; /* UCX puts; process_vm_writev calls (link_cma_write) */
    uint64_t copies;    /* copy-thread jobs writing the pools over cma (copy_direct_remote) */
    struct copyeng_job *copy; /* the one in flight, NULL once its callback ran */
    int err;
    bool issued, own_mem;
    struct copy_mem mem; /* a departing rank's mappings, unmapped at the end */
    struct dack *dack;   /* the failed flow's drain ack waiting for these puts (engine_quar.c) */
    struct fragjob *next;
};

/* The path's serve (path.h): flow tx is planned and checked; its puts start. A failure fails
 * the flow (BOUND_VIOLATION for a destination outside the generation pools). */
void frag_ctx_serve(struct tx *tx);
/* The flow ended first: its job finishes alone, then counts down d (the drain ack) if any. */
void frag_ctx_tx_gone(struct engine *e, struct tx *tx, struct dack *d);
/* tx's SEND leaves (its worker disconnects): a job still reading its pools keeps them mapped. */
void frag_ctx_send_gone(struct engine *e, struct tx *tx, struct xfer *s);
/* Teardown: waits for the copy threads' writes of fragment jobs (their callbacks run). */
void frag_ctx_stop(struct engine *e);
void frag_ctx_jobs_free(struct engine *e);
/* Fragment jobs whose puts are in flight. */
uint32_t frag_ctx_jobs_count(const struct engine *e);

#endif
