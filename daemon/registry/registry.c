/* registry.c: registered ranks and their instances (see registry.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mempin.h"
#include "registry.h"
#include "registry_gpu.h"

void registry_init(struct registry *r, struct unmapper *um)
{
    memset(r, 0, sizeof *r);
    r->next_worker_id = 1;
    r->um = um;
}

void registry_unmap(struct unmapper *um, struct copy_mem *mem)
{
    for (uint32_t i = 0; i < mem->n && i < LAYOUT_MAX_POOLS; i++) {
        if (mem->base[i]) /* later, if a copy still runs on it */
            mempin_unmap(mem->base[i], mem->size[i], um);
        mem->base[i] = NULL;
        mem->size[i] = 0;
    }
    mem->n = 0;
}

static void instance_free(struct unmapper *um, struct reg_instance *in)
{
    for (uint32_t i = 0; i < in->n_ranks; i++) {
        if (in->ranks[i]) {
            registry_unmap(um, &in->ranks[i]->mem);
            reg_gpu_unref(in->ranks[i]->gpu);
            free(in->ranks[i]);
        }
    }
    free(in->ranks);
    free(in->table);
    free(in);
}

void registry_done(struct registry *r)
{
    while (r->instances) {
        struct reg_instance *in = r->instances;
        r->instances = in->next;
        instance_free(r->um, in);
    }
    r->n_ranks = 0;
}

const struct copy_mem *registry_rank_mem(const struct reg_rank *rank)
{
    return rank->gpu ? &rank->gpu->mem : &rank->mem;
}

struct reg_instance *registry_find(struct registry *r, const char *id)
{
    for (struct reg_instance *in = r->instances; in; in = in->next)
        if (strcmp(in->id, id) == 0)
            return in;
    return NULL;
}

/* A rank of the instance to compare a newcomer with. */
static const struct layout *any_rank(const struct reg_instance *in)
{
    for (uint32_t i = 0; i < in->n_ranks; i++)
        if (in->ranks[i])
            return &in->ranks[i]->layout;
    return NULL;
}

static void rebuild_table(struct reg_instance *in)
{
    if (in->n_registered != in->n_ranks)
        return;
    for (uint32_t i = 0; i < in->n_ranks; i++)
        in->table[i] = in->ranks[i]->layout;
}

int registry_add(struct registry *r, const struct layout *l, const struct copy_mem *mem,
                 struct xclient *conn, uint64_t now_ms, struct reg_rank **ret, char *err,
                 size_t errlen)
{
    struct reg_instance *in = registry_find(r, l->instance);
    bool fresh = false;
    uint32_t idx = layout_rank(l);
    if (in) {
        const struct layout *o = any_rank(in);
        const char *what = NULL;
        if (o->role != l->role)
            what = "role";
        else if (o->tp_size != l->tp_size || o->pp_size != l->pp_size)
            what = "tp_size/pp_size";
        else if (o->attention_dp != l->attention_dp)
            what = "attention_dp";
        else if (strcmp(o->fingerprint, l->fingerprint) != 0)
            what = "fingerprint";
        else if (o->tokens_per_block != l->tokens_per_block)
            what = "tokens_per_block";
        if (what) {
            snprintf(err, errlen, "instance %s: %s differs from its already registered rank %u",
                     l->instance, what, layout_rank(o));
            return -EINVAL;
        }
        if (in->ranks[idx]) {
            snprintf(err, errlen, "instance %s rank %u (tp %u pp %u) is already registered", l->instance,
                     idx, l->tp_rank, l->pp_rank);
            return -EEXIST;
        }
    } else {
        in = calloc(1, sizeof *in);
        if (!in)
            return -ENOMEM;
        snprintf(in->id, sizeof in->id, "%s", l->instance);
        in->role = l->role;
        in->inst_epoch = ++r->next_inst_epoch;
        in->n_ranks = l->tp_size * l->pp_size;
        in->ranks = calloc(in->n_ranks, sizeof *in->ranks);
        in->table = calloc(in->n_ranks, sizeof *in->table);
        if (!in->ranks || !in->table) {
            free(in->ranks);
            free(in->table);
            free(in);
            return -ENOMEM;
        }
        fresh = true;
    }
    struct reg_rank *rk = calloc(1, sizeof *rk);
    if (!rk) {
        if (fresh)
            instance_free(r->um, in);
        return -ENOMEM;
    }
    rk->layout = *l;
    rk->mem = *mem;
    rk->conn = conn;
    rk->inst = in;
    rk->worker_id = r->next_worker_id++;
    rk->registered_ms = now_ms;
    in->ranks[idx] = rk;
    in->n_registered++;
    in->epoch++;
    if (fresh) {
        in->next = r->instances;
        r->instances = in;
    }
    rebuild_table(in);
    r->n_ranks++;
    *ret = rk;
    return 0;
}

void registry_remove(struct registry *r, struct reg_rank *rank)
{
    if (!rank)
        return;
    struct reg_instance *in = rank->inst;
    uint32_t idx = layout_rank(&rank->layout);
    in->ranks[idx] = NULL;
    in->n_registered--;
    in->epoch++;
    registry_unmap(r->um, &rank->mem);
    rank->gpu = reg_gpu_unref(rank->gpu); /* closed now, or when its last copy completes */
    free(rank);
    r->n_ranks--;
    if (in->n_registered == 0) {
        for (struct reg_instance **pp = &r->instances; *pp; pp = &(*pp)->next)
            if (*pp == in) {
                *pp = in->next;
                break;
            }
        instance_free(r->um, in);
    }
}

json_t *registry_rank_json(const struct reg_rank *rk)
{
    const struct layout *l = &rk->layout;
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < l->n_pools; i++)
        bytes += l->pools[i].bytes;
    json_t *o = json_pack("{s:I,s:s,s:s,s:i,s:i,s:i,s:i,s:i,s:b,s:i,s:I}", "worker_id",
                     (json_int_t)rk->worker_id, "instance", l->instance, "role",
                     layout_role_to_string(l->role), "rank", (int)layout_rank(l), "tp_rank",
                     (int)l->tp_rank, "tp_size", (int)l->tp_size, "pp_rank", (int)l->pp_rank,
                     "pp_size", (int)l->pp_size, "attention_dp", l->attention_dp, "pools",
                     (int)l->n_pools, "pool_bytes", (json_int_t)bytes);
    if (o) /* where its pools are: "host", or the GPU this daemon mapped them on */
        json_object_set_new(o, "memory", rk->gpu ? json_sprintf("gpu %d", rk->gpu->device)
                                                 : json_string("host"));
    return o;
}

json_t *registry_instances_json(const struct registry *r)
{
    json_t *a = json_array();
    for (const struct reg_instance *in = r->instances; in; in = in->next)
        json_array_append_new(a, json_pack("{s:s,s:s,s:i,s:i,s:b,s:I,s:I}", "id", in->id, "role",
                                           layout_role_to_string(in->role), "ranks",
                                           (int)in->n_ranks, "registered", (int)in->n_registered,
                                           "home", registry_complete(in), "epoch",
                                           (json_int_t)in->epoch, "instance_epoch",
                                           (json_int_t)in->inst_epoch));
    return a;
}
