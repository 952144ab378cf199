/* exec_gpu.h: the GPU executor row (exec_gpu.c, move_exec.h) and the state it needs per copy
 * program: the program uploaded to the launch device (from the daemon's program cache,
 * daemon/gpu/gpu_progcache.h), that device's stream, and both sides' pools as device
 * addresses of that device. An owner binds one per writer (exec_gpu_bind) and hands the row
 * the binding's own move_prog, `mp` (the row finds its state around it: a move_prog that is
 * not the mp of a bound struct exec_gpu is refused by a tag, never launched). gather, scatter
 * and direct each launch one kernel and return MOVE_STARTED; done(user, status) follows on the
 * loop (gpu_notify). Extent buffers (gather's out, scatter's in) are device-accessible
 * addresses: device memory or the device alias of page-locked host memory. Loop thread only. */
#ifndef KVF_EXEC_GPU_H
#define KVF_EXEC_GPU_H

#include <stddef.h>

#include "kvf_kernels.h"
#include "gpu_timer.h"
#include "move_exec.h"
#include "plan_template.h"

struct gpu;
struct gpu_prog;
struct CUstream_st;
struct CUevent_st;

#define EXEC_GPU_TAG 0x6b766b67u /* "kvkg": a bound struct exec_gpu */

struct exec_gpu {
    struct move_prog mp;        /* first: what the row is called with (src, dst borrowed) */
    uint32_t tag;               /* EXEC_GPU_TAG while bound */
    struct gpu *g;              /* borrowed: the daemon's */
    struct gpu_prog *prog;      /* one reference: the uploaded program (or the template's) */
    struct kvk_program *inst;   /* owned: the request's program from a template's (its ids),
                                 * or NULL (prog is the program) */
    int device;                 /* where the program, the stream and the launches are */
    struct CUstream_st *stream; /* the daemon's */
    struct kvk_mem src, dst;    /* pools as the device reaches them (n = 0: that side unused) */
    struct gpu_timer direct_time; /* the direct kernel's own GPU time (set by direct) */
};

/* The program of ops on device (cached or uploaded now), launched on stream; src / dst: the
 * pools each side addresses as device addresses of `device` (NULL: a side this binding never
 * copies), borrowed: they must outlive the binding (the owner holds the pools' reference).
 * 0, or -errno with the reason in msg (-ENOTSUP in a build without CUDA). */
int exec_gpu_bind(struct exec_gpu *x, struct gpu *g, const struct copy_op *ops, uint32_t n_ops,
                  int device, struct CUstream_st *stream, const struct copy_mem *src,
                  const struct copy_mem *dst, char *msg, size_t len);
/* Makes writer w's program of template t (gpu_tprog.h's make; arg: a struct exec_gpu_tsrc):
 * its ops at item 0 and id slots (plan_template_slots), refused unless plan_template_fits
 * holds for both sides' pools as the device maps them (every id in range stays inside them).
 * free: exec_gpu_tmpl_free. 0, or -errno with msg (-ENOTSUP without CUDA). */
struct exec_gpu_tsrc {
    const struct plan_template *t;
    uint32_t w;
    const struct plan_ids *gen, *ctx; /* a request of t's shape: the slot counts */
    const struct copy_mem *src, *dst; /* the pools as `device` reaches them */
    int device;
    struct CUstream_st *stream;       /* the upload's */
};
int exec_gpu_tmpl_make(void *arg, void **ret, char *msg, size_t len);
void exec_gpu_tmpl_free(void *obj);
/* Binds a request to template program tprog (borrowed; the binding takes a reference): its
 * n_ids ids (plan_tslot_ids order) uploaded on stream, the task table written on the GPU,
 * nothing built on the host. src / dst as for exec_gpu_bind. Its mp has no ops (the row's
 * check reads none): the pools are checked at each launch against the largest ids' reach. 0, or -errno with msg (-ERANGE:
 * an id past its region). */
int exec_gpu_bind_ids(struct exec_gpu *x, struct gpu *g, struct gpu_prog *tprog,
                      const uint32_t *ids, uint32_t n_ids, int device, struct CUstream_st *stream,
                      const struct copy_mem *src, const struct copy_mem *dst, char *msg,
                      size_t len);
/* Later launches through x go on stream (the program stays where it was uploaded, on the bind's
 * stream, and a launch elsewhere waits for its upload on the GPU); borrowed: it must outlive
 * them. */
void exec_gpu_set_stream(struct exec_gpu *x, struct CUstream_st *stream);
/* Work queued through x after this waits on the GPU for mark's latest record (gpu.h
 * gpu_event_wait; NULL: nothing). 0 or -errno with msg. */
int exec_gpu_after(const struct exec_gpu *x, struct CUevent_st *mark, char *msg, size_t len);
/* Extent bytes [lo, hi) of x's program straight from src into dst pools (a streamed SEND's
 * final prefix), one kernel; MOVE_STARTED and done(user, status) on the loop, or -errno with
 * msg. */
int exec_gpu_direct_range(struct exec_gpu *x, uint64_t lo, uint64_t hi, move_done_cb done,
                          void *user, char *msg, size_t len);
/* Drops the program reference; every launch through x must have completed. Idempotent. */
void exec_gpu_unbind(struct exec_gpu *x);
/* GPU nanoseconds of x's direct kernel once it completed (between two events around the
 * kernel alone: no upload, no completion host function), else 0. */
uint64_t exec_gpu_direct_ns(const struct exec_gpu *x);

#endif
