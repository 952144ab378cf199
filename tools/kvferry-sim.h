/* kvferry-sim.h: shared by kvferry-sim.c (arguments, --all-ranks launcher) and
 * kvferry-sim_run.c (one rank: memfd pools, registration, the workload, parity). */
#ifndef KVF_SIM_H
#define KVF_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "layout.h"

struct sim_opts {
    const char *role;          /* "context" | "generation" */
    const char *instance;
    const char *spec;
    int32_t rank;              /* -1 with --all-ranks */
    uint32_t requests;
    uint64_t prompt_tokens;
    uint64_t gen_cached_tokens; /* generation: tokens already held (prefix cache) */
    const char *ctx_instance;
    int32_t ctx_dp_rank;
    const char *socket;
    uint64_t seed;
    uint64_t first_req;
    uint32_t readers;          /* context: generation ranks that read each SEND */
    uint32_t deadline_ms;      /* generation: per RECV, 0 = daemon's */
    const char *expect_error;  /* every request must fail with this error */
    uint32_t hold_ms;          /* stay connected this long after the workload */
    uint32_t start_delay_ms;   /* wait before the workload (after registering) */
    bool quiet;
};

/* Runs one rank; returns the process exit code (0 ok, 1 parity failure, 3 request failures
 * or an expectation not met, 4 setup error). */
int sim_run(const struct sim_opts *o);

#endif
