/* gpu_timer.h: GPU time of a span of one stream's work (two timing events), so a phase
 * breakdown can tell the kernels' own time from the launch before and the completion path
 * after them (issue 12: the same-node path's "run" vs the copy program alone). Reading never
 * waits: a span whose end has not completed reads 0. Without CUDA every call does nothing.
 * Ownership: the timer owns its events (gpu_timer_done frees them). Loop thread only. */
#ifndef KVF_GPU_TIMER_H
#define KVF_GPU_TIMER_H

#include <stdint.h>

struct CUstream_st;
struct CUevent_st;

struct gpu_timer {
    struct CUevent_st *start, *end; /* owned; NULL until started */
};

/* Records the start on stream (creating the events). 0, or -errno (the timer stays unset). */
int gpu_timer_start(struct gpu_timer *t, struct CUstream_st *stream);
/* Records the end on stream (after the work to time). 0 or -errno. */
int gpu_timer_stop(struct gpu_timer *t, struct CUstream_st *stream);
/* Nanoseconds from start to end once the end completed, else 0. */
uint64_t gpu_timer_ns(const struct gpu_timer *t);
void gpu_timer_done(struct gpu_timer *t);

#endif
