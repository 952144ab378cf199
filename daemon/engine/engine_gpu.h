/* engine_gpu.h: the bounce path with GPU pools (engine_gpu.c). Loop thread only. */
#ifndef KVF_ENGINE_GPU_H
#define KVF_ENGINE_GPU_H

#include "engine_int.h"

/* engine_gpu.c: the bounce path with GPU pools (see there) */
void egpu_arena_init(struct engine *e);
void egpu_arena_json(const struct engine *e, json_t *o);
/* The GPU of tx's program (its writer's pools), of rx's writer widx's; -1: host pools. */
int egpu_tx_device(const struct tx *tx);
int egpu_rx_device(const struct rx *rx, uint32_t widx);
/* The writer rank's pools are on a GPU: its chunks are gathered by kernels. */
bool egpu_tx_on_gpu(const struct tx *tx);
/* A flow of a GPU writer rank is planned: its program uploaded. KVF_OK or the error + message. */
kvf_error_t egpu_tx_plan(struct tx *tx, char *msg, size_t len);
void egpu_tx_gone(struct tx *tx);
/* Launches the gather of st's chunk into its staging slot; bstage_gathered follows. 0, or
 * -errno with a message (nothing runs then). */
int egpu_gather(struct stage *st, char *msg, size_t len);
kvf_error_t egpu_rx_start(struct rx *rx, char *msg, size_t len);
void egpu_rx_gone(struct rx *rx);
/* Launches the scatter of a landed chunk; bland_landed follows. 0 or -errno + message. */
int egpu_scatter(struct rx *rx, uint32_t widx, const struct arena_grant *g, char *msg, size_t len);
/* A scatter of this (generation side) flow is running: its landing slots must stay. */
bool egpu_flow_busy(const struct engine *e, uint64_t flow);
/* Frees retired programs once no GPU completion is outstanding (from the tick). */
uint64_t egpu_tick(struct engine *e, uint64_t now);
/* engine_stop: waits for the engine's kernels and completes them cancelled; then (after the
 * sweeps) frees every program and unpins the arena. */
void egpu_stop_kernels(struct engine *e);
void egpu_free(struct engine *e);

#endif
