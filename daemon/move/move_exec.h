/* move_exec.h: executors, the half of a mover that copies bytes (docs/DESIGN.md §5b). One
 * function table per kind of memory a copy program (lib/plan.h, lib/copy.h) runs over: host
 * pools (exec_host.c: lib/copy.c, inline on the loop); the copy threads of the data-plane issue
 * and the GPU kernels (today engine_gpu.c, xfer_gpu.c) are further rows of the same table. A
 * driver holds one struct move_prog per writer and asks that program's executor to check,
 * gather, scatter or copy direct; it does not test which memory it is.
 *
 * Completion. gather, scatter and direct return MOVE_DONE when the bytes are in place on
 * return (done is not called), or MOVE_STARTED when the copy goes on: then done(user, status)
 * runs exactly once, later, on the loop thread, never inside the call that started it (status
 * 0, or -errno: -ECANCELED when the executor is torn down under it). A negative return is an
 * error with its reason in msg; nothing runs then. An executor that runs on copies what it
 * needs of the program at the call (ops, pool tables) and pins the pool mappings (as the copy
 * engine of the data-plane issue does), so the caller may free its plan on return; the extent
 * buffer is borrowed until done. An inline executor returns MOVE_DONE, a threaded or GPU one
 * MOVE_STARTED: callers handle both.
 *
 * Adding an executor: one file defining a `const struct move_exec`, one enum value below and
 * one row in move_execs[] (move_exec.c). Loop thread only. */
#ifndef KVF_MOVE_EXEC_H
#define KVF_MOVE_EXEC_H

#include <stddef.h>
#include <stdint.h>

#include "copy.h"

typedef enum {
    MOVE_EXEC_HOST = 0, /* host pools, lib/copy.c on the calling thread (exec_host.c) */
    MOVE_EXEC_GPU,      /* GPU pools, the CUDA copy kernels on a daemon stream (exec_gpu.c) */
    MOVE_EXEC__COUNT
} move_exec_kind_t;

enum { MOVE_DONE = 0, MOVE_STARTED = 1 };

/* One writer's copy program over its pools: borrowed, see Completion above. */
struct move_prog {
    const struct copy_op *ops; /* ascending ext_off, tiling the writer's extent */
    uint32_t n_ops;
    const struct copy_mem *src; /* the context rank's pools: check 's', gather, direct */
    const struct copy_mem *dst; /* the generation rank's pools: check 'd', scatter, direct */
};

typedef void (*move_done_cb)(void *user, int status);

struct move_exec {
    const char *name;
    /* 0 when every op of p lies inside its pools on that side ('s': src, 'd': dst), else
     * -ERANGE with the reason in msg. Synchronous: planning-time check, no bytes move. */
    int (*check)(const struct move_prog *p, char side, char *msg, size_t len);
    /* Extent bytes [lo, hi) from p->src into out (out[0] is extent byte lo). */
    int (*gather)(const struct move_prog *p, uint64_t lo, uint64_t hi, uint8_t *out,
                  move_done_cb done, void *user, char *msg, size_t len);
    /* Extent bytes [lo, hi) from in (in[0] is extent byte lo) into p->dst. */
    int (*scatter)(const struct move_prog *p, const uint8_t *in, uint64_t lo, uint64_t hi,
                   move_done_cb done, void *user, char *msg, size_t len);
    /* The whole extent, p->src straight into p->dst (the local path). */
    int (*direct)(const struct move_prog *p, move_done_cb done, void *user, char *msg,
                  size_t len);
};

extern const struct move_exec *const move_execs[MOVE_EXEC__COUNT];

/* The executor of a kind; never NULL for a kind below MOVE_EXEC__COUNT. */
const struct move_exec *move_exec_of(move_exec_kind_t k);
const char *move_exec_kind_to_string(move_exec_kind_t k);

#endif
