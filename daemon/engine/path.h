/* path.h: the paths of a request between daemons (docs/DESIGN.md §5b), the half of a mover that
 * says how one writer's extent reaches the generation rank's pools: one row of path_rows[] per
 * path, each in its own file: local (path_local.c: the writer is registered at this daemon, pool
 * to pool), bounce (path_bounce.c: chunks through landing slots of the arena), fragment
 * (frag_gen.c, its context side frag_ctx.c: the writer puts straight into the pools registered
 * with UCX).
 *
 * Choice. path_choose is the one rule, run once per request when it is planned (plan_rx): the
 * request's remote writers take its row (bounce or fragment, by the reasons in order below,
 * each counted in engine_counters path_* and kept in rx->path_why), a writer registered here
 * takes the local row. The context side takes the row its RECV_REQ names (path_of_wire). The
 * drivers (engine_gen.c, engine_ctx.c) call through w->path / the flow's row and never test
 * which path it is; the executor that copies a bounce chunk is a row of bounce_exec.h.
 *
 * Adding a path: one file defining a `const struct path_row`, one value of path_kind_t and one
 * row in path_rows[] (path.c), plus its reason in path_choose. Loop thread only. */
#ifndef KVF_PATH_H
#define KVF_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include "wire.h"

struct engine;
struct epeer;
struct itable;
struct plan;
struct rx;
struct rxw;
struct tx;
struct xfer;

typedef enum { PATH_LOCAL = 0, PATH_BOUNCE, PATH_FRAGMENT, PATH__COUNT } path_kind_t;

struct path_row {
    const char *name;
    path_kind_t kind;
    wire_path_t wire; /* what its RECV_REQ names (local: none is sent) */
    bool landing;     /* its writers hold landing slots of the arena from start to release */
    /* Generation side: the writer's flow starts (the request is moving; a remote writer's
     * daemon is connected). Failures end the request (gen_rx_fail). */
    void (*start)(struct rxw *w);
    /* Fills what the path adds to w's RECV_REQ. 0 or -errno. NULL: nothing. */
    int (*fill_req)(struct rxw *w, struct wire_recv_req *q);
    /* WRITER_DONE came from w's daemon naming the whole extent. NULL: nothing (its chunks
     * were counted as they landed). */
    void (*writer_done)(struct rxw *w, struct epeer *p);
    /* Whether w may still write into the rank's pools (a failure of the request is then held
     * until it ended). NULL: never. */
    bool (*writing)(const struct rxw *w);
    /* Context side: flow tx is planned and checked; its bytes start moving. NULL: the path
     * has no context side on the wire. */
    void (*serve)(struct tx *tx);
};

/* The rows by kind. Writable so that a test can put its own row in place of one (the driver
 * test's fake mover, tests/check_request_driver.c); the daemon never changes it. */
extern const struct path_row *path_rows[PATH__COUNT];

const struct path_row *path_of(path_kind_t k);
/* The row a RECV_REQ names, or NULL for a path no row takes from the wire. */
const struct path_row *path_of_wire(wire_path_t w);
/* The one rule: the row of x's remote writers under plan pl against table tab; *why says the
 * reason (a static string, counted in e->c.path_*). */
const struct path_row *path_choose(struct engine *e, const struct xfer *x, const struct itable *tab,
                                   const struct plan *pl, const char **why);

/* path_local.c: SEND s came (or a streaming one's last layer is final): the local writers
 * waiting for it run. It may end and free s. */
void path_local_send_arrived(struct engine *e, struct xfer *s);
/* SEND s ended: local writers' copies still reading it stop, their requests fail. */
void path_local_send_end(struct engine *e, struct xfer *s);
/* engine_stop: waits for the local writers' copies on the copy threads (callbacks run). */
void path_local_stop(struct engine *e);

#endif
