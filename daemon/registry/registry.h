/* registry.h: the daemon's table of registered ranks and their instances (docs/DESIGN.md §1, §3).
 * A rank is one worker connection's registration: its layout, its mapped host pools and the
 * connection it came on. An instance groups the ranks of one instance id; when every rank of
 * an instance has registered here, this daemon is its home and holds its complete table.
 * The registry owns ranks (and their mappings) and instances; connections are borrowed. A
 * rank's mappings go, at its removal, to the daemon's unmapper (unmapper.h, via mempin_unmap:
 * after the copies pinning them): never unmapped on the loop. Loop thread only. */
#ifndef KVF_REGISTRY_H
#define KVF_REGISTRY_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "copy.h"
#include "layout.h"

struct xclient;
struct unmapper;
struct reg_instance;
struct reg_gpu;

struct reg_rank {
    struct layout layout;
    struct copy_mem mem;          /* owned mappings (to the unmapper on removal); host pools */
    struct reg_gpu *gpu;          /* one owned reference to its GPU pools; NULL: host rank */
    struct xclient *conn;         /* borrowed: the connection that registered it */
    struct reg_instance *inst;    /* borrowed: owned by the registry */
    uint64_t worker_id;
    uint64_t registered_ms;
    char home[256];               /* the instance's home daemon "host:port" as REGISTER named
                                   * it; "" = this daemon (engine_home.c) */
};

struct reg_instance {
    char id[LAYOUT_NAME_MAX];
    layout_role_t role;
    uint32_t n_ranks;             /* tp_size * pp_size */
    uint32_t n_registered;
    struct reg_rank **ranks;      /* n_ranks slots, NULL where not registered; ranks owned */
    struct layout *table;         /* n_ranks layouts, valid while complete; owned */
    uint64_t epoch;               /* bumps at every (de)registration: cached verdicts expire */
    uint64_t inst_epoch;          /* the instance epoch (docs/DESIGN.md §7 "Epochs"): a
                                   * daemon-wide serial given when its first rank registers
                                   * here. Ranks join only an instance of their own shape, so a
                                   * new shape (TP, PP, attention-DP, model) always opens a new
                                   * one; so does a whole-instance restart. Requests meet only
                                   * within one (reqtab.h). */
    struct reg_instance *next;
};

struct registry {
    struct reg_instance *instances; /* owned list */
    uint64_t next_worker_id;
    uint64_t next_inst_epoch;     /* instance epochs given so far */
    uint32_t n_ranks;
    struct unmapper *um;          /* borrowed: must outlive the registry; NULL: munmap here */
};

void registry_init(struct registry *r, struct unmapper *um);
/* Frees every instance and rank (their mappings to the unmapper). */
void registry_done(struct registry *r);

/* Adds a rank. mem: takes ownership of the mappings on success; caller keeps them on error.
 * Refuses (-EINVAL, message in err) a rank whose slot is taken, or whose instance's ranks
 * disagree on role, tp/pp size, attention-DP, fingerprint or tokens_per_block. */
int registry_add(struct registry *r, const struct layout *l, const struct copy_mem *mem,
                 struct xclient *conn, uint64_t now_ms, struct reg_rank **ret, char *err,
                 size_t errlen);
/* Removes and frees a rank (its pools to the unmapper); frees its instance when it was the last. */
void registry_remove(struct registry *r, struct reg_rank *rank);

struct reg_instance *registry_find(struct registry *r, const char *id);
/* The pools a plan of rank addresses: its GPU mappings, or its host mappings. */
const struct copy_mem *registry_rank_mem(const struct reg_rank *rank);
static inline bool registry_complete(const struct reg_instance *in)
{
    return in && in->n_registered == in->n_ranks;
}

/* Lets a set of pool mappings go (also used by the connection layer on refusal): each to um
 * once nothing pins it (mempin_unmap); mem is emptied. */
void registry_unmap(struct unmapper *um, struct copy_mem *mem);

/* `workers` control command rows and the status section. */
json_t *registry_instances_json(const struct registry *r);
json_t *registry_rank_json(const struct reg_rank *rank);

#endif
