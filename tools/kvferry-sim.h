/* kvferry-sim.h: shared by kvferry-sim.c (arguments, --all-ranks launcher),
 * kvferry-sim_run.c (one rank: memfd pools, registration, the workload, parity) and
 * kvferry-sim_cuda.c (GPU pools registered by CUDA IPC handle, --device / --devices). */
#ifndef KVF_SIM_H
#define KVF_SIM_H

#include <stdbool.h>
#include <stdint.h>

#include "copy.h"
#include "kvferry.h"
#include "layout.h"

#define SIM_MAX_CPU_PIDS 4

struct sim_opts {
    const char *role;          /* "context" | "generation" */
    const char *instance;
    const char *spec;
    int32_t rank;              /* -1 with --all-ranks */
    uint32_t requests;
    uint64_t prompt_tokens;
    uint64_t gen_cached_tokens; /* generation: tokens already held (prefix cache) */
    const char *ctx_instance;
    const char *ctx_home;      /* generation: the context instance's home "host:port" */
    const char *home;          /* this instance's home "host:port" ("" / NULL: this daemon) */
    int32_t ctx_dp_rank;
    const char *socket;
    uint64_t seed;
    uint64_t first_req;
    uint32_t readers;          /* context: generation ranks that read each SEND */
    uint32_t deadline_ms;      /* generation: per RECV, 0 = daemon's */
    const char *expect_error;  /* every request must fail with this error */
    uint32_t hold_ms;          /* stay connected this long after the workload */
    uint32_t hold_pid;         /* or until this process exits (hold_ms, if set, caps the wait) */
    uint32_t start_delay_ms;   /* wait before the workload (after registering) */
    bool start_on_signal;      /* before that, wait for SIGUSR1 (blocked since main) */
    bool step_on_signal;       /* one request a window, each after the first after a SIGUSR1 */
    bool quiet;
    const char *devices;       /* NULL: host pools; else GPU ordinals, rank r takes entry
                                  r mod count ("1", or "0,1" for --all-ranks) */
    bool parity_first;         /* pattern fill/verify for the first request only (benchmarks) */
    bool send_tokens;          /* generation: RECV gives prompt_tokens; rows past it stay unwritten */
    const char *stats_json;    /* write PREFIX.r<rank>.json: counts and per-request latencies */
    uint32_t n_cpu_pids;       /* --cpu-pids: processes whose CPU time is sampled per window */
    int32_t cpu_pids[SIM_MAX_CPU_PIDS];
    const char *events;        /* write PREFIX.r<rank>.jsonl: the rank's history (a checker's) */
    uint32_t cancel_pct;       /* cancel this share of the requests once issued (seeded) */
    uint32_t event_wait_ms;    /* give up when no event comes this long (default 30 s) */
};

/* Runs one rank; returns the process exit code (0 ok, 1 parity failure, 3 request failures
 * or an expectation not met, 4 setup error). */
int sim_run(const struct sim_opts *o);

/* kvferry-sim_cuda.c */
struct sim_cuda;
/* The rank's device from o->devices (-1: host pools). 0 or -EINVAL with a message. */
int sim_cuda_device(const struct sim_opts *o, int32_t *ret, char *err, size_t errlen);
/* One cudaMalloc pool per non-empty pool of l on device. 0 or -errno with a message. */
int sim_cuda_new(const struct layout *l, int32_t device, struct sim_cuda **ret, char *err,
                 size_t errlen);
struct sim_cuda *sim_cuda_free(struct sim_cuda *c);
/* REGISTER entries: kind CUDA, the IPC handles. */
void sim_cuda_pools(const struct sim_cuda *c, const struct layout *l, struct kvf_pool *pools);
/* Whole pools host staging -> GPU, and back. */
int sim_cuda_push(struct sim_cuda *c, const struct copy_mem *host, char *err, size_t errlen);
int sim_cuda_pull(const struct sim_cuda *c, struct copy_mem *host, char *err, size_t errlen);
/* One rank's results, as written by sim_stats_write (kvferry-sim_stats.c). */
struct sim_stats {
    const struct sim_opts *o;
    bool gen;
    uint64_t ok, failed, bytes, parity_bad, verified;
    double t0;                 /* CLOCK_MONOTONIC seconds at the workload's start */
    double time_s;
    double *t;                 /* owned: per completed request, issue, sent and completion time */
    uint64_t *req;             /* owned: its request id */
    uint32_t n, cap;
    /* --cpu-pids: utime+stime ticks of each pid at the start and after each window */
    uint64_t (*cpu)[SIM_MAX_CPU_PIDS]; /* owned */
    uint64_t *cpu_req;         /* owned: requests completed or failed at that sample */
    uint32_t n_cpu, cap_cpu;
};

/* Samples the CPU time of o->cpu_pids now (after done requests); 0 or -ENOMEM. */
int sim_stats_cpu_sample(struct sim_stats *st, uint64_t done);

/* Records a completed request: its id, when RECV/SEND was issued, when its frame was written
 * (the libkvferry call returned) and when DONE/SENT came (CLOCK_MONOTONIC seconds); returns 0
 * or -ENOMEM. */
int sim_stats_add(struct sim_stats *st, uint64_t req_id, double t_issue, double t_sent,
                  double t_done);

/* Writes PREFIX.r<rank>.json (see kvferry-sim.c); returns 0 or -errno. */
int sim_stats_write(const struct sim_stats *st);

/* kvferry-sim_events.c: --events PREFIX, one JSON line per step of the rank (the file says
 * which). Every function is a no-op when the file is not open. */
struct sim_events {
    int fd; /* owned; -1: no --events */
};
int sim_events_open(struct sim_events *e, const char *prefix, int32_t rank);
void sim_events_close(struct sim_events *e);
void sim_events_start(struct sim_events *e, const struct sim_opts *o);
/* A line with only an optional error: "registered", "setup_failed". */
void sim_events_note(struct sim_events *e, const char *ev, const char *error);
/* "issue" / "cancel": the request and what the call returned (0 or -errno). */
void sim_events_call(struct sim_events *e, const char *ev, uint64_t req, int rc);
/* "end" for a request's event, "conn" for DISCONNECTED / RECONNECTED. */
void sim_events_event(struct sim_events *e, const struct kvf_event *ev);
void sim_events_verify(struct sim_events *e, uint64_t req, bool ok, const char *where);
/* A line {ev, key: n} ("stuck", "pending"). */
void sim_events_count(struct sim_events *e, const char *ev, const char *key, uint64_t n);
void sim_events_exit(struct sim_events *e, int code, uint64_t ok, uint64_t failed,
                     uint64_t parity_bad);

#endif
