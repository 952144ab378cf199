/* engine_tab.h: context instances' tables: the generation side's cache (engine_tab.c) and a home's
 * forwarded layouts (engine_home.c). Loop thread only. */
#ifndef KVF_ENGINE_TAB_H
#define KVF_ENGINE_TAB_H

#include "engine_int.h"

/* A context instance's table as the generation side caches it (or the home builds it). */
struct itable {
    char instance[LAYOUT_NAME_MAX];
    char home[WIRE_ADDR_MAX];
    uint64_t epoch;
    uint32_t n;                   /* ranks; 0 while fetching */
    struct layout *ranks;         /* owned, n */
    char (*addrs)[WIRE_ADDR_MAX]; /* owned, n: the daemon hosting each rank */
    enum { TAB_FETCHING, TAB_READY } state;
    uint64_t fetched_ms, deadline_ms;
    uint64_t retry_ms; /* fetching: ask the home again then (0: not waiting to retry) */
    int nack_code;     /* fetching: the home's last answer was this NACK (0: none) */
    char nack_msg[WIRE_TEXT_MAX];
    struct epeer *peer; /* the home while fetching */
    char from_id[LINK_HOST_MAX + 2 * LINK_ID_BYTES + 2]; /* the home's daemon id that sent it */
    /* verdict cache: generation ranks found incompatible at this epoch */
    uint32_t n_bad;
    struct tab_verdict {
        uint64_t worker_id;
        int code;
        char msg[WIRE_TEXT_MAX];
    } bad[16];
    struct itable *next;
};

/* Non-home side: a registration to forward to its instance's home. */
struct fwd_out {
    char home[WIRE_ADDR_MAX];
    char instance[LAYOUT_NAME_MAX];
    uint32_t rank;
    char *json;         /* owned: the layout */
    struct epeer *peer; /* the home, once connecting */
    bool sent;
    struct fwd_out *next;
};

/* Home side: the layouts other daemons forwarded for one instance. */
struct fwd_inst {
    char instance[LAYOUT_NAME_MAX];
    uint32_t n;                   /* tp * pp */
    struct layout *ranks;         /* owned, n */
    char (*addrs)[WIRE_ADDR_MAX]; /* owned, n */
    bool *have;                   /* owned, n */
    uint64_t epoch;
    struct fwd_inst *next;
};

void tab_on_table_req(struct engine *e, struct epeer *p, uint64_t flow, const struct wire_msg *m);
void tab_on_table(struct engine *e, struct epeer *p, const struct wire_msg *m);
void tab_on_table_nack(struct engine *e, struct epeer *p, const struct wire_msg *m);
/* The ready table of (instance, home), or NULL after starting (or joining) a fetch. */
struct itable *tab_get(struct engine *e, const char *instance, const char *home, int *err);
void tab_drop(struct engine *e, struct itable *t);
/* The tick's part (engine_due): fetches' retries and deadlines, old cached tables dropped. */
uint64_t tab_tick(struct engine *e, uint64_t now);
/* Asks the home for ready table t again (its answer ends in tab_ready, as any fetch's); t may be
 * dropped meanwhile. 0, or a negative errno in *err and returned. */
int tab_refetch(struct engine *e, struct itable *t, int *err);
void tab_peer_up(struct engine *e, struct epeer *p);
void tab_peer_down(struct engine *e, struct epeer *p);
void tab_free_all(struct engine *e);

void tab_ready(struct engine *e, struct itable *t, int err, const char *msg);
struct itable *tab_free_one(struct itable *t);

void home_on_forward(struct engine *e, struct epeer *p, const struct wire_msg *m);
/* The table this daemon holds as the home of instance: 0 and a READY itable, borrowed: valid
 * until the next call (it is kept, and returned again while its epoch holds: a request does
 * not copy every rank's layout again), or -ENOENT / -ENOMEM with a message. */
int home_table(struct engine *e, const char *instance, struct itable **ret, char *msg, size_t len);
uint64_t home_tick(struct engine *e, uint64_t now);
void home_peer_down(struct engine *e, struct epeer *p);
void home_sweep(struct engine *e);
void home_free_all(struct engine *e);

#endif
