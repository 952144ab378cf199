/* engine_frag.h: the fragment path: pools registered with UCX, a flow's puts (engine_frag.c). Loop
 * thread only. */
#ifndef KVF_ENGINE_FRAG_H
#define KVF_ENGINE_FRAG_H

#include "engine_int.h"

/* Generation side: a rank's host pools registered with UCX for the fragment path. */
struct fragreg {
    const struct reg_rank *rk; /* borrowed: dropped by engine_rank_removed */
    uint32_t n;
    struct link_mreg *m[LAYOUT_MAX_POOLS];
    struct fragreg *next;
};

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

void frag_rank_registered(struct engine *e, struct reg_rank *rk);
/* The gates' verdict for a request of x under pl (counted by reason; *why, when not NULL, says
 * it). Part of the rule of path_choose (path.h). */
wire_path_t frag_choose(struct engine *e, const struct xfer *x, const struct plan *pl,
                        const char **why);
int frag_fill_rkeys(struct engine *e, const struct xfer *x, struct wire_recv_req *q);
int frag_start(struct tx *tx, const struct copy_mem *src, char *msg, size_t len);
/* The flow ended first: its job finishes alone, then counts down d (the drain ack) if any. */
void frag_tx_gone(struct engine *e, struct tx *tx, struct dack *d);
void frag_send_gone(struct engine *e, struct tx *tx, struct xfer *s);
void frag_free_all(struct engine *e);
/* Teardown: waits for the copy threads' writes of fragment jobs (their callbacks run). */
void frag_stop(struct engine *e);
void frag_jobs_free(struct engine *e);
/* Fragment jobs whose puts are in flight (context side). */
uint32_t frag_jobs_count(const struct engine *e);

#endif
