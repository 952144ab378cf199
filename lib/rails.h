/* rails.h: which NIC (rail) carries each GPU's chunks and which NICs serve each NUMA node's host
 * pools (docs/SCALE.md "Each GPU's nearest NIC"), a pure function of a node's description
 * (topo.h), so that descriptions saved from real machines test it. Each GPU takes its nearest
 * NIC by topo_distance; among equally near ones, the NIC serving the fewest GPUs so far, then
 * the first in bus order (GPUs are taken in bus order too). Host pools of NUMA node n take the
 * NICs of n, or every NIC where n has none. */
#ifndef KVF_RAILS_H
#define KVF_RAILS_H

#include <jansson.h>
#include <stdint.h>

#include "topo.h"

struct rails_gpu {
    uint32_t gpu;     /* index in the description */
    uint32_t nic;     /* index in the description */
    topo_dist_t dist; /* how far the NIC is */
};

struct rails {
    struct rails_gpu gpu[TOPO_MAX_DEVICES];
    uint32_t n_gpus;
    uint32_t n_nics;
};

/* 0; -ENODEV when the description has no NIC (n_gpus is then 0: no GPU has a rail). */
int rails_choose(const struct topo *t, struct rails *ret);
/* The NICs (indices in t) for host pools on NUMA node numa, up to max: the count written. */
uint32_t rails_numa_nics(const struct topo *t, int numa, uint32_t *ret, uint32_t max);
/* {"nics": [{bdf, name, numa}], "gpus": [{bdf, numa, nic, nic_name, distance}]} */
json_t *rails_json(const struct topo *t, const struct rails *r);

#endif
