/* gpu_tprog.h: the GPU programs of plan templates (issue 12; lib/plan_template.h): for each
 * (template, device), one program per writer, made on the template's first request on that
 * device and kept while the template lives, so a request of a known shape uploads only its ids
 * (kernels/kvf_kernels.h kvk_program_of_ids) and builds, hashes and caches no program. The set
 * is attached to the template (plan_template user / user_free): when the template cache evicts
 * or forgets the template (its worker went), the set drops its references, and each program is
 * freed through the program retire list (gpu_progcache.h) once no binding holds it and no GPU
 * completion is outstanding, so never under a kernel that uses it. gpu_free detaches every set
 * (their programs go with the GPUs; a template done later frees only its set). A writer whose
 * program cannot be made (make refused: unresolved sources, pools shorter than the largest ids
 * reach) is remembered as refused: its requests take the per-request path (gpu_progcache.h).
 * The config key gpu.template_programs (false: off; gpu_tprog_enable at start) allows a
 * benchmark's A/B in one run (scripts/bench-gpu-local). Generic over the program object (make / free),
 * tested without a GPU. Loop thread only. */
#ifndef KVF_GPU_TPROG_H
#define KVF_GPU_TPROG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "gpu_progcache.h"
#include "plan_template.h"

struct gpu;

/* Makes writer's program (arg: the caller's): 0 and *ret, or -errno with the reason in msg. */
typedef int (*gpu_tprog_make_fn)(void *arg, void **ret, char *msg, size_t len);

/* Writer w's program of template t on device, borrowed (valid while t lives: the caller binds
 * it, which takes a reference, before the template cache is called again): 0 and *ret; 1 when
 * templates do not serve this writer (make refused it, now or before); -ENOMEM. */
int gpu_tprog_get(struct gpu *g, struct plan_template *t, uint32_t w, int device,
                  gpu_tprog_make_fn make, void *arg, gpu_prog_free_fn free_fn,
                  struct gpu_prog **ret, char *msg, size_t len);

/* On (the default) or off: then gpu_tprog_get answers 1 (the per-request path) for every
 * writer. */
void gpu_tprog_enable(struct gpu *g, bool on);

/* Counts one request: every program from templates (true) or not. */
void gpu_tprog_count(struct gpu *g, bool from_templates);

/* gpu_free: every set lets its programs go (to the retire list) and forgets g. */
void gpu_tprog_detach_all(struct gpu *g);

#endif
