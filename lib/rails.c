/* rails.c: the rail choice (rails.h). */
#include <errno.h>
#include <string.h>

#include "rails.h"

int rails_choose(const struct topo *t, struct rails *ret)
{
    uint32_t served[TOPO_MAX_DEVICES] = {0};
    ret->n_gpus = ret->n_nics = 0;
    for (uint32_t i = 0; i < t->n; i++)
        ret->n_nics += t->dev[i].kind == TOPO_NIC;
    if (!ret->n_nics)
        return -ENODEV;
    for (uint32_t g = 0; g < t->n; g++) {
        if (t->dev[g].kind != TOPO_GPU)
            continue;
        uint32_t best = UINT32_MAX;
        topo_dist_t best_d = TOPO__COUNT;
        for (uint32_t n = 0; n < t->n; n++) {
            if (t->dev[n].kind != TOPO_NIC)
                continue;
            topo_dist_t d = topo_distance(&t->dev[g], &t->dev[n]);
            if (d < best_d || (d == best_d && served[n] < served[best])) {
                best = n;
                best_d = d;
            }
        }
        served[best]++;
        ret->gpu[ret->n_gpus++] = (struct rails_gpu){g, best, best_d};
    }
    return 0;
}

uint32_t rails_numa_nics(const struct topo *t, int numa, uint32_t *ret, uint32_t max)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < t->n && n < max; i++)
        if (t->dev[i].kind == TOPO_NIC && numa >= 0 && t->dev[i].numa == numa)
            ret[n++] = i;
    for (uint32_t i = 0; n == 0 && i < t->n; i++) /* none on that node: every NIC */
        if (t->dev[i].kind == TOPO_NIC && n < max)
            ret[n++] = i;
    return n;
}

json_t *rails_json(const struct topo *t, const struct rails *r)
{
    json_t *o = json_object(), *nics = json_array(), *gpus = json_array();
    for (uint32_t i = 0; i < t->n; i++)
        if (t->dev[i].kind == TOPO_NIC)
            json_array_append_new(nics, json_pack("{s:s, s:s, s:i}", "bdf", t->dev[i].bdf, "name",
                                                  t->dev[i].name, "numa", t->dev[i].numa));
    for (uint32_t i = 0; i < r->n_gpus; i++) {
        const struct topo_dev *g = &t->dev[r->gpu[i].gpu], *n = &t->dev[r->gpu[i].nic];
        json_array_append_new(gpus, json_pack("{s:s, s:i, s:s, s:s, s:s}", "bdf", g->bdf, "numa",
                                              g->numa, "nic", n->bdf, "nic_name", n->name,
                                              "distance", topo_dist_to_string(r->gpu[i].dist)));
    }
    json_object_set_new(o, "nics", nics);
    json_object_set_new(o, "gpus", gpus);
    return o;
}
